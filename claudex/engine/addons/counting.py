"""The counts status, /metrics and the console show (addons/stats.py's `ProviderStats` of every
provider and the engine's `GlobalStats`), kept up to date from the lifecycle hooks."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from claudex.engine.addons.stats import GlobalStats
from claudex.engine.core.policy import AFTER_COMMIT, BreakerEffect, HealthEffect, Rule
from claudex.engine.core.request import Attempt

if TYPE_CHECKING:
    from claudex.engine.core.exchange import Exchange
    from claudex.engine.core.hooks import Flow
    from claudex.engine.core.runtime import ProviderRuntime


class StatsAddon:
    """The counts of every provider (attempts sent, successes, breaker failures, rate limits,
    client errors, the last status, error and latency, what translation dropped) and of the
    engine (requests, in flight, failovers, all failed, requests per second)."""

    name = "stats"

    def __init__(self, totals: GlobalStats,
                 runtimes: Callable[[], Mapping[str, ProviderRuntime]],
                 wall: Callable[[], float], clock: Callable[[], float]) -> None:
        self.totals = totals
        self._runtimes = runtimes  # read at each request: a reload swaps the engine's dict
        self._wall = wall
        self._clock = clock

    def request_started(self, flow: Flow) -> None:
        totals = self.totals
        totals.in_flight += 1
        if flow.addressed is not None:  # (no such profile: not a request any provider saw)
            totals.requests += 1
            totals.meter.hit(self._clock())

    def attempt_sent(self, flow: Flow, rt: ProviderRuntime, exchange: Exchange) -> None:
        rt.stats.requests += 1

    def attempt_ended(self, flow: Flow, rt: ProviderRuntime, attempt: Attempt,
                      rule: Rule | None) -> None:
        if rule is None:  # a skip: never sent
            return
        stats = rt.stats
        if rule.counter is not None:
            setattr(stats, rule.counter, getattr(stats, rule.counter) + 1)
            stats.last_status = attempt.status
        effect = rule.breaker
        if effect is BreakerEffect.SUCCESS:
            stats.successes += 1
            stats.last_status = attempt.status or 200
            if attempt.latency_ms is not None:
                stats.record(attempt.latency_ms)
        elif effect is BreakerEffect.FAILURE:
            stats.failures += 1
            stats.last_error_at = self._wall()
            if rule is AFTER_COMMIT:
                stats.last_error = attempt.message
            else:
                stats.last_status = attempt.status
                stats.last_error = f"{attempt.outcome}: {attempt.message}".strip(": ")
        if rule.health is HealthEffect.CREDENTIALS:
            stats.last_error = attempt.message

    def request_ended(self, flow: Flow) -> None:
        totals = self.totals
        totals.in_flight -= 1
        if flow.failed_over:
            totals.failovers += 1
        elif flow.all_failed:
            totals.all_failed += 1
        result = flow.result
        if result is not None and result.dropped and result.provider is not None:
            rt = self._runtimes().get(result.provider)
            if rt is not None:
                rt.stats.count_dropped(result.dropped)
