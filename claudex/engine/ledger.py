"""Bookkeeping for one provider attempt: the breaker permit, statistics and the attempt trail.

Every permit is handed back exactly once — as a success, a failure (when the failure table says
the outcome counts against the breaker) or a neutral release.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from claudex.engine.breaker import Permit
from claudex.engine.classify import DISPOSITIONS, Outcome
from claudex.engine.clock import Clock, WallClock
from claudex.engine.request import Attempt
from claudex.engine.runtime import ProviderRuntime


@dataclass
class Failure:
    """Why one provider could not serve; `retry_after` is set for rate limits."""

    attempt: Attempt
    retry_after: float | None = None


@dataclass
class Trail:
    """Everything one request tried, in order."""

    attempts: list[Attempt] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)

    def skip(self, attempt: Attempt, retry_after: float | None = None) -> None:
        self.attempts.append(attempt)
        self.failures.append(Failure(attempt, retry_after))


def _counts_against_breaker(outcome: str) -> bool:
    try:
        return DISPOSITIONS[Outcome(outcome)].breaker_failure
    except ValueError:
        return True  # "needs_login" and other claudex-level failures of the provider


class Ledger:
    """Owns one permit of one provider for the duration of a request's attempts there."""

    def __init__(self, rt: ProviderRuntime, permit: Permit, trail: Trail, clock: Clock,
                 wall: WallClock) -> None:
        self.rt = rt
        self.permit = permit
        self.trail = trail
        self.clock = clock
        self.wall = wall
        self.settled = False
        self.streaming = False  # a committed stream owns the permit until it ends

    def ms_since(self, started: float) -> float:
        return round((self.clock() - started) * 1000.0, 3)

    def note(self, attempt: Attempt) -> None:
        """An attempt that leads to another try at the same provider (429 wait, 401 refresh)."""
        self.trail.attempts.append(attempt)

    def succeed(self, status: int, started: float, *, record_attempt: bool = True) -> None:
        rt = self.rt
        latency = self.ms_since(started)
        self._settle()
        rt.breaker.record_success(self.permit)
        if rt.gate.limit.on_success(self.clock()):
            rt.gate.wake()  # the adaptive limit grew back by one
        rt.stats.successes += 1
        rt.stats.last_status = status
        rt.stats.record(latency)
        rt.health.auth_failing = False
        rt.credentials.mark_ok()
        if record_attempt:
            self.trail.attempts.append(Attempt(rt.name, "ok", status, "", latency))

    def fail(self, attempt: Attempt, retry_after: float | None = None) -> None:
        rt = self.rt
        self.trail.attempts.append(attempt)
        self.trail.failures.append(Failure(attempt, retry_after))
        self._settle()
        if _counts_against_breaker(attempt.outcome):
            rt.breaker.record_failure(self.permit)
            rt.stats.failures += 1
        else:
            rt.breaker.release(self.permit)
        rt.stats.last_status = attempt.status
        rt.stats.last_error = f"{attempt.outcome}: {attempt.message}".strip(": ")
        rt.stats.last_error_at = self.wall()
        rt.health.live_failure_since_probe = True

    def broke_mid_stream(self, message: str) -> None:
        """A committed stream failed: nothing to fail over to, but it counts."""
        rt = self.rt
        self._settle()
        rt.breaker.record_failure(self.permit)
        rt.stats.failures += 1
        rt.stats.last_error = message
        rt.stats.last_error_at = self.wall()
        rt.health.live_failure_since_probe = True

    def hand_to_stream(self) -> None:
        self.streaming = True

    def release(self, *, by_stream: bool = False) -> None:
        """A neutral end: the client's own error, a rate limit, or the client went away.
        While a committed stream owns the permit only the stream may release it."""
        if self.streaming and not by_stream:
            return
        if not self.settled:
            self._settle()
            self.rt.breaker.release(self.permit)

    def _settle(self) -> None:
        assert not self.settled, "a breaker permit was handed back twice"
        self.settled = True
