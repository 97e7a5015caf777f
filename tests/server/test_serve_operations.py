"""What an operator of `claudex serve` meets: `claudex reload`, the config file watched, a status
table that is not cut when piped, a 404 for an unknown profile's models, words that match what
happened (a pinned request, a stream that died before content)."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from claudex.demo.world import free_port
from tests.cli.test_cli import claudex, spawn_serve, wait_until_serving
from tests.conftest import GLOBALS, anthropic_body, build_config, profile_toml


@pytest.fixture
async def serving(fakes: Any, tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    f = await fakes(("primary", "anthropic"), ("backup", "openai"))
    port = free_port()
    path = tmp_path / "profiles.toml"
    head = GLOBALS.replace("[proxy]", f"[proxy]\nport = {port}")
    path.write_text(head + profile_toml("primary", f["primary"], backups=["backup"])
                    + profile_toml("backup", f["backup"]))
    proc = await spawn_serve(path)
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_until_serving(url, proc)
        yield {"url": url, "proc": proc, "fakes": f, "config": path, "head": head}
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 20)


async def _profiles(url: str) -> list[str]:
    async with httpx.AsyncClient() as client:
        status = (await client.get(url + "/_claudex/status")).json()
    return [p["name"] for p in status["profiles"]]


async def test_serve_applies_an_edited_config_and_reload_reports_problems(
        serving: dict[str, Any]) -> None:
    url, path, f = serving["url"], serving["config"], serving["fakes"]
    text = (serving["head"] + profile_toml("primary", f["primary"], backups=["backup"])
            + profile_toml("backup", f["backup"]) + profile_toml("third", f["backup"]))
    path.write_text(text)
    for _ in range(400):  # the watcher notices within its debounce; bounded at ~8 s
        if await _profiles(url) == ["primary", "backup", "third"]:
            break
        await asyncio.sleep(0.02)
    assert await _profiles(url) == ["primary", "backup", "third"]
    code, out, err = await claudex("reload", "--url", url)
    assert (code, out.strip()) == (0, "reloaded: 3 profile(s): primary, backup, third"), err
    # A broken file: reload names the problem, the running config stays.
    path.write_text(text + "\n[[profiles]]\nname = 1\n")
    code, out, err = await claudex("reload", "--url", url)
    assert code == 1 and "Not reloaded" in err and "profiles.toml:" in err, err
    assert "Traceback" not in err
    assert await _profiles(url) == ["primary", "backup", "third"]


async def test_status_piped_is_not_cut_at_80_columns(serving: dict[str, Any]) -> None:
    url = serving["url"]
    serving["fakes"]["primary"].set_fault("500")
    async with httpx.AsyncClient() as client:
        await client.post(url + "/v1/messages", json=anthropic_body())
    code, out, _ = await claudex("status", "--url", url)  # stdout is a pipe here
    assert code == 0
    rows = [line for line in out.splitlines() if line.strip().startswith("primary")]
    assert rows and max(len(line) for line in out.splitlines()) > 80
    assert "server_error" in out  # the last error, whole


async def test_unknown_profiles_models_are_404(fakes, proxy_factory) -> None:
    f = await fakes(("a", "anthropic"))
    proxy = await proxy_factory(build_config(profile_toml("a", f["a"])), fakes=f)
    resp = await proxy.client.get("/proxy/nosuch/v1/models",
                                  headers={"anthropic-version": "2023-06-01"})
    assert resp.status_code == 404
    assert resp.json()["error"]["type"] == "not_found_error"
    resp = await proxy.client.get("/proxy/nosuch/v1/models")
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "profile_not_found"
    assert (await proxy.client.get("/proxy/a/v1/models")).status_code == 200


async def test_a_pinned_request_does_not_blame_missing_backups(fakes, proxy_factory) -> None:
    f = await fakes(("a", "anthropic"), ("b", "anthropic"))
    text = profile_toml("a", f["a"], backups=["b"]) + profile_toml("b", f["b"])
    proxy = await proxy_factory(build_config(text), fakes=f)
    f["a"].set_fault("500")
    resp = await proxy.messages(headers={"x-claudex-failover": "off"})
    assert resp.status_code == 502
    message = resp.json()["error"]["message"]
    assert "no backup could serve" not in message
    assert "x-claudex-failover: off, so no backup was tried" in message
    resp = await proxy.messages()
    assert resp.status_code == 200


async def test_trail_names_a_stream_that_died_before_content(fakes, proxy_factory) -> None:
    f = await fakes(("anth", "anthropic"), ("oai", "openai"))
    text = profile_toml("anth", f["anth"], backups=["oai"]) + profile_toml("oai", f["oai"])
    proxy = await proxy_factory(build_config(text), fakes=f)
    f["anth"].set_fault("stream_error", cut_after_events=0, times=1)
    with proxy.engine.events.subscribe({"request"}) as queue:
        resp = await proxy.messages(anthropic_body(stream=True))
        assert resp.status_code == 200
        assert resp.headers["x-claudex-attempts"] == "anth:stream_error,oai:200"
        event = await asyncio.wait_for(queue.get(), 5)
    assert event.data["trail"] == "anth stream_error -> oai 200"
    assert "anth 200" not in event.message
    json.dumps(event.to_json())  # the event stays serialisable with its new fields


async def test_what_translation_dropped_is_named_in_the_request_log_and_metrics(
        fakes, proxy_factory) -> None:
    f = await fakes(("oai", "openai"))
    proxy = await proxy_factory(build_config(profile_toml("oai", f["oai"])), fakes=f)
    body = {**anthropic_body(), "thinking": {"type": "enabled", "budget_tokens": 1024},
            "top_k": 5, "made_up_key_1": 1, "made_up_key_2": 2}
    with proxy.engine.events.subscribe({"request"}) as queue:
        resp = await proxy.messages(body, profile="oai")
        assert resp.status_code == 200, resp.text
        event = await asyncio.wait_for(queue.get(), 5)
    assert {"thinking", "top_k"} <= set(event.data["dropped"])
    assert "dropped: " in event.message
    metrics = (await proxy.client.get("/metrics")).text
    assert 'claudex_translation_dropped_total{field="top_k",provider="oai"} 1.0' in metrics
    # The client's own made-up keys are named in the log but counted as one label.
    assert "made_up_key_1" in event.data["dropped"]
    assert "made_up_key" not in metrics
    assert 'claudex_translation_dropped_total{field="other",provider="oai"} 2.0' in metrics


async def test_a_stream_closed_before_its_first_chunk_lets_the_provider_go(
        fakes, proxy_factory) -> None:
    """A client gone between the answer's headers and its first chunk: the relay never ran,
    yet the breaker permit and the provider's slot must come back."""
    from claudex.engine.core.request import ProxyRequest

    f = await fakes(("anth", "anthropic"))
    text = profile_toml("anth", f["anth"])
    proxy = await proxy_factory(build_config(text), fakes=f)
    engine = proxy.engine
    body = anthropic_body(stream=True)
    req = ProxyRequest("anthropic", "messages", body, json.dumps(body).encode(), {},
                       profile="anth")
    result = await engine.forward(req)
    assert result.stream is not None and result.provider == "anth"
    await result.stream.aclose()  # never iterated
    assert engine.totals.in_flight == 0
    status = engine.snapshot()["profiles"][0]
    assert status["concurrency"]["in_flight"] == 0, status["concurrency"]
