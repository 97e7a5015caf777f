"""The soak's memory judge tells a leak from the growth that fills claudex's bounds (issue 38):
over synthetic samples, and over a real `claudex serve` made to leak 4 KB a request
(soak/child.py's SOAK_LEAK_BYTES: the leak is in the child, its code is not in claudex)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soak.child import LEAK_BYTES
from soak.memory_check import (
    SLOPE_LIMIT_MB,
    STEP_MB,
    WARMUP_ALLOWANCE_MB,
    RssSample,
    judge_memory,
    slope_per_10k,
)
from soak.run import SoakPlan, run_soak

MIB = 1024 * 1024


def run_of(rss_at: dict[str, object], *, per_second: int = 500, chaos_s: int = 30,
           warm: float = 76.0) -> list[RssSample]:
    """Samples of a soak: 4 s of warm-up, `chaos_s` of chaos, 2 s of cool-down, 4 a second,
    `per_second` requests a second; the chaos' RSS is `rss_at["chaos"](seconds into it)`."""
    chaos = rss_at["chaos"]
    assert callable(chaos)
    samples = []
    for tick in range((4 + chaos_s + 2) * 4):
        at = tick / 4
        phase = "warm-up" if at < 4 else "chaos" if at < 4 + chaos_s else "cool-down"
        rss = warm if phase == "warm-up" else chaos(min(at - 4, chaos_s))
        samples.append(RssSample(at, phase, int(at * per_second), rss))
    return samples


def test_the_slope_is_per_10000_requests() -> None:
    samples = [RssSample(i, "chaos", i * 1000, 80 + 0.5 * i) for i in range(10)]
    assert slope_per_10k(samples) == pytest.approx(5.0)
    assert slope_per_10k(samples[:1]) == 0.0


def test_warm_up_growth_and_one_step_are_not_a_leak() -> None:
    # The 30-second run as the soak sees it since issue 38's fix: RSS rises in the chaos' first
    # half, one step of 1.4 MB a third of the way into the judged half, a creep of ~0.3 MB.
    def chaos(t: float) -> float:
        return 77.0 + min(t, 5) * 0.1 + (1.4 if t > 20 else 0.0) + t * 0.01

    samples = run_of({"chaos": chaos})
    verdict = judge_memory(samples, 76.0, chaos(30))
    assert verdict.violations == []
    assert verdict.slope > SLOPE_LIMIT_MB and verdict.fitted_mb < STEP_MB  # a step, judged so
    assert verdict.judged_requests == pytest.approx(7_500, abs=150)


def test_a_long_runs_high_water_rising_in_steps_is_not_a_leak() -> None:
    # The 600-second run: the allocators' high water rises ~0.8 MB a minute or so, in steps,
    # 8 MB from warm to end in all (bench/NOTES.md).
    def chaos(t: float) -> float:
        return 77.0 + 0.8 * (t // 60) + (1.0 if t > 5 else 0.0)

    verdict = judge_memory(run_of({"chaos": chaos}, chaos_s=600), 76.0, chaos(600))
    assert verdict.violations == []
    assert verdict.fitted_mb > STEP_MB and verdict.slope < SLOPE_LIMIT_MB


def test_a_leak_of_600_bytes_a_request_is_caught_in_30_seconds() -> None:
    def chaos(t: float) -> float:
        return 77.0 + t * 500 * 600 / MIB

    verdict = judge_memory(run_of({"chaos": chaos}), 76.0, chaos(30))
    assert "RSS grows 5.72 MB per 10,000 requests" in verdict.violations[0]


def test_a_leak_of_2_mb_a_minute_is_caught_in_600_seconds_not_in_30() -> None:
    def chaos(t: float) -> float:
        return 77.0 + t * 2 / 60

    assert judge_memory(run_of({"chaos": chaos}), 76.0, chaos(30)).violations == []
    long = judge_memory(run_of({"chaos": chaos}, chaos_s=600), 76.0, chaos(600))
    assert any("RSS grows 0.67 MB per 10,000" in v for v in long.violations), long.violations


def test_growth_past_the_warm_up_allowance_is_a_violation_of_its_own() -> None:
    def chaos(t: float) -> float:
        return 77.0 + (WARMUP_ALLOWANCE_MB if t > 2 else 0.0)

    verdict = judge_memory(run_of({"chaos": chaos}), 76.0, chaos(30))
    [violation] = verdict.violations
    assert f"the warm-up allowance is {WARMUP_ALLOWANCE_MB} MB" in violation


def test_a_run_too_short_for_a_slope_is_not_judged_by_one() -> None:
    def chaos(t: float) -> float:
        return 77.0 + t

    verdict = judge_memory(run_of({"chaos": chaos}, per_second=50, chaos_s=10), 76.0, 77.5)
    assert verdict.slope == 0.0 and verdict.violations == []


@pytest.mark.timeout(240)
async def test_a_real_leak_of_4_kb_a_request_is_caught_in_the_30_second_soak(
        tmp_path: Path) -> None:
    """The CI soak's run (tests/harnesses/test_soak.py) with the child keeping 4 KB of every
    request it proxies: the judge says so, by the slope, and finds nothing else wrong."""
    report = await run_soak(SoakPlan(requests=None, seconds=30, seed=4), tmp_path,
                            instruments={LEAK_BYTES: "4096"})
    memory = report.memory
    summary = json.dumps({**report.to_json(), "rss_samples": "..."}, indent=1)
    assert memory is not None, summary
    # 4,096 bytes (and a list slot) a request: 39 MB per 10,000.
    assert 30 < memory.slope < 55, summary
    leak = [v for v in report.violations if v.startswith("RSS grows")]
    assert leak and "over the chaos phase's second half" in leak[0], summary
    others = [v for v in report.violations if not v.startswith("RSS gr")]
    assert others == [], summary
    print("memory:", json.dumps(memory.to_json()))  # shown by pytest -rP
