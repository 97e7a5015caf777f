"""The operator has the last word on a spent plan window (issue 30), through a real
`claudex serve` on 127.0.0.1 against the fakes: `claudex reset` ends the mark (saying what it
ended), and so does a new credential put in the profile's credentials file by a fresh login;
a plan that is still spent then gets exactly one request, which marks it again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from claudex.demo.fake_oauth import FakeTokenServer
from claudex.demo.fake_plans import Plan
from claudex.demo.world import free_port
from tests.cli.test_cli import claudex
from tests.conftest import GLOBALS, anthropic_body, build_config, profile_toml
from tests.engine.core.test_plan_windows import subscription
from tests.engine.credentials.test_proxy_oauth import oauth_profile, write_credentials
from tests.serve_world import serving

ANTHROPIC = {"anthropic-version": "2023-06-01"}
SPENT_WORDS = "5-hour window no longer treated as spent"


@pytest.fixture
async def served(fakes: Any, tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    f = await fakes(("sub", "anthropic"), ("backup", "anthropic"))
    creds = tmp_path / "credentials.json"
    write_credentials(creds, "tok-first-account")
    sub = f["sub"]
    sub.faults.valid_tokens = {"tok-first-account", "tok-second-account"}
    sub.plan = Plan.claude()  # the real wall clock, as the served engine's
    port = free_port()
    path = tmp_path / "profiles.toml"
    async with FakeTokenServer() as tokens:
        path.write_text(GLOBALS.replace("[proxy]", f'[proxy]\nport = {port}\n'
                                        'default_profile = "sub"')
                        + oauth_profile(sub, creds, tokens.token_url, name="sub",
                                        extra='backup_providers = ["backup"]')
                        + profile_toml("backup", f["backup"]))
        path.chmod(0o600)
        async with serving(path, port) as client:
            yield {"client": client, "sub": sub, "creds": creds, "url": f"http://127.0.0.1:{port}",
                   "tokens": tokens}


async def ask(client: httpx.AsyncClient) -> str:
    resp = await client.post("/v1/messages", json=anthropic_body(), headers=ANTHROPIC)
    assert resp.status_code == 200, resp.text
    return str(resp.headers["x-claudex-attempts"])


async def sub_status(client: httpx.AsyncClient) -> dict[str, Any]:
    profiles = (await client.get("/_claudex/status")).json()["profiles"]
    return dict(next(p for p in profiles if p["name"] == "sub"))


async def spent_and_skipped(client: httpx.AsyncClient, sub: Any) -> int:
    """Spend the plan's 5-hour window; one request finds it spent, the next skips it."""
    sub.plan.spend(3600)
    assert await ask(client) == "sub:plan_limit,backup:200"
    assert await ask(client) == "sub:window_spent,backup:200"
    assert (await sub_status(client))["window_spent"] == "5h"
    return int(sub.request_count)


async def events_of(client: httpx.AsyncClient, kinds: str, count: int) -> list[str]:
    """The messages of the served engine's first `count` events of `kinds`, from the SSE
    route's backlog (`since=0`)."""
    found: list[str] = []
    async with asyncio.timeout(10):
        async with client.stream("GET", f"/_claudex/events?kinds={kinds}&since=0") as resp:
            async for line in resp.aiter_lines():
                if line.startswith("data:"):
                    found.append(json.loads(line[5:])["message"])
                    if len(found) == count:
                        return found
    return found


async def test_the_operators_reset_ends_a_spent_window_and_one_request_marks_it_again(
        served: dict[str, Any]) -> None:
    client, sub = served["client"], served["sub"]
    calls = await spent_and_skipped(client, sub)

    code, out, err = await claudex("reset", "sub", "--url", served["url"])
    assert (code, out.strip()) == (0, f"sub: reset by operator ({SPENT_WORDS})"), err
    status = await sub_status(client)
    assert status["window_spent"] is None and status["health"]["color"] == "green"
    assert (await events_of(client, "reset", 1)) == [f"sub: reset by operator ({SPENT_WORDS})"]

    # Still spent at the provider: exactly one request, no retry, and the mark is back.
    assert await ask(client) == "sub:plan_limit,backup:200"
    assert sub.request_count == calls + 1
    assert await ask(client) == "sub:window_spent,backup:200"
    assert sub.request_count == calls + 1

    # The operator bought extra usage: after their reset the plan serves again.
    sub.plan.windows[0].used = 0
    resp = await client.post("/_claudex/breakers/sub/reset")
    assert resp.json()["ended"] == [SPENT_WORDS]
    assert await ask(client) == "sub:200"


async def test_a_fresh_login_ends_a_spent_window(served: dict[str, Any]) -> None:
    client, sub = served["client"], served["sub"]
    calls = await spent_and_skipped(client, sub)

    # `claude login` to another account rewrites the credentials file.
    write_credentials(served["creds"], "tok-second-account", refresh="refresh-other")
    for _ in range(300):  # looked at every 5 s (engine/health/spent_windows.py): bounded wait
        if (await sub_status(client))["window_spent"] is None:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the new credentials did not end the spent window")

    window = await events_of(client, "window", 2)
    assert window[1] == f"sub: new credentials in {served['creds']} ({SPENT_WORDS})"
    # The next request tries the plan with the new token: one request, still spent here.
    assert await ask(client) == "sub:plan_limit,backup:200"
    assert sub.request_count == calls + 1
    assert sub.requests[-1].headers["authorization"] == "Bearer tok-second-account"
    assert served["tokens"].call_count == 0  # a login, not a refresh


async def test_new_credentials_in_the_config_end_a_spent_window_and_a_reload_alone_does_not(
        fakes: Any, proxy_factory: Any) -> None:

    proxy = await subscription(fakes, proxy_factory)
    sub = proxy.fakes["sub"]
    sub.plan.spend(600)
    assert (await proxy.messages(profile="sub")).headers["x-claudex-attempts"] == \
        "sub:plan_limit,backup:200"
    same = build_config(profile_toml("sub", sub, backups=["backup"])
                        + profile_toml("backup", proxy.fakes["backup"]))
    proxy.engine.apply_config(same)  # nothing about its credentials changed: still spent
    assert (await proxy.messages(profile="sub")).headers["x-claudex-attempts"] == \
        "sub:window_spent,backup:200"

    other = build_config(profile_toml("sub", sub, backups=["backup"]).replace(
        'api_key_env = "FAKE_KEY"', 'api_key = "sk-another-account-key"')
        + profile_toml("backup", proxy.fakes["backup"]))
    proxy.engine.apply_config(other)
    words = [e.message for e in proxy.engine.events.since(0) if e.kind == "window"]
    assert words[-1] == f"sub: new credentials in the config ({SPENT_WORDS})"
    calls = sub.request_count
    assert (await proxy.messages(profile="sub")).headers["x-claudex-attempts"] == \
        "sub:plan_limit,backup:200"
    assert sub.request_count == calls + 1
