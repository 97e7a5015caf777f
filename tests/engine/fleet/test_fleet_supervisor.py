"""The fleet's background task outlives whatever ends one of its connections: a Redis that
died, a bug in applying what it read, a cancellation a client library leaked. Each ends the
connection (status says so) and a new one is made; none leaves the instance saying
"connected" while nothing reads or writes Redis (which is how an instance once went on
reporting `redis: connected` 15 s after Redis was killed). A real redis-server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable

import pytest
from redis.asyncio import Redis

from claudex.config.model import FleetSettings
from claudex.engine.events import Event
from claudex.engine.fleet.coordinator import Fleet
from claudex.engine.fleet.store import FleetStore
from tests.redis_server import RedisServer

LIMIT_S = 10.0  # RETRY_S and ROUND_S are 1 s: each change below takes one or two of them


async def until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + LIMIT_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {LIMIT_S} s: {what}")
        await asyncio.sleep(0.02)


@pytest.fixture
async def fleet(redis: RedisServer) -> AsyncIterator[Fleet]:
    events: list[Event] = []
    f = Fleet(FleetSettings(redis_url=redis.url, key_prefix="sup"), name="a",
              listen="127.0.0.1:0", runtimes=dict, clock=time.monotonic, wall=time.time,
              publish=events.append)
    f.start()
    try:
        await until(lambda: f.redis == "connected", "connected at start")
        yield f
    finally:
        await f.close()


async def test_a_bug_while_connected_ends_the_connection_not_the_fleet(
    fleet: Fleet, redis: RedisServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_round = fleet._round
    failed = []

    async def round_with_a_bug(store: FleetStore) -> None:
        if not failed:
            failed.append(True)
            raise RuntimeError("a bug in reading the round")
        await real_round(store)

    monkeypatch.setattr(fleet, "_round", round_with_a_bug)
    await until(lambda: fleet.redis == "unreachable", "the bug ends the connection")
    assert fleet.error is not None and "RuntimeError" in fleet.error
    await until(lambda: fleet.redis == "connected", "connected again after the retry")
    # The supervisor is alive: Redis dying now is noticed, as it was before the bug.
    await redis.kill()
    await until(lambda: fleet.redis == "unreachable", "Redis killed is noticed")


async def test_a_leaked_cancellation_ends_the_connection_not_the_fleet(
    fleet: Fleet, redis: RedisServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A CancelledError that is not this task being stopped (raised where the connection's
    first round runs, outside its loops)."""
    real_round = fleet._round
    leaked = []

    async def round_that_leaks(store: FleetStore) -> None:
        task = asyncio.current_task()
        if not leaked and task is not None and task.get_name() == "claudex-fleet":
            leaked.append(True)  # a connection's first round, not the round loop's
            raise asyncio.CancelledError
        await real_round(store)

    monkeypatch.setattr(fleet, "_round", round_that_leaks)
    await redis.restart()  # the next connection starts with the round above
    await until(lambda: bool(leaked) and fleet.redis == "connected", "connected again")
    assert fleet._task is not None and not fleet._task.done()
    await redis.kill()
    await until(lambda: fleet.redis == "unreachable", "Redis killed is noticed")


async def test_a_loop_cancelled_by_someone_else_is_started_again(
    fleet: Fleet, redis: RedisServer,
) -> None:
    (round_task,) = [t for t in asyncio.all_tasks() if t.get_name() == "round"]
    round_task.cancel()  # as a client library's timeout could leak a cancellation
    cancelled_at = time.time()
    client = Redis.from_url(redis.url, decode_responses=True)
    try:
        beats: list[float] = []

        async def beat() -> float:
            raw = await client.get("sup:instance:a")
            return 0.0 if raw is None else float(json.loads(raw)["heartbeat"])

        deadline = time.monotonic() + LIMIT_S
        while not beats or beats[-1] <= cancelled_at + 0.5:
            if time.monotonic() > deadline:
                raise AssertionError(f"no heartbeat after the round loop was cancelled: {beats}")
            beats.append(await beat())
            await asyncio.sleep(0.05)
    finally:
        await client.aclose()
    assert fleet.redis == "connected"
