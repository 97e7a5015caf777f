"""Context windows learned by one instance of a fleet are passed over by all (DESIGN.md failure
table, "400 stating the context window"; fact register `context`, engine/fleet/facts.py): two
`claudex serve` instances and a real redis-server; instance a pays the backup's refused request,
b then passes that backup over unsent, and an instance started later reads the window in Redis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import profile_toml
from tests.fleet_world import FleetWorld, fleet_of
from tests.redis_server import RedisServer

pytestmark = pytest.mark.timeout(120)

ANTHROPIC = {"anthropic-version": "2023-06-01"}
LONG = "lorem ipsum " * 1500  # ~4,500 tokens by claudex's estimate
SMALL_WINDOW = 2000


@pytest.fixture
async def world(redis: RedisServer, fakes: Any, tmp_path: Path) -> AsyncIterator[FleetWorld]:
    f = await fakes(("primary", "anthropic"), ("small", "openai"), ("big", "openai"))
    f["small"].context_window = SMALL_WINDOW  # refuses longer prompts in OpenAI's words
    f["primary"].set_fault("529")
    profiles = (profile_toml("primary", f["primary"], backups=["small", "big"])
                + profile_toml("small", f["small"]) + profile_toml("big", f["big"]))
    w = FleetWorld(redis, f, tmp_path, profiles=profiles)
    try:
        await asyncio.gather(*(w.spawn(name) for name in ("a", "b")))
        await w.wait_for(["a", "b"], lambda s: len(fleet_of(s)["instances"]) == 2
                         and fleet_of(s)["redis"] == "connected")
        yield w
    finally:
        await w.close()


async def ask_long(world: FleetWorld, name: str) -> httpx.Response:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64,
            "messages": [{"role": "user", "content": LONG}]}
    resp = await world.http.post(world.instances[name].url + "/v1/messages", json=body,
                                 headers=ANTHROPIC)
    assert resp.status_code == 200, resp.text
    return resp


def knows_the_window(status: dict[str, Any]) -> bool:
    return any(p["name"] == "small" and p["learned_context_window"] == {
        "small-model": SMALL_WINDOW} for p in status["profiles"])


async def test_a_context_window_learned_by_one_instance_is_passed_over_by_the_others(
        world: FleetWorld) -> None:
    small = world.fakes["small"]
    resp = await ask_long(world, "a")
    assert resp.headers["x-claudex-attempts"] == "primary:529,small:context_exceeded,big:200"
    assert [r.status for r in small.requests] == [400]

    await world.wait_for(["b"], knows_the_window)
    resp = await ask_long(world, "b")
    assert resp.headers["x-claudex-provider"] == "big"
    assert resp.headers["x-claudex-attempts"] == "primary:529,small:context_too_small,big:200"
    assert len(small.requests) == 1  # b never sent it the prompt a saw refused
    small_b = await world.provider("b", "small")
    assert small_b["breaker"]["consecutive_failures"] == 0

    # An instance that joins later reads the window in Redis at its first round.
    await world.spawn("c")
    await world.wait_for(["c"], knows_the_window)
    resp = await ask_long(world, "c")
    assert resp.headers["x-claudex-attempts"] == "primary:529,small:context_too_small,big:200"
    assert len(small.requests) == 1
    # A short request still reaches the small backup from any instance.
    short = {"model": "claude-sonnet-4-5", "max_tokens": 64,
             "messages": [{"role": "user", "content": "hello"}]}
    resp = await world.http.post(world.instances["b"].url + "/v1/messages", json=short,
                                 headers=ANTHROPIC)
    assert resp.headers["x-claudex-attempts"] == "primary:529,small:200"
