"""Engine events and the bus that fans them out to the console, the SSE admin route and logs.

Publishing never blocks and never fails: each subscriber has a bounded queue, and a subscriber
that falls behind loses its oldest events rather than slowing the proxy.

Every published event gets an `id`, one more than the previous one's, and the bus keeps the last
`backlog_size` of them so a reader that lost its connection (the SSE route's `Last-Event-ID`)
can ask for everything after the last id it saw (`since`). Ids start from the wall clock in
microseconds, so an engine restarted on the same machine hands out larger ids than the one
before it: a console holding an old id gets the new engine's whole backlog, nothing twice.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

# "link": an attached console's own news (the engine stopped answering, answers again).
# "trip": an operator changed the terms of a trip already in force (no breaker transition).
# "window": a plan's quota window is spent until its reset (issue 22).
# "slow": a provider's real traffic turned slow against its baseline, or is no longer (issue 30).
# "reset": an operator reset a provider, and what that ended (breaker, cooldown, spent window).
EventKind = Literal["breaker", "request", "refresh", "reload", "escalation", "health", "cooldown",
                    "limit", "link", "trip", "window", "slow", "reset", "proxy"]


@dataclass(frozen=True)
class Event:
    kind: EventKind
    message: str
    profile: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    time: float = field(default_factory=time.time)
    id: int = 0  # given by the bus on publish; 0 for an event never published

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        """The event `to_json` described (as the SSE route and the journal carry it); unknown
        keys are ignored and a missing one takes its default, so a newer engine's event reads."""
        payload = data.get("data")
        return cls(kind=data.get("kind", "escalation"), message=str(data.get("message", "")),
                   profile=data.get("profile"),
                   data=payload if isinstance(payload, dict) else {},
                   time=float(data.get("time") or 0.0), id=int(data.get("id") or 0))


class Deferred(Protocol):
    """An event the bus numbers and keeps but that is built only when read (`event()`, once):
    a finished request's (engine/addons/request_report.py `RequestRecord`), which most of the
    time nobody reads right away. `instance`: set by a fleet's bus, added to the data."""

    kind: EventKind
    id: int
    instance: str | None

    def event(self) -> Event: ...


Kept = Event | Deferred


def built(item: Kept) -> Event:
    """The event `item` is (a deferred one built now, once)."""
    return item if isinstance(item, Event) else item.event()


def first_event_id(wall: float | None = None) -> int:
    """Where a new bus starts counting: above any id an earlier engine on this machine gave
    (unless it published a million events a second, or the clock went back)."""
    return int((time.time() if wall is None else wall) * 1_000_000)


class EventBus:
    def __init__(self, queue_size: int = 1000, *, backlog_size: int = 2000,
                 first_id: int | None = None) -> None:
        self._queue_size = queue_size
        self._subscribers: list[tuple[asyncio.Queue[Event], Collection[str] | None]] = []
        self.recent: list[Event] = []
        self._recent_max = 200
        self._backlog: deque[Kept] = deque(maxlen=backlog_size)
        self.last_id = (first_event_id() if first_id is None else first_id) - 1
        # Called with every published event, deferred ones as they are (the journal builds
        # its row from them); must not block or raise.
        self.sinks: list[Callable[[Kept], None]] = []

    @property
    def first_id(self) -> int:
        """The oldest id the backlog still holds (last_id + 1 when it is empty)."""
        return self._backlog[0].id if self._backlog else self.last_id + 1

    def since(self, last_seen: int, kinds: Collection[str] | None = None) -> list[Event]:
        """The backlog's events after id `last_seen`, oldest first (all of it for an id from
        before it, which includes an id from an earlier engine)."""
        backlog = self._backlog
        if not backlog or last_seen >= self.last_id:
            return []
        # Ids in the backlog are consecutive, so the first wanted one's place is arithmetic.
        start = max(0, last_seen + 1 - backlog[0].id)
        return [built(backlog[i]) for i in range(start, len(backlog))
                if kinds is None or backlog[i].kind in kinds]

    @property
    def has_subscribers(self) -> bool:
        return bool(self._subscribers)

    def wants(self, kind: str) -> bool:
        """Whether an event of `kind` would reach anyone (skip building it if not). The backlog
        keeps every kind, so a console that reconnects misses nothing: always, unless the bus
        was made without one."""
        if self._backlog.maxlen or self.sinks:
            return True
        return any(kinds is None or kind in kinds for _, kinds in self._subscribers)

    def publish(self, event: Event) -> None:
        self.last_id += 1
        # Built directly: dataclasses.replace re-reads the fields on every call.
        event = Event(event.kind, event.message, event.profile, event.data, event.time,
                      self.last_id)
        self._backlog.append(event)
        for sink in self.sinks:
            sink(event)
        if event.kind != "request":
            self.recent.append(event)
            if len(self.recent) > self._recent_max:
                del self.recent[: len(self.recent) - self._recent_max]
        for q, kinds in self._subscribers:
            if kinds is not None and event.kind not in kinds:
                continue
            if q.full():
                try:
                    q.get_nowait()
                except asyncio.QueueEmpty:  # pragma: no cover - raced with the consumer
                    pass
            q.put_nowait(event)

    def publish_deferred(self, item: Deferred) -> None:
        """Number `item` and keep it as `publish` keeps an event, building its event only for
        a subscriber that wants its kind now (a backlog reader builds it when it reads)."""
        self.last_id += 1
        item.id = self.last_id
        if self._stamps:
            self._stamp(item)
        self._backlog.append(item)
        for sink in self.sinks:
            sink(item)
        kind, event = item.kind, None
        for q, kinds in self._subscribers:
            if kinds is not None and kind not in kinds:
                continue
            if event is None:
                event = item.event()
            if q.full():
                try:
                    q.get_nowait()
                except asyncio.QueueEmpty:  # pragma: no cover - raced with the consumer
                    pass
            q.put_nowait(event)

    # Whether `_stamp` adds anything (a fleet's bus: True); the plain bus skips the call.
    _stamps = False

    def _stamp(self, item: Deferred) -> None:
        """What this bus adds to a deferred event before it is kept (a fleet's: its name)."""

    @contextmanager
    def subscribe(self, kinds: Collection[str] | None = None) -> Iterator[asyncio.Queue[Event]]:
        """A queue of every event from now on, or only those whose kind is in `kinds`.

        Filtering here rather than in the reader matters under load: a subscriber that wants only
        breaker transitions must not have them pushed out of its queue by request events."""
        q: asyncio.Queue[Event] = asyncio.Queue(self._queue_size)
        entry = (q, None if kinds is None else frozenset(kinds))
        self._subscribers.append(entry)
        try:
            yield q
        finally:
            self._subscribers.remove(entry)
