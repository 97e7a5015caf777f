"""Timed trips with a reason: the breaker, the duration parser, the engine through its admin API,
restoring trips from the journal, and the words panels use (console/test_timed_trips_live.py has
the console dialog, `claudex trip` against `claudex serve`, and a fleet)."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from claudex.config.model import BreakerSettings, Config
from claudex.console.format import breaker_words, event_colour
from claudex.console.http_link import HttpLink
from claudex.console.link import LinkError
from claudex.engine.breaker.circuit import BreakerState, CircuitBreaker, Transition
from claudex.engine.breaker.trips import DurationError, duration_words, parse_duration, trip_words
from claudex.engine.clock import FakeClock
from claudex.engine.engine import Engine
from claudex.engine.events import Event, built
from claudex.engine.history.journal import Journal
from tests.conftest import TEST_ENV, build_config, eventually, profile_toml

# --- the breaker ------------------------------------------------------------------------------


def make_breaker() -> tuple[CircuitBreaker, FakeClock, list[Transition]]:
    clock = FakeClock()
    events: list[Transition] = []
    breaker = CircuitBreaker("grok", BreakerSettings(3, 30.0, 1, 300.0), clock, events.append)
    return breaker, clock, events


def state(b: CircuitBreaker) -> BreakerState:
    return b.state


def test_a_timed_trip_half_opens_when_its_time_is_up_and_one_trial_decides(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="claudex.breaker")
    b, clock, events = make_breaker()
    b.trip(until=clock() + 1200, reason="maintenance window")
    snap = b.snapshot()
    assert snap.state is BreakerState.FORCED_OPEN
    assert snap.trip is not None and snap.trip.reason == "maintenance window"
    assert snap.retry_in_s == pytest.approx(1200)
    clock.advance(1199)
    assert b.try_acquire() is None
    assert b.snapshot().retry_in_s == pytest.approx(1)
    clock.advance(1)
    first = b.try_acquire()  # the deadline is read with the clock: half-open, one trial
    assert first is not None and first.probe
    assert b.try_acquire() is None
    b.record_success(first)
    assert state(b) is BreakerState.CLOSED
    assert [(e.old, e.new, e.reason) for e in events] == [
        (BreakerState.CLOSED, BreakerState.FORCED_OPEN,
         "tripped by operator for 20m: maintenance window"),
        (BreakerState.FORCED_OPEN, BreakerState.HALF_OPEN, "trip ended after 20m"),
        (BreakerState.HALF_OPEN, BreakerState.CLOSED, "probe succeeded"),
    ]
    assert events[0].trip is not None and events[0].trip.until == clock()
    lines = [r.getMessage() for r in caplog.records if r.name == "claudex.breaker"]
    assert lines[1] == "breaker grok: forced_open -> half_open (trip ended after 20m)"
    assert len(lines) == 3


def test_a_failed_trial_after_a_timed_trip_opens_the_breaker() -> None:
    b, clock, events = make_breaker()
    b.trip(until=clock() + 60)
    clock.advance(61)
    trial = b.try_acquire()
    assert trial is not None and trial.probe
    b.record_failure(trial)
    assert state(b) is BreakerState.OPEN
    assert b.snapshot().trip is None
    assert events[-1].new is BreakerState.OPEN


def test_an_untimed_trip_holds_until_reset_and_tripping_again_replaces_the_terms() -> None:
    b, clock, events = make_breaker()
    b.trip()
    clock.advance(10 * 86400)
    assert state(b) is BreakerState.FORCED_OPEN
    assert b.snapshot().retry_in_s is None
    b.trip(until=clock() + 300, reason="extended")  # new terms, no transition
    snap = b.snapshot()
    assert snap.trip is not None and snap.trip.reason == "extended"
    assert snap.retry_in_s == pytest.approx(300)
    assert len(events) == 1 and events[0].reason == "tripped by operator"
    b.reset()
    assert state(b) is BreakerState.CLOSED and b.snapshot().trip is None
    clock.advance(400)
    assert state(b) is BreakerState.CLOSED  # the old deadline is gone with the trip


# --- durations --------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90), ("20m", 1200), ("1h30m", 5400), ("2h", 7200), ("1h 30m", 5400),
    ("90", 90), (" 45S ", 45), ("1.5h", 5400), ("1d", 86400), ("2m30s", 150),
    (90, 90), (0.5, 0.5),
])
def test_durations_parse(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("garbage", [
    "", " ", "abc", "20", "m", "20x", "1h-30m", "30m1h", "1h1h", "-5m", "0", "0s", "5m!",
    "1e3", "inf", "nan", "20 minutes", "1h30", "31d", True, None, [20], {"m": 20},
    float("inf"), float("nan"), -1, 0,
])
def test_garbage_durations_are_refused_with_a_sentence(garbage: object) -> None:
    if garbage == "20":
        assert parse_duration(garbage) == 20  # a bare number is seconds
        return
    with pytest.raises(DurationError) as info:
        parse_duration(garbage)
    assert "duration" in str(info.value) or "trip" in str(info.value)


@pytest.mark.parametrize(("seconds", "words"), [
    (45, "45s"), (89.2, "90s"), (720, "12m"), (690, "12m"), (5400, "1h30m"), (7200, "2h"),
    (86400, "1d"), (90000, "1d1h"), (0, "0s"),
])
def test_time_left_in_words_reads_back(seconds: float, words: str) -> None:
    assert duration_words(seconds) == words
    if seconds:
        assert parse_duration(words) >= seconds


def test_trip_words() -> None:
    assert trip_words("maintenance", 720) == "tripped by operator: maintenance (12m left)"
    assert trip_words(None, None) == "tripped by operator (until reset)"


# --- the engine, through the admin API on 127.0.0.1 ---------------------------------------------


async def two(fakes: Any, proxy_factory: Any, clock: FakeClock) -> Any:
    f = await fakes(("grok", "openai"), ("deepseek", "openai"))
    config = build_config(profile_toml("grok", f["grok"], backups=["deepseek"])
                          + profile_toml("deepseek", f["deepseek"]))
    return await proxy_factory(config, fakes=f, clock=clock, wall=clock.wall)


def grok_status(data: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in data["profiles"] if p["name"] == "grok")


async def test_a_timed_trip_through_the_admin_api_ends_by_itself(fakes: Any,
                                                                proxy_factory: Any) -> None:
    clock = FakeClock()
    proxy = await two(fakes, proxy_factory, clock)
    seen: list[Event] = []
    proxy.engine.events.sinks.append(lambda e: seen.append(built(e)))
    resp = await proxy.client.post("/_claudex/breakers/grok/trip",
                                   json={"for": "20m", "reason": "maintenance window"})
    assert resp.status_code == 200
    assert resp.json() == {"name": "grok", "breaker": "forced_open",
                           "reason": "maintenance window", "until": clock.wall() + 1200,
                           "retry_in_s": 1200.0}
    breaker = grok_status((await proxy.client.get("/_claudex/status")).json())["breaker"]
    assert (breaker["state"], breaker["reason"], breaker["until"], breaker["retry_in_s"]) == (
        "forced_open", "maintenance window", clock.wall() + 1200, 1200.0)
    trip = next(e for e in seen if e.kind == "breaker")
    assert trip.message == ("grok: breaker closed -> forced_open (tripped by operator for 20m: "
                            "maintenance window)")
    assert (trip.data["until"], trip.data["trip_reason"]) == (clock.wall() + 1200,
                                                              "maintenance window")
    clock.advance(8 * 60)
    chat = await proxy.chat(profile="grok")
    assert chat.headers["x-claudex-attempts"] == "grok:forced_open,deepseek:200"
    assert proxy.fakes["grok"].request_count == 0
    request = next(e for e in seen if e.kind == "request")
    assert request.data["attempts"][0]["message"] == (
        "tripped by operator: maintenance window (12m left)")
    clock.advance(12 * 60)
    breaker = grok_status((await proxy.client.get("/_claudex/status")).json())["breaker"]
    assert (breaker["state"], breaker["reason"], breaker["until"]) == ("half_open", None, None)
    ended = [e.message for e in seen if e.kind == "breaker"][-1]
    assert ended == "grok: breaker forced_open -> half_open (trip ended after 20m)"
    chat = await proxy.chat(profile="grok")  # the one trial decides
    assert chat.headers["x-claudex-provider"] == "grok"
    assert proxy.engine.runtimes["grok"].breaker.state.value == "closed"


async def test_a_trip_with_no_body_holds_until_reset_and_a_second_trip_says_its_terms(
        fakes: Any, proxy_factory: Any) -> None:
    clock = FakeClock()
    proxy = await two(fakes, proxy_factory, clock)
    seen: list[Event] = []
    proxy.engine.events.sinks.append(lambda e: seen.append(built(e)))
    resp = await proxy.client.post("/_claudex/breakers/grok/trip")
    assert resp.json() == {"name": "grok", "breaker": "forced_open", "reason": None,
                           "until": None, "retry_in_s": None}
    await proxy.chat(profile="grok")
    request = next(e for e in seen if e.kind == "request")
    assert request.data["attempts"][0]["message"] == "tripped by operator (until reset)"
    clock.advance(86400)
    resp = await proxy.client.post("/_claudex/breakers/grok/trip",
                                   json={"for": 90, "reason": "  extended \n window "})
    assert resp.json()["reason"] == "extended window" and resp.json()["retry_in_s"] == 90
    again = [e for e in seen if e.kind == "trip"]
    assert [e.message for e in again] == [
        "grok: tripped by operator: extended window (90s left)"]
    assert again[0].data["until"] == clock.wall() + 90
    assert len([e for e in seen if e.kind == "breaker"]) == 1  # no transition


@pytest.mark.parametrize(("body", "words"), [
    (b'{"for": "soon"}', "duration looks like"),
    (b'{"for": -5}', "more than 0"),
    (b'{"for": "45d"}', "at most 30 days"),
    (b"not json", "JSON"),
    (b"[1, 2]", "object"),
    (b'{"reason": 5}', "reason is a string"),
    (b'{"until": "20m"}', "unknown key"),
])
async def test_a_bad_trip_body_is_a_400_in_words(fakes: Any, proxy_factory: Any, body: bytes,
                                                 words: str) -> None:
    proxy = await two(fakes, proxy_factory, FakeClock())
    resp = await proxy.client.post("/_claudex/breakers/grok/trip", content=body,
                                   headers={"content-type": "application/json"})
    assert resp.status_code == 400
    assert words in resp.json()["error"] and resp.json()["error"].startswith("not tripped: ")
    assert proxy.engine.runtimes["grok"].breaker.state.value == "closed"
    missing = await proxy.client.post("/_claudex/breakers/nobody/trip", content=body)
    assert missing.status_code == 404


# --- surviving a restart: two engine lifetimes on one journal -----------------------------------


async def test_trips_survive_an_engine_restart_through_the_journal(fakes: Any,
                                                                   tmp_path: Path) -> None:
    f = await fakes(("grok", "openai"), ("deepseek", "openai"), ("claude", "openai"))
    config = build_config(profile_toml("grok", f["grok"], backups=["deepseek"])
                          + profile_toml("deepseek", f["deepseek"])
                          + profile_toml("claude", f["claude"]))
    clock = FakeClock()
    path = tmp_path / "history.sqlite3"

    async def lifetime(on: Config = config) -> Engine:
        engine = Engine(on, clock=clock, wall=clock.wall, env=TEST_ENV,
                        journal=Journal(path, wall=clock.wall))
        await engine.start(health=False)
        return engine

    def state(engine: Engine, name: str) -> dict[str, Any]:
        profile = next(p for p in engine.snapshot()["profiles"] if p["name"] == name)
        breaker: dict[str, Any] = profile["breaker"]
        return breaker

    first = await lifetime()
    assert first.trip("grok", 20 * 60, "maintenance window")
    assert first.trip("deepseek", None, "flaky")
    assert first.trip("claude", 60, None)
    first.reset("claude")
    await first.close()

    clock.advance(5 * 60)
    # Another engine sharing the journal (the user's state dir), on another port: not its trips.
    elsewhere = await lifetime(replace(config, proxy=replace(config.proxy, port=14001)))
    assert [state(elsewhere, n)["state"] for n in ("grok", "deepseek", "claude")] == [
        "closed", "closed", "closed"]
    await elsewhere.close()
    second = await lifetime()
    grok = state(second, "grok")
    assert (grok["state"], grok["reason"], grok["retry_in_s"]) == (
        "forced_open", "maintenance window", 15 * 60.0)
    assert grok["until"] == clock.wall() + 15 * 60
    deepseek = state(second, "deepseek")
    assert (deepseek["state"], deepseek["reason"], deepseek["until"]) == (
        "forced_open", "flaky", None)
    assert state(second, "claude")["state"] == "closed"  # reset before the restart
    # The trip keeps its length: it still ends "after 20m".
    restored = second.runtimes["grok"].breaker.snapshot().trip
    assert restored is not None and restored.since == pytest.approx(clock() - 5 * 60)
    second.reset("deepseek")
    await second.close()

    clock.advance(16 * 60)  # grok's trip ended while no engine ran
    third = await lifetime()
    assert [state(third, n)["state"] for n in ("grok", "deepseek", "claude")] == [
        "closed", "closed", "closed"]
    await third.close()


def test_panel_words_for_a_trip() -> None:
    assert breaker_words({"state": "forced_open", "reason": "maintenance",
                          "retry_in_s": 720.0}) == "tripped · 12m left · maintenance"
    assert breaker_words({"state": "forced_open", "reason": "db", "retry_in_s": None}) == (
        "tripped · until reset · db")
    assert breaker_words({"state": "forced_open", "retry_in_s": 30}) == (
        "tripped · 30s left")
    assert breaker_words({"state": "forced_open"}) == "tripped by operator · r resets"
    masked = breaker_words({"state": "forced_open", "reason": "key sk-ant-api03-" + "x" * 40})
    assert "xxxxxxxxxxxx" not in masked
    assert event_colour(Event("trip", "grok: tripped by operator (until reset)")) == "red"


async def test_an_attached_console_link_trips_for_a_while_with_a_reason(
        fakes: Any, proxy_factory: Any) -> None:
    clock = FakeClock()
    proxy = await two(fakes, proxy_factory, clock)
    link = HttpLink(proxy.url)
    try:
        assert await link.trip("grok", 1200, "maintenance window")
        breaker = proxy.engine.snapshot()["profiles"][0]["breaker"]
        assert (breaker["reason"], breaker["retry_in_s"]) == ("maintenance window", 1200.0)
        with pytest.raises(LinkError) as info:
            await link.trip("deepseek", -1, None)  # the engine's sentence, not a traceback
        assert "not tripped: a trip lasts more than 0 seconds" in str(info.value)
        assert not await link.trip("nobody", 60, None)
    finally:
        await link.close()


IDLE_PROFILE = """
[[profiles]]
name = "alpha"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "FAKE_KEY"
"""


async def test_a_timed_trip_ends_on_time_with_nobody_reading_the_breaker() -> None:
    # The real clock, and nothing reading status or sending requests: the engine reads the
    # breaker when the trip is due, so the end is told then (bounded wait, not a timing claim).
    engine = Engine(build_config(IDLE_PROFILE), env=TEST_ENV)
    seen: list[Event] = []
    engine.events.sinks.append(lambda e: seen.append(built(e)))
    try:
        assert engine.trip("alpha", 0.2, "short")
        await eventually(lambda: any(e.kind == "breaker" and e.data.get("new") == "half_open"
                                     for e in seen))
        ended = [e.message for e in seen if e.kind == "breaker"]
        assert ended[-1].startswith("alpha: breaker forced_open -> half_open (trip ended after")
    finally:
        await engine.close()
