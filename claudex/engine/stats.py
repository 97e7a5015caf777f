"""Per-provider and global request statistics, cheap enough to update on the hot path."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from claudex.providers.translate.drops import listed


@dataclass
class ProviderStats:
    requests: int = 0          # attempts sent to this provider
    successes: int = 0
    failures: int = 0          # breaker failures
    rate_limited: int = 0
    client_errors: int = 0
    last_status: int | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    last_latency_ms: float | None = None
    latencies_ms: deque[float] = field(default_factory=lambda: deque(maxlen=60))
    # Requests served with something left out, per short name ("thinking"): /metrics.
    dropped: dict[str, int] = field(default_factory=dict)

    def count_dropped(self, names: tuple[str, ...]) -> None:
        for name in names:
            # A client's own unknown keys are named in the log, but counted together: a label
            # per made-up key would let any client grow /metrics without bound.
            key = name if listed(name) else "other"
            self.dropped[key] = self.dropped.get(key, 0) + 1

    def record(self, latency_ms: float) -> None:
        self.last_latency_ms = latency_ms
        self.latencies_ms.append(latency_ms)

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "successes": self.successes,
            "failures": self.failures,
            "rate_limited": self.rate_limited,
            "client_errors": self.client_errors,
            "last_status": self.last_status,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
            "last_latency_ms": self.last_latency_ms,
        }


class RateMeter:
    """Requests per second over a sliding window of whole seconds."""

    def __init__(self, window: int = 10) -> None:
        self._window = window
        self._buckets: deque[tuple[int, int]] = deque()

    def hit(self, now: float) -> None:
        second = int(now)
        if self._buckets and self._buckets[-1][0] == second:
            sec, n = self._buckets[-1]
            self._buckets[-1] = (sec, n + 1)
        else:
            self._buckets.append((second, 1))
            while self._buckets and self._buckets[0][0] <= second - self._window:
                self._buckets.popleft()

    def rate(self, now: float) -> float:
        second = int(now)
        total = sum(n for sec, n in self._buckets if second - self._window < sec < second)
        return total / max(1, self._window - 1)


@dataclass
class GlobalStats:
    requests: int = 0
    failovers: int = 0
    all_failed: int = 0
    in_flight: int = 0
    meter: RateMeter = field(default_factory=RateMeter)
