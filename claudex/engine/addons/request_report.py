"""What the engine does with a request once it is finished: count its tokens, feed the series of
every provider it tried, and tell it (a "request" event and a debug log line).

Kept apart from engine.py, which owns the runtimes and serves requests: this runs after the
answer went out (a stream's at its last chunk or when the client left), the same for every
request, and needs only the runtimes, the token totals, the event bus and the wall clock. Its
cost is on every request's path, so the event is built only when someone subscribes to requests
or debug logging is on; attempt messages (an upstream's words) are masked by SCRUBBER.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from claudex.engine.clock import WallClock
from claudex.engine.core.request import ForwardResult, ProxyRequest, shown_headers
from claudex.engine.core.runtime import ProviderRuntime
from claudex.engine.core.usage import TokenTotals, Usage
from claudex.engine.events import Event, EventBus
from claudex.engine.secrets import SCRUBBER

# The engine's logger: to whoever reads the log, the request lines come from the engine.
log = logging.getLogger("claudex.engine")


class RequestReports:
    """The bookkeeping for finished requests; `runtimes` is read at each one (a reload swaps
    the engine's dict)."""

    def __init__(self, events: EventBus, tokens: TokenTotals,
                 runtimes: Callable[[], Mapping[str, ProviderRuntime]], wall: WallClock) -> None:
        self._events = events
        self._tokens = tokens
        self._runtimes = runtimes
        self._wall = wall

    def finished(self, req: ProxyRequest, result: ForwardResult, ms: float,
                 usage: Usage | None) -> None:
        if usage is not None:
            self._tokens.add(result.provider, req.profile, usage)
        self._observe(req, result, usage)
        if self._events.wants("request") or log.isEnabledFor(logging.DEBUG):
            self._report_request(req, result, ms, usage)

    def _observe(self, req: ProxyRequest, result: ForwardResult, usage: Usage | None) -> None:
        """The per-minute series of every provider tried, and the latency the served answer
        took (engine/addons/latency.py: a few array writes, no allocation that grows)."""
        now = self._wall()
        runtimes = self._runtimes()
        for attempt in result.attempts:
            rt = runtimes.get(attempt.provider)
            if rt is not None:
                rt.stats.observe_attempt(now, attempt.outcome, attempt.message)
        served = runtimes.get(result.provider) if result.provider else None
        if served is None or not result.attempts:
            return
        if usage is not None:
            served.stats.minutes.add(now, tokens=usage.input_tokens + usage.output_tokens)
        last = result.attempts[-1]
        if last.provider != result.provider or last.outcome != "ok" or \
                req.endpoint == "count_tokens":
            return
        if req.stream:
            if last.first_content_ms is not None:
                served.stats.observe_first_content(now, last.first_content_ms)
        elif last.latency_ms is not None:
            served.stats.observe_duration(now, last.latency_ms)

    def _report_request(self, req: ProxyRequest, result: ForwardResult, ms: float,
                        usage: Usage | None = None) -> None:
        trail = " -> ".join(a.label() for a in result.attempts)
        model = req.model or "-"
        message = (f"{req.protocol} {model} -> {result.provider or 'none'} "
                   f"{result.status} [{trail}] {ms:.1f} ms")
        if result.dropped:
            message += f" dropped: {', '.join(result.dropped)}"
        if result.notes:
            message += f" ({'; '.join(result.notes)})"
        log.debug("request %s", message)
        if self._events.wants("request"):
            self._events.publish(Event("request", message, result.provider, {
                "protocol": req.protocol,
                "endpoint": req.endpoint,
                "model": req.model,
                "profile": req.profile,
                "provider": result.provider,
                "status": result.status,
                "stream": req.stream,
                "latency_ms": round(ms, 2),
                "attempts": [_scrubbed_attempt(a.to_json()) for a in result.attempts],
                "trail": trail,
                "dropped": list(result.dropped),
                "notes": list(result.notes),
                "usage": usage.to_json() if usage is not None else None,
                # The request detail (issue 15): which request, by which route, with which
                # headers (credentials masked), and how soon the served stream had content.
                "request_id": req.request_id,
                "route": req.route,
                "headers": shown_headers(req.headers),
                "first_content_ms": _first_content_ms(result),
            }))


def _first_content_ms(result: ForwardResult) -> float | None:
    """The served attempt's time to first content (streams), else None."""
    for attempt in reversed(result.attempts):
        if attempt.provider == result.provider and attempt.outcome == "ok":
            return attempt.first_content_ms
    return None


def _scrubbed_attempt(attempt: dict[str, Any]) -> dict[str, Any]:
    if attempt["message"]:
        attempt["message"] = SCRUBBER.text(attempt["message"])
    return attempt
