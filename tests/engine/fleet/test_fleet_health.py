"""Health probing in a fleet: three `claudex serve` processes and one redis-server. One instance
probes each provider per interval (a Redis lease), every instance shows the result; with Redis
gone, each probes on its own again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from claudex.demo.fake_provider import FakeProvider
from tests.fleet_world import FleetWorld, fleet_of
from tests.redis_server import RedisServer

pytestmark = pytest.mark.timeout(120)

INTERVAL_S = 0.5
HEALTH = f"\n[health]\nenabled = true\ninterval_seconds = {INTERVAL_S}\ntimeout_seconds = 2\n"


@pytest.fixture
async def world(redis: RedisServer, fakes: Any, tmp_path: Path) -> AsyncIterator[FleetWorld]:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    w = FleetWorld(redis, f, tmp_path, extra=HEALTH)
    try:
        await asyncio.gather(*(w.spawn(name) for name in ("a", "b", "c")))
        await w.wait_for(["a", "b", "c"], lambda s: len(fleet_of(s)["instances"]) == 3)
        yield w
    finally:
        await w.close()


def probes(fake: FakeProvider) -> int:
    return sum(1 for r in fake.requests if r.method == "GET" and r.path == "/v1/models")


def health(status: dict[str, Any], provider: str = "primary") -> dict[str, Any]:
    for profile in status["profiles"]:
        if profile["name"] == provider:
            found: dict[str, Any] = profile["health"]
            return found
    raise AssertionError(f"no {provider}")


async def test_one_instance_probes_each_provider_per_interval_and_all_show_it(
    world: FleetWorld,
) -> None:
    primary = world.fakes["primary"]
    await world.wait_for(["a", "b", "c"], lambda s: health(s)["color"] == "green")
    before, started = probes(primary), time.monotonic()
    await asyncio.sleep(5.0)  # a window of intervals to count probes in (not a timing check)
    intervals = (time.monotonic() - started) / INTERVAL_S
    counted = probes(primary) - before
    # Leased: about one probe per interval (a lease changing hands may add one), where three
    # instances probing on their own would send three.
    assert 1 <= counted <= intervals + 4, (counted, intervals)

    # A provider failing its probes turns red on every instance, though only one probed it.
    primary.set_fault("500")
    await world.wait_for(["a", "b", "c"], lambda s: health(s)["color"] == "red")
    colours = {health(await world.status(n))["color"] for n in ("a", "b", "c")}
    assert colours == {"red"}
    errors = {health(await world.status(n))["error"] for n in ("a", "b", "c")}
    assert errors == {"server error (500)"}
    applied = [fleet_of(await world.status(n))["health_applied"] for n in ("a", "b", "c")]
    assert sum(1 for n in applied if n > 0) >= 2, applied  # the others took it from the prober

    # It passes again: a passing probe while open moves every breaker on (half-open, then the
    # fleet's trial closes it) and every instance shows green.
    await world.wait_breaker(["a", "b", "c"], "open")
    primary.set_fault("ok")
    await world.wait_for(["a", "b", "c"], lambda s: health(s)["error"] is None
                         and s["profiles"][0]["breaker"]["state"] != "open")


async def test_with_redis_gone_every_instance_probes_on_its_own(
    world: FleetWorld, redis: RedisServer,
) -> None:
    await world.wait_for(["a", "b", "c"], lambda s: health(s)["color"] == "green")
    await redis.kill()
    await world.wait_for(["a", "b", "c"], lambda s: fleet_of(s)["redis"] == "unreachable")
    # Nobody tells anybody now: a health view that moves on was probed by its own instance.
    seen = {n: health(await world.status(n))["last_checked"] for n in ("a", "b", "c")}
    await world.wait_for(["a", "b", "c"], lambda s: health(s)["last_checked"]
                         > seen[fleet_of(s)["name"]])
    before, started = probes(world.fakes["primary"]), time.monotonic()
    await asyncio.sleep(3.0)
    intervals = (time.monotonic() - started) / INTERVAL_S
    assert probes(world.fakes["primary"]) - before > intervals + 4  # more than one prober
    # Redis back: one prober again, and the results reach everyone.
    await redis.start()
    await world.wait_for(["a", "b", "c"], lambda s: fleet_of(s)["redis"] == "connected")
    world.fakes["primary"].set_fault("500")
    await world.wait_for(["a", "b", "c"], lambda s: health(s)["color"] == "red")


def test_a_probe_result_round_trips_and_anything_else_on_the_channel_is_refused() -> None:
    from claudex.engine.fleet.store import _health_record
    from claudex.engine.health.probes import ProbeResult

    for result in (ProbeResult("ok", 200, 12.5), ProbeResult("auth", 401, 3.0),
                   ProbeResult("unsupported", 404),
                   ProbeResult("failure", 503, error="server error (503)", counts=True)):
        assert ProbeResult.from_json(result.to_json()) == result
    bad: object
    for bad in (None, [], {"kind": "great"}, {"kind": "ok", "status": "200"},
                {"kind": "ok", "status": True}, {"kind": "ok", "latency_ms": "fast"},
                {"kind": "failure", "error": 5}):
        with pytest.raises(ValueError):
            ProbeResult.from_json(bad)
    assert _health_record('{"provider": "p", "by": "a", "kind": "ok"}') is not None
    for raw in ("not json", "[1]", '{"provider": 1, "by": "a"}', '{"provider": "p"}', "9" * 5000):
        assert _health_record(raw) is None


class RecordingFleet:
    """The checker's side of a fleet, recorded: every lease is granted."""

    def __init__(self) -> None:
        self.leases: list[str] = []
        self.dropped: list[str] = []
        self.published: dict[str, dict[str, Any]] = {}
        self.sink: Any = None

    async def health_lease(self, provider: str, lease_s: float) -> bool:
        assert lease_s > INTERVAL_S
        self.leases.append(provider)
        return True

    async def drop_health_lease(self, provider: str) -> None:
        self.dropped.append(provider)

    def publish_health(self, provider: str, result: dict[str, Any]) -> None:
        self.published[provider] = result

    def listen_health(self, sink: Any) -> None:
        self.sink = sink


