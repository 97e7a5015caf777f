"""Pools through a real `claudex serve` (DESIGN.md "Pools"): sticky conversations, new ones on
the member with most headroom, a short outage keeping the binding and a long one moving it,
round robin, the pool's own backups (never a member's), a pool as default profile and as a
profile's backup, the trail naming pool and member, and the status' `pools`."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from claudex.demo.world import free_port
from tests.cli.test_cli import spawn_serve, wait_until_serving
from tests.conftest import GLOBALS, profile_toml

ANTHROPIC = {"anthropic-version": "2023-06-01"}


def turn(session: str, first: str, turns: int = 1) -> tuple[dict[str, Any], dict[str, str]]:
    """A body of `turns` user turns starting with `first`, in Claude Code's session `session`."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": first}]
    for n in range(1, turns):
        messages += [{"role": "assistant", "content": f"answer {n}"},
                     {"role": "user", "content": f"turn {n}"}]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "system": "You are helpful.",
            "messages": messages}
    return body, {**ANTHROPIC, "x-claude-code-session-id": session}


Served = Callable[..., Any]


@pytest.fixture
async def serve(fakes: Any, tmp_path: Path) -> AsyncIterator[Served]:
    procs: list[asyncio.subprocess.Process] = []
    clients: list[httpx.AsyncClient] = []

    async def start(pool: str, *, members: tuple[str, ...] = ("acct-a", "acct-b", "acct-c"),
                    extra_fakes: tuple[str, ...] = ("spare", "other"),
                    extra: str = "", default: str = "claude") -> dict[str, Any]:
        f = await fakes(*((name, "anthropic") for name in (*members, *extra_fakes)))
        port = free_port()
        path = tmp_path / "profiles.toml"
        profiles = "".join(profile_toml(name, fake, backups=["other"] if name in members
                                        else ()) for name, fake in f.items())
        path.write_text(GLOBALS.replace("[proxy]", f'[proxy]\nport = {port}\n'
                                        f'default_profile = "{default}"')
                        + profiles + pool + extra)
        path.chmod(0o600)
        proc = await spawn_serve(path, "--debug")
        procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        await wait_until_serving(url, proc)
        client = httpx.AsyncClient(base_url=url, timeout=10.0)
        clients.append(client)
        return {"client": client, "fakes": f}

    yield start
    for client in clients:
        await client.aclose()
    for proc in procs:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.communicate(), 20)


STICKY = """
[[profiles]]
name = "claude"
members = ["acct-a", "acct-b", "acct-c"]
backup_providers = ["spare"]
"""


async def send(client: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str],
               path: str = "/v1/messages") -> httpx.Response:
    resp = await client.post(path, json=body, headers=headers)
    assert resp.status_code == 200, resp.text
    return resp


async def test_sticky_keeps_each_conversation_on_one_member_and_spreads_new_ones(
        serve: Served) -> None:
    world = await serve(STICKY)
    client = world["client"]
    where: dict[str, set[str]] = {}
    for n in range(1, 4):  # three turns of each of six conversations, interleaved
        for conv in range(6):
            # Two conversations per session: a session's subagent (its own first message)
            # is a conversation of its own.
            resp = await send(client, *turn(f"session-{conv // 2}", f"task {conv}", n))
            where.setdefault(f"task {conv}", set()).add(resp.headers["x-claudex-provider"])
    assert all(len(members) == 1 for members in where.values()), where
    # New conversations go where fewest are bound: two on each member.
    served = [next(iter(members)) for members in where.values()]
    assert sorted(served) == ["acct-a", "acct-a", "acct-b", "acct-b", "acct-c", "acct-c"]

    status = (await client.get("/_claudex/status")).json()
    (pool,) = status["pools"]
    assert pool["name"] == "claude" and pool["balance"] == "sticky"
    assert pool["bindings"] == 6 and pool["backup_providers"] == ["spare"]
    assert {m["name"]: (m["bindings"], m["requests"]) for m in pool["members"]} == {
        "acct-a": (2, 6), "acct-b": (2, 6), "acct-c": (2, 6)}
    assert [m["share"] for m in pool["members"]] == [pytest.approx(1 / 3, abs=1e-3)] * 3
    assert status["default_profile"] == "claude"


