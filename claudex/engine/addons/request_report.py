"""A finished request, told: the "request" event (the console's request log, the SSE stream,
the history journal) and a debug log line, at `request_ended` (a stream's at its last chunk or
when the client left).

Its cost is on every request's path, and most requests are told to nobody right away: a headless
`claudex serve` has no console reading its events, and the journal wants a row, not an event. So the
addon keeps a `RequestRecord` — the few references its event and its journal row are made from — and
hands it to the event bus as a deferred event: the bus numbers it and keeps it in its backlog; the
event itself (its sentence, its data with every attempt as JSON and the client's headers through
engine/masking/header_policy.py) is built only when a reader asks for it (a live subscriber at once;
the SSE route's `Last-Event-ID` catch-up when it reads the backlog), and the journal builds its row
from the record in its writer thread. Attempt messages (an upstream's words) are masked by SCRUBBER
when the record is made.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from claudex.engine.core.request import Attempt, ForwardResult, ProxyRequest
from claudex.engine.core.usage import Usage
from claudex.engine.events import Event, EventBus, EventKind
from claudex.engine.history.rows import outcome_of_attempts
from claudex.engine.masking.header_policy import shown_headers
from claudex.engine.masking.secrets import SCRUBBER
from claudex.providers.windows import Described, described_windows

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
        result = flow.result
        if result is None:
            return
        record = RequestRecord(flow.req, result, flow.ms, flow.usage, time.time())
        # Its price at API prices (engine/addons/cost.py, which runs before this one).
        record.cost_usd, record.cost_basis = flow.cost_usd, flow.cost_basis
        data = flow.data
        if data is not None and (seen := data.get("windows")) is not None:
            record.windows = seen.get("windows")  # the quota windows (engine/addons/windows.py)
            record.plan = seen.get("plan", True)  # (a stream's codex.rate_limits: a plan's)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("request %s", record.sentence())
        if self._events.wants("request"):
            self._events.publish_deferred(record)


# The client header sets records share (see RequestRecord), each keyed by its items; emptied
# when full (sessions' own ids make more sets than a client has kinds of request).
_HEADER_SETS: dict[tuple[tuple[str, str], ...], Mapping[str, str]] = {}
_HEADER_SETS_MAX: Final = 256


class RequestRecord:
    """One finished request as the bus and the journal keep it (a deferred event: `event()`
    builds the event once, when someone reads it). Holds no body: the request's few fields,
    its attempts (messages scrubbed), the result's status and what translation dropped, the
    usage, and the client's headers as received (shown through the header policy when read)."""

    __slots__ = (
        "_attempts",
        "_event",
        "cost_basis",
        "cost_usd",
        "dropped",
        "endpoint",
        "headers",
        "id",
        "instance",
        "model",
        "ms",
        "notes",
        "plan",
        "profile",
        "protocol",
        "provider",
        "request_id",
        "route",
        "routed",
        "status",
        "stream",
        "time",
        "usage",
        "windows",
    )

    kind: EventKind = "request"

    def __init__(self, req: ProxyRequest, result: ForwardResult, ms: float,
                 usage: Usage | None, now: float) -> None:
        self.id = 0  # given by the bus
        self.instance: str | None = None  # a fleet's bus names its instance
        self.cost_usd: float | None = None  # set by the addon from the flow (addons/cost.py)
        self.cost_basis: str | None = None
        self.time = now  # when the request ended, as an event's time is when it is made
        self.protocol = req.protocol
        self.endpoint = req.endpoint
        # The model's name, one string however many records name it (the body's own copy
        # goes with the body; the exchange interns the one its attempt holds).
        model = req.model
        self.model = None if model is None else sys.intern(model)
        self.profile = req.profile
        self.stream = req.stream
        self.request_id = req.request_id
        # The path the client used: one of a handful, kept once however many records hold it.
        self.route = sys.intern(req.route)
        # The route that chose the profile ("long_context -> gemini"), when one did.
        self.routed: str | None = None if req.routed is None else req.routed.label
        # One mapping per distinct set of client headers: a client sends the same few on every
        # request, and the backlog's 2,000 records held 2,000 equal copies (~0.4 KB each, the
        # strings fresh per request). Inline: this runs on every request.
        headers = req.headers
        key = tuple(headers.items())
        shared = _HEADER_SETS.get(key)
        if shared is None:
            if len(_HEADER_SETS) >= _HEADER_SETS_MAX:
                _HEADER_SETS.clear()
            shared = _HEADER_SETS[key] = headers
        self.headers: Mapping[str, str] = shared
        self.provider = result.provider
        self.status = result.status
        self.dropped = result.dropped
        self.notes = result.notes
        attempts = result.attempts
        # The usual request's one attempt is held as it is, not in a list of its own (72
        # bytes a record, ~0.14 MB over the backlog's 2,000): `attempts` makes the list.
        self._attempts: Attempt | list[Attempt] = attempts[0] if len(attempts) == 1 and \
            not attempts[0].message else [_scrubbed(a) if a.message else a for a in attempts]
        self.ms = ms
        self.usage = usage
        # The plan's quota windows the last answer described: (provider, windows), or None.
        self.windows: tuple[str, Described] | None = None
        # Whether they include a plan's (a subscription's) window: the journal keeps only those.
        self.plan = False
        self._event: Event | None = None

    @property
    def attempts(self) -> list[Attempt]:
        attempts = self._attempts
        return attempts if isinstance(attempts, list) else [attempts]

    def trail(self) -> str:
        attempts = self._attempts
        if not isinstance(attempts, list):  # the usual request: its journal row needs no join
            return attempts.label()
        return " -> ".join(a.label() for a in attempts)

    def outcome(self) -> str:
        """`ok`, `failover` or `failed` (a committed stream that broke included)."""
        return outcome_of_attempts(self.status, self.attempts)

    def sentence(self) -> str:
        """The request log's line: `anthropic claude-x -> grok 200 [deepseek 503 -> grok 200]
        12.3 ms`, with the route that chose the profile, what was dropped and changed. A
        committed stream that broke answered 200, but the client got an error event: `200
        stream failed`."""
        broke = " stream failed" if self.status < 400 and self.outcome() == "failed" else ""
        message = (f"{self.protocol} {self.model or '-'} -> {self.provider or 'none'} "
                   f"{self.status}{broke} [{self.trail()}] {self.ms:.1f} ms")
        if self.routed is not None:
            message += f" route {self.routed}"
        if self.dropped:
            message += f" dropped: {', '.join(self.dropped)}"
        if self.notes:
            message += f" ({'; '.join(self.notes)})"
        return message

    def event_data(self) -> dict[str, Any]:
        data = {
            "protocol": self.protocol,
            "endpoint": self.endpoint,
            "model": self.model,
            "profile": self.profile,
            "provider": self.provider,
            "status": self.status,
            "outcome": self.outcome(),
            "routed": self.routed,
            "stream": self.stream,
            "latency_ms": round(self.ms, 2),
            "attempts": [a.to_json() for a in self.attempts],
            "trail": self.trail(),
            "dropped": list(self.dropped),
            "notes": list(self.notes),
            "usage": self.usage.to_json() if self.usage is not None else None,
            # Its price at API prices (engine/addons/cost.py).
            "cost_usd": self.cost_usd,
            "cost_basis": self.cost_basis,
            # The request detail (issue 15): which request, by which route, with which
            # headers (engine/masking/header_policy.py: values off its allow-list masked), and how
            # soon the served stream had content.
            "request_id": self.request_id,
            "route": self.route,
            "headers": shown_headers(self.headers),
            "first_content_ms": self.first_content_ms(),
            "windows": windows_json(self.windows),
        }
        if self.instance is not None:
            data["instance"] = self.instance
        return data

    def first_content_ms(self) -> float | None:
        """The served attempt's time to first content (streams), else None."""
        for attempt in reversed(self.attempts):
            if attempt.provider == self.provider and attempt.outcome == "ok":
                return attempt.first_content_ms
        return None

    def event(self) -> Event:
        event = self._event
        if event is None:
            event = self._event = Event("request", self.sentence(), self.provider,
                                        self.event_data(), self.time, self.id)
        return event


def windows_json(seen: tuple[str, Described] | None) -> dict[str, Any] | None:
    """The windows a request's last answer described, as the event and the journal keep
    them: `{"provider": "claude", "windows": [{"name": "5h", "used": 0.42, ...}, ...]}`;
    None when it described none."""
    if seen is None:
        return None
    provider, described = seen
    windows = described_windows(described)
    if not windows:
        return None
    return {"provider": provider, "windows": [w.to_json() for w in windows]}


def _scrubbed(attempt: Attempt) -> Attempt:
    message = SCRUBBER.text(attempt.message)
    return attempt if message == attempt.message else dataclasses.replace(attempt,
                                                                          message=message)
