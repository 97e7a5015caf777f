"""The soak's memory judge: a leak is memory that keeps growing with the traffic once claudex's
bounded structures are full, not the growth that fills them, nor the allocators' high water.

The soak samples the `claudex serve` child's RSS through the run (`RssSample`, every
`SAMPLE_EVERY_S`, with the requests finished by then). Two judges, each with its own limit
(what the figures are and where they come from: bench/NOTES.md, "What the soak's memory is"):

    the slope  the least-squares slope of RSS against requests finished, over the second half
               of the chaos phase (the first half reaches the paths the warm-up did not), in MB
               per 10,000 requests. A leak when it is over `SLOPE_LIMIT_MB` *and* the growth it
               fits over that half is over `STEP_MB`. Once the bounds are full, Python's live
               memory stays flat (pymalloc's blocks in use: +0.2 MB over 391,000 requests) but
               RSS rises in steps: pymalloc and glibc keep the high water of the chaos' peaks
               (64 requests in flight through a spell of timeouts, the garbage of broken
               connections between the collector's passes), a step now and then, rarer as the
               run goes on. In the 30-second run that is one step of ~1.5 MB, or none, in the
               judged half; over a 600-second run's second half ~3.5-4 MB in steps, a slope of
               0.20-0.22. What the judge catches: a leak of ~400-650 bytes a request in the
               30-second run (3 MB over the 4,500-7,900 requests judged; 4 KB a request is a
               slope of ~39), of ~42 bytes a request in a 600-second one (~170,000 judged; 2 MB
               a minute at the soak's ~670 requests a second is a slope of 0.5).
    warm-up    RSS at the end (idle, after the cool-down) minus RSS after the warm-up (idle):
               at most `WARMUP_ALLOWANCE_MB`. The warm-up fills the bounds the soak's traffic
               reaches (the event backlog's 2,000 records, the latency windows); after it, the
               conversations `avoid_slow` started elsewhere (1.5 MB at their 10,000) and the
               allocators' high water above: +2.5-2.9 MB after 30 s, +7.0-8.7 MB after 600 s.

The warm-up also reaches the peak of the proxied profile's TLS tunnels (soak/run.py
`_proxied_bursts`: every client at it at once, twice, the proxy dropping its tunnels between):
each TLS connection reads into a 256 KiB buffer glibc serves from its heap, so the heap's high
water follows the most tunnels open at once, and the chaos' reconnect bursts after the proxy
drops them reached twice the mixed warm-up's. Without that step a 60-s run's judged half fitted
3.2-4.1 MB of free heap (bench/NOTES.md, "The soak's proxied memory"); the limits did not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

SAMPLE_EVERY_S: Final = 0.25
SLOPE_LIMIT_MB: Final = 0.4
"""MB per 10,000 requests (42 bytes a request) over the chaos phase's second half."""
STEP_MB: Final = 3.0
"""The growth the slope must fit over the judged half before it is a leak (a step of S MB in
the middle of the half fits as ~1.5 S)."""
WARMUP_ALLOWANCE_MB: Final = 12.0
"""End minus warm, both idle: the 600-second run's growth with a third to spare."""
SLOPE_MIN_REQUESTS: Final = 2_000
"""Fewer requests in the judged half than this: too short a run for a slope (not judged)."""


@dataclass(frozen=True)
class RssSample:
    at: float
    """Seconds since the soak started."""
    phase: str
    requests: int
    """Requests finished so far, every phase."""
    rss_mb: float


def slope_per_10k(samples: Sequence[RssSample]) -> float:
    """Least-squares slope of RSS (MB) against requests finished, per 10,000 requests."""
    n = len(samples)
    if n < 2:
        return 0.0
    mean_x = sum(s.requests for s in samples) / n
    mean_y = sum(s.rss_mb for s in samples) / n
    sxx = sum((s.requests - mean_x) ** 2 for s in samples)
    if sxx == 0:
        return 0.0
    sxy = sum((s.requests - mean_x) * (s.rss_mb - mean_y) for s in samples)
    return sxy / sxx * 10_000


def judged_half(samples: Sequence[RssSample], phase: str = "chaos") -> list[RssSample]:
    """The samples of the second half (by time) of `phase`."""
    during = [s for s in samples if s.phase == phase]
    if not during:
        return []
    middle = (during[0].at + during[-1].at) / 2
    return [s for s in during if s.at >= middle]


@dataclass(frozen=True)
class MemoryVerdict:
    warm_mb: float
    end_mb: float
    slope: float
    """MB per 10,000 requests over the judged half; 0.0 when it was too short to judge."""
    judged_requests: int
    """Requests finished over the judged half."""
    peak_mb: float
    violations: list[str] = field(default_factory=list)

    @property
    def growth_mb(self) -> float:
        return self.end_mb - self.warm_mb

    @property
    def fitted_mb(self) -> float:
        """The growth the slope fits over the judged half."""
        return self.slope * self.judged_requests / 10_000

    def to_json(self) -> dict[str, Any]:
        return {"warm_mb": round(self.warm_mb, 2), "end_mb": round(self.end_mb, 2),
                "growth_mb": round(self.growth_mb, 2), "peak_mb": round(self.peak_mb, 2),
                "slope_mb_per_10k": round(self.slope, 3),
                "slope_over_requests": self.judged_requests,
                "fitted_mb": round(self.fitted_mb, 2)}


def judge_memory(samples: Sequence[RssSample], warm_mb: float, end_mb: float, *,
                 slope_limit: float = SLOPE_LIMIT_MB, step_mb: float = STEP_MB,
                 allowance_mb: float = WARMUP_ALLOWANCE_MB,
                 min_requests: int = SLOPE_MIN_REQUESTS) -> MemoryVerdict:
    half = judged_half(samples)
    spanned = half[-1].requests - half[0].requests if half else 0
    slope = slope_per_10k(half) if spanned >= min_requests else 0.0
    fitted = slope * spanned / 10_000
    violations = []
    if slope > slope_limit and fitted > step_mb:
        violations.append(
            f"RSS grows {slope:.2f} MB per 10,000 requests over the chaos phase's second half "
            f"({fitted:.1f} MB over {spanned:,} requests; a leak is over {slope_limit} MB per "
            f"10,000 and {step_mb} MB)")
    growth = end_mb - warm_mb
    if growth > allowance_mb:
        violations.append(f"RSS grew {growth:.1f} MB from warm to end ({warm_mb:.1f} → "
                          f"{end_mb:.1f} MB; the warm-up allowance is {allowance_mb} MB)")
    peak = max((s.rss_mb for s in samples), default=end_mb)
    return MemoryVerdict(warm_mb, end_mb, slope, spanned, peak, violations)
