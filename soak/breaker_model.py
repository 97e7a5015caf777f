"""An independent model of the breaker contract (DESIGN.md "Circuit breaker"), used to judge the
transitions a running claudex reports on `GET /_claudex/events?kinds=breaker`.

It does not re-run the breaker; it checks each reported transition against what the contract
allows from the state the model is in, including the timing: OPEN may become HALF_OPEN by itself
only after the current recovery time, which starts at `recovery_seconds`, doubles after each failed
probe up to `max_recovery_seconds`, and returns to the base after a close or an operator reset.
Every event carries the engine's monotonic clock as `data.at`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

CLOSED, OPEN, HALF_OPEN, FORCED_OPEN = "closed", "open", "half_open", "forced_open"
_PROBE_FAILED = re.compile(r"probe failed; recovery now ([0-9.]+)s$")
_TOLERANCE_S = 1e-9  # `at` is the very reading the breaker decided on


@dataclass(frozen=True)
class Transition:
    provider: str
    old: str
    new: str
    reason: str
    at: float

    @classmethod
    def from_event(cls, event: dict[str, Any]) -> Transition:
        data = event["data"]
        return cls(str(event["profile"]), data["old"], data["new"], data["reason"],
                   float(data["at"]))


@dataclass
class _Breaker:
    state: str = CLOSED
    recovery_s: float = 0.0
    opened_at: float = 0.0


@dataclass
class BreakerModel:
    threshold: int
    recovery_s: float
    max_recovery_s: float
    breakers: dict[str, _Breaker] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    counts: dict[tuple[str, str], int] = field(default_factory=dict)

    def state(self, provider: str) -> str:
        return self._get(provider).state

    def _get(self, provider: str) -> _Breaker:
        if provider not in self.breakers:
            self.breakers[provider] = _Breaker(recovery_s=self.recovery_s)
        return self.breakers[provider]

    def feed(self, t: Transition) -> None:
        """Check one reported transition and move the model; a violation is recorded, and the
        model follows the report anyway so that one bad event is not reported many times."""
        b = self._get(t.provider)
        self.counts[(t.old, t.new)] = self.counts.get((t.old, t.new), 0) + 1
        problem = self._problem(b, t)
        if problem:
            self.violations.append(f"{t.provider}: {t.old} -> {t.new} ({t.reason}): {problem}")
        self._apply(b, t)

    def _problem(self, b: _Breaker, t: Transition) -> str | None:
        if t.old != b.state:
            return f"the model's state was {b.state} (an event is missing or out of order)"
        pair = (t.old, t.new)
        if pair == (CLOSED, OPEN):
            expected = f"{self.threshold} consecutive failures"
            return None if t.reason == expected else f"expected reason {expected!r}"
        if pair == (OPEN, HALF_OPEN):
            if t.reason == "health probe passed":
                return None
            if t.reason != "recovery time elapsed":
                return "unknown reason"
            waited = t.at - b.opened_at
            if waited + _TOLERANCE_S < b.recovery_s:
                return f"half-open after {waited:.3f}s, recovery is {b.recovery_s:g}s"
            return None
        if pair == (HALF_OPEN, CLOSED):
            return None if t.reason == "probe succeeded" else "unknown reason"
        if pair == (HALF_OPEN, OPEN):
            match = _PROBE_FAILED.match(t.reason)
            if not match:
                return "unknown reason"
            doubled = min(b.recovery_s * 2, max(self.recovery_s, self.max_recovery_s))
            said = float(match.group(1))
            return None if abs(said - doubled) < 0.01 else f"recovery should be {doubled:g}s"
        if t.new == FORCED_OPEN and t.old != FORCED_OPEN:
            return None if t.reason == "tripped by operator" else "unknown reason"
        if t.new == CLOSED and t.old in (OPEN, HALF_OPEN, FORCED_OPEN):
            return None if t.reason == "reset by operator" else "unknown reason"
        return "not a transition the breaker has"

    def _apply(self, b: _Breaker, t: Transition) -> None:
        if t.new == OPEN:
            if t.old == HALF_OPEN:
                b.recovery_s = min(b.recovery_s * 2, max(self.recovery_s, self.max_recovery_s))
            b.opened_at = t.at
        elif t.new == CLOSED:
            b.recovery_s = self.recovery_s
        b.state = t.new
