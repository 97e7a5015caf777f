"""Per-provider circuit breaker: a pure state machine driven by an injected clock.

States: CLOSED (traffic flows) -> OPEN (after `failure_threshold` consecutive failures; rejects
everything for the current recovery time) -> HALF_OPEN (admits `half_open_probes` concurrent
trial requests) -> CLOSED on a probe's success, or back to OPEN with the recovery time doubled
(capped at `max_recovery_seconds`) on a probe's failure. An operator can trip any state to
FORCED_OPEN, which rejects everything until reset(), or, for a timed trip (`trip(until=...)`),
until its deadline: then it goes to HALF_OPEN, so one trial request decides whether traffic comes
back. A trip may carry the operator's reason; both are in the snapshot. reset() closes from any
state and clears the counters and the recovery time.

Everything that affects the state machine lives in `claudex.engine.breaker.table`: the states,
and one handler for every (state, signal) pair, naming what it updates and which state comes next
(if any). This module is the runtime object around it: the clock, the permits, the log line and
the callback.

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

from claudex.config.model import BreakerSettings
from claudex.engine.breaker.table import (
    TABLE,
    TIME_DRIVEN,
    BreakerState,
    Memory,
    Permit,
    Signal,
    enter,
)
from claudex.engine.breaker.trips import Trip
from claudex.engine.clock import Clock

__all__ = ["BreakerSnapshot", "BreakerState", "CircuitBreaker", "Permit", "Transition", "Trip"]

log = logging.getLogger("claudex.breaker")


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
class BreakerSnapshot:
    state: BreakerState
    consecutive_failures: int
    retry_in_s: float | None  # seconds until OPEN (or a timed trip) may become HALF_OPEN
    recovery_seconds: float  # current (possibly doubled) recovery
    probes_in_flight: int
    trip: Trip | None = None  # while FORCED_OPEN: its deadline and reason

    def status_json(self) -> dict[str, object]:
        """The breaker as status JSON shows it, for a profile and an upstream proxy alike."""
        return {
            "state": self.state.value,
            "consecutive_failures": self.consecutive_failures,
            "retry_in_s": None if self.retry_in_s is None else round(self.retry_in_s, 3),
            "recovery_seconds": self.recovery_seconds,
            # While tripped: the operator's words (`retry_in_s` is then the time it has left).
            "reason": self.trip.reason if self.trip is not None else None,
        }


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
        self._memory = Memory(settings=settings, probe_gate=probe_gate)

    # --- requests ---------------------------------------------------------------------------

    def try_acquire(self) -> Permit | None:
        """A permit to send one request, or None: skip this provider."""
        return self._fire(Signal.ACQUIRE)

    def record_success(self, permit: Permit) -> None:
        self._fire(Signal.SUCCESS, permit)

    def record_failure(self, permit: Permit | None = None) -> None:
        """A failed request; with no permit, an out-of-band (health probe) failure."""
        if permit is None:
            self._fire(Signal.OUT_OF_BAND_FAILURE)
        else:
            self._fire(Signal.FAILURE, permit)

    def release(self, permit: Permit) -> None:
        """A neutral outcome (client error, rate limit): frees a probe slot, nothing else."""
        self._fire(Signal.RELEASE, permit)

    # --- health and operator ----------------------------------------------------------------

    def probe_passed(self) -> None:
        """A health probe succeeded: OPEN becomes HALF_OPEN at once; no effect otherwise."""
        self._fire(Signal.PROBE_PASSED)

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
            self._fire(Signal.TRIP)
        finally:
            self._memory.asked = None

    def reset(self) -> None:
        self._fire(Signal.RESET)

    def peer_opened(self) -> None:
        """Another instance's breaker for this provider opened: CLOSED/HALF_OPEN open too."""
        self._fire(Signal.PEER_OPENED)

    def peer_closed(self) -> None:
        """Another instance's probe succeeded: OPEN/HALF_OPEN close; a trip holds."""
        self._fire(Signal.PEER_CLOSED)

    def poll(self) -> None:
        """Apply time-based transitions (OPEN -> HALF_OPEN when the recovery time is over)."""
        if self._state in TIME_DRIVEN:
            self._fire(Signal.TICK)

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

    def _fire(self, signal: Signal, permit: Permit | None = None) -> Permit | None:
        if signal is not Signal.TICK and self._state in TIME_DRIVEN:
            self._fire(Signal.TICK)  # every call sees the state as of now
        if permit is not None and permit.generation != self._memory.generation:
            return None  # stale permit: see the module docstring
        now = self._clock()
        step = TABLE[(self._state, signal)](self._memory, now, permit)
        if step.goto is not None:
            self._move(step.goto, step.reason, now)
        return step.permit

    def _move(self, new: BreakerState, reason: str, now: float) -> None:
        old = self._state
        self._state = new
        enter(self._memory, new, now)
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
