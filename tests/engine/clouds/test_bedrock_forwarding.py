"""Bedrock on the one forwarding path (issue 37): claudex in front of the fake Bedrock, which checks
SigV4 signatures with botocore, the body rules and answers in eventstream frames. The client
speaks plain Anthropic (or Chat Completions) and gets plain Anthropic; every row of the failure
table Bedrock has is one request here."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from claudex.demo.fake_bedrock import FakeBedrock
from claudex.demo.fake_provider import FakeProvider
from claudex.engine.clouds.wire import WireRequest
from claudex.providers.bedrock import describe
from tests.cloud_world import API_KEY, KEY, MODEL, bedrock_toml, isolate_cloud_env
from tests.conftest import (
    TEST_ENV,
    Proxy,
    anthropic_body,
    build_config,
    eventually,
    openai_body,
    profile_toml,
    served_models,
)


@pytest.fixture
async def bedrock() -> AsyncIterator[FakeBedrock]:
    async with FakeBedrock(keys=[KEY], api_keys=[TEST_ENV["FAKE_KEY"], API_KEY]) as fake:
        yield fake


@pytest.fixture
async def backup() -> AsyncIterator[FakeProvider]:
    async with FakeProvider("backup", "anthropic",
                            models=served_models("backup", "anthropic")) as fake:
        yield fake


async def _proxy(proxy_factory: Any, bedrock: FakeBedrock, backup: FakeProvider | None = None,
                 **kw: Any) -> Proxy:
    text = bedrock_toml("bedrock", bedrock.base_url,
                        backups=("backup",) if backup is not None else (), **kw)
    if backup is not None:
        text += profile_toml("backup", backup)
    proxy: Proxy = await proxy_factory(build_config(text),
                                       fakes={"backup": backup} if backup else {})
    return proxy


async def _attempts(proxy: Proxy) -> list[tuple[str, str, str]]:
    events = proxy.engine.events
    await eventually(lambda: bool(events.since(0, {"request"})))
    return [(a["provider"], a["outcome"], a.get("message") or "")
            for a in events.since(0, {"request"})[-1].data["attempts"]]


def _sse_types(text: str) -> list[str]:
    return [line[7:] for line in text.splitlines() if line.startswith("event: ")]


async def test_whole_and_streamed_answers_are_plain_anthropic(proxy_factory: Any,
                                                              bedrock: FakeBedrock) -> None:
    proxy = await _proxy(proxy_factory, bedrock)
    headers = {"anthropic-version": "2023-06-01", "anthropic-beta":
               "interleaved-thinking-2025-05-14", "x-stainless-lang": "js"}
    resp = await proxy.client.post("/v1/messages?beta=true", json=anthropic_body(),
                                   headers=headers)
    assert resp.status_code == 200, resp.text
    answer = resp.json()
    assert answer["type"] == "message" and answer["model"] == MODEL
    assert resp.headers["x-claudex-provider"] == "bedrock"
    streamed = await proxy.client.post("/v1/messages", json=anthropic_body(stream=True),
                                       headers=headers)
    assert streamed.status_code == 200
    assert streamed.headers["content-type"].startswith("text/event-stream")
    types = _sse_types(streamed.text)
    assert types[0] == "message_start" and types[-1] == "message_stop"
    assert "content_block_delta" in types and b"\x00" not in streamed.content
    whole, stream = bedrock.requests
    # The SDK's rewrite: the model and the kind in the path, no `model`/`stream` in the body,
    # Bedrock's anthropic_version, the betas in the body; no client query, no client header.
    assert whole.path == f"/model/{MODEL}/invoke" and whole.query == ""
    assert stream.path == f"/model/{MODEL}/invoke-with-response-stream"
    for request in (whole, stream):
        assert "model" not in request.json and "stream" not in request.json
        assert request.json["anthropic_version"] == "bedrock-2023-05-31"
        assert request.json["anthropic_beta"] == ["interleaved-thinking-2025-05-14"]
        assert "x-stainless-lang" not in request.headers
        assert "anthropic-beta" not in request.headers
        assert request.headers["authorization"] == f"Bearer {TEST_ENV['FAKE_KEY']}"
    assert stream.headers["accept"] == "application/vnd.amazon.eventstream"


async def test_requests_are_signed_sigv4_with_the_aws_chain(
        proxy_factory: Any, bedrock: FakeBedrock, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    isolate_cloud_env(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", KEY.secret_access_key)
    proxy = await _proxy(proxy_factory, bedrock, auth="")
    for stream in (False, True):
        resp = await proxy.messages(anthropic_body(stream=stream))
        assert resp.status_code == 200, resp.text
    signed = [r.headers["authorization"] for r in bedrock.requests]
    assert all(a.startswith(f"AWS4-HMAC-SHA256 Credential={KEY.access_key_id}/") for a in signed)
    assert all("/us-east-1/bedrock/aws4_request" in a for a in signed)
    status = json.dumps(proxy.engine.snapshot())
    assert KEY.secret_access_key not in status
    assert proxy.engine.snapshot()["profiles"][0]["cloud"]["signed"] == "sigv4"


async def test_no_aws_credentials_is_a_misconfigured_profile_that_fails_over(
        proxy_factory: Any, bedrock: FakeBedrock, backup: FakeProvider,
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_cloud_env(monkeypatch, tmp_path)
    proxy = await _proxy(proxy_factory, bedrock, backup, auth="")
    resp = await proxy.messages()
    assert resp.status_code == 200 and resp.headers["x-claudex-provider"] == "backup"
    [(_, outcome, words), _] = await _attempts(proxy)
    assert outcome == "credentials" and "no AWS credentials found" in words
    rt = proxy.engine.runtimes["bedrock"]
    assert rt.color(proxy.engine.clock(), 3000)[0] == "red"
    assert bedrock.request_count == 0


@pytest.mark.parametrize(("fault", "outcome"), [
    ("unavailable", "server_error"), ("internal", "server_error"),
    ("model_timeout", "server_error"), ("model_error", "server_error"),
])
async def test_the_services_failures_fail_over(proxy_factory: Any, bedrock: FakeBedrock,
                                               backup: FakeProvider, fault: Any,
                                               outcome: str) -> None:
    proxy = await _proxy(proxy_factory, bedrock, backup)
    bedrock.set_fault(fault)
    resp = await proxy.messages()
    assert resp.status_code == 200 and resp.headers["x-claudex-provider"] == "backup"
    attempts = await _attempts(proxy)
    assert [a[:2] for a in attempts] == [("bedrock", outcome), ("backup", "ok")]
    assert proxy.engine.runtimes["bedrock"].breaker.snapshot().consecutive_failures == 1


async def test_throttling_is_retried_and_a_quota_400_is_a_rate_limit_never_the_clients(
        proxy_factory: Any, bedrock: FakeBedrock, backup: FakeProvider) -> None:
    proxy = await _proxy(proxy_factory, bedrock, backup, extra="max_attempts = 2")
    bedrock.set_fault("throttling", times=1)
    resp = await proxy.messages()
    assert resp.headers["x-claudex-provider"] == "bedrock"
    assert [a[1] for a in await _attempts(proxy)] == ["rate_limited", "ok"]
    assert len(proxy.sleep.waits) == 1  # backed off once, as [retry] says
    proxy.engine.runtimes["bedrock"].cooldown_until = 0.0  # (its only request: it cooled down)
    bedrock.set_fault("quota")
    resp = await proxy.messages()
    assert resp.status_code == 200 and resp.headers["x-claudex-provider"] == "backup"
    attempts = await _attempts(proxy)
    assert [a[:2] for a in attempts] == [("bedrock", "rate_limited"),
                                         ("bedrock", "rate_limited"), ("backup", "ok")]
    assert attempts[0][2].startswith("ServiceQuotaExceededException: ")
    rt = proxy.engine.runtimes["bedrock"]
    assert rt.breaker.snapshot().consecutive_failures == 0 and rt.stats.client_errors == 0


async def test_a_refused_key_is_auth_and_the_key_never_shows(
        proxy_factory: Any, bedrock: FakeBedrock, backup: FakeProvider) -> None:
    bedrock.api_keys.clear()
    proxy = await _proxy(proxy_factory, bedrock, backup)
    resp = await proxy.messages()
    assert resp.headers["x-claudex-provider"] == "backup"
    [(_, outcome, words), _] = await _attempts(proxy)
    assert outcome == "auth_error" and words.startswith("AccessDeniedException: ")
    assert proxy.engine.runtimes["bedrock"].health.auth_failing
    assert TEST_ENV["FAKE_KEY"] not in json.dumps(proxy.engine.snapshot())


async def test_exception_frames_before_content_fail_over_and_after_it_reach_the_client(
        proxy_factory: Any, bedrock: FakeBedrock, backup: FakeProvider) -> None:
    proxy = await _proxy(proxy_factory, bedrock, backup)
    bedrock.set_fault("exception_before_content", times=1)
    resp = await proxy.messages(anthropic_body(stream=True))
    assert resp.headers["x-claudex-provider"] == "backup"
    assert _sse_types(resp.text)[-1] == "message_stop"
    [(_, outcome, words), _] = await _attempts(proxy)
    assert outcome == "stream_error" and "The model stream failed" in words
    bedrock.set_fault("exception_after_content", times=1, cut_after_events=2)
    resp = await proxy.messages(anthropic_body(stream=True))
    assert resp.headers["x-claudex-provider"] == "bedrock"
    types = _sse_types(resp.text)
    assert "content_block_delta" in types and types[-1] == "error"
    error = json.loads(resp.text.rstrip().splitlines()[-1][6:])
    assert error["error"]["message"] == "The model stream failed. Retry your request."
    assert backup.request_count == 1  # nothing sent twice once the stream committed


async def test_a_field_bedrock_refuses_is_dropped_retried_once_and_remembered(
        proxy_factory: Any, bedrock: FakeBedrock) -> None:
    proxy = await _proxy(proxy_factory, bedrock)
    body = {**anthropic_body(), "context_management": {"edits": []},
            "output_config": {"effort": "high"}}
    resp = await proxy.messages(body)
    assert resp.status_code == 200 and resp.headers["x-claudex-provider"] == "bedrock"
    assert [a[1] for a in await _attempts(proxy)] == ["unsupported_field", "ok"]
    first, second = bedrock.requests
    assert "context_management" in first.json and "output_config" in first.json
    assert "context_management" not in second.json and "output_config" not in second.json
    learned = proxy.engine.events.since(0, {"limit"})[-1]
    assert "context_management, output_config" in learned.message
    # Remembered for the profile and model: the next request leaves them out at once.
    resp = await proxy.messages(body)
    assert [a[1] for a in await _attempts(proxy)] == ["ok"]
    assert "context_management" not in bedrock.requests[-1].json
    request = proxy.engine.events.since(0, {"request"})[-1]
    assert "context_management" in json.dumps(request.data)  # the trail says what went
    cloud = proxy.engine.snapshot()["profiles"][0]["cloud"]
    assert cloud["learned"][MODEL]["dropped_fields"] == ["context_management", "output_config"]


async def test_a_field_refused_inside_every_tool_is_dropped_from_each(
        proxy_factory: Any, bedrock: FakeBedrock) -> None:
    """Bedrock's validator names one tool's place, with the tool's kind in it
    (`tools.1.custom.defer_loading`, anthropics/claude-code#82549): it goes from every tool."""
    proxy = await _proxy(proxy_factory, bedrock)
    wire = proxy.engine.runtimes["bedrock"].wire
    assert wire is not None
    refusal = describe("ValidationException", "The model returned the following errors: "
                       "tools.1.custom.defer_loading: Extra inputs are not permitted", 400)
    assert wire.learn(refusal, WireRequest(MODEL, False, False, None)) is not None
    tools = [{"name": "a", "input_schema": {"type": "object"}, "defer_loading": True},
             {"name": "b", "input_schema": {"type": "object"}, "defer_loading": True}]
    resp = await proxy.messages({**anthropic_body(), "tools": tools})
    assert resp.status_code == 200
    assert [tool["name"] for tool in bedrock.requests[-1].json["tools"]] == ["a", "b"]
    assert all("defer_loading" not in tool for tool in bedrock.requests[-1].json["tools"])


async def test_an_invalid_beta_keeps_the_documented_betas_then_none(
        proxy_factory: Any, bedrock: FakeBedrock) -> None:
    proxy = await _proxy(proxy_factory, bedrock)
    beta = {"anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14"}
    resp = await proxy.messages(headers=beta)
    assert resp.status_code == 200
    assert [a[1] for a in await _attempts(proxy)] == ["unsupported_field", "ok"]
    assert [r.json.get("anthropic_beta") for r in bedrock.requests] == [
        ["claude-code-20250219", "interleaved-thinking-2025-05-14"],
        ["interleaved-thinking-2025-05-14"]]
    # A model that takes none of them (as Opus 4.7 on Bedrock takes only one): none, then.
    bedrock.known_betas = frozenset()
    bedrock.reset_log()
    resp = await proxy.messages(headers=beta)
    assert resp.status_code == 200
    assert [a[1] for a in await _attempts(proxy)] == ["unsupported_field", "ok"]
    assert [r.json.get("anthropic_beta") for r in bedrock.requests] == [
        ["interleaved-thinking-2025-05-14"], None]
    bedrock.reset_log()
    await proxy.messages(headers=beta)
    assert [r.json.get("anthropic_beta") for r in bedrock.requests] == [None]


async def test_a_model_bedrock_does_not_know_fails_over_and_says_so(
        proxy_factory: Any, bedrock: FakeBedrock, backup: FakeProvider) -> None:
    proxy = await _proxy(proxy_factory, bedrock, backup, model="us.anthropic.nope-v1:0")
    resp = await proxy.messages()
    assert resp.headers["x-claudex-provider"] == "backup"
    assert [a[1] for a in await _attempts(proxy)] == ["model_unavailable", "ok"]
    [said] = [e for e in proxy.engine.events.since(0, {"limit"}) if e.profile == "bedrock"]
    assert "us.anthropic.nope-v1:0 cannot be used there" in said.message


async def test_a_clients_own_mistake_reaches_it_in_anthropics_shape(
        proxy_factory: Any, bedrock: FakeBedrock, backup: FakeProvider) -> None:
    proxy = await _proxy(proxy_factory, bedrock, backup)
    resp = await proxy.messages({**anthropic_body(), "max_tokens": 0})
    assert resp.status_code == 400 and backup.request_count == 0
    assert resp.json()["type"] == "error"
    assert resp.json()["error"]["type"] == "invalid_request_error"


async def test_a_token_count_is_the_local_estimate(proxy_factory: Any,
                                                   bedrock: FakeBedrock) -> None:
    proxy = await _proxy(proxy_factory, bedrock)
    resp = await proxy.client.post("/v1/messages/count_tokens", json={
        "model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hello " * 50}]})
    assert resp.status_code == 200 and resp.json()["input_tokens"] > 10
    assert bedrock.request_count == 0


async def test_a_chat_completions_client_is_translated_both_ways(
        proxy_factory: Any, bedrock: FakeBedrock) -> None:
    proxy = await _proxy(proxy_factory, bedrock)
    resp = await proxy.chat(openai_body(model="claude-sonnet-4-5"), profile="bedrock")
    assert resp.status_code == 200, resp.text
    assert resp.json()["choices"][0]["message"]["content"].startswith("Hello from bedrock")
    streamed = await proxy.chat(openai_body(model="claude-sonnet-4-5", stream=True),
                                profile="bedrock")
    assert streamed.status_code == 200 and "data: [DONE]" in streamed.text
    assert all(r.path.startswith(f"/model/{MODEL}/") for r in bedrock.requests)
