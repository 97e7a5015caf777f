"""OAuth refresh-then-retry end to end: proxy -> fake provider answering 401 -> new token."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from claudex.demo.fake_oauth import FakeTokenServer
from tests.conftest import build_config


def write_credentials(path: Path, access: str, refresh: str | None = "refresh-1") -> None:
    doc: dict[str, Any] = {
        "claudeAiOauth": {"accessToken": access, "expiresAt": 4_102_444_800_000,
                          "scopes": ["user:inference"], "subscriptionType": "max"},
        "otherTool": {"keep": True},
    }
    if refresh:
        doc["claudeAiOauth"]["refreshToken"] = refresh
    path.write_text(json.dumps(doc))
    path.chmod(0o600)


def oauth_profile(fake: Any, creds: Path, token_url: str, *, name: str = "claude-oauth",
                  extra: str = "") -> str:
    return f"""
[[profiles]]
name = "{name}"
provider_type = "DirectAnthropic"
base_url = "{fake.base_url}"
auth_type = "oauth"
oauth_provider = "claude"
credentials_file = "{creds}"
token_url = "{token_url}"
{extra}
"""


async def test_401_then_rotated_file_retries_without_refresh(
    fakes: Any, proxy_factory: Any, tmp_path: Path
) -> None:
    f = await fakes(("claude", "anthropic"),)
    creds = tmp_path / "credentials.json"
    write_credentials(creds, "tok-old")
    async with FakeTokenServer() as tokens:
        proxy = await proxy_factory(build_config(oauth_profile(f["claude"], creds,
                                                               tokens.token_url)), fakes=f)
        f["claude"].faults.valid_tokens = {"tok-old"}
        assert (await proxy.messages()).status_code == 200
        # Another tool rotates the token; the provider now only accepts the new one.
        write_credentials(creds, "tok-new")
        f["claude"].faults.valid_tokens = {"tok-new"}
        resp = await proxy.messages()
        assert resp.status_code == 200
        assert resp.headers["x-claudex-attempts"] == "claude-oauth:token_expired,claude-oauth:200"
        assert tokens.call_count == 0
        sent = f["claude"].requests[-1].headers
        assert sent["authorization"] == "Bearer tok-new"
        assert "oauth-2025-04-20" in sent["anthropic-beta"]
        assert "x-api-key" not in sent
        assert proxy.engine.runtimes["claude-oauth"].breaker.snapshot().consecutive_failures == 0


async def test_401_then_refresh_grant_rewrites_file_and_retries(
    fakes: Any, proxy_factory: Any, tmp_path: Path
) -> None:
    f = await fakes(("claude", "anthropic"),)
    creds = tmp_path / "credentials.json"
    write_credentials(creds, "tok-old", refresh="refresh-1")
    async with FakeTokenServer() as tokens:
        tokens.set_next("tok-fresh", "refresh-2", expires_in=3600)
        proxy = await proxy_factory(build_config(oauth_profile(f["claude"], creds,
                                                               tokens.token_url)), fakes=f)
        f["claude"].faults.valid_tokens = {"tok-fresh"}
        resp = await proxy.messages()
        assert resp.status_code == 200
        assert tokens.call_count == 1
        doc = json.loads(creds.read_text())
        assert doc["claudeAiOauth"]["accessToken"] == "tok-fresh"
        assert doc["claudeAiOauth"]["refreshToken"] == "refresh-2"
        assert doc["claudeAiOauth"]["subscriptionType"] == "max"
        assert doc["otherTool"] == {"keep": True}
        assert stat.S_IMODE(creds.stat().st_mode) == 0o600
        assert f["claude"].requests[-1].headers["authorization"] == "Bearer tok-fresh"


async def test_refresh_impossible_fails_over_and_says_needs_login(
    fakes: Any, proxy_factory: Any, tmp_path: Path
) -> None:
    f = await fakes(("claude", "anthropic"), ("backup", "anthropic"))
    creds = tmp_path / "credentials.json"
    write_credentials(creds, "tok-old", refresh="refresh-1")
    async with FakeTokenServer() as tokens:
        tokens.set_failing("invalid_grant")
        text = oauth_profile(f["claude"], creds, tokens.token_url).replace(
            'token_url', 'backup_providers = ["backup"]\ntoken_url')
        text += f"""
[[profiles]]
name = "backup"
provider_type = "DirectAnthropic"
base_url = "{f['backup'].base_url}"
api_key_env = "FAKE_KEY"
"""
        proxy = await proxy_factory(build_config(text), fakes=f)
        f["claude"].faults.valid_tokens = {"something-else"}
        resp = await proxy.messages()
        assert resp.status_code == 200
        assert resp.headers["x-claudex-provider"] == "backup"
        status = proxy.engine.snapshot()["profiles"][0]
        assert status["health"]["auth"] == "needs login"
        assert status["health"]["color"] == "red"
        assert status["breaker"]["consecutive_failures"] == 1