async def test_the_trail_names_pool_and_member(serve: Served) -> None:
    world = await serve(STICKY)
    client = world["client"]
    resp = await send(client, *turn("s", "hello"))
    member = resp.headers["x-claudex-provider"]
    assert resp.headers["x-claudex-attempts"] == f"claude/{member}:200"
    history = (await client.get("/_claudex/history")).json()["requests"]
    assert history[-1]["trail"] == f"claude/{member} 200"
    assert history[-1]["profile"] is None and history[-1]["provider"] == member


async def test_a_member_out_for_one_request_keeps_its_conversation(serve: Served) -> None:
    world = await serve(STICKY)
    client, f = world["client"], world["fakes"]
    first = (await send(client, *turn("s", "hello"))).headers["x-claudex-provider"]
    f[first].set_fault("down")  # one refused connection: a breaker failure, not open
    resp = await send(client, *turn("s", "hello", 2))
    other = resp.headers["x-claudex-provider"]
    assert other != first and resp.headers["x-claudex-attempts"].startswith(f"claude/{first}:")
    f[first].set_fault("ok")
    # Back to its warm cache: the binding did not move.
    assert (await send(client, *turn("s", "hello", 3))).headers["x-claudex-provider"] == first
    counts = {m["name"]: m["bindings"]
              for m in (await client.get("/_claudex/status")).json()["pools"][0]["members"]}
    assert counts[first] == 1 and counts[other] == 0


async def test_a_tripped_member_loses_its_conversations_for_good(serve: Served) -> None:
    world = await serve(STICKY)
    client = world["client"]
    first = (await send(client, *turn("s", "hello"))).headers["x-claudex-provider"]
    assert (await client.post(f"/_claudex/breakers/{first}/trip")).status_code == 200
    resp = await send(client, *turn("s", "hello", 2))
    moved = resp.headers["x-claudex-provider"]
    assert moved != first
    assert resp.headers["x-claudex-attempts"] == f"claude/{first}:forced_open,claude/{moved}:200"
    assert (await client.post(f"/_claudex/breakers/{first}/reset")).status_code == 200
    # The cache is at `moved` now: the conversation stays there.
    assert (await send(client, *turn("s", "hello", 3))).headers["x-claudex-provider"] == moved


async def test_the_pools_backups_serve_after_every_member_never_a_members_own(
        serve: Served) -> None:
    world = await serve(STICKY)
    client, f = world["client"], world["fakes"]
    for name in ("acct-a", "acct-b", "acct-c"):
        f[name].set_fault("500")
    resp = await send(client, *turn("s", "hello"))
    assert resp.headers["x-claudex-provider"] == "spare"
    tried = [token.split(":")[0] for token in resp.headers["x-claudex-attempts"].split(",")]
    assert "other" not in tried and f["other"].request_count == 0
    assert {"claude/acct-a", "claude/acct-b", "claude/acct-c"} <= set(tried)
    assert tried[-1] == "spare"


async def test_round_robin_takes_members_in_turn_by_weight(serve: Served) -> None:
    world = await serve("""
[[profiles]]
name = "claude"
members = ["acct-a", "acct-b"]
balance = "round_robin"
weights = { acct-a = 2 }
""", members=("acct-a", "acct-b"))
    client = world["client"]
    served = [(await send(client, *turn("s", "same conversation"))).headers[
        "x-claudex-provider"] for _ in range(6)]
    assert served.count("acct-a") == 4 and served.count("acct-b") == 2
    assert served[:3] in (["acct-a", "acct-b", "acct-a"], ["acct-a", "acct-a", "acct-b"])


