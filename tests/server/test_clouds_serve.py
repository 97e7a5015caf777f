"""Claude on Bedrock and Vertex through a real `claudex serve` (issue 37): the Anthropic API,
Bedrock (SigV4 from the AWS keys in its environment, checked by the fake with botocore) and
Vertex (a service account's file, its JWT checked by the fake token endpoint) back each other
up in every order, whole and streamed; and no secret of theirs reaches the status, the events,
the history or the log."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from claudex.demo.fake_bedrock import FakeBedrock
from claudex.demo.fake_google_token import FakeGoogleTokenServer
from claudex.demo.fake_provider import FakeProvider
from claudex.demo.fake_vertex import FakeVertex
from claudex.demo.world import free_port
from tests.cli.test_cli import spawn_serve, wait_until_serving
from tests.cloud_world import (
    KEY,
    ServiceAccount,
    bedrock_toml,
    isolate_cloud_env,
    service_account,
    vertex_toml,
)
from tests.conftest import GLOBALS, anthropic_body, profile_toml, served_models


@dataclass
class Clouds:
    anthropic: FakeProvider
    bedrock: FakeBedrock
    tokens: FakeGoogleTokenServer
    vertex: FakeVertex
    account: ServiceAccount
    url: str
    proc: asyncio.subprocess.Process


@pytest.fixture
async def clouds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Clouds]:
    isolate_cloud_env(monkeypatch, tmp_path)
    async with FakeProvider("anthropic", "anthropic",
                            models=served_models("anthropic", "anthropic")) as anthropic, \
            FakeBedrock(keys=[KEY]) as bedrock, FakeGoogleTokenServer() as tokens, \
            FakeVertex(tokens=tokens) as vertex:
        account = service_account(tmp_path, tokens.token_url)
        tokens.add_service_account(account.email, account.key.public_key())
        port = free_port()
        config = tmp_path / "profiles.toml"
        config.write_text(
            GLOBALS.replace("[proxy]", f"[proxy]\nport = {port}\ndefault_profile = \"anthropic\"")
            + profile_toml("anthropic", anthropic, backups=["bedrock", "vertex"])
            + bedrock_toml("bedrock", bedrock.base_url, auth="", backups=("vertex", "anthropic"))
            + vertex_toml("vertex", vertex.base_url, backups=("anthropic", "bedrock"),
                          auth=f'credentials_file = "{account.path}"'))
        config.chmod(0o600)
        env = {"AWS_ACCESS_KEY_ID": KEY.access_key_id,
               "AWS_SECRET_ACCESS_KEY": KEY.secret_access_key, "HOME": str(tmp_path)}
        proc = await spawn_serve(config, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            await wait_until_serving(url, proc)
            yield Clouds(anthropic, bedrock, tokens, vertex, account, url, proc)
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(proc.communicate(), 20)


async def _send(clouds: Clouds, path: str = "/v1/messages", *, stream: bool = False
                ) -> httpx.Response:
    async with httpx.AsyncClient(base_url=clouds.url, timeout=20) as client:
        return await client.post(path, json=anthropic_body(stream=stream),
                                 headers={"anthropic-version": "2023-06-01"})


def _served(resp: httpx.Response) -> tuple[str, str]:
    assert resp.status_code == 200, resp.text
    if resp.headers["content-type"].startswith("text/event-stream"):
        assert "event: content_block_delta" in resp.text and "event: message_stop" in resp.text
    else:
        assert resp.json()["content"][0]["text"].startswith("Hello from")
    return resp.headers["x-claudex-provider"], resp.headers["x-claudex-attempts"]


async def test_failover_in_every_order_whole_and_streamed(clouds: Clouds) -> None:
    for stream in (False, True):
        assert _served(await _send(clouds, stream=stream))[0] == "anthropic"
    clouds.anthropic.faults.mode = "529"  # the Anthropic API overloaded: Bedrock serves
    for stream in (False, True):
        provider, attempts = _served(await _send(clouds, stream=stream))
        assert provider == "bedrock" and attempts.startswith("anthropic:529,")
    clouds.bedrock.set_fault("unavailable")  # and Bedrock down too: Vertex serves
    for stream in (False, True):
        provider, attempts = _served(await _send(clouds, stream=stream))
        assert provider == "vertex" and "bedrock:503" in attempts
    # Back the other way: Vertex addressed, itself down, the Anthropic API back up (its
    # breaker, opened by the 529s, reset by the operator).
    clouds.anthropic.faults.mode = "ok"
    async with httpx.AsyncClient(base_url=clouds.url, timeout=20) as client:
        assert (await client.post("/_claudex/breakers/anthropic/reset")).status_code == 200
    clouds.vertex.set_fault("unavailable")
    provider, _ = _served(await _send(clouds, "/proxy/vertex/v1/messages", stream=True))
    assert provider == "anthropic"
    clouds.bedrock.set_fault("ok")
    clouds.vertex.set_fault("ok")
    provider, _ = _served(await _send(clouds, "/proxy/bedrock/v1/messages", stream=True))
    assert provider == "bedrock"
    signed = [r for r in clouds.bedrock.requests if r.status == 200]
    assert signed and all(r.headers["authorization"].startswith("AWS4-HMAC-SHA256 ")
                          for r in signed)
    assert len(clouds.tokens.minted) == 1  # one access token, minted once, reused


async def test_no_cloud_secret_reaches_status_events_history_or_the_log(clouds: Clouds) -> None:
    clouds.anthropic.faults.mode = "529"
    _served(await _send(clouds))
    clouds.bedrock.set_fault("unavailable")
    _served(await _send(clouds, stream=True))
    async with httpx.AsyncClient(base_url=clouds.url, timeout=20) as client:
        status = (await client.get("/_claudex/status")).text
        history = (await client.get("/_claudex/history")).text
        metrics = (await client.get("/metrics")).text
    cloud = {p["name"]: p["cloud"] for p in json.loads(status)["profiles"]}
    assert cloud["bedrock"]["signed"] == "sigv4" and cloud["vertex"]["tokens"] == "google-auth"
    clouds.proc.send_signal(signal.SIGTERM)
    _, stderr = await asyncio.wait_for(clouds.proc.communicate(), 20)
    log = stderr.decode()
    [token] = clouds.tokens.minted
    pem = clouds.account.path.read_text()
    key_body = json.loads(pem)["private_key"].splitlines()[1]
    for text in (status, history, metrics, log):
        assert KEY.secret_access_key not in text
        assert token not in text
        assert key_body not in text
    assert "vertex" in log or "bedrock" in log  # the log did see them
