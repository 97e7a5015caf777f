"""A pool's bindings shared through Redis (engine/fleet/bindings.py): two `claudex serve`
instances and a real redis-server; the turns of each conversation, sent to either instance in
turn, all land on one member; an instance started later reads a conversation's binding there."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import profile_toml
from tests.fleet_world import FleetWorld, fleet_of
from tests.redis_server import RedisServer

pytestmark = pytest.mark.timeout(120)

MEMBERS = ("acct-a", "acct-b", "acct-c")


@pytest.fixture
async def world(redis: RedisServer, fakes: Any, tmp_path: Path) -> AsyncIterator[FleetWorld]:
    f = await fakes(*((name, "anthropic") for name in MEMBERS))
    profiles = "".join(profile_toml(name, fake) for name, fake in f.items()) + """
[[profiles]]
name = "claude"
members = ["acct-a", "acct-b", "acct-c"]
"""
    w = FleetWorld(redis, f, tmp_path, profiles=profiles)
    try:
        await asyncio.gather(*(w.spawn(name) for name in ("a", "b")))
        await w.wait_for(["a", "b"], lambda s: len(fleet_of(s)["instances"]) == 2)
        yield w
    finally:
        await w.close()


def body(conv: int, turns: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"task {conv}"}]
    for n in range(1, turns):
        messages += [{"role": "assistant", "content": f"answer {n}"},
                     {"role": "user", "content": f"turn {n}"}]
    return {"model": "claude-sonnet-4-5", "max_tokens": 32, "messages": messages}


async def turn(world: FleetWorld, instance: str, conv: int, n: int) -> str:
    resp = await world.http.post(
        world.instances[instance].url + "/proxy/claude/v1/messages", json=body(conv, n),
        headers={"anthropic-version": "2023-06-01", "x-claude-code-session-id": f"s{conv}"})
    assert resp.status_code == 200, resp.text
    return resp.headers["x-claudex-provider"]


def bound(status: dict[str, Any]) -> int:
    return int(status["pools"][0]["bindings"]) if status.get("pools") else 0


async def test_two_instances_send_a_conversations_turns_to_the_same_member(
        world: FleetWorld) -> None:
    where: dict[int, list[str]] = {}
    conversations = 6
    for n in range(1, 5):
        for conv in range(conversations):
            # Turns alternate between the instances, the first turns too.
            instance = "a" if (conv + n) % 2 == 0 else "b"
            where.setdefault(conv, []).append(await turn(world, instance, conv, n))
            if n == 1:  # the binding has reached the other instance before its next turn
                await world.wait_for(["a", "b"], lambda s, k=conv + 1: bound(s) == k)
    assert all(len(set(members)) == 1 for members in where.values()), where
    # Spread as one instance would spread them: two conversations a member.
    firsts = sorted(members[0] for members in where.values())
    assert firsts == ["acct-a", "acct-a", "acct-b", "acct-b", "acct-c", "acct-c"]

    # An instance started after the conversations began reads their bindings from Redis.
    await world.spawn("c")
    await world.wait_for(["c"], lambda s: fleet_of(s)["redis"] == "connected")
    for conv in range(conversations):
        assert await turn(world, "c", conv, 5) == where[conv][0]
    c = fleet_of(await world.status("c"))
    assert c["bindings_read"] == conversations
    applied = [fleet_of(await world.status(name))["bindings_applied"] for name in ("a", "b")]
    assert sum(applied) >= conversations  # each instance applied the other's bindings
