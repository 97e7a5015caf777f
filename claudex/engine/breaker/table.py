"""The circuit breaker's state machine as data: its states, the signals that drive it, and one
handler for every (state, signal) pair in `TABLE`.

Kept apart from `breaker/circuit.py` (the runtime object: clock, permits' staleness check,
logging, the `on_transition` callback and the public methods) so that the whole machine can be
read, and checked entry by entry, in one place: a handler reads and updates the breaker's
`Memory` and returns a `Step` naming the next state (if any); `enter()` holds the bookkeeping
shared by every transition (new generation, probe slots freed, open time noted). Nothing else
changes the state. Pure functions of (memory, now, permit): no clock, no I/O, no logging.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, StrEnum

from claudex.config.model import BreakerSettings
from claudex.engine.breaker.trips import Trip, duration_words

# Doubling stops here; 2.0**_MAX_DOUBLINGS is still a finite float, so no OverflowError.
_MAX_DOUBLINGS = 1000


class BreakerState(StrEnum):
    """A str enum: the values are what the admin API and events show."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"
    FORCED_OPEN = "forced_open"


@dataclass(frozen=True)
class Permit:
    """Admission to send one request; hand it back to exactly one record_*/release call."""

    probe: bool  # True when admitted as a half-open trial
    generation: int  # breaker generation at acquire time


class Signal(Enum):
    ACQUIRE = "acquire"
    SUCCESS = "success"
    FAILURE = "failure"  # a failure reported with a (current) permit
    OUT_OF_BAND_FAILURE = "out_of_band_failure"  # a failed health probe: no permit
    RELEASE = "release"
    TICK = "tick"  # the clock moved; OPEN or a timed trip may be due to become HALF_OPEN
    PROBE_PASSED = "probe_passed"
    TRIP = "trip"
    RESET = "reset"
    # Another instance of a fleet (engine/fleet/) opened this provider's breaker, or closed
    # it after its probe succeeded: the same facts, learned second hand.
    PEER_OPENED = "peer_opened"
    PEER_CLOSED = "peer_closed"

    # Enum's own hash is a Python function (hash of the name), called for the TABLE lookup of
    # every signal, twice a request; its members are singletons compared by identity, so
    # identity's hash serves as well, in C.
    __hash__ = object.__hash__


@dataclass
class Memory:
    """The mutable part of a breaker, other than its state; handlers read and update it."""

    settings: BreakerSettings
    generation: int = 0
    consecutive_failures: int = 0
    doublings: int = 0  # failed probes since the breaker last closed
    probes_in_flight: int = 0
    opened_at: float = 0.0
    # In a fleet (engine/fleet/), whether this instance holds the provider's half-open slot:
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
class Step:
    """A handler's answer: the next state (None = stay), why, and a permit for ACQUIRE."""

    goto: BreakerState | None = None
    reason: str = ""
    permit: Permit | None = None


_STAY = Step()

Handler = Callable[[Memory, float, "Permit | None"], Step]


