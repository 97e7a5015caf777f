"""Per-provider circuit breaker: a pure state machine driven by an injected clock.

States: CLOSED (traffic flows) -> OPEN (after `failure_threshold` consecutive failures; rejects
everything for the current recovery time) -> HALF_OPEN (admits `half_open_probes` concurrent
trial requests) -> CLOSED on a probe's success, or back to OPEN with the recovery time doubled
(capped at `max_recovery_seconds`) on a probe's failure. An operator can trip any state to
FORCED_OPEN, which rejects everything until reset(), or, for a timed trip (`trip(until=...)`),
until its deadline: then it goes to HALF_OPEN, so one trial request decides whether traffic comes
back. A trip may carry the operator's reason; both are in the snapshot. reset() closes from any
state and clears the counters and the recovery time.

Everything that affects the state machine lives in `_TABLE` below: one entry for every
(state, signal) pair, naming the handler that updates the counters and says which state comes
next (if any). `_enter()` holds the bookkeeping shared by every transition (new generation, probe
slots freed, open time noted); nothing else changes the state.

Permits: `try_acquire()` returns a `Permit` (or None to reject) and the caller hands it back to
exactly one of record_success / record_failure / release. Every transition starts a new
generation, and a result carried by a permit from an older generation is ignored entirely: it
describes a request that was admitted under circumstances that no longer hold (for example the
third of five concurrent failures has already opened the breaker, so the other two must not count
against the coming half-open trial). This staleness check is the one rule applied before the
table is consulted.

Time: the breaker reads only the injected monotonic `clock`. OPEN -> HALF_OPEN and the end of a
timed trip (FORCED_OPEN -> HALF_OPEN) happen lazily, the first time any public method runs after
the deadline (every public method first applies the clock), and are reported once. No I/O, no
asyncio.

Each transition calls `on_transition` exactly once and writes exactly one log line on the
"claudex.breaker" logger (WARNING when it opens, INFO otherwise). Rejected requests and ignored
results are not logged. Self-transitions do not exist: tripping a forced-open breaker again only
replaces the trip's deadline and reason, silently (the engine reports that), and resetting a
closed one only clears its counters, silently.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum, StrEnum

from claudex.config.model import BreakerSettings
from claudex.engine.clock import Clock
from claudex.engine.trips import Trip, duration_words

__all__ = ["BreakerSnapshot", "BreakerState", "CircuitBreaker", "Permit", "Transition", "Trip"]

log = logging.getLogger("claudex.breaker")

# Doubling stops here; 2.0**_MAX_DOUBLINGS is still a finite float, so no OverflowError.
_MAX_DOUBLINGS = 1000


class BreakerState(StrEnum):
    """A str enum: the values are what the admin API and events show."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"
    FORCED_OPEN = "forced_open"


@dataclass(frozen=True)
class Transition:
    """One change of state, as reported to `on_transition`; `reason` is plain words."""

    provider: str
    old: BreakerState
    new: BreakerState
    reason: str
    at: float = field(default=0.0, compare=False)
    """The injected clock's reading the transition was decided on (so a checker can verify
    recovery times exactly; a clock read later, in a callback, would be a little late)."""
    trip: Trip | None = field(default=None, compare=False)
    """For a move into FORCED_OPEN: the trip's terms."""


@dataclass(frozen=True)
class Permit:
    """Admission to send one request; hand it back to exactly one record_*/release call."""

    probe: bool  # True when admitted as a half-open trial
    generation: int  # breaker generation at acquire time


@dataclass(frozen=True)
class BreakerSnapshot:
    state: BreakerState
    consecutive_failures: int
    retry_in_s: float | None  # seconds until OPEN (or a timed trip) may become HALF_OPEN
    recovery_seconds: float  # current (possibly doubled) recovery
    probes_in_flight: int
    trip: Trip | None = None  # while FORCED_OPEN: its deadline and reason


class _Signal(Enum):
    ACQUIRE = "acquire"
    SUCCESS = "success"
    FAILURE = "failure"  # a failure reported with a (current) permit
    OUT_OF_BAND_FAILURE = "out_of_band_failure"  # a failed health probe: no permit
    RELEASE = "release"
    TICK = "tick"  # the clock moved; OPEN or a timed trip may be due to become HALF_OPEN
    PROBE_PASSED = "probe_passed"
    TRIP = "trip"
    RESET = "reset"
    # Another instance of a fleet (engine/fleet.py) opened this provider's breaker, or closed
    # it after its probe succeeded: the same facts, learned second hand.
    PEER_OPENED = "peer_opened"
    PEER_CLOSED = "peer_closed"


