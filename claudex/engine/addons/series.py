"""The per-minute series of every provider a request tried, and the latency its served answer
took (addons/latency.py's windows: a few array writes, no allocation that grows), at the end of
the request: what the panels' sparklines, `stats.minutes` and `stats.latency` show."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from claudex.engine.addons.stats import attempt_counts
from claudex.engine.clock import WallClock

if TYPE_CHECKING:
    from claudex.engine.core.hooks import Flow
    from claudex.engine.core.runtime import ProviderRuntime


class SeriesAddon:
    name = "series"

    def __init__(self, runtimes: Callable[[], Mapping[str, ProviderRuntime]],
                 wall: WallClock) -> None:
        self._runtimes = runtimes  # read at each request: a reload swaps the engine's dict
        self._wall = wall

    def request_ended(self, flow: Flow) -> None:
        result = flow.result
        if result is None:
            return
        now = self._wall()
        runtimes = self._runtimes()
        attempts = result.attempts
        served = runtimes.get(result.provider) if result.provider else None
        usage = flow.usage
        if len(attempts) == 1 and served is not None and usage is not None and \
                runtimes.get(attempts[0].provider) is served:
            # The usual request: its one attempt's count and the tokens it served go in one
            # write of the same minute (what observe_attempt and a second add would give).
            sent, error = attempt_counts(attempts[0].outcome, attempts[0].message)
            served.stats.minutes.add(now, sent, error, usage.total)  # cache reads and writes too
        else:
            for attempt in attempts:
                rt = runtimes.get(attempt.provider)
                if rt is not None:
                    rt.stats.observe_attempt(now, attempt.outcome, attempt.message)
            if served is None or not attempts:
                return
            if usage is not None:
                served.stats.minutes.add(now, tokens=usage.total)  # cache reads and writes too
        last = attempts[-1]
        req = flow.req
        if last.provider != result.provider or last.outcome != "ok" or \
                req.endpoint == "count_tokens":
            return
        if req.stream:
            if last.first_content_ms is not None:
                served.stats.observe_first_content(now, last.first_content_ms)
        elif last.latency_ms is not None:
            served.stats.observe_duration(now, last.latency_ms)
