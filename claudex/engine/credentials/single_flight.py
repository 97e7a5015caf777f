"""One run of a piece of async work at a time, shared by every caller that arrives while it
runs: a token minted once for ten requests waiting, not ten times.

A caller that gives up (cancelled, timed out) does not cancel the work the others wait for;
the work's exception reaches every caller waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["SingleFlight"]

T = TypeVar("T")


class SingleFlight(Generic[T]):
    def __init__(self) -> None:
        self._pending: asyncio.Future[T] | None = None

    @property
    def running(self) -> bool:
        return self._pending is not None

    async def run(self, work: Callable[[], Awaitable[T]]) -> T:
        """`work()`'s result: started now, or the run already under way."""
        pending = self._pending
        if pending is None:
            loop = asyncio.get_running_loop()
            pending = self._pending = loop.create_future()
            task = loop.create_task(_awaited(work))
            task.add_done_callback(lambda done: self._settle(pending, done))
        return await asyncio.shield(pending)

    def _settle(self, pending: asyncio.Future[T], task: asyncio.Task[T]) -> None:
        if self._pending is pending:
            self._pending = None
        if pending.done():
            return
        if task.cancelled():
            pending.cancel()
            return
        error = task.exception()
        if error is not None:
            pending.set_exception(error)
            pending.exception()  # marked retrieved: no warning when every caller gave up
        else:
            pending.set_result(task.result())


async def _awaited(work: Callable[[], Awaitable[T]]) -> T:
    return await work()
