"""A fleet: several `claudex serve` processes and one real redis-server on 127.0.0.1.

Convergence is waited for (bounded), never timed: the times are measured by
`python -m bench.fleet_convergence`.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from claudex.demo.fake_plans import Plan
from claudex.demo.world import free_port
from tests.cli.test_cli import claudex
from tests.conftest import anthropic_body, build_config, eventually, profile_toml
from tests.fleet_world import FleetWorld, fleet_of
from tests.redis_server import RedisServer

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def world(redis: RedisServer, fakes: Any, tmp_path: Path) -> AsyncIterator[FleetWorld]:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    w = FleetWorld(redis, f, tmp_path)
    try:
        await asyncio.gather(*(w.spawn(name) for name in ("a", "b", "c")))
        await w.wait_for(["a", "b", "c"], lambda s: len(fleet_of(s)["instances"]) == 3)
        yield w
    finally:
        await w.close()


async def ask(world: FleetWorld, name: str) -> httpx.Response:
    return await world.http.post(world.instances[name].url + "/v1/messages",
                                 json=anthropic_body(), headers={"anthropic-version": "2023-06-01"})


def well_formed(resp: httpx.Response) -> bool:
    if resp.status_code != 200:
        return False
    body = resp.json()
    return body.get("type") == "message" and bool(body.get("content"))


async def test_a_breaker_opened_by_one_instance_opens_everywhere(world: FleetWorld) -> None:
    primary = world.fakes["primary"]
    primary.set_fault("500")
    for _ in range(3):  # failure_threshold: a's own failures open a's breaker
        assert well_formed(await ask(world, "a"))  # served by the backup
    assert await world.breaker("a") == "open"
    await world.wait_breaker(["b", "c"], "open")
    calls = primary.request_count
    for name in ("b", "c"):
        resp = await ask(world, name)
        assert well_formed(resp)
        assert resp.headers["x-claudex-provider"] == "backup"
    assert primary.request_count == calls  # nobody rediscovered the outage


async def test_trip_and_reset_from_any_instance_or_the_cli_apply_everywhere(
    world: FleetWorld,
) -> None:
    await world.action("b", "trip")
    await world.wait_breaker(["a", "b", "c"], "forced_open")
    code, out, err = await claudex("reset", "primary", "--url", world.instances["c"].url)
    assert (code, out.strip()) == (0, "primary: reset by operator (breaker closed)"), err
    await world.wait_breaker(["a", "b", "c"], "closed")


async def test_a_trip_survives_an_instance_restart(world: FleetWorld) -> None:
    await world.action("a", "trip")
    await world.wait_breaker(["b", "c"], "forced_open")
    await world.stop("c")
    await world.spawn("c")  # a new process, reading the record
    await world.wait_breaker(["c"], "forced_open")
    resp = await ask(world, "c")
    assert well_formed(resp) and resp.headers["x-claudex-provider"] == "backup"


async def test_a_rate_limit_cooldown_is_shared(world: FleetWorld) -> None:
    primary = world.fakes["primary"]
    primary.set_fault("429", retry_after=30)
    resp = await ask(world, "a")
    assert well_formed(resp) and resp.headers["x-claudex-provider"] == "backup"

    def cooling(status: dict[str, Any]) -> bool:
        return any(p["name"] == "primary" and p["cooldown_s"] > 20 for p in status["profiles"])

    await world.wait_for(["b", "c"], cooling)
    calls = primary.request_count
    assert (await ask(world, "b")).headers["x-claudex-provider"] == "backup"
    assert primary.request_count == calls
    # A reset anywhere ends the cooldown everywhere.
    await world.action("c", "reset")
    await world.wait_for(["a", "b"], lambda s: not cooling(s) and all(
        p["cooldown_s"] == 0 for p in s["profiles"] if p["name"] == "primary"))


async def test_a_spent_plan_window_is_shared_until_its_reset(world: FleetWorld) -> None:
    primary = world.fakes["primary"]
    primary.plan = Plan.claude()
    primary.plan.spend(600)
    resp = await ask(world, "a")
    assert well_formed(resp) and resp.headers["x-claudex-attempts"] == \
        "primary:plan_limit,backup:200"

    def spent(status: dict[str, Any]) -> bool:
        return any(p["name"] == "primary" and p["window_spent_until"] is not None
                   and p["window_spent"] == "5h" for p in status["profiles"])

    await world.wait_for(["b", "c"], spent)
    calls = primary.request_count
    for name in ("b", "c"):
        resp = await ask(world, name)
        assert resp.headers["x-claudex-attempts"] == "primary:window_spent,backup:200"
    assert primary.request_count == calls  # no instance asked the spent plan again
    # An operator's reset on c ends the spent window everywhere (issue 30) ...
    code, out, err = await claudex("reset", "primary", "--url", world.instances["c"].url)
    assert (code, out.strip()) == (
        0, "primary: reset by operator (5-hour window no longer treated as spent)"), err
    await world.wait_for(["a", "b", "c"], lambda s: not spent(s))
    # ... so a asks the plan once more; it is still spent, and that one answer marks it again
    # for the whole fleet: one request after the reset, no retry.
    resp = await ask(world, "a")
    assert resp.headers["x-claudex-attempts"] == "primary:plan_limit,backup:200"
    assert primary.request_count == calls + 1
    await world.wait_for(["b", "c"], spent)
    for name in ("b", "c"):
        resp = await ask(world, name)
        assert resp.headers["x-claudex-attempts"] == "primary:window_spent,backup:200"
    assert primary.request_count == calls + 1


async def test_a_probe_success_closes_it_everywhere(world: FleetWorld) -> None:
    primary = world.fakes["primary"]
    primary.set_fault("500")
    for _ in range(3):
        await ask(world, "a")
    await world.wait_breaker(["a", "b", "c"], "open")
    primary.set_fault("ok")
    # A health probe that passes moves a's breaker to half-open, and the others', whom a told;
    # the instance holding the fleet's half-open slot sends the trial.
    resp = await world.http.post(world.instances["a"].url + "/_claudex/health")
    assert resp.status_code == 200
    assert await world.breaker("a") == "half_open"
    await world.wait_breaker(["b", "c"], "half_open")
    holder = await asyncio.wait_for(slot_holder(world), 15)
    resp = await ask(world, holder)
    assert resp.headers["x-claudex-provider"] == "primary"
    await world.wait_breaker(["a", "b", "c"], "closed")


async def test_fleet_route_and_status_list_every_instance(world: FleetWorld) -> None:
    resp = await world.http.get(world.instances["b"].url + "/_claudex/fleet")
    assert resp.status_code == 200
    body = resp.json()
    assert body["name"] == "b" and body["redis"] == "connected"
    assert [i["name"] for i in body["instances"]] == ["a", "b", "c"]
    assert all(i["age_s"] < 6 and i["listen"].startswith("127.0.0.1:") for i in body["instances"])
    code, out, err = await claudex("status", "--url", world.instances["a"].url)
    assert code == 0, err
    assert "fleet: connected" in out
    lines = out.splitlines()
    for name in ("a", "b", "c"):
        listen = world.instances[name].url.removeprefix("http://")
        assert any(line.startswith(f"  {name}  {listen}  heartbeat ") for line in lines), out


async def test_redis_killed_and_restarted_mid_traffic_loses_no_answer(
    world: FleetWorld, redis: RedisServer,
) -> None:
    answers: list[httpx.Response] = []
    stop = asyncio.Event()

    async def traffic(name: str) -> None:
        while not stop.is_set():
            answers.append(await ask(world, name))

    workers = [asyncio.create_task(traffic(n)) for n in ("a", "b", "c") for _ in range(2)]
    try:
        await asyncio.sleep(0.3)  # traffic flowing before the fault (no assertion on timing)
        await redis.kill()
        await world.wait_for(["a", "b", "c"], lambda s: fleet_of(s)["redis"] == "unreachable")
        during = len(answers)
        await world.action("a", "trip")  # decided locally while Redis is away
        await redis.start()  # same port, empty
        await world.wait_for(["a", "b", "c"], lambda s: fleet_of(s)["redis"] == "connected")
        # The trip made while Redis was gone reaches the others once it is back.
        await world.wait_breaker(["b", "c"], "forced_open")
    finally:
        stop.set()
        await asyncio.gather(*workers)
    assert len(answers) > during > 0
    assert all(well_formed(r) for r in answers), [r.text for r in answers if not well_formed(r)]
    for inst in world.instances.values():
        outages = [line for line in inst.log if "fleet: redis unreachable" in line]
        assert len(outages) == 1, inst.log  # once per outage, not per request or retry


async def test_no_stale_trip_is_resurrected_when_redis_returns(
    world: FleetWorld, redis: RedisServer,
) -> None:
    await world.action("a", "trip")
    await world.wait_breaker(["b", "c"], "forced_open")
    await redis.kill()
    await world.wait_for(["a", "b", "c"], lambda s: fleet_of(s)["redis"] == "unreachable")
    await world.action("b", "reset")  # later than the trip, which a still holds
    await redis.start()  # empty: a re-offers its trip, b its reset; the later one wins
    await world.wait_for(["a", "b", "c"], lambda s: fleet_of(s)["redis"] == "connected")
    await world.wait_breaker(["a", "b", "c"], "closed")


class SilentRedis:
    """Accepts connections and never answers: a Redis that is slow, or cut mid-command."""

    def __init__(self) -> None:
        self.server: asyncio.Server | None = None
        self.held: list[asyncio.StreamWriter] = []

    async def start(self) -> int:
        async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.held.append(writer)

        self.server = await asyncio.start_server(hold, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        for writer in self.held:
            writer.close()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


@pytest.mark.parametrize("outage", ["down", "silent", "restarting"])
async def test_sigterm_exits_promptly_while_redis_is_away(
    outage: str, redis: RedisServer, fakes: Any, tmp_path: Path,
) -> None:
    """Shutting down never waits on Redis: not on one that is down (connections refused), one
    that accepts and never answers (hung, or cut mid-command), or one just restarted."""
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    silent = SilentRedis()
    url = f"redis://127.0.0.1:{await silent.start()}/0" if outage == "silent" else None
    w = FleetWorld(redis, f, tmp_path, redis_url=url)
    try:
        await asyncio.gather(*(w.spawn(name) for name in ("a", "b", "c")))
        if outage == "silent":
            await w.wait_for(["a", "b", "c"], lambda s: fleet_of(s)["redis"] == "unreachable")
        else:
            await w.wait_for(["a", "b", "c"], lambda s: len(fleet_of(s)["instances"]) == 3)
            await redis.kill()
            if outage == "restarting":
                await redis.start()  # the instances reconnect while they are told to stop
            else:
                await w.wait_for(["a", "b", "c"],
                                 lambda s: fleet_of(s)["redis"] == "unreachable")
        answers = await asyncio.gather(*(ask(w, n) for n in ("a", "b", "c")))
        assert all(well_formed(r) for r in answers)
        for name in ("a", "b", "c"):
            proc, log = w.instances[name].proc, w.instances[name].log
            await w.stop(name, limit_s=8.0)  # well inside the 20 s a fleet test allows
            assert proc.returncode == 0
            assert any("claudex stopped" in line for line in log), log
            assert not any("did not stop within" in line for line in log), log
    finally:
        await w.close()
        await silent.stop()


@pytest.mark.parametrize("redis_kind", ["refusing", "silent"])
async def test_an_unreachable_or_silent_redis_costs_requests_nothing(
    redis_kind: str, fakes: Any, proxy_factory: Any,
) -> None:
    f = await fakes(("primary", "anthropic"))
    silent = SilentRedis()
    port = await silent.start() if redis_kind == "silent" else free_port()
    config = build_config(f'[fleet]\nredis_url = "redis://127.0.0.1:{port}"\n'
                          + profile_toml("primary", f["primary"]))
    proxy = await proxy_factory(config, fakes=f)
    await proxy.engine.start(health=False)
    try:
        fleet = proxy.engine.fleet
        assert fleet is not None
        # Requests are answered while the fleet task is still waiting on Redis, and after.
        assert (await proxy.messages()).status_code == 200
        await eventually(lambda: fleet.redis == "unreachable", limit_s=10)
        for _ in range(5):
            assert (await proxy.messages()).status_code == 200
        assert proxy.engine.trip("primary")  # operator actions stay local, and work
        assert (await proxy.messages()).status_code == 502
        status = (await proxy.client.get("/_claudex/fleet")).json()
        assert status["status"] == "fleet: redis unreachable" and status["error"]
    finally:
        await proxy.engine.close()
        await silent.stop()


async def test_with_redis_url_unset_there_is_no_fleet_route(fakes: Any,
                                                            proxy_factory: Any) -> None:
    f = await fakes(("primary", "anthropic"))
    proxy = await proxy_factory(build_config(profile_toml("primary", f["primary"])), fakes=f)
    resp = await proxy.client.get("/_claudex/fleet")
    assert resp.status_code == 404 and "[fleet] redis_url" in resp.json()["error"]
    assert "fleet" not in (await proxy.client.get("/_claudex/status")).json()


@pytest.fixture
async def quick_world(redis: RedisServer, fakes: Any,
                      tmp_path: Path) -> AsyncIterator[FleetWorld]:
    """Three instances whose breakers become half-open one second after opening."""
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    w = FleetWorld(redis, f, tmp_path, extra="\n[breaker]\nrecovery_seconds = 1\n")
    try:
        await asyncio.gather(*(w.spawn(name) for name in ("a", "b", "c")))
        await w.wait_for(["a", "b", "c"], lambda s: len(fleet_of(s)["instances"]) == 3)
        yield w
    finally:
        await w.close()


async def slot_holder(world: FleetWorld) -> str:
    """The instance holding primary's half-open slot, once one does."""
    while True:
        for name in sorted(world.instances):
            if "primary" in fleet_of(await world.status(name))["probe_slots"]:
                return name
        await asyncio.sleep(0.01)


