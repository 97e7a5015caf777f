"""The engine's watch over slowness (engine/health/slowness.py): every `EVAL_S` seconds, each
provider's recent latency windows are judged against its baselines, off the request path; a verdict
that changes is said once (an event, a log line), and `names` — the providers slow now — is what the
forwarding core reads when `[health] avoid_slow` is on."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from claudex.config.model import HealthSettings
from claudex.engine.clock import Sleep, WallClock
from claudex.engine.events import Event
from claudex.engine.health.slowness import (
    EVAL_S,
    MEASURE_WORDS,
    Change,
    Measure,
    Reading,
    SlowVerdict,
    seconds_text,
)

if TYPE_CHECKING:
    from claudex.engine.core.runtime import ProviderRuntime

log = logging.getLogger("claudex.health")


def readings(rt: ProviderRuntime, now: float) -> tuple[Reading, Reading]:
    """The two windows a provider is judged by, at wall time `now`."""
    stats = rt.stats
    _, fc95, fc_n = stats.first_content.percentiles(now)
    _, d95, d_n = stats.duration.percentiles(now)
    return ("first_content", fc95, fc_n), ("duration", d95, d_n)


class SlowWatch:
    def __init__(self, runtimes: Callable[[], Mapping[str, ProviderRuntime]],
                 settings: Callable[[], HealthSettings], wall: WallClock,
                 publish: Callable[[Event], None]) -> None:
        self._runtimes = runtimes  # read at each round: a reload swaps the engine's dict
        self._settings = settings
        self._wall = wall
        self._publish = publish
        self.names: frozenset[str] = frozenset()  # slow now
        # What the forwarding core and the pools steer new conversations away from: the slow
        # ones when `[health] avoid_slow` is on, else nothing (one empty-set test per request).
        self.avoided: frozenset[str] = frozenset()
        self._failed = False

    def judge_all(self, now: float | None = None) -> None:
        """Judge every provider at wall time `now` (default: the engine's wall clock)."""
        now = self._wall() if now is None else now
        settings = self._settings()
        slow: set[str] = set()
        for name, rt in self._runtimes().items():
            before = rt.slowness.verdict
            seen = readings(rt, now)
            change = rt.slowness.judge(now, seen, factor=settings.slow_factor,
                                       min_samples=settings.slow_min_samples)
            if change is not None:
                self._tell(rt, change, before, seen)
            if rt.slowness.verdict is not None:
                slow.add(name)
        self.names = frozenset(slow)
        self.avoided = self.names if settings.avoid_slow else frozenset()

    def _tell(self, rt: ProviderRuntime, change: Change, before: SlowVerdict | None,
              seen: tuple[Reading, Reading]) -> None:
        verdict = rt.slowness.verdict
        if change == "slow" and verdict is not None:
            words = f"{rt.name}: {verdict.words()}"
            data = {"slow": True, **verdict.to_json()}
        else:
            measure: Measure = before.measure if before is not None else "first_content"
            p95 = next((p for m, p, _ in seen if m == measure), None)
            base = rt.slowness.baselines.get(measure)
            if change == "recovered" and p95 is not None and base is not None:
                words = (f"{rt.name}: no longer slow ({MEASURE_WORDS[measure]} p95 "
                         f"{seconds_text(p95)}, usually {seconds_text(base.p95_ms)})")
            elif change == "recovered":  # judging was turned off
                words = f"{rt.name}: no longer judged slow (slow_factor = 0)"
            else:
                words = (f"{rt.name}: no longer judged slow (too few recent answers to "
                         f"judge by)")
            data = {"slow": False, "measure": measure, "change": change}
        self._publish(Event("slow", words, rt.name, data))
        log.info("%s", words)

    async def run_forever(self, sleep: Sleep, every: float = EVAL_S) -> None:
        while True:
            await sleep(every)
            try:
                self.judge_all()
            except Exception:  # a bug must not end the watch: said once, judged again next time
                if not self._failed:
                    self._failed = True
                    log.exception("judging slowness failed (told once; the watch goes on)")