async def test_a_pool_is_addressed_like_a_profile(serve: Served) -> None:
    world = await serve(STICKY + """
[[profiles]]
name = "front"
members = ["spare"]
""", default="other", extra="")
    client = world["client"]
    # /proxy/NAME/...
    resp = await send(client, *turn("s", "hi"), path="/proxy/claude/v1/messages")
    assert resp.headers["x-claudex-provider"] in ("acct-a", "acct-b", "acct-c")
    # Not the default: the default profile serves.
    assert (await send(client, *turn("s", "hi"))).headers["x-claudex-provider"] == "other"


async def test_a_pool_as_a_profiles_backup_stands_for_its_members(serve: Served) -> None:
    world = await serve(STICKY, default="lead", extra="""
[[profiles]]
name = "lead"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "FAKE_KEY"
backup_providers = ["claude"]
""")
    client = world["client"]
    resp = await send(client, *turn("s", "hi"))
    assert resp.headers["x-claudex-provider"] in ("acct-a", "acct-b", "acct-c")
    first, served = resp.headers["x-claudex-attempts"].split(",")
    assert first.startswith("lead:") and served.startswith("claude/")


async def test_claudex_status_shows_each_pool_with_its_members(serve: Served) -> None:
    from io import StringIO

    from rich.console import Console

    from claudex.text.status import render_status

    world = await serve(STICKY)
    client = world["client"]
    for conv in range(3):
        await send(client, *turn("s", f"task {conv}"))
    out = StringIO()
    render_status((await client.get("/_claudex/status")).json(),
                  Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    assert "pool claude (sticky) · 3 conversations bound → spare" in text
    for member in ("acct-a", "acct-b", "acct-c"):
        assert f"└ {member}: 1 bound · 1 requests (33%)" in text


async def test_a_route_to_a_pool_is_served_by_its_members(serve: Served) -> None:
    world = await serve(STICKY, default="other", extra='\n[routes]\nbackground = "claude"\n')
    client = world["client"]
    body, headers = turn("s", "summarise this session")
    body["model"] = "claude-haiku-4-5"
    resp = await send(client, body, headers)
    assert resp.headers["x-claudex-route"] == "background -> claude"
    member = resp.headers["x-claudex-provider"]
    assert member in ("acct-a", "acct-b", "acct-c")
    assert resp.headers["x-claudex-attempts"] == f"claude/{member}:200"
    # The conversation is bound there: its next turn follows.
    body2, _ = turn("s", "summarise this session", 2)
    body2["model"] = "claude-haiku-4-5"
    assert (await send(client, body2, headers)).headers["x-claudex-provider"] == member


async def test_a_pools_model_list_is_its_members(serve: Served) -> None:
    world = await serve(STICKY)
    client = world["client"]
    resp = await client.get("/proxy/claude/v1/models", headers=ANTHROPIC)
    assert resp.status_code == 200, resp.text
    ids = [model["id"] for model in resp.json()["data"]]
    assert {"acct-a-model", "acct-b-model", "acct-c-model"} <= set(ids)
    assert "other-model" not in ids
    # The default route: the default pool's members too.
    ids = [m["id"] for m in (await client.get("/v1/models", headers=ANTHROPIC)).json()["data"]]
    assert {"acct-a-model", "acct-b-model", "acct-c-model"} <= set(ids)


async def test_count_tokens_through_a_pool_binds_nothing(serve: Served) -> None:
    world = await serve(STICKY)
    client = world["client"]
    body, headers = turn("s", "hello")
    del body["max_tokens"]
    resp = await client.post("/v1/messages/count_tokens", json=body, headers=headers)
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-claudex-provider"] in ("acct-a", "acct-b", "acct-c")
    assert (await client.get("/_claudex/status")).json()["pools"][0]["bindings"] == 0