@dataclass
class _Memory:
    """The mutable part of a breaker, other than its state; handlers read and update it."""

    settings: BreakerSettings
    generation: int = 0
    consecutive_failures: int = 0
    doublings: int = 0  # failed probes since the breaker last closed
    probes_in_flight: int = 0
    opened_at: float = 0.0
    # In a fleet (engine/fleet.py), whether this instance holds the provider's half-open slot:
    # a read of local memory, so the machine stays pure. None: always (a lone instance).
    probe_gate: Callable[[], bool] | None = None
    trip: Trip | None = None  # the trip in force (FORCED_OPEN only)
    asked: Trip | None = None  # the terms of the trip() being handled

    @property
    def recovery_seconds(self) -> float:
        base = self.settings.recovery_seconds
        cap = max(base, self.settings.max_recovery_seconds)
        return min(cap, base * 2.0**self.doublings)


@dataclass(frozen=True)
class _Step:
    """A handler's answer: the next state (None = stay), why, and a permit for ACQUIRE."""

    goto: BreakerState | None = None
    reason: str = ""
    permit: Permit | None = None


_STAY = _Step()

_Handler = Callable[[_Memory, float, "Permit | None"], _Step]


def _seconds(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") + "s"


# --- handlers: each returns what happens next; only these change `_Memory` -----------------


def _stay(m: _Memory, now: float, permit: Permit | None) -> _Step:
    """No effect: rejections while open, results that cannot matter in this state."""
    return _STAY


def _admit(m: _Memory, now: float, permit: Permit | None) -> _Step:
    return _Step(permit=Permit(probe=False, generation=m.generation))


def _admit_probe(m: _Memory, now: float, permit: Permit | None) -> _Step:
    if m.probes_in_flight >= m.settings.half_open_probes:
        return _STAY
    if m.probe_gate is not None and not m.probe_gate():
        return _STAY  # another instance of the fleet holds the trial slot
    m.probes_in_flight += 1
    return _Step(permit=Permit(probe=True, generation=m.generation))


def _clear_failures(m: _Memory, now: float, permit: Permit | None) -> _Step:
    m.consecutive_failures = 0
    return _STAY


def _count_failure(m: _Memory, now: float, permit: Permit | None) -> _Step:
    m.consecutive_failures += 1
    if m.consecutive_failures < m.settings.failure_threshold:
        return _STAY
    n = m.consecutive_failures
    return _Step(BreakerState.OPEN, f"{n} consecutive failure{'' if n == 1 else 's'}")


def _free_probe_slot(m: _Memory, now: float, permit: Permit | None) -> _Step:
    m.probes_in_flight = max(0, m.probes_in_flight - 1)
    return _STAY


def _close_after_probe(m: _Memory, now: float, permit: Permit | None) -> _Step:
    m.consecutive_failures = 0
    m.doublings = 0
    return _Step(BreakerState.CLOSED, "probe succeeded")


def _reopen_after_probe(m: _Memory, now: float, permit: Permit | None) -> _Step:
    m.consecutive_failures += 1
    cap = max(m.settings.recovery_seconds, m.settings.max_recovery_seconds)
    if m.recovery_seconds < cap:
        m.doublings = min(m.doublings + 1, _MAX_DOUBLINGS)
    return _Step(BreakerState.OPEN, f"probe failed; recovery now {_seconds(m.recovery_seconds)}")


def _half_open_when_due(m: _Memory, now: float, permit: Permit | None) -> _Step:
    if now - m.opened_at < m.recovery_seconds:
        return _STAY
    return _Step(BreakerState.HALF_OPEN, "recovery time elapsed")


def _half_open_at_once(m: _Memory, now: float, permit: Permit | None) -> _Step:
    return _Step(BreakerState.HALF_OPEN, "health probe passed")


def _force_open(m: _Memory, now: float, permit: Permit | None) -> _Step:
    m.trip = m.asked or Trip(since=now)
    return _Step(BreakerState.FORCED_OPEN, m.trip.words())


def _new_terms(m: _Memory, now: float, permit: Permit | None) -> _Step:
    """Tripped again while tripped: the new deadline and reason replace the old, no move."""
    m.trip = m.asked or Trip(since=now)
    return _STAY


def _end_trip_when_due(m: _Memory, now: float, permit: Permit | None) -> _Step:
    trip = m.trip
    if trip is None or trip.until is None or now < trip.until:
        return _STAY
    return _Step(BreakerState.HALF_OPEN,
                 f"trip ended after {duration_words(trip.until - trip.since)}")


def _open_for_peer(m: _Memory, now: float, permit: Permit | None) -> _Step:
    return _Step(BreakerState.OPEN, "opened by another instance")


def _close_for_peer(m: _Memory, now: float, permit: Permit | None) -> _Step:
    _clear_counters(m, now, permit)
    return _Step(BreakerState.CLOSED, "another instance's probe succeeded")


def _clear_counters(m: _Memory, now: float, permit: Permit | None) -> _Step:
    m.consecutive_failures = 0
    m.doublings = 0
    return _STAY


def _reset_to_closed(m: _Memory, now: float, permit: Permit | None) -> _Step:
    _clear_counters(m, now, permit)
    return _Step(BreakerState.CLOSED, "reset by operator")


_C, _O, _H, _F = (
    BreakerState.CLOSED,
    BreakerState.OPEN,
    BreakerState.HALF_OPEN,
    BreakerState.FORCED_OPEN,
)
_S = _Signal

# The whole state machine. In OPEN and FORCED_OPEN no current permit can exist (entering them
# starts a new generation and they issue none), so SUCCESS/FAILURE/RELEASE there are no-ops; in
# HALF_OPEN every current permit is a probe.
_TABLE: dict[tuple[BreakerState, _Signal], _Handler] = {
    (_C, _S.ACQUIRE): _admit,
    (_C, _S.SUCCESS): _clear_failures,
    (_C, _S.FAILURE): _count_failure,
    (_C, _S.OUT_OF_BAND_FAILURE): _count_failure,
    (_C, _S.RELEASE): _stay,
    (_C, _S.TICK): _stay,
    (_C, _S.PROBE_PASSED): _stay,
    (_C, _S.TRIP): _force_open,
    (_C, _S.PEER_OPENED): _open_for_peer,
    (_C, _S.PEER_CLOSED): _stay,
    (_C, _S.RESET): _clear_counters,
    (_O, _S.ACQUIRE): _stay,
    (_O, _S.SUCCESS): _stay,
    (_O, _S.FAILURE): _stay,
    (_O, _S.OUT_OF_BAND_FAILURE): _stay,
    (_O, _S.RELEASE): _stay,
    (_O, _S.TICK): _half_open_when_due,
    (_O, _S.PROBE_PASSED): _half_open_at_once,
    (_O, _S.TRIP): _force_open,
    (_O, _S.PEER_OPENED): _stay,
    (_O, _S.PEER_CLOSED): _close_for_peer,
    (_O, _S.RESET): _reset_to_closed,
    (_H, _S.ACQUIRE): _admit_probe,
    (_H, _S.SUCCESS): _close_after_probe,
    (_H, _S.FAILURE): _reopen_after_probe,
    (_H, _S.OUT_OF_BAND_FAILURE): _stay,
    (_H, _S.RELEASE): _free_probe_slot,
    (_H, _S.TICK): _stay,
    (_H, _S.PROBE_PASSED): _stay,
    (_H, _S.TRIP): _force_open,
    (_H, _S.PEER_OPENED): _open_for_peer,
    (_H, _S.PEER_CLOSED): _close_for_peer,
    (_H, _S.RESET): _reset_to_closed,
    (_F, _S.ACQUIRE): _stay,
    (_F, _S.SUCCESS): _stay,
    (_F, _S.FAILURE): _stay,
    (_F, _S.OUT_OF_BAND_FAILURE): _stay,
    (_F, _S.RELEASE): _stay,
    (_F, _S.TICK): _end_trip_when_due,
    (_F, _S.PROBE_PASSED): _stay,
    (_F, _S.TRIP): _new_terms,
    (_F, _S.PEER_OPENED): _stay,
    (_F, _S.PEER_CLOSED): _stay,
    (_F, _S.RESET): _reset_to_closed,
}


# States in which time alone can cause a transition, read off the table: only these need a TICK
# before each call (a TICK elsewhere is a no-op, and it used to cost ~6 calls a request).
_TIME_DRIVEN = frozenset(state for state in BreakerState if _TABLE[(state, _S.TICK)] is not _stay)


def _enter(m: _Memory, new: BreakerState, now: float) -> None:
    """Bookkeeping shared by every transition."""
    m.generation += 1  # every permit issued so far becomes stale
    m.probes_in_flight = 0
    if new is not BreakerState.FORCED_OPEN:
        m.trip = None
    if new is BreakerState.OPEN:
        m.opened_at = now


class CircuitBreaker:
    """One provider's breaker. Not thread-safe; the engine drives it from one event loop."""

    def __init__(
        self,
        provider: str,
        settings: BreakerSettings,
        clock: Clock,
        on_transition: Callable[[Transition], None] | None = None,
        probe_gate: Callable[[], bool] | None = None,
    ) -> None:
        self.provider = provider
        self._clock = clock
        self._on_transition = on_transition
        self._state = BreakerState.CLOSED
        self._memory = _Memory(settings=settings, probe_gate=probe_gate)

    # --- requests ---------------------------------------------------------------------------

    def try_acquire(self) -> Permit | None:
        """A permit to send one request, or None: skip this provider."""
        return self._fire(_Signal.ACQUIRE)

    def record_success(self, permit: Permit) -> None:
        self._fire(_Signal.SUCCESS, permit)

    def record_failure(self, permit: Permit | None = None) -> None:
        """A failed request; with no permit, an out-of-band (health probe) failure."""
        if permit is None:
            self._fire(_Signal.OUT_OF_BAND_FAILURE)
        else:
            self._fire(_Signal.FAILURE, permit)

    def release(self, permit: Permit) -> None:
        """A neutral outcome (client error, rate limit): frees a probe slot, nothing else."""
        self._fire(_Signal.RELEASE, permit)

    # --- health and operator ----------------------------------------------------------------

    def probe_passed(self) -> None:
        """A health probe succeeded: OPEN becomes HALF_OPEN at once; no effect otherwise."""
        self._fire(_Signal.PROBE_PASSED)

    def trip(self, *, until: float | None = None, reason: str | None = None,
             since: float | None = None) -> None:
        """Force the breaker open until reset(), or until the clock reads `until` (then
        HALF_OPEN). `reason` is the operator's words; `since` when the trip began (a trip
        restored or learned from elsewhere), else now. Tripping a tripped breaker replaces
        its deadline and reason."""
        now = self._clock()
        if until is not None and not math.isfinite(until):
            until = None
        self._memory.asked = Trip(until, reason or None, now if since is None else since)
        try:
            self._fire(_Signal.TRIP)
        finally:
            self._memory.asked = None

    def reset(self) -> None:
        self._fire(_Signal.RESET)

    def peer_opened(self) -> None:
        """Another instance's breaker for this provider opened: CLOSED/HALF_OPEN open too."""
        self._fire(_Signal.PEER_OPENED)

    def peer_closed(self) -> None:
        """Another instance's probe succeeded: OPEN/HALF_OPEN close; a trip holds."""
        self._fire(_Signal.PEER_CLOSED)

    def poll(self) -> None:
        """Apply time-based transitions (OPEN -> HALF_OPEN when the recovery time is over)."""
        if self._state in _TIME_DRIVEN:
            self._fire(_Signal.TICK)

    # --- reading and configuration ----------------------------------------------------------

    @property
    def state(self) -> BreakerState:
        self.poll()
        return self._state

    @property
    def settings(self) -> BreakerSettings:
        return self._memory.settings

    def snapshot(self) -> BreakerSnapshot:
        self.poll()
        m = self._memory
        retry_in_s: float | None = None
        if self._state is BreakerState.OPEN:
            retry_in_s = max(0.0, m.opened_at + m.recovery_seconds - self._clock())
        elif m.trip is not None and m.trip.until is not None:
            retry_in_s = max(0.0, m.trip.until - self._clock())
        return BreakerSnapshot(
            state=self._state,
            consecutive_failures=m.consecutive_failures,
            retry_in_s=retry_in_s,
            recovery_seconds=m.recovery_seconds,
            probes_in_flight=m.probes_in_flight,
            trip=m.trip,
        )

    def update_settings(self, settings: BreakerSettings) -> None:
        """Config reload: new limits apply from now on; state, counters and permits are kept."""
        self._memory.settings = settings

    # --- the engine ---------------------------------------------------------------------------

    def _fire(self, signal: _Signal, permit: Permit | None = None) -> Permit | None:
        if signal is not _Signal.TICK and self._state in _TIME_DRIVEN:
            self._fire(_Signal.TICK)  # every call sees the state as of now
        if permit is not None and permit.generation != self._memory.generation:
            return None  # stale permit: see the module docstring
        now = self._clock()
        step = _TABLE[(self._state, signal)](self._memory, now, permit)
        if step.goto is not None:
            self._move(step.goto, step.reason, now)
        return step.permit

    def _move(self, new: BreakerState, reason: str, now: float) -> None:
        old = self._state
        self._state = new
        _enter(self._memory, new, now)
        opening = new in (BreakerState.OPEN, BreakerState.FORCED_OPEN)
        log.log(
            logging.WARNING if opening else logging.INFO,
            "breaker %s: %s -> %s (%s)",
            self.provider,
            old.value,
            new.value,
            reason,
        )
        if self._on_transition is not None:
            self._on_transition(Transition(self.provider, old, new, reason, now,
                                           self._memory.trip))
