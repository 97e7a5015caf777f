"""Timed trips through what an operator touches: the console's trip dialog (Pilot), `claudex trip
--for --reason` against a real `claudex serve`, and a fleet of two on a real redis-server."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, Static

from claudex.console.app import ConsoleApp
from claudex.console.components import ChainView, ProviderPanel
from claudex.console.http_link import HttpLink
from claudex.console.link import LocalLink
from claudex.console.screens.trip_dialog import TripScreen
from claudex.engine.clock import FakeClock
from claudex.engine.engine import Engine
from claudex.engine.events import Event, built
from claudex.engine.fleet.facts import BadFact, Fact, Registers, decode, view
from tests.cli.test_cli import claudex, spawn_serve, wait_until_serving
from tests.conftest import (
    TEST_ENV,
    anthropic_body,
    build_config,
    primary_backup_config,
)
from tests.console.test_console import TWO_PROFILES
from tests.fleet_world import FleetWorld, fleet_of
from tests.redis_server import RedisServer

# --- the console: t asks for how long and why ----------------------------------------------------


CONSOLE_PROFILES = TWO_PROFILES


async def settle(app: ConsoleApp, pilot: Any) -> None:
    await pilot.pause()
    await app.main_screen.refresh_now()
    await pilot.pause()


async def test_the_trip_dialog_trips_for_a_while_with_a_reason() -> None:
    clock = FakeClock()
    engine = Engine(build_config(CONSOLE_PROFILES), env=TEST_ENV, clock=clock, wall=clock.wall)
    app = ConsoleApp(LocalLink(engine))
    try:
        async with app.run_test(size=(140, 44)) as pilot:
            await settle(app, pilot)
            assert app.main_screen.selected == "alpha"
            await pilot.press("t")
            assert isinstance(app.screen, TripScreen)
            await pilot.press("s", "o", "o", "n", "enter")  # not a duration: said, and kept
            await pilot.pause()
            assert isinstance(app.screen, TripScreen)
            error = str(app.screen.query_one("#trip-error", Static).render())
            assert "a duration looks like 90s, 20m, 1h30m or 2h, not 'soon'" in error
            assert engine.runtimes["alpha"].breaker.state.value == "closed"
            field = app.screen.query_one("#trip-for", Input)
            field.value = ""
            await pilot.press("1", "m", "tab", *"db migration", "enter")
            await pilot.pause()
            assert not isinstance(app.screen, TripScreen)
            breaker = engine.snapshot()["profiles"][0]["breaker"]
            assert (breaker["state"], breaker["reason"], breaker["retry_in_s"]) == (
                "forced_open", "db migration", 60.0)
            await settle(app, pilot)
            panel = next(p for p in app.main_screen.query(ProviderPanel)
                         if p.profile_name == "alpha")
            assert "tripped · 60s left · db migration" in panel.breaker_line.text
            assert "tripped · 60s left · db migration" in app.main_screen.query_one(ChainView).text
            clock.advance(60)  # the engine re-closes it to half-open by itself
            await settle(app, pilot)
            assert engine.runtimes["alpha"].breaker.state.value == "half_open"
            assert "half-open" in panel.breaker_line.text
    finally:
        await engine.close()


async def test_escape_cancels_the_trip_dialog_and_read_only_refuses_it() -> None:
    engine = Engine(build_config(CONSOLE_PROFILES), env=TEST_ENV)
    try:
        app = ConsoleApp(LocalLink(engine))
        async with app.run_test(size=(140, 44)) as pilot:
            await settle(app, pilot)
            await pilot.press("t", "2", "0", "m", "escape")
            await pilot.pause()
            assert not isinstance(app.screen, TripScreen)
            await pilot.press("t", "enter")  # blank: until reset, as before
            await pilot.pause()
            breaker = engine.snapshot()["profiles"][0]["breaker"]
            assert (breaker["state"], breaker["until"]) == ("forced_open", None)
        engine.reset("alpha")
        watch = ConsoleApp(LocalLink(engine), read_only=True)
        async with watch.run_test(size=(140, 44)) as pilot:
            await settle(watch, pilot)
            await pilot.press("t")
            await pilot.pause()
            assert not isinstance(watch.screen, TripScreen)
        assert engine.runtimes["alpha"].breaker.state.value == "closed"
    finally:
        await engine.close()


# --- claudex trip --for / --reason against a real `claudex serve` --------------------------------


async def test_claudex_trip_for_a_while_with_a_reason_against_serve(fakes: Any,
                                                                    tmp_path: Path) -> None:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    path, port = primary_backup_config(tmp_path, f)
    url = f"http://127.0.0.1:{port}"
    proc = await spawn_serve(path)
    try:
        await wait_until_serving(url, proc)
        code, out, err = await claudex("trip", "primary", "--for", "20m", "--reason",
                                       "db migration", "--url", url)
        assert (code, out.strip()) == (
            0, "primary: breaker forced_open, tripped by operator: db migration (20m left)"), err
        code, out, err = await claudex("status", "--url", url)
        assert code == 0, err
        line = next(ln for ln in out.splitlines() if "primary" in ln)
        assert "breaker tripped by operator: db migration" in line and "forced-open 20m" in line
        code, out, _ = await claudex("status", "--json", "--url", url)
        breaker = json.loads(out)["profiles"][0]["breaker"]
        assert breaker["reason"] == "db migration" and 1190 < breaker["retry_in_s"] <= 1200
        assert abs(breaker["until"] - (time.time() + breaker["retry_in_s"])) < 30
        for bad in ("soon", "0", "-5m", "1h1h"):
            code, out, err = await claudex("trip", "backup", f"--for={bad}", "--url", url)
            assert code == 1 and "--for:" in err and "Traceback" not in err + out, bad
        code, out, _ = await claudex("status", "--json", "--url", url)
        assert json.loads(out)["profiles"][1]["breaker"]["state"] == "closed"
        code, out, _ = await claudex("trip", "backup", "--url", url)  # as before: until reset
        assert (code, out.strip()) == (0, "backup: breaker forced_open")
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.communicate(), 20)


# --- a fleet: a timed trip ends everywhere ----------------------------------------------------


def test_a_timed_trip_fact_carries_its_terms_and_stops_holding_at_its_until() -> None:
    t0 = 1_750_000_000.0
    trip = Fact("grok", "operator", "forced_open", t0, "a", t0 + 1200, "maintenance")
    again = decode(trip.encode())
    assert again == trip and again.reason == "maintenance"
    assert trip.ttl_s(t0 + 200) == 1000
    assert Fact("grok", "operator", "forced_open", t0, "a").ttl_s(t0) is None  # until reset
    regs = Registers()
    regs.offer(Fact("grok", "traffic", "open", t0 - 5, "b", t0 + 25))
    regs.offer(trip)
    assert view(regs, t0 + 1199).breaker == "forced_open"
    assert view(regs, t0 + 1200).breaker == "closed"  # over; the open before it is too
    with pytest.raises(BadFact):
        decode('{"provider":"p","register":"operator","state":"forced_open","at":1,"by":"a",'
               '"until":null,"reason":5}')
    # A record from before reasons existed still reads.
    assert decode('{"provider":"p","register":"operator","state":"forced_open","at":1,'
                  '"by":"a","until":null}').reason is None


@pytest.fixture
async def pair(fakes: Any, tmp_path: Path) -> AsyncIterator[FleetWorld]:
    redis = RedisServer()
    await redis.start()
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    world = FleetWorld(redis, f, tmp_path)
    try:
        await asyncio.gather(*(world.spawn(name) for name in ("a", "b")))
        await world.wait_for(["a", "b"], lambda s: len(fleet_of(s)["instances"]) == 2)
        yield world
    finally:
        await world.close()
        await redis.kill()


@pytest.mark.timeout(120)
async def test_a_timed_trip_from_one_instance_ends_on_every_instance(pair: FleetWorld) -> None:
    resp = await pair.http.post(pair.instances["a"].url + "/_claudex/breakers/primary/trip",
                                json={"for": 3, "reason": "fleet window"})
    assert resp.status_code == 200, resp.text
    until = resp.json()["until"]
    await pair.wait_breaker(["b"], "forced_open")
    remote = (await pair.provider("b", "primary"))["breaker"]
    assert remote["reason"] == "fleet window" and abs(remote["until"] - until) < 0.5
    # Nobody writes again: each instance's breaker reads the same deadline.
    await pair.wait_breaker(["a", "b"], "half_open")
    # One trial for the fleet: sent by whichever instance holds the half-open slot (a Redis
    # lease), and the others follow its success.
    providers: list[str] = []
    for _ in range(200):  # bounded: the slot is taken within a few heartbeats
        for name in ("a", "b"):
            served = await pair.http.post(pair.instances[name].url + "/v1/messages",
                                          json=anthropic_body(),
                                          headers={"anthropic-version": "2023-06-01"})
            assert served.status_code == 200, served.text
            providers.append(served.headers["x-claudex-provider"])
        if "primary" in providers:
            break
        await asyncio.sleep(0.05)
    assert "primary" in providers
    await pair.wait_breaker(["a", "b"], "closed")


async def test_attached_to_serve_t_trips_for_a_while_and_the_engine_half_opens_it(
        fakes: Any, tmp_path: Path) -> None:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    path, port = primary_backup_config(tmp_path, f)
    url = f"http://127.0.0.1:{port}"
    proc = await spawn_serve(path, stdout=asyncio.subprocess.DEVNULL)
    link = HttpLink(url)
    try:
        await wait_until_serving(url, proc)
        assert await link.connect()
        app = ConsoleApp(link)
        async with app.run_test(size=(140, 44)) as pilot:

            async def until(predicate: Callable[[dict[str, Any]], bool]) -> None:
                for _ in range(300):  # bounded: the engine is another process
                    await settle(app, pilot)
                    profiles = app.main_screen.snapshot_data.get("profiles") or []
                    if profiles and predicate(profiles[0]["breaker"]):
                        return
                    await asyncio.sleep(0.05)
                raise AssertionError("condition not reached in time")

            await until(lambda b: b["state"] == "closed")
            # Five seconds: long enough that a busy machine cannot end the trip before the
            # console has shown it (two were missed once under a loaded two-core run).
            await pilot.press("t", "5", "s", "tab", *"test", "enter")
            await until(lambda b: (b["state"], b["reason"]) == ("forced_open", "test"))
            assert "tripped ·" in app.main_screen.query_one(ChainView).text
            await until(lambda b: b["state"] == "half_open")  # by itself, five seconds on
    finally:
        await link.close()
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.communicate(), 20)


async def test_t_on_a_tripped_provider_gives_it_new_terms() -> None:
    clock = FakeClock()
    engine = Engine(build_config(CONSOLE_PROFILES), env=TEST_ENV, clock=clock, wall=clock.wall)
    engine.trip("alpha", None, "incident")
    seen: list[Event] = []
    engine.events.sinks.append(lambda e: seen.append(built(e)))
    app = ConsoleApp(LocalLink(engine))
    try:
        async with app.run_test(size=(140, 44)) as pilot:
            await settle(app, pilot)
            await pilot.press("t")
            assert isinstance(app.screen, TripScreen)
            message = str(app.screen.query_one("#dialog-message", Static).render())
            assert "alpha is tripped · until reset · incident" in message
            await pilot.press("5", "m", "tab", *"winding down", "enter")
            await pilot.pause()
            breaker = engine.snapshot()["profiles"][0]["breaker"]
            assert (breaker["state"], breaker["reason"], breaker["retry_in_s"]) == (
                "forced_open", "winding down", 300.0)
            assert [e.kind for e in seen if e.kind in ("trip", "breaker")] == ["trip"]
    finally:
        await engine.close()
