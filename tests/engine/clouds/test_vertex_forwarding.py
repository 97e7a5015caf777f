"""Vertex AI on the one forwarding path (issue 37): claudex in front of the fake Vertex, whose
tokens come from the fake Google token endpoint that verifies the service account's signed JWT.
The client speaks plain Anthropic; each Vertex row of the failure table is one request here."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from claudex.demo.fake_google_token import FakeGoogleTokenServer
from claudex.demo.fake_provider import FakeProvider
from claudex.demo.fake_vertex import FakeVertex
from tests.cloud_world import (
    PROJECT,
    VERTEX_MODEL,
    ServiceAccount,
    isolate_cloud_env,
    service_account,
    vertex_toml,
)
from tests.conftest import (
    Proxy,
    anthropic_body,
    build_config,
    eventually,
    profile_toml,
    served_models,
)


@dataclass
class Google:
    tokens: FakeGoogleTokenServer
    vertex: FakeVertex
    account: ServiceAccount
    backup: FakeProvider


@pytest.fixture
async def google(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> AsyncIterator[Google]:
    isolate_cloud_env(monkeypatch, tmp_path)
    async with FakeGoogleTokenServer() as tokens, FakeVertex(tokens=tokens) as vertex, \
            FakeProvider("backup", "anthropic",
                         models=served_models("backup", "anthropic")) as backup:
        account = service_account(tmp_path, tokens.token_url)
        tokens.add_service_account(account.email, account.key.public_key())
        yield Google(tokens, vertex, account, backup)


async def _proxy(proxy_factory: Any, google: Google, **kw: Any) -> Proxy:
    kw.setdefault("auth", f'credentials_file = "{google.account.path}"')
    text = vertex_toml("vertex", google.vertex.base_url, backups=("backup",), **kw) + \
        profile_toml("backup", google.backup)
    proxy: Proxy = await proxy_factory(build_config(text), fakes={"backup": google.backup})
    return proxy


async def _attempts(proxy: Proxy) -> list[tuple[str, str, str]]:
    events = proxy.engine.events
    await eventually(lambda: bool(events.since(0, {"request"})))
    return [(a["provider"], a["outcome"], a.get("message") or "")
            for a in events.since(0, {"request"})[-1].data["attempts"]]


async def test_whole_streamed_and_counted_with_one_minted_token(proxy_factory: Any,
                                                                 google: Google) -> None:
    proxy = await _proxy(proxy_factory, google)
    beta = {"anthropic-beta": "interleaved-thinking-2025-05-14"}
    resp = await proxy.messages(headers=beta)
    assert resp.status_code == 200, resp.text
    assert resp.json()["content"][0]["text"] == f"Hello from vertex (model {VERTEX_MODEL})."
    streamed = await proxy.messages(anthropic_body(stream=True), headers=beta)
    assert streamed.status_code == 200 and "event: message_stop" in streamed.text
    counted = await proxy.client.post("/v1/messages/count_tokens", json={
        "model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hello"}]})
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
    prefix = f"/v1/projects/{PROJECT}/locations/us-east5/publishers/anthropic/models/"
    assert [r.path for r in google.vertex.requests] == [
        f"{prefix}{VERTEX_MODEL}:rawPredict", f"{prefix}{VERTEX_MODEL}:streamRawPredict",
        f"{prefix}count-tokens:rawPredict"]
    whole, stream, count = google.vertex.requests
    assert "model" not in whole.json and whole.json["anthropic_version"] == "vertex-2023-10-16"
    assert stream.json["stream"] is True
    assert count.json["model"] == VERTEX_MODEL  # a count names its model
    assert whole.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert len(google.tokens.minted) == 1  # one token for the three, minted off the loop
    [token] = google.tokens.minted
    status = json.dumps(proxy.engine.snapshot())
    assert token not in status and token not in json.dumps(
        [e.to_json() for e in proxy.engine.events.since(0)])


async def test_a_refused_token_is_minted_again_and_the_request_retried_once(
        proxy_factory: Any, google: Google) -> None:
    proxy = await _proxy(proxy_factory, google)
    assert (await proxy.messages()).status_code == 200
    google.tokens.expire_all()  # Google stops accepting it before its stated expiry
    resp = await proxy.messages()
    assert resp.status_code == 200 and resp.headers["x-claudex-provider"] == "vertex"
    assert [a[1] for a in await _attempts(proxy)] == ["token_expired", "ok"]
    assert google.tokens.request_count == 2 and google.backup.request_count == 0
    rt = proxy.engine.runtimes["vertex"]
    assert rt.breaker.snapshot().consecutive_failures == 0 and rt.credentials.status is None


async def test_a_token_that_cannot_be_minted_again_needs_login_and_fails_over(
        proxy_factory: Any, google: Google) -> None:
    proxy = await _proxy(proxy_factory, google)
    assert (await proxy.messages()).status_code == 200
    google.tokens.expire_all()
    google.tokens.accounts.clear()  # the service account was deleted
    resp = await proxy.messages()
    assert resp.headers["x-claudex-provider"] == "backup"
    assert [a[1] for a in await _attempts(proxy)] == ["token_expired", "needs_login", "ok"]
    rt = proxy.engine.runtimes["vertex"]
    assert rt.credentials.status == "needs login"
    assert rt.color(proxy.engine.clock(), 3000) == ("red", "needs login")


@pytest.mark.parametrize(("fault", "outcome"), [
    ("unavailable", "server_error"), ("internal", "server_error"),
    ("permission_denied", "auth_error"), ("model_not_enabled", "model_unavailable"),
])
async def test_vertex_failures_fail_over(proxy_factory: Any, google: Google, fault: Any,
                                         outcome: str) -> None:
    proxy = await _proxy(proxy_factory, google)
    google.vertex.set_fault(fault)
    resp = await proxy.messages()
    assert resp.status_code == 200 and resp.headers["x-claudex-provider"] == "backup"
    assert [a[:2] for a in await _attempts(proxy)] == [("vertex", outcome), ("backup", "ok")]


async def test_resource_exhausted_is_a_rate_limit(proxy_factory: Any, google: Google) -> None:
    proxy = await _proxy(proxy_factory, google, extra="max_attempts = 2")
    google.vertex.set_fault("resource_exhausted")
    resp = await proxy.messages()
    assert resp.headers["x-claudex-provider"] == "backup"
    attempts = await _attempts(proxy)
    assert [a[1] for a in attempts] == ["rate_limited", "rate_limited", "ok"]
    assert attempts[0][2].startswith("RESOURCE_EXHAUSTED: Quota exceeded")
    assert proxy.engine.runtimes["vertex"].breaker.snapshot().consecutive_failures == 0


async def test_a_model_not_enabled_says_so(proxy_factory: Any, google: Google) -> None:
    google.vertex.enabled.discard(VERTEX_MODEL)
    proxy = await _proxy(proxy_factory, google)
    await proxy.messages()
    [said] = [e for e in proxy.engine.events.since(0, {"limit"}) if e.profile == "vertex"]
    assert f"{VERTEX_MODEL} cannot be used there (FAILED_PRECONDITION: Project" in said.message


async def test_the_health_probe_is_a_free_token_count(proxy_factory: Any,
                                                      google: Google) -> None:
    proxy = await _proxy(proxy_factory, google)
    await proxy.engine.check_health_now()
    rt = proxy.engine.runtimes["vertex"]
    assert rt.color(proxy.engine.clock(), 3000) == ("green", "ok")
    [probe] = google.vertex.requests
    assert probe.path.endswith("/models/count-tokens:rawPredict")
    google.vertex.set_fault("permission_denied")
    await proxy.engine.check_health_now()
    assert rt.health.auth_failing


async def test_a_token_command_serves_instead_of_google_auth(proxy_factory: Any,
                                                             google: Google) -> None:
    google.vertex.valid_tokens.add("ya29.from-a-command-000000000000")
    proxy = await _proxy(proxy_factory, google,
                         auth='token_command = "printf ya29.from-a-command-000000000000"')
    resp = await proxy.messages()
    assert resp.status_code == 200 and resp.headers["x-claudex-provider"] == "vertex"
    assert google.tokens.minted == {}
