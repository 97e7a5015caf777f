"""Circuit breaker: a hypothesis state machine against a reference model, plus worked examples."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from claudex.config.model import BreakerSettings
from claudex.engine.breaker import table as breaker_table
from claudex.engine.breaker.circuit import (
    BreakerState,
    CircuitBreaker,
    Permit,
    Transition,
)
from claudex.engine.clock import FakeClock

LOGGER = "claudex.breaker"


# --- reference model ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelPermit:
    ident: int
    probe: bool


class ReferenceBreaker:
    """The breaker's contract written as plainly as possible, with no table and no generations.

    A permit is "live" until the next state change; results from dead permits are ignored.
    """

    def __init__(self, config: BreakerSettings, clock: FakeClock) -> None:
        self.config = config
        self.clock = clock
        self.state = "closed"
        self.failures = 0
        self.recovery = config.recovery_seconds
        self.opened_at = 0.0
        self.probes = 0
        self.live: set[int] = set()
        self.trip_until: float | None = None  # a timed trip's deadline
        self.trip_reason: str | None = None
        self.next_ident = 0
        self.transitions: list[tuple[str, str]] = []

    def go(self, new: str) -> None:
        self.transitions.append((self.state, new))
        self.state = new
        self.live.clear()
        self.probes = 0
        if new != "forced_open":
            self.trip_until = self.trip_reason = None
        if new == "open":
            self.opened_at = self.clock()

    def tick(self) -> None:
        if self.state == "open" and self.clock() >= self.opened_at + self.recovery:
            self.go("half_open")
        if (self.state == "forced_open" and self.trip_until is not None
                and self.clock() >= self.trip_until):
            self.go("half_open")

    def acquire(self) -> ModelPermit | None:
        self.tick()
        if self.state == "closed":
            probe = False
        elif self.state == "half_open" and self.probes < self.config.half_open_probes:
            self.probes += 1
            probe = True
        else:
            return None
        self.next_ident += 1
        self.live.add(self.next_ident)
        return ModelPermit(self.next_ident, probe)

    def closed_failure(self) -> None:
        self.failures += 1
        if self.failures >= self.config.failure_threshold:
            self.go("open")

    def success(self, permit: ModelPermit) -> None:
        self.tick()
        if permit.ident not in self.live:
            return
        self.live.discard(permit.ident)
        if self.state == "closed":
            self.failures = 0
        elif self.state == "half_open":
            self.failures = 0
            self.recovery = self.config.recovery_seconds
            self.go("closed")

    def failure(self, permit: ModelPermit) -> None:
        self.tick()
        if permit.ident not in self.live:
            return
        self.live.discard(permit.ident)
        if self.state == "closed":
            self.closed_failure()
        elif self.state == "half_open":
            self.failures += 1
            self.recovery = min(self.recovery * 2, self.config.max_recovery_seconds)
            self.go("open")

    def out_of_band_failure(self) -> None:
        self.tick()
        if self.state == "closed":
            self.closed_failure()

    def release(self, permit: ModelPermit) -> None:
        self.tick()
        if permit.ident not in self.live:
            return
        self.live.discard(permit.ident)
        if self.state == "half_open":
            self.probes -= 1

    def probe_passed(self) -> None:
        self.tick()
        if self.state == "open":
            self.go("half_open")

    def trip(self, seconds: float | None = None, reason: str | None = None) -> None:
        self.tick()
        if self.state != "forced_open":
            self.go("forced_open")
        # Tripped again while tripped: the new terms replace the old, with no transition.
        self.trip_until = None if seconds is None else self.clock() + seconds
        self.trip_reason = reason

    def reset(self) -> None:
        self.tick()
        self.failures = 0
        self.recovery = self.config.recovery_seconds
        if self.state != "closed":
            self.go("closed")

    def retry_in_s(self) -> float | None:
        if self.state == "forced_open" and self.trip_until is not None:
            return self.trip_until - self.clock()
        if self.state != "open":
            return None
        return self.opened_at + self.recovery - self.clock()


class RecordingHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class BreakerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.events: list[Transition] = []
        self.outstanding: list[tuple[Permit, ModelPermit]] = []
        self.handler = RecordingHandler()
        self.logger = logging.getLogger(LOGGER)
        self.old_level = self.logger.level
        self.logger.setLevel(logging.INFO)
        self.logger.addHandler(self.handler)

    def teardown(self) -> None:
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.old_level)

    @initialize(
        threshold=st.integers(1, 3),
        probes=st.sampled_from([1, 3]),
        recovery=st.sampled_from([5.0, 10.0]),
        max_recovery=st.sampled_from([10.0, 25.0, 40.0, 300.0]),
    )
    def build(self, threshold: int, probes: int, recovery: float, max_recovery: float) -> None:
        config = BreakerSettings(threshold, recovery, probes, max_recovery)
        self.breaker = CircuitBreaker("p", config, self.clock, self.events.append)
        self.model = ReferenceBreaker(config, self.clock)

    def take(self, index: int) -> tuple[Permit, ModelPermit]:
        return self.outstanding.pop(index % len(self.outstanding))

    @rule()
    def acquire(self) -> None:
        real = self.breaker.try_acquire()
        expected = self.model.acquire()
        assert (real is None) == (expected is None)
        if real is not None and expected is not None:
            assert real.probe == expected.probe
            self.outstanding.append((real, expected))

    @precondition(lambda self: self.outstanding)
    @rule(index=st.integers(0, 20))
    def success(self, index: int) -> None:
        real, expected = self.take(index)
        self.breaker.record_success(real)
        self.model.success(expected)

    @precondition(lambda self: self.outstanding)
    @rule(index=st.integers(0, 20))
    def failure(self, index: int) -> None:
        real, expected = self.take(index)
        self.breaker.record_failure(real)
        self.model.failure(expected)

    @precondition(lambda self: self.outstanding)
    @rule(index=st.integers(0, 20))
    def release(self, index: int) -> None:
        real, expected = self.take(index)
        self.breaker.release(real)
        self.model.release(expected)

    @rule()
    def out_of_band_failure(self) -> None:
        self.breaker.record_failure()
        self.model.out_of_band_failure()

    # Whole seconds keep the deadline comparisons exact in both implementations; the sampled
    # values land exactly on recovery deadlines often.
    @rule(seconds=st.sampled_from([1, 5, 10, 20, 25, 40]) | st.integers(0, 50))
    def advance(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @rule()
    def trip(self) -> None:
        self.breaker.trip()
        self.model.trip()

    @rule(seconds=st.sampled_from([1, 5, 20]) | st.integers(1, 60),
          reason=st.sampled_from([None, "maintenance"]))
    def timed_trip(self, seconds: int, reason: str | None) -> None:
        self.breaker.trip(until=self.clock() + seconds, reason=reason)
        self.model.trip(seconds, reason)

    @rule()
    def reset(self) -> None:
        self.breaker.reset()
        self.model.reset()

    @rule()
    def probe_passed(self) -> None:
        self.breaker.probe_passed()
        self.model.probe_passed()

    @invariant()
    def agrees_with_model(self) -> None:
        snap = self.breaker.snapshot()
        self.model.tick()
        assert snap.state.value == self.model.state
        assert snap.consecutive_failures == self.model.failures
        assert snap.probes_in_flight == self.model.probes
        assert snap.recovery_seconds == self.model.recovery
        expected_retry = self.model.retry_in_s()
        if expected_retry is None:
            assert snap.retry_in_s is None
        else:
            assert snap.retry_in_s is not None
            assert snap.retry_in_s == pytest.approx(expected_retry)
            assert snap.retry_in_s > 0
        assert snap.probes_in_flight <= self.breaker.settings.half_open_probes
        if self.model.state == "forced_open":
            assert snap.trip is not None
            assert (snap.trip.until, snap.trip.reason) == (self.model.trip_until,
                                                           self.model.trip_reason)
        else:
            assert snap.trip is None

    @invariant()
    def one_event_and_one_log_line_per_transition(self) -> None:
        assert [(e.old.value, e.new.value) for e in self.events] == self.model.transitions
        assert all(e.old is not e.new for e in self.events)
        assert len(self.handler.records) == len(self.model.transitions)


BreakerMachine.TestCase.settings = hypothesis_settings(
    max_examples=250, stateful_step_count=40, deadline=None
)
TestBreakerAgainstModel = BreakerMachine.TestCase


# --- worked examples ---------------------------------------------------------------------------


def make(
    threshold: int = 3,
    recovery: float = 30.0,
    probes: int = 1,
    max_recovery: float = 300.0,
) -> tuple[CircuitBreaker, FakeClock, list[Transition]]:
    clock = FakeClock()
    events: list[Transition] = []
    config = BreakerSettings(threshold, recovery, probes, max_recovery)
    return CircuitBreaker("grok", config, clock, events.append), clock, events


def state(b: CircuitBreaker) -> BreakerState:
    """Read the state through a call, so mypy does not narrow `b.state` across actions."""
    return b.state


def fail_n(b: CircuitBreaker, n: int) -> None:
    for _ in range(n):
        permit = b.try_acquire()
        assert permit is not None
        b.record_failure(permit)


def test_every_state_and_signal_has_a_table_entry() -> None:
    table = breaker_table.TABLE
    expected = {(s, g) for s in BreakerState for g in breaker_table.Signal}
    assert set(table) == expected


def test_opens_after_consecutive_failures_and_success_resets_the_count() -> None:
    b, _, events = make(threshold=3)
    fail_n(b, 2)
    ok = b.try_acquire()
    assert ok is not None
    b.record_success(ok)
    assert b.snapshot().consecutive_failures == 0
    fail_n(b, 2)
    assert state(b) is BreakerState.CLOSED
    fail_n(b, 1)
    assert state(b) is BreakerState.OPEN
    assert events == [
        Transition("grok", BreakerState.CLOSED, BreakerState.OPEN, "3 consecutive failures")
    ]


def test_open_rejects_until_recovery_then_half_opens_once() -> None:
    b, clock, events = make(threshold=1, recovery=30.0)
    fail_n(b, 1)
    clock.advance(29.5)
    assert b.try_acquire() is None
    assert b.snapshot().retry_in_s == pytest.approx(0.5)
    clock.advance(0.5)
    b.poll()
    b.poll()
    assert state(b) is BreakerState.HALF_OPEN
    assert b.snapshot().retry_in_s is None
    assert [e.reason for e in events] == ["1 consecutive failure", "recovery time elapsed"]


@pytest.mark.parametrize("probes", [1, 3])
def test_half_open_admits_exactly_the_configured_number_of_probes(probes: int) -> None:
    b, clock, _ = make(threshold=1, recovery=10.0, probes=probes)
    fail_n(b, 1)
    clock.advance(10)
    permits = [b.try_acquire() for _ in range(probes)]
    assert all(p is not None and p.probe for p in permits)
    assert b.try_acquire() is None
    assert b.snapshot().probes_in_flight == probes
    first = permits[0]
    assert first is not None
    b.release(first)  # a neutral outcome frees the slot and changes nothing else
    assert state(b) is BreakerState.HALF_OPEN
    assert b.snapshot().probes_in_flight == probes - 1
    assert b.try_acquire() is not None
    assert b.try_acquire() is None


def test_probe_success_closes_and_restores_base_recovery() -> None:
    b, clock, events = make(threshold=1, recovery=10.0)
    fail_n(b, 1)
    clock.advance(10)
    fail_n(b, 1)  # failed probe: recovery 20
    clock.advance(20)
    probe = b.try_acquire()
    assert probe is not None and probe.probe
    b.record_success(probe)
    snap = b.snapshot()
    assert snap.state is BreakerState.CLOSED
    assert snap.recovery_seconds == 10.0
    assert snap.consecutive_failures == 0
    assert events[-1].reason == "probe succeeded"


def test_failed_probes_double_recovery_up_to_the_cap() -> None:
    b, clock, events = make(threshold=1, recovery=10.0, max_recovery=35.0)
    fail_n(b, 1)
    seen = []
    for _ in range(4):
        clock.advance(b.snapshot().recovery_seconds)
        fail_n(b, 1)  # the single probe fails
        seen.append(b.snapshot().recovery_seconds)
    assert seen == [20.0, 35.0, 35.0, 35.0]
    assert events[2].reason == "probe failed; recovery now 20s"
    assert b.snapshot().retry_in_s == pytest.approx(35.0)


def test_forced_open_rejects_until_reset_and_reset_clears_everything() -> None:
    b, clock, events = make(threshold=1, recovery=10.0)
    fail_n(b, 1)
    clock.advance(10)
    fail_n(b, 1)  # recovery now 20
    b.trip()
    clock.advance(10_000)
    b.probe_passed()
    b.record_failure()
    assert b.try_acquire() is None
    assert state(b) is BreakerState.FORCED_OPEN
    b.trip()  # already forced open: no transition
    b.reset()
    snap = b.snapshot()
    assert snap.state is BreakerState.CLOSED
    assert (snap.consecutive_failures, snap.recovery_seconds) == (0, 10.0)
    assert [e.reason for e in events[-2:]] == ["tripped by operator", "reset by operator"]
    assert b.try_acquire() is not None


def test_reset_while_closed_clears_the_count_without_a_transition() -> None:
    b, _, events = make(threshold=3)
    fail_n(b, 2)
    b.reset()
    assert b.snapshot().consecutive_failures == 0
    assert events == []


def test_results_from_stale_permits_are_ignored() -> None:
    b, clock, _ = make(threshold=2, recovery=10.0)
    permits = [b.try_acquire() for _ in range(3)]
    assert all(p is not None for p in permits)
    first, second, third = (p for p in permits if p is not None)
    b.record_failure(first)
    b.record_failure(second)
    assert state(b) is BreakerState.OPEN
    b.record_failure(third)  # admitted before the breaker opened: does not count again
    assert b.snapshot().consecutive_failures == 2
    clock.advance(10)
    b.record_success(third)  # must not close a half-open breaker
    b.release(third)
    assert state(b) is BreakerState.HALF_OPEN
    probe = b.try_acquire()
    assert probe is not None and probe.probe


def test_out_of_band_failure_counts_only_while_closed() -> None:
    b, clock, events = make(threshold=2, recovery=10.0)
    b.record_failure()
    b.record_failure()
    assert state(b) is BreakerState.OPEN
    b.record_failure()
    assert b.snapshot().recovery_seconds == 10.0
    clock.advance(10)
    b.record_failure()
    assert state(b) is BreakerState.HALF_OPEN
    # Each transition carries the clock reading it was decided on: exactly the recovery apart.
    assert [e.new for e in events] == [BreakerState.OPEN, BreakerState.HALF_OPEN]
    assert events[1].at - events[0].at == 10.0


def test_health_probe_passing_half_opens_an_open_breaker_at_once() -> None:
    b, _, events = make(threshold=1, recovery=300.0)
    b.probe_passed()
    assert state(b) is BreakerState.CLOSED
    fail_n(b, 1)
    b.probe_passed()
    assert state(b) is BreakerState.HALF_OPEN
    assert events[-1] == Transition(
        "grok", BreakerState.OPEN, BreakerState.HALF_OPEN, "health probe passed"
    )


def test_one_log_line_per_transition_and_none_for_rejections(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    b, clock, events = make(threshold=1, recovery=10.0)
    fail_n(b, 1)
    for _ in range(20):
        assert b.try_acquire() is None
    b.record_failure()
    clock.advance(10)
    probe = b.try_acquire()
    assert probe is not None
    assert b.try_acquire() is None
    b.record_success(probe)
    b.trip()
    b.reset()
    records = [r for r in caplog.records if r.name == LOGGER]
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.WARNING, "breaker grok: closed -> open (1 consecutive failure)"),
        (logging.INFO, "breaker grok: open -> half_open (recovery time elapsed)"),
        (logging.INFO, "breaker grok: half_open -> closed (probe succeeded)"),
        (logging.WARNING, "breaker grok: closed -> forced_open (tripped by operator)"),
        (logging.INFO, "breaker grok: forced_open -> closed (reset by operator)"),
    ]
    assert len(events) == len(records)


def test_update_settings_keeps_state_and_applies_new_limits() -> None:
    b, clock, events = make(threshold=2, recovery=30.0)
    fail_n(b, 2)
    clock.advance(5)
    b.update_settings(BreakerSettings(failure_threshold=5, recovery_seconds=60.0))
    snap = b.snapshot()
    assert snap.state is BreakerState.OPEN
    assert snap.consecutive_failures == 2
    assert snap.retry_in_s == pytest.approx(55.0)
    assert len(events) == 1
    clock.advance(55)
    probe = b.try_acquire()
    assert probe is not None
    b.record_success(probe)
    fail_n(b, 4)
    assert state(b) is BreakerState.CLOSED  # the new threshold of 5 applies
    fail_n(b, 1)
    assert state(b) is BreakerState.OPEN


def test_permit_from_before_a_settings_update_still_counts() -> None:
    b, _, _ = make(threshold=2)
    permit = b.try_acquire()
    assert permit is not None
    b.update_settings(BreakerSettings(failure_threshold=1))
    b.record_failure(permit)
    assert state(b) is BreakerState.OPEN
