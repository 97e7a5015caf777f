"""Engine events and the bus that fans them out to the console, the SSE admin route and logs.

Publishing never blocks and never fails: each subscriber has a bounded queue, and a subscriber
that falls behind loses its oldest events rather than slowing the proxy.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

EventKind = Literal["breaker", "request", "refresh", "reload", "escalation", "health", "cooldown",
                    "limit"]


@dataclass(frozen=True)
class Event:
    kind: EventKind
    message: str
    profile: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    time: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class EventBus:
    def __init__(self, queue_size: int = 1000) -> None:
        self._queue_size = queue_size
        self._subscribers: list[tuple[asyncio.Queue[Event], Collection[str] | None]] = []
        self.recent: list[Event] = []
        self._recent_max = 200

    @property
    def has_subscribers(self) -> bool:
        return bool(self._subscribers)

    def wants(self, kind: str) -> bool:
        """Whether any subscriber would receive an event of `kind` (skip building it if not)."""
        return any(kinds is None or kind in kinds for _, kinds in self._subscribers)

    def publish(self, event: Event) -> None:
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
