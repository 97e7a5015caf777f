"""A finished request, told: the "request" event (the console's request log, the SSE stream,
the history journal) and a debug log line, at `request_ended` (a stream's at its last chunk or
when the client left).

Its cost is on every request's path, so the event is built only when someone subscribes to
requests or debug logging is on; attempt messages (an upstream's words) are masked by SCRUBBER.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from claudex.engine.core.request import ForwardResult, ProxyRequest
from claudex.engine.core.usage import Usage
from claudex.engine.events import Event, EventBus
from claudex.engine.header_policy import shown_headers
from claudex.engine.secrets import SCRUBBER

if TYPE_CHECKING:
    from claudex.engine.core.hooks import Flow

# The engine's logger: to whoever reads the log, the request lines come from the engine.
log = logging.getLogger("claudex.engine")


class RequestEventsAddon:
    """The "request" event and the debug log line of every finished request."""

    name = "events"

    def __init__(self, events: EventBus) -> None:
        self._events = events

    def request_ended(self, flow: Flow) -> None:
        if flow.result is not None and (self._events.wants("request")
                                        or log.isEnabledFor(logging.DEBUG)):
            self._report_request(flow.req, flow.result, flow.ms, flow.usage, flow)

    def _report_request(self, req: ProxyRequest, result: ForwardResult, ms: float,
                        usage: Usage | None = None, flow: Flow | None = None) -> None:
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
                # Its price at API prices (engine/addons/cost.py, which runs before this one).
                "cost_usd": flow.cost_usd if flow is not None else None,
                "cost_basis": flow.cost_basis if flow is not None else None,
                # The request detail (issue 15): which request, by which route, with which
                # headers (engine/header_policy.py: values off its allow-list masked), and how
                # soon the served stream had content.
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
