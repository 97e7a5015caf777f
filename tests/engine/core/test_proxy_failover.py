"""Failover through a real server on 127.0.0.1 against claudex's fake providers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from tests.conftest import anthropic_body, build_config, eventually, openai_body, profile_toml


async def three_anthropic(fakes: Any, proxy_factory: Any, extra: str = "",
                          primary_extra: str = "") -> Any:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"), ("spare", "anthropic"))
    config = build_config(
        profile_toml("primary", f["primary"], backups=["backup", "spare"],
                     extra=extra + "\n" + primary_extra)
        + profile_toml("backup", f["backup"], extra=extra)
        + profile_toml("spare", f["spare"], extra=extra)
    )
    return await proxy_factory(config, fakes=f)


def text_of(resp: httpx.Response) -> str:
    return "".join(b.get("text", "") for b in resp.json()["content"])


async def test_healthy_primary_serves_and_tags_the_response(fakes: Any, proxy_factory: Any) -> None:
    proxy = await three_anthropic(fakes, proxy_factory)
    resp = await proxy.messages()
    assert resp.status_code == 200
    assert resp.headers["x-claudex-provider"] == "primary"
    assert resp.headers["x-claudex-attempts"] == "primary:200"
    assert "primary" in text_of(resp)
    sent = proxy.fakes["primary"].requests[-1]
    # The model is kept at the addressed profile; the client's own credentials never leave.
    assert sent.json["model"] == "claude-sonnet-4-5"
    assert sent.headers["x-api-key"] == "sk-test-key-0123456789"
    assert sent.headers["anthropic-version"] == "2023-06-01"


async def test_client_credentials_are_not_forwarded(fakes: Any, proxy_factory: Any) -> None:
    proxy = await three_anthropic(fakes, proxy_factory)
    await proxy.messages(headers={"x-api-key": "client-own-key", "anthropic-beta": "tools-1"})
    sent = proxy.fakes["primary"].requests[-1]
    assert sent.headers["x-api-key"] == "sk-test-key-0123456789"
    assert sent.headers["anthropic-beta"] == "tools-1"


async def test_failover_when_primary_refuses_connections(fakes: Any, proxy_factory: Any) -> None:
    proxy = await three_anthropic(fakes, proxy_factory)
    proxy.fakes["primary"].set_fault("down")
    resp = await proxy.messages()
    assert resp.status_code == 200
    assert resp.headers["x-claudex-provider"] == "backup"
    assert resp.headers["x-claudex-attempts"] == "primary:connect_error,backup:200"
    # At the backup the request takes the backup's default model.
    assert proxy.fakes["backup"].requests[-1].json["model"] == "backup-model"


async def test_failover_on_server_errors(fakes: Any, proxy_factory: Any) -> None:
    proxy = await three_anthropic(fakes, proxy_factory)
    for mode, status in (("500", 500), ("529", 529)):
        proxy.fakes["primary"].set_fault(mode)
        proxy.engine.reset("primary")
        resp = await proxy.messages()
        assert resp.status_code == 200, mode
        assert resp.headers["x-claudex-attempts"] == f"primary:{status},backup:200"


async def test_failover_on_read_timeout(fakes: Any, proxy_factory: Any) -> None:
    # Only the hung primary gets the short timeout: a backup slowed by a loaded machine must
    # not time out too.
    proxy = await three_anthropic(fakes, proxy_factory, primary_extra="read_timeout = 0.3")
    proxy.fakes["primary"].set_fault("hang")
    resp = await proxy.messages()
    assert resp.status_code == 200
    assert resp.headers["x-claudex-attempts"] == "primary:timeout,backup:200"


async def test_breaker_opens_after_three_failures_and_is_not_contacted(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await three_anthropic(fakes, proxy_factory)
    primary = proxy.fakes["primary"]
    primary.set_fault("500")
    for _ in range(3):
        assert (await proxy.messages()).status_code == 200
    assert primary.request_count == 3
    assert proxy.engine.runtimes["primary"].breaker.state.value == "open"
    resp = await proxy.messages()
    assert resp.status_code == 200
    assert resp.headers["x-claudex-attempts"] == "primary:breaker_open,backup:200"
    assert primary.request_count == 3  # the open provider was not contacted


async def test_half_open_admits_exactly_one_probe(fakes: Any, proxy_factory: Any) -> None:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    now = [1000.0]
    config = build_config(
        profile_toml("primary", f["primary"], backups=["backup"])
        + profile_toml("backup", f["backup"])
    )
    proxy = await proxy_factory(config, fakes=f, clock=lambda: now[0])
    primary = f["primary"]
    primary.set_fault("500")
    for _ in range(3):
        await proxy.messages()
    assert proxy.engine.runtimes["primary"].breaker.state.value == "open"
    now[0] += 31  # past recovery_seconds = 30
    primary.set_fault("slow", latency_ms=400)
    before = primary.request_count
    first = asyncio.create_task(proxy.messages())
    await eventually(lambda: primary.request_count > before)  # the probe reached it
    second = await proxy.messages()
    assert second.headers["x-claudex-attempts"] == "primary:half_open_busy,backup:200"
    probe = await first
    assert probe.headers["x-claudex-provider"] == "primary"
    assert primary.request_count == before + 1
    assert proxy.engine.runtimes["primary"].breaker.state.value == "closed"


async def test_rate_limit_waits_retry_after_then_succeeds(fakes: Any, proxy_factory: Any) -> None:
    proxy = await three_anthropic(fakes, proxy_factory)
    proxy.fakes["primary"].set_fault("429", retry_after=2, times=1)
    resp = await proxy.messages()
    assert resp.status_code == 200
    assert resp.headers["x-claudex-attempts"] == "primary:429,primary:200"
    assert proxy.sleep.waits == [2.0]
    # A rate limit is not a breaker failure.
    assert proxy.engine.runtimes["primary"].breaker.snapshot().consecutive_failures == 0


async def test_long_retry_after_fails_over_and_cools_down(fakes: Any, proxy_factory: Any) -> None:
    proxy = await three_anthropic(fakes, proxy_factory)
    primary = proxy.fakes["primary"]
    primary.set_fault("429", retry_after=120)
    resp = await proxy.messages()
    assert resp.status_code == 200
    assert resp.headers["x-claudex-attempts"] == "primary:429,backup:200"
    assert proxy.sleep.waits == []
    # The next request skips the cooling provider without contacting it.
    count = primary.request_count
    resp = await proxy.messages()
    assert resp.headers["x-claudex-attempts"] == "primary:cooling_down,backup:200"
    assert primary.request_count == count


async def test_client_error_passes_through_without_failover(fakes: Any, proxy_factory: Any) -> None:
    proxy = await three_anthropic(fakes, proxy_factory)
    # The fakes answer 400 to a request without messages, like the real API.
    resp = await proxy.client.post("/v1/messages", json={"model": "x", "max_tokens": 5})
    assert resp.status_code == 400
    assert resp.json()["type"] == "error"
    assert proxy.fakes["backup"].request_count == 0
    assert proxy.engine.runtimes["primary"].breaker.snapshot().consecutive_failures == 0


async def test_failover_off_header_restricts_to_addressed(fakes: Any, proxy_factory: Any) -> None:
    proxy = await three_anthropic(fakes, proxy_factory)
    proxy.fakes["primary"].set_fault("500")
    resp = await proxy.messages(headers={"x-claudex-failover": "off"})
    assert resp.status_code == 502
    assert proxy.fakes["backup"].request_count == 0
    assert [a["provider"] for a in resp.json()["error"]["attempts"]] == ["primary"]


async def test_all_failed_error_lists_every_attempt(fakes: Any, proxy_factory: Any) -> None:
    proxy = await three_anthropic(fakes, proxy_factory)
    proxy.fakes["primary"].set_fault("down")
    proxy.fakes["backup"].set_fault("500")
    proxy.fakes["spare"].set_fault("529")
    resp = await proxy.messages()
    assert resp.status_code == 502
    body = resp.json()
    assert body["type"] == "error"
    attempts = body["error"]["attempts"]
    assert [(a["provider"], a["outcome"], a["status"]) for a in attempts] == [
        ("primary", "connect_error", None), ("backup", "server_error", 500),
        ("spare", "server_error", 529)]
    message = body["error"]["message"]
    assert message.endswith(".") and "spare" in message and "\n" not in message


async def test_all_rate_limited_gives_429_with_retry_after(fakes: Any, proxy_factory: Any) -> None:
    proxy = await three_anthropic(fakes, proxy_factory)
    for name in ("primary", "backup", "spare"):
        proxy.fakes[name].set_fault("429", retry_after=90)
    resp = await proxy.messages()
    assert resp.status_code == 429
    assert int(resp.headers["retry-after"]) == 90
    assert resp.json()["error"]["message"].startswith(
        "Repeated rate-limit errors from primary, backup and spare")


async def test_a_profile_whose_token_command_fails_does_not_hide_a_rate_limit(
    fakes: Any, proxy_factory: Any
) -> None:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    config = build_config(
        profile_toml("primary", f["primary"], backups=["backup"],
                     extra='token_command = "exit 3"')
        + profile_toml("backup", f["backup"]))
    proxy = await proxy_factory(config, fakes=f)
    f["backup"].set_fault("429", retry_after=90)
    resp = await proxy.messages()
    # The primary could not be used at all (its credentials), so the only word from a provider
    # is "rate limited": 429 with Retry-After, not 502.
    assert resp.status_code == 429 and int(resp.headers["retry-after"]) == 90
    assert resp.headers["x-claudex-attempts"] == "primary:credentials,backup:429"
    assert f["primary"].request_count == 0
    # With no health probe running (health is off here), live traffic is what shows it red.
    shown = proxy.engine.runtimes["primary"].status_json(0.0, 3000)["health"]
    assert shown["color"] == "red" and "misconfigured: token_command" in shown["reason"]


async def test_openai_chain_fails_over_with_openai_error_format(
    fakes: Any, proxy_factory: Any
) -> None:
    f = await fakes(("grok", "openai"), ("deepseek", "openai"))
    config = build_config(profile_toml("grok", f["grok"], backups=["deepseek"])
                          + profile_toml("deepseek", f["deepseek"]))
    proxy = await proxy_factory(config, fakes=f)
    f["grok"].set_fault("503" if False else "500")
    resp = await proxy.chat(profile="grok")
    assert resp.status_code == 200
    assert resp.headers["x-claudex-attempts"] == "grok:500,deepseek:200"
    assert f["grok"].requests[-1].headers["authorization"] == "Bearer sk-test-key-0123456789"
    f["deepseek"].set_fault("down")
    resp = await proxy.chat(profile="grok")
    assert resp.status_code == 502
    assert set(resp.json()) == {"error"}
    assert resp.json()["error"]["attempts"][-1]["provider"] == "deepseek"


async def test_mixed_protocol_chain_fails_over_in_order(fakes: Any, proxy_factory: Any) -> None:
    f = await fakes(("claude", "anthropic"), ("grok", "openai"), ("backup", "anthropic"))
    config = build_config(profile_toml("claude", f["claude"], backups=["grok", "backup"])
                          + profile_toml("grok", f["grok"]) + profile_toml("backup", f["backup"]))
    proxy = await proxy_factory(config, fakes=f)
    f["claude"].set_fault("500")
    resp = await proxy.messages()
    assert resp.headers["x-claudex-attempts"] == "claude:500,grok:200"
    assert resp.json()["type"] == "message"  # answered in the client's protocol
    assert f["backup"].request_count == 0


async def test_malformed_and_oversized_requests_get_protocol_errors(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await three_anthropic(fakes, proxy_factory)
    resp = await proxy.client.post("/v1/messages", content=b"{not json",
                                   headers={"content-type": "application/json"})
    assert resp.status_code == 400 and resp.json()["error"]["type"] == "invalid_request_error"
    resp = await proxy.client.post("/v1/chat/completions", content=b"[1, 2]")
    assert resp.status_code == 400 and "message" in resp.json()["error"]
    big = b'{"x": "' + b"a" * (32 * 1024 * 1024) + b'"}'
    resp = await proxy.client.post("/v1/messages", content=big)
    assert resp.status_code == 413 and resp.json()["error"]["type"] == "request_too_large"
    assert proxy.fakes["primary"].request_count == 0


async def test_model_mapping_by_family(fakes: Any, proxy_factory: Any) -> None:
    f = await fakes(("claude", "anthropic"), ("backup", "anthropic"))
    config = build_config(
        profile_toml("claude", f["claude"], backups=["backup"])
        + profile_toml("backup", f["backup"],
                       extra='models = { haiku = "small-1", sonnet = "big-2" }'))
    proxy = await proxy_factory(config, fakes=f)
    f["claude"].set_fault("down")
    await proxy.messages(anthropic_body(model="claude-3-5-haiku-latest"))
    assert f["backup"].requests[-1].json["model"] == "small-1"
    await proxy.messages(anthropic_body(model="claude-sonnet-4-5"))
    assert f["backup"].requests[-1].json["model"] == "big-2"


async def test_max_tokens_is_capped(fakes: Any, proxy_factory: Any) -> None:
    f = await fakes(("claude", "anthropic"),)
    config = build_config(profile_toml("claude", f["claude"], extra="max_tokens = 32"))
    proxy = await proxy_factory(config, fakes=f)
    body = anthropic_body()
    body["max_tokens"] = 4096
    await proxy.messages(body)
    assert f["claude"].requests[-1].json["max_tokens"] == 32


async def test_unknown_profile_is_404_in_protocol_format(fakes: Any, proxy_factory: Any) -> None:
    proxy = await three_anthropic(fakes, proxy_factory)
    resp = await proxy.messages(profile="nope")
    assert resp.status_code == 404
    assert resp.json()["error"]["type"] == "not_found_error"


async def test_openai_body_is_json(fakes: Any, proxy_factory: Any) -> None:
    f = await fakes(("grok", "openai"),)
    proxy = await proxy_factory(build_config(profile_toml("grok", f["grok"])), fakes=f)
    resp = await proxy.chat(openai_body("hi"))
    assert resp.status_code == 200
    assert json.loads(resp.content)["choices"][0]["message"]["role"] == "assistant"
