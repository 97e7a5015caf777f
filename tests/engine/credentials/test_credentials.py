"""Credentials: header shapes, token files, refresh-then-retry against a local token endpoint."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import socket
import stat
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from claudex.config.model import Profile
from claudex.engine.clock import FakeClock
from claudex.engine.credentials.cache import (
    AuthHeaders,
    CredentialError,
    Credentials,
    NeedsLogin,
    credentials_path,
    mask_secret,
    write_json_atomic,
    write_text_atomic,
)
from claudex.engine.credentials.token_command import CommandFailed, run_shell_command
from claudex.engine.events import Event

ACCESS = "sk-ant-oat01-old-access-token-aaaa"
REFRESH = "sk-ant-ort01-old-refresh-token-bbbb"
NEW_ACCESS = "sk-ant-oat01-new-access-token-cccc"
NEW_REFRESH = "sk-ant-ort01-new-refresh-token-dddd"


# -- a real token endpoint on 127.0.0.1 ------------------------------------------------------


@dataclass
class TokenEndpoint:
    url: str
    posts: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    answer: dict[str, Any] | str = field(
        default_factory=lambda: {
            "access_token": NEW_ACCESS,
            "refresh_token": NEW_REFRESH,
            "expires_in": 3600,
        }
    )
    # When set, the handler waits for `release` after signalling `entered`.
    hold: bool = False
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


@pytest.fixture
async def endpoint() -> AsyncIterator[TokenEndpoint]:
    state = TokenEndpoint(url="")

    async def token(request: web.Request) -> web.StreamResponse:
        state.posts.append(await request.json())
        if state.hold:
            state.entered.set()
            await state.release.wait()
        if isinstance(state.answer, str):
            return web.Response(status=state.status, text=state.answer)
        return web.json_response(state.answer, status=state.status)

    app = web.Application()
    app.router.add_post("/v1/oauth/token", token)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    state.url = f"http://127.0.0.1:{port}/v1/oauth/token"
    try:
        yield state
    finally:
        state.release.set()
        await runner.cleanup()


# -- helpers -----------------------------------------------------------------------------------

CLOCK = FakeClock()
NOW = CLOCK.wall()
HOUR_MS = 3_600_000


def claude_doc(
    access: str = ACCESS, refresh: str | None = REFRESH, expires_ms: float | None = None
) -> dict[str, Any]:
    section: dict[str, Any] = {
        "accessToken": access,
        "expiresAt": int(NOW * 1000 + HOUR_MS) if expires_ms is None else int(expires_ms),
        "scopes": ["user:inference", "user:profile"],
        "subscriptionType": "max",
    }
    if refresh is not None:
        section["refreshToken"] = refresh
    return {"claudeAiOauth": section, "otherTool": {"keep": True}}


def write_doc(path: Path, doc: object, mode: int = 0o644) -> Path:
    path.write_text(json.dumps(doc))
    path.chmod(mode)
    return path


def claude_profile(path: Path, token_url: str | None = None, **extra: Any) -> Profile:
    return Profile(
        name="claude-oauth",
        provider_type="DirectAnthropic",
        base_url="https://api.anthropic.com",
        auth_type="oauth",
        oauth_provider="claude",
        credentials_file=str(path),
        token_url=token_url,
        **extra,
    )


def make(profile: Profile, events: list[Event] | None = None, **kw: Any) -> Credentials:
    kw.setdefault("wall", CLOCK.wall)
    kw.setdefault("env", {})
    return Credentials(profile, on_event=events.append if events is not None else None, **kw)


def failed_with(token: str) -> AuthHeaders:
    return AuthHeaders({"authorization": f"Bearer {token}"}, token)


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1/oauth/token"


# -- mask_secret --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("sk-ant-api03-abcdefghijklmnop-wxyz", "sk-…wxyz"),
        ("sk-proj-1234567890abcdef", "sk-…cdef"),
        ("xai-ABCDEFGHIJKLMNOPQRSTUV", "xai-…STUV"),
        ("eyJhbGciOiJSUzI1NiJ9.payload.sig1", "…sig1"),  # no short tag: no prefix
        ("abcdefgh-ijklmnop", "…mnop"),  # dash too far in to be a tag
        ("0123456789a", "…9a"),  # 11 chars
        ("short12", "…"),
        ("", "…"),
    ],
)
def test_mask_secret(value: str, shown: str) -> None:
    assert mask_secret(value) == shown


def test_mask_secret_never_shows_more_than_four_trailing_characters() -> None:
    for length in range(0, 60):
        value = "".join(chr(ord("A") + i % 26) for i in range(length))
        masked = mask_secret(value)
        assert len(masked.split("…", 1)[1]) <= 4


# -- api keys -----------------------------------------------------------------------------------


async def test_api_key_from_env_is_x_api_key_for_anthropic() -> None:
    profile = Profile("a", "DirectAnthropic", "https://api.anthropic.com", api_key_env="A_KEY")
    auth = await make(profile, env={"A_KEY": "sk-ant-key-1"}).auth_headers()
    assert auth == AuthHeaders({"x-api-key": "sk-ant-key-1"}, "sk-ant-key-1", None)


async def test_api_key_is_bearer_for_openai_compatible() -> None:
    profile = Profile("g", "OpenAICompatible", "https://api.x.ai/v1", api_key="xai-secret-key")
    auth = await make(profile).auth_headers()
    assert auth == AuthHeaders({"authorization": "Bearer xai-secret-key"}, "xai-secret-key")


async def test_api_key_refresh_is_true_only_when_the_env_var_changed() -> None:
    env = {"K": "key-one-000000"}
    profile = Profile("g", "OpenAICompatible", "https://x/v1", api_key_env="K")
    creds = make(profile, env=env)
    first = await creds.auth_headers()
    assert first is not None
    assert await creds.refresh_after_401(first) is False
    env["K"] = "key-two-000000"
    assert await creds.refresh_after_401(first) is True
    second = await creds.auth_headers()
    assert second is not None and second.token == "key-two-000000"
    assert creds.status is None  # an api-key 401 is "auth", not "needs login"


async def test_missing_env_var_is_a_credential_error_naming_the_variable() -> None:
    profile = Profile("g", "OpenAICompatible", "https://x/v1", api_key_env="XAI_API_KEY")
    with pytest.raises(CredentialError, match="g: environment variable XAI_API_KEY is not set"):
        await make(profile).auth_headers()


async def test_passthrough_has_no_headers_and_no_refresh() -> None:
    profile = Profile("p", "DirectAnthropic", "https://api.anthropic.com", auth_type="passthrough")
    creds = make(profile)
    assert await creds.auth_headers() is None
    assert await creds.refresh_after_401(failed_with("x" * 20)) is False


# -- credential files ---------------------------------------------------------------------------


async def test_claude_file_gives_bearer_and_oauth_beta_without_api_key(tmp_path: Path) -> None:
    path = write_doc(tmp_path / ".credentials.json", claude_doc())
    auth = await make(claude_profile(path)).auth_headers()
    assert auth is not None
    assert auth.headers == {"authorization": f"Bearer {ACCESS}"}
    assert auth.beta == "oauth-2025-04-20"
    assert auth.token == ACCESS


async def test_codex_file_gives_bearer(tmp_path: Path) -> None:
    doc = {"OPENAI_API_KEY": None, "tokens": {"access_token": "codex-access-1234", "id_token": "i"}}
    path = write_doc(tmp_path / "auth.json", doc)
    profile = Profile(
        "chatgpt",
        "OpenAICompatible",
        "https://chatgpt.example/v1",
        auth_type="oauth",
        oauth_provider="codex",
        credentials_file=str(path),
    )
    auth = await make(profile).auth_headers()
    assert auth == AuthHeaders({"authorization": "Bearer codex-access-1234"}, "codex-access-1234")


def test_default_credentials_paths_expand_home() -> None:
    claude = Profile(
        "c", "DirectAnthropic", "https://a", auth_type="oauth", oauth_provider="claude"
    )
    codex = Profile("x", "OpenAICompatible", "https://b", auth_type="oauth", oauth_provider="codex")
    assert credentials_path(claude) == Path.home() / ".claude" / ".credentials.json"
    assert credentials_path(codex) == Path.home() / ".codex" / "auth.json"
    assert credentials_path(Profile("k", "OpenAICompatible", "https://b", api_key="k")) is None


async def test_missing_or_malformed_file_names_the_file_never_the_token(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(CredentialError) as info:
        await make(claude_profile(missing)).auth_headers()
    assert str(missing) in str(info.value) and "claude login" in str(info.value)

    broken = tmp_path / "broken.json"
    broken.write_text('{"claudeAiOauth": {"accessToken": "' + ACCESS + '"')
    with pytest.raises(CredentialError) as info:
        await make(claude_profile(broken)).auth_headers()
    assert str(broken) in str(info.value) and "not valid JSON" in str(info.value)
    assert ACCESS not in str(info.value)

    no_token = write_doc(tmp_path / "empty.json", {"claudeAiOauth": {"refreshToken": REFRESH}})
    with pytest.raises(CredentialError, match=r"claudeAiOauth\.accessToken") as info:
        await make(claude_profile(no_token)).auth_headers()
    assert REFRESH not in str(info.value)


# -- refresh after 401 --------------------------------------------------------------------------


async def test_file_rotated_by_another_tool_is_picked_up_without_http(
    tmp_path: Path, endpoint: TokenEndpoint
) -> None:
    path = write_doc(tmp_path / "c.json", claude_doc())
    creds = make(claude_profile(path, endpoint.url))
    first = await creds.auth_headers()
    assert first is not None
    write_doc(path, claude_doc(access=NEW_ACCESS))

    assert await creds.refresh_after_401(first) is True
    second = await creds.auth_headers()
    assert second is not None and second.token == NEW_ACCESS
    assert endpoint.posts == []


async def test_refresh_grant_rewrites_the_file_keeping_other_keys(
    tmp_path: Path, endpoint: TokenEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="claudex")
    original = claude_doc()
    path = write_doc(tmp_path / "c.json", original, mode=0o644)
    events: list[Event] = []
    creds = make(claude_profile(path, endpoint.url), events)
    first = await creds.auth_headers()
    assert first is not None

    assert await creds.refresh_after_401(first) is True

    assert endpoint.posts == [
        {
            "grant_type": "refresh_token",
            "refresh_token": REFRESH,
            "client_id": "9d1c250a-e61b-44d9-88ed-5944d1962f5e",
        }
    ]
    written = json.loads(path.read_text())
    section = written["claudeAiOauth"]
    assert section["accessToken"] == NEW_ACCESS
    assert section["refreshToken"] == NEW_REFRESH
    assert section["expiresAt"] == int(NOW * 1000) + 3600 * 1000
    assert section["scopes"] == original["claudeAiOauth"]["scopes"]
    assert section["subscriptionType"] == "max"
    assert written["otherTool"] == {"keep": True}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["c.json"]

    second = await creds.auth_headers()
    assert second is not None and second.token == NEW_ACCESS
    assert [(e.kind, e.profile, e.message) for e in events] == [
        ("refresh", "claude-oauth", "claude-oauth: token refreshed")
    ]
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "token refreshed" in logged
    for secret in (ACCESS, REFRESH, NEW_ACCESS, NEW_REFRESH):
        assert secret not in logged


async def test_refresh_keeps_the_old_refresh_token_when_none_comes_back(
    tmp_path: Path, endpoint: TokenEndpoint
) -> None:
    endpoint.answer = {"access_token": NEW_ACCESS, "expires_in": 600}
    path = write_doc(tmp_path / "c.json", claude_doc())
    creds = make(claude_profile(path, endpoint.url), http=httpx.AsyncClient())
    assert await creds.refresh_after_401(failed_with(ACCESS)) is True
    section = json.loads(path.read_text())["claudeAiOauth"]
    assert (section["accessToken"], section["refreshToken"]) == (NEW_ACCESS, REFRESH)


async def test_codex_refresh_uses_its_client_id_and_keeps_other_keys(
    tmp_path: Path, endpoint: TokenEndpoint
) -> None:
    endpoint.answer = {"access_token": "codex-new-1234", "refresh_token": "rt-2", "id_token": "id2"}
    doc = {
        "OPENAI_API_KEY": None,
        "tokens": {
            "access_token": "codex-old-1234",
            "refresh_token": "rt-1",
            "id_token": "id1",
            "account_id": "acct",
        },
        "last_refresh": "2025-01-01T00:00:00Z",
    }
    path = write_doc(tmp_path / "auth.json", doc)
    profile = Profile(
        "chatgpt",
        "OpenAICompatible",
        "https://chatgpt.example/v1",
        auth_type="oauth",
        oauth_provider="codex",
        credentials_file=str(path),
        token_url=endpoint.url,
    )
    creds = make(profile)
    assert await creds.refresh_after_401(failed_with("codex-old-1234")) is True
    assert endpoint.posts[0]["client_id"] == "app_EMoamEEZ73f0CkXaXp7hrann"
    written = json.loads(path.read_text())
    assert written["tokens"] == {
        "access_token": "codex-new-1234",
        "refresh_token": "rt-2",
        "id_token": "id2",
        "account_id": "acct",
    }
    # last_refresh is now, as Codex CLI writes it after a refresh (its refresh-ahead rule).
    assert written["last_refresh"] == "2025-06-15T15:06:40Z"  # CLOCK.wall()
    assert written["OPENAI_API_KEY"] is None
    auth = await creds.auth_headers()
    assert auth is not None and auth.token == "codex-new-1234" and auth.beta is None
    assert auth.headers == {"authorization": "Bearer codex-new-1234",
                            "chatgpt-account-id": "acct", "originator": "codex_cli_rs"}


async def test_profile_client_id_overrides_the_default(
    tmp_path: Path, endpoint: TokenEndpoint
) -> None:
    path = write_doc(tmp_path / "c.json", claude_doc())
    creds = make(claude_profile(path, endpoint.url, client_id="my-client"))
    assert await creds.refresh_after_401(failed_with(ACCESS)) is True
    assert endpoint.posts[0]["client_id"] == "my-client"


async def test_no_refresh_token_means_needs_login_in_plain_words(
    tmp_path: Path, endpoint: TokenEndpoint
) -> None:
    path = write_doc(tmp_path / "c.json", claude_doc(refresh=None))
    events: list[Event] = []
    creds = make(claude_profile(path, endpoint.url), events)
    auth = await creds.auth_headers()
    assert auth is not None

    assert await creds.refresh_after_401(auth) is False
    assert creds.status == "needs login"
    assert isinstance(creds.needs_login, NeedsLogin)
    assert str(creds.needs_login) == (
        "claude-oauth: the OAuth token was rejected and could not be refreshed "
        "(no refresh token); run `claude login`"
    )
    assert endpoint.posts == []
    assert [e.kind for e in events] == ["refresh"] and events[0].data["ok"] is False


@pytest.mark.parametrize(
    ("status", "answer", "reason"),
    [
        (
            400,
            {"error": "invalid_grant", "error_description": "Refresh token revoked"},
            "answered 400 (invalid_grant)",
        ),
        (500, "<html>oops</html>", "answered 500"),
        (200, "not json at all", "not a JSON object"),
        (200, {"token_type": "bearer"}, "without an access token"),
    ],
)
async def test_refresh_failure_is_false_and_needs_login(
    tmp_path: Path, endpoint: TokenEndpoint, status: int, answer: Any, reason: str
) -> None:
    endpoint.status, endpoint.answer = status, answer
    before = claude_doc()
    path = write_doc(tmp_path / "c.json", before)
    creds = make(claude_profile(path, endpoint.url))

    assert await creds.refresh_after_401(failed_with(ACCESS)) is False
    assert creds.status == "needs login"
    assert creds.needs_login is not None and reason in creds.needs_login.reason
    assert json.loads(path.read_text()) == before  # nothing written


async def test_unreachable_token_endpoint_is_needs_login_not_an_exception(tmp_path: Path) -> None:
    path = write_doc(tmp_path / "c.json", claude_doc())
    creds = make(claude_profile(path, closed_port_url()))
    assert await creds.refresh_after_401(failed_with(ACCESS)) is False
    assert creds.status == "needs login"
    assert creds.needs_login is not None
    assert "could not reach the token endpoint" in creds.needs_login.reason


async def test_needs_login_clears_when_a_token_works_again(
    tmp_path: Path, endpoint: TokenEndpoint
) -> None:
    endpoint.status, endpoint.answer = 400, {"error": "invalid_grant"}
    path = write_doc(tmp_path / "c.json", claude_doc())
    creds = make(claude_profile(path, endpoint.url))
    assert await creds.refresh_after_401(failed_with(ACCESS)) is False
    assert creds.status == "needs login"
    creds.mark_ok()
    assert creds.status is None and creds.needs_login is None


async def test_user_logging_in_again_is_picked_up_after_needs_login(
    tmp_path: Path, endpoint: TokenEndpoint
) -> None:
    endpoint.status, endpoint.answer = 400, {"error": "invalid_grant"}
    path = write_doc(tmp_path / "c.json", claude_doc())
    creds = make(claude_profile(path, endpoint.url))
    assert await creds.refresh_after_401(failed_with(ACCESS)) is False
    write_doc(path, claude_doc(access=NEW_ACCESS))  # `claude login` ran
    auth = await creds.auth_headers()
    assert auth is not None and auth.token == NEW_ACCESS


async def test_a_second_401_soon_after_a_failed_refresh_does_not_post_again(
    tmp_path: Path, endpoint: TokenEndpoint
) -> None:
    clock = FakeClock()
    endpoint.status, endpoint.answer = 400, {"error": "invalid_grant"}
    path = write_doc(tmp_path / "c.json", claude_doc())
    creds = make(claude_profile(path, endpoint.url), wall=clock.wall)
    assert await creds.refresh_after_401(failed_with(ACCESS)) is False
    clock.advance(10)
    assert await creds.refresh_after_401(failed_with(ACCESS)) is False
    assert len(endpoint.posts) == 1
    clock.advance(60)
    assert await creds.refresh_after_401(failed_with(ACCESS)) is False
    assert len(endpoint.posts) == 2


async def test_ten_concurrent_401s_make_exactly_one_post(
    tmp_path: Path, endpoint: TokenEndpoint
) -> None:
    endpoint.hold = True
    path = write_doc(tmp_path / "c.json", claude_doc())
    creds = make(claude_profile(path, endpoint.url))
    failed = await creds.auth_headers()
    assert failed is not None

    calls = [asyncio.create_task(creds.refresh_after_401(failed)) for _ in range(10)]
    await endpoint.entered.wait()  # the one refresh is in flight; the other nine are queued
    endpoint.release.set()
    results = await asyncio.gather(*calls)

    assert results == [True] * 10
    assert len(endpoint.posts) == 1
    auth = await creds.auth_headers()
    assert auth is not None and auth.token == NEW_ACCESS


async def test_ten_concurrent_401s_share_one_failed_refresh(
    tmp_path: Path, endpoint: TokenEndpoint
) -> None:
    endpoint.hold = True
    endpoint.status, endpoint.answer = 400, {"error": "invalid_grant"}
    path = write_doc(tmp_path / "c.json", claude_doc())
    events: list[Event] = []
    creds = make(claude_profile(path, endpoint.url), events)

    calls = [asyncio.create_task(creds.refresh_after_401(failed_with(ACCESS))) for _ in range(10)]
    await endpoint.entered.wait()
    endpoint.release.set()
    assert await asyncio.gather(*calls) == [False] * 10
    assert len(endpoint.posts) == 1
    assert len(events) == 1


async def test_requests_during_a_refresh_wait_for_the_new_token(
    tmp_path: Path, endpoint: TokenEndpoint
) -> None:
    endpoint.hold = True
    path = write_doc(tmp_path / "c.json", claude_doc())
    creds = make(claude_profile(path, endpoint.url))
    failed = await creds.auth_headers()
    assert failed is not None
    refresh = asyncio.create_task(creds.refresh_after_401(failed))
    await endpoint.entered.wait()
    during = asyncio.create_task(creds.auth_headers())
    endpoint.release.set()
    assert await refresh is True
    auth = await during
    assert auth is not None and auth.token == NEW_ACCESS


# -- proactive refresh --------------------------------------------------------------------------


async def test_token_expiring_within_60s_is_refreshed_before_use(
    tmp_path: Path, endpoint: TokenEndpoint
) -> None:
    clock = FakeClock()
    soon = clock.wall() * 1000 + 30_000
    path = write_doc(tmp_path / "c.json", claude_doc(expires_ms=soon))
    creds = make(claude_profile(path, endpoint.url), wall=clock.wall)
    auth = await creds.auth_headers()
    assert auth is not None and auth.token == NEW_ACCESS
    assert len(endpoint.posts) == 1
    expires = json.loads(path.read_text())["claudeAiOauth"]["expiresAt"]
    assert expires == int(clock.wall() * 1000) + 3_600_000


async def test_cached_token_is_refreshed_once_the_clock_reaches_the_margin(
    tmp_path: Path, endpoint: TokenEndpoint
) -> None:
    clock = FakeClock()
    in_two_minutes = clock.wall() * 1000 + 120_000
    path = write_doc(tmp_path / "c.json", claude_doc(expires_ms=in_two_minutes))
    creds = make(claude_profile(path, endpoint.url), wall=clock.wall)
    first = await creds.auth_headers()
    assert first is not None and first.token == ACCESS and endpoint.posts == []
    clock.advance(61)
    second = await creds.auth_headers()
    assert second is not None and second.token == NEW_ACCESS
    assert len(endpoint.posts) == 1


async def test_expired_file_already_rotated_by_another_tool_is_not_refreshed(
    tmp_path: Path, endpoint: TokenEndpoint
) -> None:
    clock = FakeClock()
    path = write_doc(tmp_path / "c.json", claude_doc(expires_ms=clock.wall() * 1000 + 120_000))
    creds = make(claude_profile(path, endpoint.url), wall=clock.wall)
    assert (await creds.auth_headers()) is not None
    write_doc(path, claude_doc(access=NEW_ACCESS, expires_ms=clock.wall() * 1000 + 7_200_000))
    clock.advance(90)
    auth = await creds.auth_headers()
    assert auth is not None and auth.token == NEW_ACCESS
    assert endpoint.posts == []


async def test_failed_proactive_refresh_still_uses_the_current_token(
    tmp_path: Path, endpoint: TokenEndpoint
) -> None:
    clock = FakeClock()
    endpoint.status, endpoint.answer = 503, {"error": "unavailable"}
    path = write_doc(tmp_path / "c.json", claude_doc(expires_ms=clock.wall() * 1000 + 30_000))
    creds = make(claude_profile(path, endpoint.url), wall=clock.wall)
    for _ in range(3):
        auth = await creds.auth_headers()
        assert auth is not None and auth.token == ACCESS
    assert len(endpoint.posts) == 1  # not once per request
    assert creds.status is None  # not rejected yet


async def test_codex_expiry_field_is_honoured_and_kept_in_its_unit(
    tmp_path: Path, endpoint: TokenEndpoint
) -> None:
    clock = FakeClock()
    endpoint.answer = {"access_token": "codex-new-1234", "expires_in": 900}
    tokens = {"access_token": "codex-old-1234", "refresh_token": "rt-1"}
    doc = {"tokens": {**tokens, "expires_at": int(clock.wall()) + 20}}
    path = write_doc(tmp_path / "auth.json", doc)
    profile = Profile(
        "chatgpt",
        "OpenAICompatible",
        "https://chatgpt.example/v1",
        auth_type="oauth",
        oauth_provider="codex",
        credentials_file=str(path),
        token_url=endpoint.url,
    )
    auth = await make(profile, wall=clock.wall).auth_headers()
    assert auth is not None and auth.token == "codex-new-1234"
    assert json.loads(path.read_text())["tokens"]["expires_at"] == int(clock.wall()) + 900


# -- token_command ------------------------------------------------------------------------------


def scripted(*outputs: str) -> tuple[Callable[[str], Any], list[str]]:
    ran: list[str] = []
    queue = list(outputs)

    async def run(command: str) -> str:
        ran.append(command)
        return queue.pop(0)

    return run, ran


async def test_token_command_is_cached_and_rerun_on_401() -> None:
    run, ran = scripted("tok-one-123456\n", "tok-two-123456\n", "tok-two-123456\n")
    profile = Profile(
        "grok",
        "OpenAICompatible",
        "https://api.x.ai/v1",
        auth_type="oauth",
        token_command="pass show llm/grok",
    )
    creds = make(profile, run_command=run)
    first = await creds.auth_headers()
    assert first == AuthHeaders({"authorization": "Bearer tok-one-123456"}, "tok-one-123456")
    assert await creds.auth_headers() == first
    assert ran == ["pass show llm/grok"]

    assert await creds.refresh_after_401(first) is True
    second = await creds.auth_headers()
    assert second is not None and second.token == "tok-two-123456"
    assert await creds.refresh_after_401(second) is False  # same token again
    assert creds.status == "needs login"
    assert len(ran) == 3


async def test_token_command_takes_the_first_line() -> None:
    run, _ = scripted("tok-first-line\nlogin: me\nurl: https://x\n")
    profile = Profile("g", "OpenAICompatible", "https://x/v1", token_command="pass show g")
    auth = await make(profile, run_command=run).auth_headers()
    assert auth is not None and auth.token == "tok-first-line"


async def test_token_command_beta_only_for_claude_oauth_on_anthropic() -> None:
    run, _ = scripted("tok-a-123456789", "tok-b-123456789")
    plain = Profile("a", "DirectAnthropic", "https://api.anthropic.com", token_command="get-tok")
    auth = await make(plain, run_command=run).auth_headers()
    assert auth is not None
    assert auth.headers == {"authorization": "Bearer tok-a-123456789"} and auth.beta is None
    claude = Profile(
        "c",
        "DirectAnthropic",
        "https://api.anthropic.com",
        auth_type="oauth",
        oauth_provider="claude",
        token_command="get-tok",
    )
    auth = await make(claude, run_command=run).auth_headers()
    assert auth is not None and auth.beta == "oauth-2025-04-20"


async def test_real_shell_token_command() -> None:
    profile = Profile(
        "g", "OpenAICompatible", "https://x/v1", token_command="printf 'tok-shell-42\\n'"
    )
    auth = await make(profile).auth_headers()
    assert auth is not None and auth.token == "tok-shell-42"


async def test_failing_token_command_names_the_exit_status_not_its_output() -> None:
    command = "echo tok-secret-printed; echo 'gpg: decryption failed' >&2; exit 3"
    profile = Profile("g", "OpenAICompatible", "https://x/v1", token_command=command)
    with pytest.raises(CredentialError) as info:
        await make(profile).auth_headers()
    message = str(info.value)
    assert "exited with status 3" in message and "gpg: decryption failed" in message
    assert "tok-secret-printed" not in message


async def test_token_command_that_hangs_is_stopped_at_the_time_limit() -> None:
    with pytest.raises(CommandFailed, match=r"did not finish within 0\.2 s"):
        await run_shell_command("sleep 30", time_limit=0.2)


async def test_token_command_printing_nothing_is_an_error() -> None:
    run, _ = scripted("  \n")
    profile = Profile("g", "OpenAICompatible", "https://x/v1", token_command="true")
    with pytest.raises(CredentialError, match="printed nothing"):
        await make(profile, run_command=run).auth_headers()


# -- atomic writes --------------------------------------------------------------------------------


def test_write_json_atomic_sets_0600_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "profiles.json"
    target.write_text("old")
    target.chmod(0o644)
    write_json_atomic(target, {"a": [1, 2], "ü": "ok"})
    assert json.loads(target.read_text(encoding="utf-8")) == {"a": [1, 2], "ü": "ok"}
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["profiles.json"]


def test_write_text_atomic_mode_symlink_and_new_directories(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "profiles.toml"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "profiles.toml"
    link.symlink_to(real)
    write_text_atomic(link, "new = 1\n", mode=0o640)
    assert link.is_symlink() and real.read_text() == "new = 1\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640

    nested = tmp_path / "a" / "b" / "c.toml"
    write_text_atomic(nested, "x = 2\n")
    assert nested.read_text() == "x = 2\n"


def test_unserialisable_data_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "c.json"
    target.write_text('{"old": true}')
    with pytest.raises(TypeError):
        write_json_atomic(target, {"bad": object()})
    assert target.read_text() == '{"old": true}'
    assert os.listdir(tmp_path) == ["c.json"]


def test_auth_headers_repr_masks_the_token() -> None:
    auth = AuthHeaders({"authorization": f"Bearer {ACCESS}"}, ACCESS, "oauth-2025-04-20")
    assert ACCESS not in repr(auth) and "…aaaa" in repr(auth)


def _jwt(claims: dict[str, Any]) -> str:
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"eyJhbGciOiJub25lIn0.{body}.sig"


@pytest.mark.parametrize(("tokens", "last_refresh", "refreshes"), [
    # Codex CLI's rules: an access token whose JWT exp has passed ...
    ({"access_token": _jwt({"exp": 1_749_999_000})}, None, True),
    ({"access_token": _jwt({"exp": 1_760_000_000})}, "2020-01-01T00:00:00Z", False),
    # ... else a last_refresh more than 8 days old.
    ({"access_token": "opaque-token-1234"}, "2025-06-01T00:00:00Z", True),
    ({"access_token": "opaque-token-1234"}, "2025-06-14T00:00:00Z", False),
    ({"access_token": "opaque-token-1234"}, None, False),
])
async def test_codex_token_is_refreshed_ahead_by_codex_clis_rule(
    tmp_path: Path, endpoint: TokenEndpoint, tokens: dict[str, Any], last_refresh: str | None,
    refreshes: bool
) -> None:
    endpoint.answer = {"access_token": "codex-new-1234", "refresh_token": "rt-2"}
    doc: dict[str, Any] = {"tokens": {**tokens, "refresh_token": "rt-1", "account_id": "a"}}
    if last_refresh is not None:
        doc["last_refresh"] = last_refresh
    path = write_doc(tmp_path / "auth.json", doc)
    profile = Profile("codex", "OpenAIResponses", "https://chatgpt.com/backend-api/codex",
                      auth_type="oauth", oauth_provider="codex", credentials_file=str(path),
                      token_url=endpoint.url)
    auth = await make(profile).auth_headers()
    assert auth is not None
    assert (auth.token == "codex-new-1234") is refreshes
    assert len(endpoint.posts) == (1 if refreshes else 0)
    if refreshes:
        written = json.loads(path.read_text())
        assert written["tokens"]["refresh_token"] == "rt-2"
        assert written["last_refresh"] == "2025-06-15T15:06:40Z"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


# -- a credential changed outside (issue 30: it ends a spent plan window) ----------------------


async def test_a_fresh_login_is_a_change_and_the_engines_own_refresh_is_not(
    tmp_path: Path, endpoint: TokenEndpoint
) -> None:
    path = write_doc(tmp_path / "creds.json", claude_doc(), mode=0o600)
    creds = make(claude_profile(path, endpoint.url))
    first = await creds.auth_headers()
    assert first is not None and first.token == ACCESS
    assert await creds.changed_outside() is None  # the token in use

    # The engine's own refresh (after a 401) writes the file: the same account, no news.
    assert await creds.refresh_after_401(first) is True
    assert json.loads(path.read_text())["claudeAiOauth"]["accessToken"] == NEW_ACCESS
    assert await creds.changed_outside() is None

    # Rewritten with the same token (another tool saving the file): no news either.
    write_doc(path, claude_doc(NEW_ACCESS, NEW_REFRESH), mode=0o600)
    assert await creds.changed_outside() is None

    # A fresh login by something else: news, and the new token is the one in use.
    write_doc(path, claude_doc("sk-ant-oat01-other-account-eeee", "r-other"), mode=0o600)
    assert await creds.changed_outside() == f"new credentials in {path}"
    now = await creds.auth_headers()
    assert now is not None and now.token == "sk-ant-oat01-other-account-eeee"
    assert await creds.changed_outside() is None  # told once


async def test_a_half_written_credentials_file_is_not_a_change(tmp_path: Path) -> None:
    path = write_doc(tmp_path / "creds.json", claude_doc(), mode=0o600)
    creds = make(claude_profile(path))
    await creds.auth_headers()
    path.write_text('{"claudeAiOauth": {"accessTo')
    assert await creds.changed_outside() is None
    write_doc(path, claude_doc("sk-ant-oat01-after-login-ffff"), mode=0o600)
    assert await creds.changed_outside() == f"new credentials in {path}"


async def test_another_token_from_token_command_is_a_change_looked_for_once_a_minute() -> None:
    clock = FakeClock()
    run, ran = scripted("tok-one-123456\n", "tok-one-123456\n", "tok-two-123456\n")
    profile = Profile("grok", "OpenAICompatible", "https://api.x.ai/v1",
                      token_command="pass show llm/grok")
    creds = make(profile, run_command=run, wall=clock.wall)
    await creds.auth_headers()
    assert await creds.changed_outside() is None  # the same token
    clock.advance(30)
    assert await creds.changed_outside() is None and len(ran) == 2  # not re-run yet
    clock.advance(31)
    assert await creds.changed_outside() == "token_command gave another token"
    now = await creds.auth_headers()
    assert now is not None and now.token == "tok-two-123456" and len(ran) == 3


async def test_a_key_cannot_change_outside() -> None:
    profile = Profile("k", "DirectAnthropic", "https://api.anthropic.com", api_key="sk-1234")
    creds = make(profile)
    await creds.auth_headers()
    assert await creds.changed_outside() is None
