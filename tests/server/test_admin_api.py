"""Admin API, security checks, metrics and health probes through a real server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from claudex.config.loader import load_config
from claudex.engine.engine import Engine
from claudex.server.app import create_app
from claudex.server.run import start_in_background
from tests.conftest import GLOBALS, TEST_ENV, build_config, eventually, profile_toml


async def two(fakes: Any, proxy_factory: Any, **kw: Any) -> Any:
    f = await fakes(("grok", "openai"), ("deepseek", "openai"))
    config = build_config(profile_toml("grok", f["grok"], backups=["deepseek"])
                          + profile_toml("deepseek", f["deepseek"]))
    return await proxy_factory(config, fakes=f, **kw)


async def test_status_lists_profiles_in_contract_shape(fakes: Any, proxy_factory: Any) -> None:
    proxy = await two(fakes, proxy_factory)
    data = (await proxy.client.get("/_claudex/status")).json()
    grok = data["profiles"][0]
    assert grok["name"] == "grok" and grok["provider_type"] == "OpenAICompatible"
    assert grok["enabled"] is True
    assert set(grok["breaker"]) >= {"state", "consecutive_failures", "retry_in_s"}
    assert set(grok["health"]) >= {"color", "latency_ms", "last_checked", "error"}
    assert grok["breaker"]["state"] == "closed" and grok["health"]["color"] == "green"
    assert "sk-test-key" not in json.dumps(data)


async def test_trip_and_reset(fakes: Any, proxy_factory: Any) -> None:
    proxy = await two(fakes, proxy_factory)
    resp = await proxy.client.post("/_claudex/breakers/grok/trip")
    assert resp.json() == {"name": "grok", "breaker": "forced_open", "reason": None,
                           "until": None, "retry_in_s": None}
    chat = await proxy.chat(profile="grok")
    assert chat.headers["x-claudex-attempts"] == "grok:forced_open,deepseek:200"
    assert proxy.fakes["grok"].request_count == 0
    status = (await proxy.client.get("/_claudex/status")).json()["profiles"][0]
    assert status["breaker"]["state"] == "forced_open" and status["health"]["color"] == "red"
    resp = await proxy.client.post("/_claudex/breakers/grok/reset")
    assert resp.json()["breaker"] == "closed"
    assert (await proxy.chat(profile="grok")).headers["x-claudex-provider"] == "grok"
    assert (await proxy.client.post("/_claudex/breakers/nope/trip")).status_code == 404


async def first_event(proxy: Any, path: str) -> dict[str, Any]:
    async with proxy.client.stream("GET", path) as resp:
        async for line in resp.aiter_lines():
            if line.startswith("data:"):
                return dict(json.loads(line[5:]))
    raise AssertionError("the event stream ended")


async def test_events_stream_reports_breaker_transitions(fakes: Any, proxy_factory: Any) -> None:
    proxy = await two(fakes, proxy_factory)
    task = asyncio.create_task(first_event(proxy, "/_claudex/events"))
    await eventually(lambda: proxy.engine.events.has_subscribers)
    await proxy.client.post("/_claudex/breakers/grok/trip")
    event = await asyncio.wait_for(task, 5)
    assert event["kind"] == "breaker" and event["profile"] == "grok"
    assert event["data"]["new"] == "forced_open"


async def test_events_stream_filtered_by_kind_gets_only_those(fakes: Any,
                                                             proxy_factory: Any) -> None:
    proxy = await two(fakes, proxy_factory)
    task = asyncio.create_task(first_event(proxy, "/_claudex/events?kinds=breaker"))
    await eventually(lambda: proxy.engine.events.has_subscribers)
    assert (await proxy.messages()).status_code == 200  # a request event this reader skips
    await proxy.client.post("/_claudex/breakers/grok/trip")
    event = await asyncio.wait_for(task, 5)  # the first event it got is the transition
    assert event["kind"] == "breaker"
    assert event["data"]["old"] == "closed" and isinstance(event["data"]["at"], float)


async def test_host_origin_and_token_checks(fakes: Any, proxy_factory: Any) -> None:
    proxy = await two(fakes, proxy_factory, token="local-secret-token")
    ok = {"authorization": "Bearer local-secret-token"}
    assert (await proxy.client.get("/_claudex/status")).status_code == 401
    assert (await proxy.client.get("/_claudex/status", headers=ok)).status_code == 200
    assert (await proxy.client.get("/_claudex/status",
                                   headers={"x-api-key": "local-secret-token"})).status_code == 200
    evil = {**ok, "host": "evil.example:13456"}
    assert (await proxy.client.get("/_claudex/status", headers=evil)).status_code == 403
    browser = {**ok, "origin": "https://evil.example"}
    assert (await proxy.client.post("/_claudex/breakers/grok/trip",
                                    headers=browser)).status_code == 403
    assert proxy.engine.runtimes["grok"].breaker.state.value == "closed"
    chat = await proxy.chat(headers={"authorization": "Bearer wrong"})
    assert chat.status_code == 401 and "error" in chat.json()
    # The local token is the client's credential for claudex, never forwarded upstream.
    await proxy.chat(headers=ok)
    assert proxy.fakes["grok"].requests[-1].headers["authorization"] == \
        "Bearer sk-test-key-0123456789"


async def test_metrics_in_prometheus_format(fakes: Any, proxy_factory: Any) -> None:
    proxy = await two(fakes, proxy_factory)
    proxy.fakes["grok"].set_fault("500")
    await proxy.chat(profile="grok")
    text = (await proxy.client.get("/metrics")).text
    assert 'claudex_provider_failures_total{provider="grok"} 1.0' in text
    assert 'claudex_breaker_state{provider="grok",state="closed"} 1.0' in text
    assert "claudex_failovers_total 1.0" in text


async def test_models_list_in_client_format(fakes: Any, proxy_factory: Any) -> None:
    proxy = await two(fakes, proxy_factory)
    openai_list = (await proxy.client.get("/v1/models")).json()
    assert openai_list["object"] == "list"
    assert {m["id"] for m in openai_list["data"]} == {"grok-model", "deepseek-model"}
    anthropic_list = (await proxy.client.get(
        "/v1/models", headers={"anthropic-version": "2023-06-01"})).json()
    assert anthropic_list["data"][0]["type"] == "model"


async def test_health_probe_colors_and_breaker_feed(fakes: Any, proxy_factory: Any) -> None:
    now = [1000.0]
    proxy = await two(fakes, proxy_factory, clock=lambda: now[0])
    engine = proxy.engine
    await engine.check_health_now()
    grok = engine.snapshot()["profiles"][0]
    assert grok["health"]["color"] == "green" and grok["health"]["latency_ms"] is not None
    proxy.fakes["grok"].set_fault("down")
    await engine.check_health_now()
    assert engine.snapshot()["profiles"][0]["health"]["color"] == "yellow"
    await engine.check_health_now()
    grok = engine.snapshot()["profiles"][0]
    assert grok["health"]["color"] == "red"
    assert grok["breaker"]["consecutive_failures"] == 2
    await engine.check_health_now()
    assert engine.runtimes["grok"].breaker.state.value == "open"
    # A passing probe while open moves the breaker to half-open at once.
    proxy.fakes["grok"].set_fault("ok")
    await engine.check_health_now()
    assert engine.runtimes["grok"].breaker.state.value == "half_open"
    assert engine.snapshot()["profiles"][0]["health"]["color"] == "yellow"


async def test_health_probe_auth_and_unsupported(fakes: Any, proxy_factory: Any) -> None:
    proxy = await two(fakes, proxy_factory)
    proxy.fakes["grok"].set_fault("401")
    await proxy.engine.check_health_now()
    grok = proxy.engine.snapshot()["profiles"][0]
    assert grok["health"]["color"] == "red" and "auth" in grok["health"]["reason"]
    assert grok["breaker"]["consecutive_failures"] == 0


async def test_reload_applies_valid_and_rejects_invalid(fakes: Any, tmp_path: Path) -> None:
    f = await fakes(("grok", "openai"), ("deepseek", "openai"))
    path = tmp_path / "profiles.toml"
    path.write_text(GLOBALS + profile_toml("grok", f["grok"]))
    engine = Engine(load_config(path, env=TEST_ENV), env=TEST_ENV)
    app = create_app(engine, load_config=lambda: load_config(path, env=TEST_ENV))
    server = await start_in_background(app)
    try:
        async with httpx.AsyncClient(base_url=server.url) as client:
            engine.runtimes["grok"].breaker.trip()
            path.write_text(GLOBALS + profile_toml("grok", f["grok"], backups=["deepseek"])
                            + profile_toml("deepseek", f["deepseek"]))
            resp = await client.post("/_claudex/reload")
            assert resp.json()["profiles"] == ["grok", "deepseek"]
            # Breaker state of a kept profile survives the reload.
            assert engine.runtimes["grok"].breaker.state.value == "forced_open"
            path.write_text(GLOBALS + profile_toml("grok", f["grok"], backups=["nobody"]))
            resp = await client.post("/_claudex/reload")
            assert resp.status_code == 400
            assert any("nobody" in issue for issue in resp.json()["issues"])
            assert [p.name for p in engine.config.profiles] == ["grok", "deepseek"]
    finally:
        await server.stop()


async def test_probe_without_models_endpoint_is_unsupported_not_a_failure(
    fakes: Any, proxy_factory: Any
) -> None:
    f = await fakes(("odd", "openai"),)
    text = profile_toml("odd", f["odd"]).replace(f["odd"].base_url, f["odd"].base_url[:-3] + "/v9")
    proxy = await proxy_factory(build_config(text), fakes=f)
    for _ in range(3):
        await proxy.engine.check_health_now()
    odd = proxy.engine.snapshot()["profiles"][0]
    assert odd["health"]["probe_unsupported"] is True
    assert odd["health"]["color"] == "green" and "unsupported" in odd["health"]["reason"]
    assert odd["breaker"]["consecutive_failures"] == 0
