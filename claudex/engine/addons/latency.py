"""Latency users feel, kept cheaply per provider: a sliding window of samples for p50/p95, a
per-minute series of requests, errors and tokens, and bucket counts for `/metrics` histograms.

Every structure here is a set of fixed-size arrays allocated once per provider: recording a
sample writes a few slots and allocates nothing that grows. Percentiles and series are worked
out only when the status is read. Times are wall-clock seconds passed in by the caller (the
engine's injected `wall`), so tests drive the window with a fake clock, and samples seeded from
the history journal (which keeps wall times) land in the same window as live ones.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Mapping
from typing import Any, Final

WINDOW_S: Final = 300.0
CAPACITY: Final = 512
MINUTES: Final = 30
# Seconds; LLM answers run from a fast first token to a long tool-writing turn.
BUCKETS_S: Final = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)


def nearest_rank(ordered: list[float], p: float) -> float:
    """The p-th percentile (0 < p <= 100) of a sorted, non-empty list, by nearest rank: the
    smallest sample with at least p% of the samples at or below it (always a real sample)."""
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[rank - 1]


class LatencyWindow:
    """The samples of the last `window_s` seconds, at most the newest `capacity` of them.

    Why both bounds: five minutes is what "slow right now" means to someone watching an
    incident, and old samples must not dilute it; a ring of a fixed size keeps the memory and
    the cost of a read fixed whatever the traffic. Under heavy traffic (more than `capacity`
    answers in five minutes) the window is the last `capacity` answers, which are more recent
    still. 512 samples put the p95 on the 26th-slowest sample: steady enough to read.

    A read sorts the samples in the window once, and is cached until a sample is added or the
    oldest one it used falls out of the window (a console polling at 10 Hz pays for one sort
    per change, not per frame).
    """

    __slots__ = (
        "_cache",
        "_cache_until",
        "_cache_version",
        "_count",
        "_next",
        "_times",
        "_values",
        "_version",
        "capacity",
        "window_s",
    )

    def __init__(self, window_s: float = WINDOW_S, capacity: int = CAPACITY) -> None:
        self.window_s = window_s
        self.capacity = capacity
        self._values = array("d", bytes(8 * capacity))
        self._times = array("d", bytes(8 * capacity))
        self._next = 0
        self._count = 0
        self._version = 0
        self._cache_version = -1
        self._cache_until = -math.inf
        self._cache: tuple[float | None, float | None, int] = (None, None, 0)

    def __len__(self) -> int:
        return self._count

    def add(self, at: float, value: float) -> None:
        i = self._next
        self._values[i] = value
        self._times[i] = at
        self._next = (i + 1) % self.capacity
        if self._count < self.capacity:
            self._count += 1
        self._version += 1

    def seed(self, samples: list[tuple[float, float]]) -> None:
        """Older samples (the journal's, at start): they only fill free slots, oldest first, so
        they never push out a live sample recorded meanwhile."""
        free = self.capacity - self._count
        if free <= 0:
            return
        for at, value in sorted(samples)[-free:]:
            self.add(at, value)

    def percentiles(self, now: float) -> tuple[float | None, float | None, int]:
        """(p50, p95, samples) of the window at `now`; (None, None, 0) when it is empty."""
        if self._version == self._cache_version and now < self._cache_until:
            return self._cache
        since = now - self.window_s
        count = self._count
        times = self._times if count == self.capacity else self._times[:count]
        values = self._values if count == self.capacity else self._values[:count]
        oldest = min(times, default=math.inf)
        if oldest > since:  # the usual case: everything kept is recent (C loops only)
            inside = sorted(values)
        else:
            kept = [(t, v) for t, v in zip(times, values, strict=True) if t > since]
            inside = sorted(v for _, v in kept)
            oldest = min((t for t, _ in kept), default=math.inf)
        result: tuple[float | None, float | None, int] = (None, None, 0)
        if inside:
            result = (nearest_rank(inside, 50.0), nearest_rank(inside, 95.0), len(inside))
        until = oldest + self.window_s  # when the oldest sample used falls out (inf: none)
        self._cache, self._cache_version, self._cache_until = result, self._version, until
        return result


class BucketCounts:
    """A Prometheus histogram's state: a count per bucket, their sum, allocated once."""

    __slots__ = ("_counts", "bounds", "sum", "total")

    def __init__(self, bounds: tuple[float, ...] = BUCKETS_S) -> None:
        self.bounds = bounds
        self._counts = array("q", bytes(8 * (len(bounds) + 1)))  # the last one is +Inf
        self.total = 0
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self._counts[bisect_left(self.bounds, seconds)] += 1
        self.total += 1
        self.sum += seconds

    def cumulative(self) -> list[tuple[float, int]]:
        """`[(upper bound, count at or below it), ...]`, +Inf last, as Prometheus wants them."""
        out: list[tuple[float, int]] = []
        running = 0
        for bound, count in zip((*self.bounds, math.inf), self._counts, strict=True):
            running += count
            out.append((bound, running))
        return out


class MinuteSeries:
    """Requests, errors and tokens per wall-clock minute for the last `MINUTES` minutes: a ring
    of slots, each remembering which minute it holds, so a quiet stretch needs no clean-up."""

    __slots__ = ("_errors", "_minute", "_requests", "_tokens", "since")

    def __init__(self, since: float) -> None:
        self._minute = array("q", [-1] * MINUTES)
        self._requests = array("q", bytes(8 * MINUTES))
        self._errors = array("q", bytes(8 * MINUTES))
        self._tokens = array("q", bytes(8 * MINUTES))
        self.since = since  # from when the series knows the traffic (start, or the journal's)

    def add(self, at: float, requests: int = 0, errors: int = 0, tokens: int = 0) -> None:
        minute = int(at // 60)
        slot = minute % MINUTES
        held = self._minute[slot]
        if held > minute:
            return  # older than the ring reaches
        if held < minute:
            self._minute[slot] = minute
            self._requests[slot] = self._errors[slot] = self._tokens[slot] = 0
        self._requests[slot] += requests
        self._errors[slot] += errors
        self._tokens[slot] += tokens

    def series(self, now: float) -> dict[str, list[int]]:
        """Oldest first; the last entry is the current minute."""
        current = int(now // 60)
        out: dict[str, list[int]] = {"requests": [], "errors": [], "tokens": []}
        for minute in range(current - MINUTES + 1, current + 1):
            slot = minute % MINUTES
            fresh = self._minute[slot] == minute
            out["requests"].append(self._requests[slot] if fresh else 0)
            out["errors"].append(self._errors[slot] if fresh else 0)
            out["tokens"].append(self._tokens[slot] if fresh else 0)
        return out

    def minutes_covered(self, now: float) -> float:
        """How many minutes of the window the series has seen (at least one)."""
        return min(float(MINUTES), max(1.0, (now - self.since) / 60.0))


# -- in words (panels, the provider table, `claudex status`) -----------------------------------

def short_ms(ms: float) -> str:
    """0.4ms, 12ms, 0.8s, 2.1s, 95s: a latency in few characters."""
    if ms < 9.95:
        return f"{ms:.1f}ms"
    if ms < 999.5:
        return f"{ms:.0f}ms"
    seconds = ms / 1000.0
    return f"{seconds:.1f}s" if seconds < 100.0 else f"{seconds:.0f}s"


def _pair(latency: Mapping[str, Any]) -> tuple[str, float, float] | None:
    """Time to first content when streams were served, else the duration of whole answers."""
    for label, key in (("ttfc", "first_content"), ("took", "duration")):
        p50, p95 = latency.get(f"{key}_p50_ms"), latency.get(f"{key}_p95_ms")
        if isinstance(p50, int | float) and isinstance(p95, int | float):
            return label, float(p50), float(p95)
    return None


def latency_words(latency: Mapping[str, Any] | None) -> str:
    """`ttfc p50 0.8s · p95 2.1s` (streams), `took p50 1.2s · p95 3.4s` (whole answers), or
    "" while the window holds no sample."""
    pair = _pair(latency or {})
    if pair is None:
        return ""
    label, p50, p95 = pair
    return f"{label} p50 {short_ms(p50)} · p95 {short_ms(p95)}"


def latency_cell(latency: Mapping[str, Any] | None) -> str:
    """`ttfc 0.8s/2.1s` for a table cell, `–` without samples."""
    pair = _pair(latency or {})
    if pair is None:
        return "–"
    label, p50, p95 = pair
    return f"{label} {short_ms(p50)}/{short_ms(p95)}"
