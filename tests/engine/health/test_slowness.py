"""Slow is yellow (issue 30), the judgement alone: readings and the wall time are passed in, so
every rule is driven by an injected clock — the factor, the minimum of answers, the floor, the
slow-moving baseline, recovery near it, and a verdict that lapses with no traffic to judge by."""

from __future__ import annotations

from claudex.engine.health.slowness import (
    BASELINE_TAU_S,
    FLOOR_MS,
    HOLD_S,
    Measure,
    Reading,
    Slowness,
    seconds_text,
)

FACTOR = 3.0
MIN = 20


def fc(p95: float | None, samples: int = 50) -> tuple[Reading, Reading]:
    """A first-content reading (and no whole answers)."""
    return ("first_content", p95, samples), ("duration", None, 0)


def run(s: Slowness, start: float, seconds: float, readings: tuple[Reading, Reading],
        every: float = 5.0) -> list[tuple[float, str]]:
    """Judge every `every` seconds from `start` for `seconds`; the changes, with their time."""
    changes: list[tuple[float, str]] = []
    t = start
    while t < start + seconds:
        change = s.judge(t, readings, factor=FACTOR, min_samples=MIN)
        if change is not None:
            changes.append((t, change))
        t += every
    return changes


def test_the_baseline_starts_at_the_first_reading_with_enough_answers() -> None:
    s = Slowness()
    assert s.judge(0.0, fc(900.0, samples=MIN - 1), factor=FACTOR, min_samples=MIN) is None
    assert "first_content" not in s.baselines
    assert s.judge(5.0, fc(900.0), factor=FACTOR, min_samples=MIN) is None
    assert s.baselines["first_content"].p95_ms == 900.0
    assert s.baselines_json() == {"first_content_p95_ms": 900.0, "duration_p95_ms": None}


def test_three_times_the_baseline_is_slow_with_the_words() -> None:
    s = Slowness()
    s.judge(0.0, fc(900.0), factor=FACTOR, min_samples=MIN)
    assert s.judge(5.0, fc(2600.0), factor=FACTOR, min_samples=MIN) is None  # under 3x
    assert s.judge(10.0, fc(8100.0), factor=FACTOR, min_samples=MIN) == "slow"
    assert s.verdict is not None
    assert s.verdict.words() == "slow: first content p95 8.1 s, usually 0.9 s"
    assert s.verdict.since == 10.0
    data = s.verdict.to_json()
    assert data["measure"] == "first_content" and data["samples"] == 50
    assert data["ratio"] == 9.0


def test_too_few_answers_cannot_flip_it() -> None:
    s = Slowness()
    s.judge(0.0, fc(900.0), factor=FACTOR, min_samples=MIN)
    assert s.judge(5.0, fc(9000.0, samples=5), factor=FACTOR, min_samples=MIN) is None
    assert s.verdict is None
    assert s.judge(10.0, fc(9000.0, samples=MIN), factor=FACTOR, min_samples=MIN) == "slow"


def test_under_the_floor_nothing_is_slow() -> None:
    s = Slowness()
    s.judge(0.0, fc(4.0), factor=FACTOR, min_samples=MIN)
    assert s.judge(5.0, fc(FLOOR_MS - 1), factor=FACTOR, min_samples=MIN) is None
    assert s.verdict is None
    assert s.judge(10.0, fc(FLOOR_MS), factor=FACTOR, min_samples=MIN) == "slow"


def test_a_slow_provider_does_not_become_its_own_normal_within_minutes() -> None:
    s = Slowness()
    s.judge(0.0, fc(900.0), factor=FACTOR, min_samples=MIN)
    changes = run(s, 5.0, 3600.0, fc(8100.0))  # an hour of slow answers
    assert changes == [(5.0, "slow")]
    assert s.verdict is not None  # still slow after an hour
    assert s.baselines["first_content"].p95_ms < 2100.0  # it learned 2.0 s of the 8.1
    # ... but after a working day of it, that is what it is now.
    changes = run(s, 3605.0, 12 * 3600.0, fc(8100.0), every=60.0)
    assert changes[-1][1] == "recovered"
    assert s.verdict is None


def test_the_baseline_follows_normal_changes_in_half_an_hour() -> None:
    s = Slowness()
    s.judge(0.0, fc(900.0), factor=FACTOR, min_samples=MIN)
    run(s, 5.0, BASELINE_TAU_S, fc(1300.0))  # under the recovery line: normal drift
    learned = s.baselines["first_content"].p95_ms
    # One time constant: about 63% of the way from 900 to 1300.
    assert 1130.0 < learned < 1175.0


def test_back_near_the_baseline_is_green_again() -> None:
    s = Slowness()
    s.judge(0.0, fc(900.0), factor=FACTOR, min_samples=MIN)
    assert s.judge(5.0, fc(8100.0), factor=FACTOR, min_samples=MIN) == "slow"
    # Halfway down is still out of line (recovery is under max(1.25, 3/2) x the baseline).
    assert s.judge(10.0, fc(2000.0), factor=FACTOR, min_samples=MIN) is None
    assert s.verdict is not None and s.verdict.p95_ms == 2000.0  # the latest words
    assert s.judge(15.0, fc(1000.0), factor=FACTOR, min_samples=MIN) == "recovered"
    assert s.verdict is None


def test_with_no_answers_to_judge_by_the_verdict_lapses() -> None:
    s = Slowness()
    s.judge(0.0, fc(900.0), factor=FACTOR, min_samples=MIN)
    assert s.judge(5.0, fc(8100.0), factor=FACTOR, min_samples=MIN) == "slow"
    quiet = fc(None, samples=0)
    assert s.judge(5.0 + HOLD_S - 5.0, quiet, factor=FACTOR, min_samples=MIN) is None
    assert s.verdict is not None
    assert s.judge(5.0 + HOLD_S, quiet, factor=FACTOR, min_samples=MIN) == "lapsed"
    assert s.verdict is None


def test_the_slowest_measure_names_the_verdict() -> None:
    s = Slowness()
    normal: tuple[Reading, Reading] = (("first_content", 900.0, 40), ("duration", 3000.0, 40))
    s.judge(0.0, normal, factor=FACTOR, min_samples=MIN)
    both: tuple[Reading, Reading] = (("first_content", 3000.0, 40), ("duration", 30000.0, 40))
    assert s.judge(5.0, both, factor=FACTOR, min_samples=MIN) == "slow"
    assert s.verdict is not None
    measure: Measure = s.verdict.measure
    assert measure == "duration"
    assert s.verdict.words() == "slow: whole answers p95 30.0 s, usually 3.0 s"


def test_factor_zero_turns_it_off_and_ends_a_verdict() -> None:
    s = Slowness()
    s.judge(0.0, fc(900.0), factor=FACTOR, min_samples=MIN)
    assert s.judge(5.0, fc(8100.0), factor=FACTOR, min_samples=MIN) == "slow"
    assert s.judge(10.0, fc(8100.0), factor=0.0, min_samples=MIN) == "recovered"
    assert s.judge(15.0, fc(8100.0), factor=0.0, min_samples=MIN) is None


def test_seconds_text() -> None:
    assert seconds_text(12.4) == "12 ms"
    assert seconds_text(450.0) == "0.45 s"
    assert seconds_text(900.0) == "0.9 s"
    assert seconds_text(8120.0) == "8.1 s"
    assert seconds_text(125_000.0) == "125 s"
