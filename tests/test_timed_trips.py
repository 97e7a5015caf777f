"""Timed trips with a reason: the breaker, the duration parser, the engine and its interfaces."""

from __future__ import annotations

import logging

import pytest

from claudex.config.model import BreakerSettings
from claudex.engine.breaker import BreakerState, CircuitBreaker, Transition
from claudex.engine.clock import FakeClock
from claudex.engine.trips import DurationError, duration_words, parse_duration, trip_words

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
