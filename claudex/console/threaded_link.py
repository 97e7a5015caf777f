"""`EngineLink` for an engine that runs on its own thread (`EngineThread`), as in `claudex
console` and `claudex demo`.

The engine is only ever touched on its own loop: calls (`trip`, `reset`, `apply_config`, a health
round) are submitted to it and awaited from the console's loop; `fresh_snapshot()` takes the
snapshot there and hands the finished dict over, and `snapshot()` returns the last one taken, so
the console never reads state the proxy is changing. Events cross in batches: a forwarder task on
the engine's loop drains the bus at most every `FORWARD_INTERVAL_S` and hands the batch to the
console's loop with one `call_soon_threadsafe`, so a thousand requests a second cost the proxy a
queue append each and the console ~20 wake-ups a second.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable, Iterator
from typing import Any, Final, TypeVar

from claudex.config.model import Config
from claudex.console.engine_thread import CALL_TIMEOUT_S, EngineThread, EngineThreadError
from claudex.console.link import (
    HISTORY_PAGE,
    HistoryKind,
    HistoryPage,
    LinkState,
    hosting_state,
    read_journal,
)
from claudex.engine.engine import Engine
from claudex.engine.events import Event
from claudex.server.serve import register_secrets

T = TypeVar("T")
Deliver = Callable[[list[Event]], None]

FORWARD_INTERVAL_S: Final = 0.05
INBOX_MAX: Final = 2000  # events waiting on the console's side (a stalled UI drops the oldest)


class ThreadedLink:
    def __init__(self, engine: Engine, thread: EngineThread[Any],
                 *, forward_interval_s: float = FORWARD_INTERVAL_S) -> None:
        """Takes a first snapshot at once (waiting for the engine's loop), so `snapshot()`
        always has something to return."""
        self.engine = engine
        self.thread = thread
        self.forward_interval_s = forward_interval_s
        self._snapshot: dict[str, Any] = thread.call_and_wait(engine.snapshot)

    # -- state ---------------------------------------------------------------------------------

    def state(self) -> LinkState:
        return hosting_state(self.engine)

    def snapshot(self) -> dict[str, Any]:
        return self._snapshot

    async def fresh_snapshot(self) -> dict[str, Any]:
        snapshot = await self._await(self.thread.call(self.engine.snapshot))
        self._snapshot = snapshot
        return snapshot

    def recent_events(self) -> list[Event]:
        return self.thread.call_and_wait(lambda: list(self.engine.events.recent))

    @property
    def in_flight(self) -> int:
        # One int read: atomic under the GIL, and a count that is a moment old is still right.
        return self.engine.totals.in_flight

    # -- actions -------------------------------------------------------------------------------

    async def trip(self, name: str, seconds: float | None = None,
                   reason: str | None = None) -> bool:
        return await self._await(self.thread.call(
            lambda: self.engine.trip(name, seconds, reason)))

    async def reset(self, name: str) -> bool:
        return await self._await(self.thread.call(lambda: self.engine.reset(name)))

    async def apply_config(self, config: Config) -> None:
        def apply() -> None:
            # On the engine's thread: the redactor's set of secrets is read there by every log
            # line, and adding to a set while another thread iterates it is an error.
            register_secrets(config)
            self.engine.apply_config(config)

        await self._await(self.thread.call(apply))

    async def check_health_now(self) -> None:
        await asyncio.wrap_future(self.thread.submit(self.engine.check_health_now()))

    async def history(self, kind: HistoryKind, *, until: float | None = None,
                      limit: int = HISTORY_PAGE, text: str | None = None) -> HistoryPage:
        # The journal's file, read on a thread of its own: neither loop waits on SQLite.
        return await asyncio.to_thread(read_journal, self.engine.journal, kind, until, limit,
                                       text)

    @staticmethod
    async def _await(future: concurrent.futures.Future[T]) -> T:
        return await asyncio.wait_for(asyncio.wrap_future(future), CALL_TIMEOUT_S)

    # -- events --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def subscribe(self) -> Iterator[asyncio.Queue[Event]]:
        """A queue on the calling (console's) loop that receives every event published from
        the moment this returns; events are delivered in batches."""
        console_loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[Event] = asyncio.Queue(INBOX_MAX)

        def deliver(batch: list[Event]) -> None:  # on the console's loop
            for event in batch:
                if inbox.full():
                    inbox.get_nowait()
                inbox.put_nowait(event)

        subscribed: concurrent.futures.Future[None] = concurrent.futures.Future()
        forwarder = self.thread.submit(self._forward(console_loop, deliver, subscribed))
        try:
            subscribed.result(CALL_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            forwarder.cancel()
            raise EngineThreadError("The engine did not answer within "
                                    f"{CALL_TIMEOUT_S:g} s.") from None
        try:
            yield inbox
        finally:
            with contextlib.suppress(RuntimeError):  # the engine's loop has closed already
                forwarder.cancel()

    async def _forward(self, console_loop: asyncio.AbstractEventLoop,
                       deliver: Deliver, subscribed: concurrent.futures.Future[None]) -> None:
        """On the engine's loop: hand the bus's events over in batches until cancelled."""
        with self.engine.events.subscribe() as queue:
            subscribed.set_result(None)
            while True:
                batch = [await queue.get()]
                while not queue.empty():
                    batch.append(queue.get_nowait())
                try:
                    console_loop.call_soon_threadsafe(deliver, batch)
                except RuntimeError:  # the console's loop has closed: nobody is listening
                    return
                # Events published meanwhile wait in the bus's queue (no wake-up per request).
                await asyncio.sleep(self.forward_interval_s)