async def test_half_open_admits_its_trials_fleet_wide_not_per_instance(
    quick_world: FleetWorld,
) -> None:
    world = quick_world
    primary = world.fakes["primary"]
    primary.set_fault("500")
    for _ in range(3):
        await ask(world, "a")
    await world.wait_breaker(["b", "c"], "open")
    holder = await asyncio.wait_for(slot_holder(world), 15)
    calls = primary.request_count
    for name in sorted(n for n in world.instances if n != holder):
        resp = await ask(world, name)  # half-open or open there, but without the slot
        assert well_formed(resp) and resp.headers["x-claudex-provider"] == "backup"
    assert primary.request_count == calls
    await ask(world, holder)  # the one trial of the fleet
    assert primary.request_count == calls + 1


async def test_an_instance_killed_mid_probe_frees_the_slot_when_its_lease_ends(
    quick_world: FleetWorld,
) -> None:
    world = quick_world
    primary = world.fakes["primary"]
    primary.set_fault("500")
    for _ in range(3):
        await ask(world, "a")
    await world.wait_breaker(["b", "c"], "open")
    holder = await asyncio.wait_for(slot_holder(world), 15)
    primary.set_fault("hang")
    calls = primary.request_count
    probe = asyncio.create_task(ask(world, holder))
    await eventually(lambda: primary.request_count > calls, limit_s=10)
    await world.stop(holder, signal.SIGKILL)  # mid-probe: the lease is never given back
    with pytest.raises(httpx.TransportError):
        await probe
    heir = await asyncio.wait_for(slot_holder(world), 15)
    assert heir != holder
