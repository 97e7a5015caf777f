"""Slow is yellow: a provider whose real traffic is slower than usual (issue 30).

Each provider's latency is judged against its own past, as Envoy's outlier detection judges a
host by what live traffic sees of it rather than by a probe: the p95 of the last five minutes'
answers (the same windows the panels show, engine/addons/latency.py) against a *baseline*, a
slow-moving average of that p95. Two measures, each with its own baseline: time to first content
of streams (what Claude Code feels) and the duration of whole answers.

- **Slow** when a measure's recent p95 is at least `slow_factor` (3) times its baseline, over
  at least `slow_min_samples` (20) answers, and at least `FLOOR_MS` (a local server going from
  4 ms to 15 ms is not slow to anyone).
- **Green again** when every measure with enough answers is back under half that factor times
  its baseline (at least 1.25x): near the baseline, with room so that a provider hovering at
  the threshold does not flicker.
- **Lapsed** when the verdict has had no window with enough answers for `HOLD_S`: nothing says
  it is still slow (new conversations may have been sent elsewhere), so it is judged afresh.
- **The baseline** follows the recent p95 with a time constant of `BASELINE_TAU_S` (30
  minutes), and of `SLOW_TAU_S` (6 hours) while the reading is abnormal (over the recovery
  line): a provider that turns slow cannot become its own normal within minutes, but one that
  stays slow for a working day does. It starts at the first reading with enough answers.

Everything here is pure: the caller passes the readings and the wall time, and the verdict only
changes in `Slowness.judge`, which the engine's watch (engine/health/slow_watch.py) calls every
`EVAL_S` seconds, off the request path. A request pays nothing for any of this beyond the
latency sample it already records.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

Measure = Literal["first_content", "duration"]
MEASURES: Final[tuple[Measure, ...]] = ("first_content", "duration")
MEASURE_WORDS: Final[dict[Measure, str]] = {"first_content": "first content",
                                            "duration": "whole answers"}

EVAL_S: Final = 5.0              # how often the watch judges every provider
FLOOR_MS: Final = 500.0          # a recent p95 under this is never slow
BASELINE_TAU_S: Final = 1800.0   # the baseline's time constant
SLOW_TAU_S: Final = 6 * 3600.0   # ... while the reading is abnormal
HOLD_S: Final = 300.0            # a verdict with no fresh window lapses after this
_MAX_STEP_S: Final = 60.0        # one judgement learns at most this much time (a paused loop)

Change = Literal["slow", "recovered", "lapsed"]


def seconds_text(ms: float) -> str:
    """`8.1 s`, `0.9 s`, `0.45 s`, `12 ms`: a p95 in the words of the verdict."""
    if ms < 100.0:
        return f"{ms:.0f} ms"
    seconds = ms / 1000.0
    if seconds < 1.0:
        return f"{seconds:.2f}".rstrip("0") + " s"
    return f"{seconds:.1f} s" if seconds < 100.0 else f"{seconds:.0f} s"


def short_words(verdict: Mapping[str, Any]) -> str | None:
    """`slow: 8.1 s, usually 0.9 s`: a verdict's JSON (`SlowVerdict.to_json`) in the ~30
    columns a console panel has for its reason (which measure, and its p50, is on the panel's
    latency line); None for JSON that is not a verdict (an attached console reading another
    version)."""
    measure, p95, usual = verdict.get("measure"), verdict.get("p95_ms"), verdict.get("baseline_ms")
    if measure not in MEASURES or not isinstance(p95, int | float) \
            or not isinstance(usual, int | float):
        return None
    return f"slow: {seconds_text(p95)}, usually {seconds_text(usual)}"


def recovery_factor(factor: float) -> float:
    """Under this many times the baseline a measure counts as near it again."""
    return max(1.25, factor / 2.0)


@dataclass
class Baseline:
    p95_ms: float
    learned_at: float  # wall time of the last reading it learned from


@dataclass(frozen=True)
class SlowVerdict:
    """Why a provider is slow: its slowest measure, as last confirmed."""

    measure: Measure
    p95_ms: float
    baseline_ms: float
    samples: int
    since: float  # wall time it turned slow

    @property
    def ratio(self) -> float:
        return self.p95_ms / self.baseline_ms if self.baseline_ms > 0 else math.inf

    def words(self) -> str:
        """`slow: first content p95 8.1 s, usually 0.9 s`."""
        return (f"slow: {MEASURE_WORDS[self.measure]} p95 {seconds_text(self.p95_ms)}, "
                f"usually {seconds_text(self.baseline_ms)}")

    def to_json(self) -> dict[str, Any]:
        """Status JSON's `health.slow`; `short_words` says it again in a panel's width."""
        return {"measure": self.measure, "p95_ms": round(self.p95_ms, 1),
                "baseline_ms": round(self.baseline_ms, 1), "ratio": round(self.ratio, 2),
                "samples": self.samples, "since": round(self.since, 3)}


Reading = tuple[Measure, float | None, int]
"""(measure, the recent window's p95 in ms or None, how many answers the window holds)."""


@dataclass
class Slowness:
    """One provider's baselines and verdict."""

    baselines: dict[Measure, Baseline] = field(default_factory=dict)
    verdict: SlowVerdict | None = None
    confirmed_at: float = 0.0  # wall time the verdict last had a fresh window behind it
    judged_at: float | None = None

    def judge(self, now: float, readings: Iterable[Reading], *, factor: float,
              min_samples: int) -> Change | None:
        """Judge the readings at wall time `now`; what changed, if anything. `factor` 0 turns
        judging off (and ends a verdict)."""
        step = 0.0 if self.judged_at is None else min(_MAX_STEP_S, max(0.0, now - self.judged_at))
        self.judged_at = now
        if factor <= 0:
            if self.verdict is not None:
                self.verdict = None
                return "recovered"
            return None
        worst: SlowVerdict | None = None
        # The verdict's own measure, as this window reads it: None (too few answers), or
        # (p95, its baseline, answers, whether it is still out of line).
        own: tuple[float, float, int, bool] | None = None
        verdict = self.verdict
        for measure, p95, samples in readings:
            if p95 is None or samples < min_samples:
                continue
            base = self.baselines.get(measure)
            if base is None:  # the first reading with enough answers is where it starts
                self.baselines[measure] = Baseline(p95, now)
                continue
            usual = base.p95_ms
            if p95 >= factor * usual and p95 >= FLOOR_MS and (
                    worst is None or p95 / usual > worst.ratio):
                worst = SlowVerdict(measure, p95, usual, samples, now)
            out_of_line = p95 >= recovery_factor(factor) * usual and p95 >= FLOOR_MS
            if verdict is not None and verdict.measure == measure:
                own = (p95, usual, samples, out_of_line)
            tau = SLOW_TAU_S if out_of_line else BASELINE_TAU_S
            base.p95_ms = usual + (p95 - usual) * (1.0 - math.exp(-step / tau))
            base.learned_at = now
        return self._settle(now, worst, own)

    def _settle(self, now: float, worst: SlowVerdict | None,
                own: tuple[float, float, int, bool] | None) -> Change | None:
        verdict = self.verdict
        if verdict is None:
            if worst is None:
                return None
            self.verdict, self.confirmed_at = worst, now
            return "slow"
        if worst is not None:  # still slow (or slow in the other measure): the latest words
            self.verdict = SlowVerdict(worst.measure, worst.p95_ms, worst.baseline_ms,
                                       worst.samples, verdict.since)
            self.confirmed_at = now
            return None
        if own is not None:
            p95, usual, samples, out_of_line = own
            if not out_of_line:
                self.verdict = None
                return "recovered"
            self.verdict = SlowVerdict(verdict.measure, p95, usual, samples, verdict.since)
            self.confirmed_at = now
            return None
        if now - self.confirmed_at >= HOLD_S:  # nothing fresh says it still is
            self.verdict = None
            return "lapsed"
        return None

    def baselines_json(self) -> dict[str, float | None]:
        return {f"{m}_p95_ms": (round(b.p95_ms, 1) if (b := self.baselines.get(m)) else None)
                for m in MEASURES}