def _seconds(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") + "s"


# --- handlers: each returns what happens next; only these change `Memory` -----------------


def _stay(m: Memory, now: float, permit: Permit | None) -> Step:
    """No effect: rejections while open, results that cannot matter in this state."""
    return _STAY


def _admit(m: Memory, now: float, permit: Permit | None) -> Step:
    return Step(permit=Permit(probe=False, generation=m.generation))


def _admit_probe(m: Memory, now: float, permit: Permit | None) -> Step:
    if m.probes_in_flight >= m.settings.half_open_probes:
        return _STAY
    if m.probe_gate is not None and not m.probe_gate():
        return _STAY  # another instance of the fleet holds the trial slot
    m.probes_in_flight += 1
    return Step(permit=Permit(probe=True, generation=m.generation))


def _clear_failures(m: Memory, now: float, permit: Permit | None) -> Step:
    m.consecutive_failures = 0
    return _STAY


def _count_failure(m: Memory, now: float, permit: Permit | None) -> Step:
    m.consecutive_failures += 1
    if m.consecutive_failures < m.settings.failure_threshold:
        return _STAY
    n = m.consecutive_failures
    return Step(BreakerState.OPEN, f"{n} consecutive failure{'' if n == 1 else 's'}")


def _free_probe_slot(m: Memory, now: float, permit: Permit | None) -> Step:
    m.probes_in_flight = max(0, m.probes_in_flight - 1)
    return _STAY


def _close_after_probe(m: Memory, now: float, permit: Permit | None) -> Step:
    m.consecutive_failures = 0
    m.doublings = 0
    return Step(BreakerState.CLOSED, "probe succeeded")


def _reopen_after_probe(m: Memory, now: float, permit: Permit | None) -> Step:
    m.consecutive_failures += 1
    cap = max(m.settings.recovery_seconds, m.settings.max_recovery_seconds)
    if m.recovery_seconds < cap:
        m.doublings = min(m.doublings + 1, _MAX_DOUBLINGS)
    return Step(BreakerState.OPEN, f"probe failed; recovery now {_seconds(m.recovery_seconds)}")


def _half_open_when_due(m: Memory, now: float, permit: Permit | None) -> Step:
    if now - m.opened_at < m.recovery_seconds:
        return _STAY
    return Step(BreakerState.HALF_OPEN, "recovery time elapsed")


def _half_open_at_once(m: Memory, now: float, permit: Permit | None) -> Step:
    return Step(BreakerState.HALF_OPEN, "health probe passed")


def _force_open(m: Memory, now: float, permit: Permit | None) -> Step:
    m.trip = m.asked or Trip(since=now)
    return Step(BreakerState.FORCED_OPEN, m.trip.words())


def _new_terms(m: Memory, now: float, permit: Permit | None) -> Step:
    """Tripped again while tripped: the new deadline and reason replace the old, no move."""
    m.trip = m.asked or Trip(since=now)
    return _STAY


def _end_trip_when_due(m: Memory, now: float, permit: Permit | None) -> Step:
    trip = m.trip
    if trip is None or trip.until is None or now < trip.until:
        return _STAY
    return Step(BreakerState.HALF_OPEN,
                 f"trip ended after {duration_words(trip.until - trip.since)}")


def _open_for_peer(m: Memory, now: float, permit: Permit | None) -> Step:
    return Step(BreakerState.OPEN, "opened by another instance")


def _close_for_peer(m: Memory, now: float, permit: Permit | None) -> Step:
    _clear_counters(m, now, permit)
    return Step(BreakerState.CLOSED, "another instance's probe succeeded")


def _clear_counters(m: Memory, now: float, permit: Permit | None) -> Step:
    m.consecutive_failures = 0
    m.doublings = 0
    return _STAY


def _reset_to_closed(m: Memory, now: float, permit: Permit | None) -> Step:
    _clear_counters(m, now, permit)
    return Step(BreakerState.CLOSED, "reset by operator")


_C, _O, _H, _F = (
    BreakerState.CLOSED,
    BreakerState.OPEN,
    BreakerState.HALF_OPEN,
    BreakerState.FORCED_OPEN,
)
_S = Signal

# The whole state machine. In OPEN and FORCED_OPEN no current permit can exist (entering them
# starts a new generation and they issue none), so SUCCESS/FAILURE/RELEASE there are no-ops; in
# HALF_OPEN every current permit is a probe.
TABLE: dict[tuple[BreakerState, Signal], Handler] = {
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
TIME_DRIVEN = frozenset(state for state in BreakerState if TABLE[(state, _S.TICK)] is not _stay)


def enter(m: Memory, new: BreakerState, now: float) -> None:
    """Bookkeeping shared by every transition."""
    m.generation += 1  # every permit issued so far becomes stale
    m.probes_in_flight = 0
    if new is not BreakerState.FORCED_OPEN:
        m.trip = None
    if new is BreakerState.OPEN:
        m.opened_at = now

