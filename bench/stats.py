"""Percentiles and medians over samples, and the median of repeated runs' results."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear between closest ranks."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50.0)


def summary_ms(samples_ns: Sequence[int]) -> dict[str, float]:
    """p50 / p95 / p99 / mean of nanosecond samples, in milliseconds."""
    ms = [s / 1e6 for s in samples_ns]
    return {
        "p50": round(percentile(ms, 50), 4),
        "p95": round(percentile(ms, 95), 4),
        "p99": round(percentile(ms, 99), 4),
        "mean": round(sum(ms) / len(ms), 4) if ms else math.nan,
        "n": len(ms),
    }


def merge_runs(runs: Sequence[Any]) -> Any:
    """Median of every numeric leaf across repeated runs of one section; other leaves as in the
    first run. Every run must have the same shape (the same keys)."""
    first = runs[0]
    if isinstance(first, dict):
        return {key: merge_runs([run[key] for run in runs if key in run]) for key in first}
    if isinstance(first, bool) or not isinstance(first, (int, float)):
        return first
    numbers = [float(run) for run in runs if isinstance(run, (int, float))]
    if any(math.isnan(n) for n in numbers):
        return math.nan
    value = median(numbers)
    return round(value, 4) if isinstance(first, float) else round(value)