async def test_results_are_announced_and_applied_as_if_probed_and_local_trouble_is_not(
    fakes: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from claudex.engine.breaker.circuit import BreakerState
    from claudex.engine.credentials.cache import CredentialError
    from claudex.engine.engine import Engine
    from tests.conftest import TEST_ENV, build_config, profile_toml

    f = await fakes(("a", "anthropic"), ("b", "anthropic"))
    engine = Engine(build_config(profile_toml("a", f["a"]) + profile_toml("b", f["b"])),
                    env=TEST_ENV)
    fleet = RecordingFleet()
    engine.health.fleet = fleet
    fleet.listen_health(engine.health.from_peer)
    try:
        async def unreadable() -> Any:
            raise CredentialError("the credentials file went away", profile="b")

        monkeypatch.setattr(engine.runtimes["b"].credentials, "auth_headers", unreadable)
        await engine.health.check_all(leased=True)
        # a's result is the fleet's news and its lease is renewed; b's trouble is b's own
        # here: not announced, and its lease given up so that another instance probes b.
        assert fleet.published["a"]["kind"] == "ok" and "b" not in fleet.published
        assert fleet.leases == ["a", "b", "a"] and fleet.dropped == ["b"]

        # A peer's results: failures count against this instance's breaker as if it had
        # probed; a pass while open moves it to half-open.
        b = engine.runtimes["b"]
        for _ in range(3):
            fleet.sink("b", {"kind": "failure", "error": "server error (500)", "counts": True,
                             "provider": "b", "by": "other"})
        assert b.breaker.state is BreakerState.OPEN
        assert b.health.error == "server error (500)"
        assert b.health.probe_failures == 4  # its own failed read, and the three
        fleet.sink("b", {"kind": "ok", "status": 200, "latency_ms": 4.0})
        assert b.breaker.snapshot().state is BreakerState.HALF_OPEN
        assert b.health.latency_ms == 4.0
        fleet.sink("b", {"kind": "nonsense"})  # ignored
        fleet.sink("nobody", {"kind": "ok", "status": 200})  # a provider this one lacks
        assert engine.health.peer_results == 4
    finally:
        await engine.close()


WRONG_KEY = "sk-wrong-key-9876543210"


def probes_with(fake: FakeProvider, key: str) -> int:
    return sum(1 for r in fake.requests if r.method == "GET" and r.path == "/v1/models"
               and r.headers.get("x-api-key") == key)


async def test_a_peers_auth_failure_is_its_own_login_and_not_applied_by_the_others(
    redis: RedisServer, fakes: Any, tmp_path: Path,
) -> None:
    """a's key is wrong (another token in its environment), b's and c's right: a's 401 says
    nothing about theirs, so they stay green and probe with their own key; a stays red and a
    peer's pass does not clear its flag; a 5xx is still the fleet's news."""
    from tests.conftest import TEST_ENV

    good = TEST_ENV["FAKE_KEY"]
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    primary = f["primary"]
    primary.set_fault("ok", valid_tokens=[good])
    w = FleetWorld(redis, f, tmp_path, extra=HEALTH, env={"a": {"FAKE_KEY": WRONG_KEY}})
    try:
        # a alone first: it holds the health lease on primary and finds its own login failing.
        await w.spawn("a")
        await w.wait_for(["a"], lambda s: health(s)["error"] == "auth failing (401)")
        assert probes_with(primary, WRONG_KEY) >= 1
        await asyncio.gather(w.spawn("b"), w.spawn("c"))
        await w.wait_for(["a", "b", "c"], lambda s: len(fleet_of(s)["instances"]) == 3)

        seen: dict[str, set[str | None]] = {"b": set(), "c": set()}

        def good_login(status: dict[str, Any]) -> bool:
            name, found = fleet_of(status)["name"], health(status)
            seen[name].add(found["error"])
            # b and c heard a's 401 and kept it out, and their own key was probed since.
            return (fleet_of(status)["health_kept_out"] >= 1 and found["color"] == "green"
                    and probes_with(primary, good) >= 2)

        await w.wait_for(["b", "c"], good_login)
        assert not any("auth" in str(e) for errors in seen.values() for e in errors), seen

        # a keeps probing with its own key, and the others' passes do not clear its flag.
        wrong = probes_with(primary, WRONG_KEY)
        await w.wait_for(["a"], lambda s: fleet_of(s)["health_kept_out"] >= 2
                         and probes_with(primary, WRONG_KEY) > wrong)
        assert health(await w.status("a"))["error"] == "auth failing (401)"
        for name in ("b", "c"):
            status = await w.status(name)
            assert health(status)["color"] == "green", health(status)
            assert not health(status).get("auth_failing"), health(status)

        # What is about the provider is still shared: b or c holds the lease, the other
        # takes its 500 (a, refused before any fault, stays auth failing).
        applied = {n: fleet_of(await w.status(n))["health_applied"] for n in ("b", "c")}
        primary.set_fault("500")
        await w.wait_for(["b", "c"], lambda s: health(s)["error"] == "server error (500)")
        grew = [n for n in ("b", "c")
                if fleet_of(await w.status(n))["health_applied"] > applied[n]]
        assert grew, applied
    finally:
        await w.close()


def test_a_peers_auth_result_is_kept_out_and_so_is_any_while_this_login_fails() -> None:
    from claudex.engine.clock import FakeClock
    from tests.engine.fleet.test_fleet_facts import fleet_engine

    engine, fleet = fleet_engine(FakeClock())
    rt = engine.runtimes["p"]
    fleet._health_news({"kind": "auth", "status": 401, "latency_ms": 2.0, "provider": "p",
                        "by": "peer"})
    assert not rt.health.auth_failing and rt.health.error is None
    assert (fleet.health_kept_out, fleet.health_applied) == (1, 0)
    # The provider's own trouble is still the fleet's news.
    fleet._health_news({"kind": "failure", "error": "server error (500)", "counts": True,
                        "provider": "p", "by": "peer"})
    assert rt.health.error == "server error (500)" and fleet.health_applied == 1
    # This instance's login refused (its probe or its traffic): a peer's pass is not its own.
    rt.health.auth_failing = True
    fleet._health_news({"kind": "ok", "status": 200, "latency_ms": 3.0, "provider": "p",
                        "by": "peer"})
    assert rt.health.auth_failing and fleet.health_kept_out == 2
    assert fleet.status_json()["health_kept_out"] == 2
