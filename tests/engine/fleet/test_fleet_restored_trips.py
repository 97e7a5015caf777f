"""A trip an engine restores from its history journal at start is the fleet's news too, by the
same write-if-newer rule as a fresh one: offered with the time it was made, it reaches the
peers unless the fleet holds a newer fact for that provider (a reset made while this engine was
down), which then wins here as well. Real `claudex serve` processes and a real redis-server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from claudex.config import parse_config
from claudex.engine.breaker.trips import SavedTrip
from claudex.engine.clock import FakeClock
from claudex.engine.engine import Engine
from claudex.engine.fleet.facts import Fact
from tests.conftest import TEST_ENV
from tests.engine.fleet.test_fleet_facts import PROFILE, fleet_engine
from tests.fleet_world import FleetWorld, fleet_of
from tests.redis_server import RedisServer

pytestmark = pytest.mark.timeout(120)

RESTORED = "restored primary's trip from the history journal"


@pytest.fixture
async def pair(redis: RedisServer, fakes: Any, tmp_path: Path) -> AsyncIterator[FleetWorld]:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    world = FleetWorld(redis, f, tmp_path)
    try:
        await asyncio.gather(*(world.spawn(name) for name in ("a", "b")))
        await world.wait_for(["a", "b"], lambda s: len(fleet_of(s)["instances"]) == 2)
        yield world
    finally:
        await world.close()


async def test_a_trip_restored_from_the_journal_reaches_peers_that_never_heard_of_it(
    pair: FleetWorld, redis: RedisServer,
) -> None:
    # a trips primary while Redis is away: b never hears of it, and a stops before Redis
    # returns, so the trip lives on in a's journal only.
    await redis.kill()
    await pair.wait_for(["a", "b"], lambda s: fleet_of(s)["redis"] == "unreachable")
    resp = await pair.http.post(pair.instances["a"].url + "/_claudex/breakers/primary/trip",
                                json={"for": 600, "reason": "kept across restarts"})
    assert resp.status_code == 200, resp.text
    until = resp.json()["until"]
    port = pair.instances["a"].port
    await pair.stop("a")
    await redis.start()  # empty
    await pair.wait_for(["b"], lambda s: fleet_of(s)["redis"] == "connected")
    assert await pair.breaker("b") == "closed"

    a = await pair.spawn("a", port)  # same address: its journal's trips are its own
    await pair.wait_breaker(["a", "b"], "forced_open")
    assert any(RESTORED in line for line in a.log), a.log[-20:]
    remote = (await pair.provider("b", "primary"))["breaker"]
    assert remote["reason"] == "kept across restarts"
    assert abs(remote["until"] - until) < 1.0  # the same deadline, not a new one


async def test_a_newer_reset_in_the_fleet_beats_the_restored_trip_everywhere(
    pair: FleetWorld,
) -> None:
    await pair.action("a", "trip")
    await pair.wait_breaker(["b"], "forced_open")
    port = pair.instances["a"].port
    await pair.stop("a")
    await pair.action("b", "reset")  # while a is down: newer than the trip in a's journal
    assert await pair.breaker("b") == "closed"
    applied = fleet_of(await pair.status("b"))["facts_applied"]

    a = await pair.spawn("a", port)
    assert any(RESTORED in line for line in a.log), a.log[-20:]  # restored, then...
    await pair.wait_for(["a"], lambda s: fleet_of(s)["redis"] == "connected")
    await pair.wait_breaker(["a"], "closed")  # ...dropped for the fleet's newer reset
    # The older trip never went over the reset: b applied nothing from a's restart.
    assert await pair.breaker("b") == "closed"
    assert fleet_of(await pair.status("b"))["facts_applied"] == applied

    # And a's journal now says the trip is over: the next start restores nothing.
    await pair.stop("a")
    a = await pair.spawn("a", port)
    assert not any(RESTORED in line for line in a.log), a.log[-20:]
    await pair.wait_for(["a"], lambda s: fleet_of(s)["redis"] == "connected")
    assert await pair.breaker("a") == "closed"


# -- the same rule without Redis: the fact a restored trip becomes ----------------------------


def test_a_restored_trip_becomes_a_fact_dated_when_it_was_made() -> None:
    clock = FakeClock()
    engine, fleet = fleet_engine(clock)
    made = clock.wall() - 120  # tripped two minutes before this start
    engine._restore_trips([SavedTrip("p", clock.wall() + 480, "window", made)])
    assert engine.runtimes["p"].breaker.state.value == "forced_open"
    fact = fleet.registers["p"].operator
    assert fact is not None
    assert (fact.state, fact.at, fact.by, fact.reason) == ("forced_open", made, "me", "window")
    assert fact.until == clock.wall() + 480
    # A reset the fleet made after the trip (while this engine was down) wins here...
    assert fleet.receive(Fact("p", "operator", "reset", made + 60, "peer"))
    assert engine.runtimes["p"].breaker.state.value == "closed"


def test_an_older_fleet_fact_loses_to_the_restored_trip() -> None:
    clock = FakeClock()
    engine, fleet = fleet_engine(clock)
    made = clock.wall() - 120
    engine._restore_trips([SavedTrip("p", None, None, made)])
    # ...and one from before the trip changes nothing.
    assert not fleet.receive(Fact("p", "operator", "reset", made - 60, "peer"))
    assert engine.runtimes["p"].breaker.state.value == "forced_open"
    fact = fleet.registers["p"].operator
    assert fact is not None and fact.by == "me" and fact.until is None


def test_without_a_fleet_a_restored_trip_is_only_local() -> None:
    engine = Engine(parse_config(PROFILE, env=TEST_ENV), env=TEST_ENV)
    engine._restore_trips([SavedTrip("p", None, "r", engine.wall())])
    assert engine.runtimes["p"].breaker.state.value == "forced_open"
