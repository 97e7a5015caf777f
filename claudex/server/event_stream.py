"""The admin API's event stream (`GET /_claudex/events`): engine events as Server-Sent Events.

A stream stays open for as long as its reader (an attached console) does, so a server that is
stopping must end them itself: uvicorn's graceful shutdown waits for every response to finish,
and an event stream never would, so a `claudex serve` with a console attached took its whole
graceful window to exit and then cancelled the stream with a traceback. `EventStreams.close`
ends every open stream at once (the reader sees the response end and reconnects to whatever
serves next); the server calls it when its shutdown begins.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Collection

from claudex.engine.events import Event, EventBus

KEEP_ALIVE_S = 15.0

_CLOSED = Event(kind="link", message="server stopping")  # never sent: it ends the stream


def frame(event: Event) -> bytes:
    payload = json.dumps(event.to_json())
    return f"id: {event.id}\nevent: {event.kind}\ndata: {payload}\n\n".encode()


class EventStreams:
    """Every open event stream of one app, so that a stopping server can end them."""

    def __init__(self) -> None:
        self._queues: set[asyncio.Queue[Event]] = set()
        self.closed = False

    def close(self) -> None:
        """End every open stream (and refuse new ones). Safe to call more than once."""
        self.closed = True
        for queue in self._queues:
            if queue.full():  # the stream is behind: its oldest event goes, as the bus does
                queue.get_nowait()
            queue.put_nowait(_CLOSED)

    async def open(self, bus: EventBus, kinds: Collection[str] | None,
                   last_seen: int | None) -> AsyncIterator[bytes]:
        """The stream's bytes: a comment line, the backlog after `last_seen` (a reconnecting
        reader's Last-Event-ID), then each event as it is published, and a keep-alive comment
        every 15 s of quiet, until `close`."""
        # Subscribed before the backlog is read, so nothing published in between is missed;
        # whatever both hold is sent once (ids only grow).
        with bus.subscribe(kinds) as queue:
            self._queues.add(queue)
            try:
                sent = bus.last_id if last_seen is None else last_seen
                gap = last_seen is not None and last_seen + 1 < bus.first_id <= bus.last_id
                yield (f": connected; oldest id kept {bus.first_id}"
                       + ("; events were missed before it" if gap else "") + "\n\n").encode()
                if last_seen is not None:
                    for event in bus.since(last_seen, kinds):
                        sent = event.id
                        yield frame(event)
                while not self.closed:
                    try:
                        event = await asyncio.wait_for(queue.get(), timeout=KEEP_ALIVE_S)
                    except TimeoutError:
                        yield b": keep-alive\n\n"
                        continue
                    if event is _CLOSED:
                        return
                    if event.id <= sent:
                        continue
                    sent = event.id
                    yield frame(event)
            finally:
                self._queues.discard(queue)
