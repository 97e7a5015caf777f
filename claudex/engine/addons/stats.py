"""Per-provider and global request statistics, cheap enough to update on the hot path (the
addon that keeps them up to date is addons/counting.py `StatsAddon`)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from claudex.engine.addons.latency import BucketCounts, LatencyWindow, MinuteSeries
from claudex.engine.core.request import PROXY_OUTCOMES, SKIP_OUTCOMES
from claudex.providers.translate.drops import listed

# Attempts that never reached the provider (besides the skips): not its traffic.
NOT_SENT = SKIP_OUTCOMES | PROXY_OUTCOMES | {"credentials", "translation_error",
                                             "invalid_request"}
# Attempts the provider answered well, or that failed by the client's own fault.
NOT_ERRORS = frozenset({"ok", "client_error"})
LOCAL_ESTIMATE = "local estimate"  # count_tokens answered by claudex itself


def attempt_counts(outcome: str, message: str) -> tuple[int, int]:
    """(sent, error) for one attempt in a trail: 1 when it reached the provider, and 1 when
    the provider answered it with a failure (a 5xx, a 429, a timeout, a broken stream...)."""
    if outcome in NOT_SENT or (outcome == "ok" and message == LOCAL_ESTIMATE):
        return 0, 0
    return 1, 0 if outcome in NOT_ERRORS else 1


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
    # What requests felt (engine/addons/latency.py), wall-clock times: time to first content of
    # streams, duration of answers that were not streamed, and the last 30 minutes' traffic.
    first_content: LatencyWindow = field(default_factory=LatencyWindow)
    duration: LatencyWindow = field(default_factory=LatencyWindow)
    first_content_hist: BucketCounts = field(default_factory=BucketCounts)
    duration_hist: BucketCounts = field(default_factory=BucketCounts)
    minutes: MinuteSeries = field(default_factory=lambda: MinuteSeries(0.0))
    # Today's counts from before this start, read from the history journal (journal_seed.py):
    # added in status (the panels, claudex status), left out of /metrics, whose counters count
    # this process (a counter that started at yesterday's value would read as a burst).
    earlier: dict[str, int] = field(default_factory=dict)

    def observe_attempt(self, at: float, outcome: str, message: str) -> None:
        sent, error = attempt_counts(outcome, message)
        if sent:
            self.minutes.add(at, sent, error)

    def observe_first_content(self, at: float, ms: float) -> None:
        self.first_content.add(at, ms)
        self.first_content_hist.observe(ms / 1000.0)

    def observe_duration(self, at: float, ms: float) -> None:
        self.duration.add(at, ms)
        self.duration_hist.observe(ms / 1000.0)

    def window_json(self, now: float) -> dict[str, Any]:
        """`latency`, `minutes` and the rates over them at wall time `now` (computed here, on
        a status read, never on the hot path)."""
        fc50, fc95, fc_n = self.first_content.percentiles(now)
        d50, d95, d_n = self.duration.percentiles(now)
        series = self.minutes.series(now)
        covered = self.minutes.minutes_covered(now)
        requests, errors = sum(series["requests"]), sum(series["errors"])
        return {
            "latency": {
                "first_content_p50_ms": _ms(fc50), "first_content_p95_ms": _ms(fc95),
                "duration_p50_ms": _ms(d50), "duration_p95_ms": _ms(d95),
                "samples": fc_n + d_n,
                "first_content_samples": fc_n, "duration_samples": d_n,
            },
            "minutes": series,
            "requests_per_min": round(requests / covered, 2),
            "error_rate": round(errors / requests, 4) if requests else 0.0,
            "tokens_per_min": round(sum(series["tokens"]) / covered, 1),
        }

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
            "requests": self.requests + self.earlier.get("requests", 0),
            "successes": self.successes + self.earlier.get("successes", 0),
            "failures": self.failures + self.earlier.get("failures", 0),
            "rate_limited": self.rate_limited + self.earlier.get("rate_limited", 0),
            "client_errors": self.client_errors,
            "last_status": self.last_status,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
            "last_latency_ms": self.last_latency_ms,
        }


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


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

