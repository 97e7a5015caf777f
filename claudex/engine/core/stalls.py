"""Deadlines of a streamed request before it commits (DESIGN.md failure table).

A streamed answer normally starts within seconds, so a provider that accepts the connection
and then sends nothing (or only `message_start` and pings) is abandoned long before the
non-streamed `read_timeout`: no response headers or first event within
`stream_first_byte_timeout`, or no content within `stream_commit_timeout`, both counted from
sending. Either raises `StreamStalled`, which fails over like a read timeout. After the commit,
silence is bounded by `stream_idle_timeout`, watched by `IdleWatch`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from claudex.config.model import Profile
from claudex.engine.core.classify import StreamStalled

T = TypeVar("T")


@dataclass(frozen=True)
class StreamDeadlines:
    """Loop-time deadlines of one streamed attempt, and the settings they came from."""

    first_byte: float
    commit: float
    first_byte_s: float
    commit_s: float

    @classmethod
    def start(cls, profile: Profile) -> StreamDeadlines:
        now = asyncio.get_running_loop().time()
        first, commit = profile.stream_first_byte_timeout, profile.stream_commit_timeout
        return cls(now + min(first, commit), now + commit, first, commit)

    def headers(self) -> tuple[float, str]:
        return self.first_byte, (f"no response headers within {self.first_byte_s:g} s "
                                 "(stream_first_byte_timeout)")

    def next_event(self, any_yet: bool) -> tuple[float, str]:
        """The deadline for the next upstream bytes before the commit, and what passing it
        means."""
        if any_yet:
            return self.commit, (f"no content within {self.commit_s:g} s "
                                 "(stream_commit_timeout)")
        return self.first_byte, (f"no first event within {self.first_byte_s:g} s "
                                 "(stream_first_byte_timeout)")


async def within(deadline: tuple[float, str], awaitable: Awaitable[T]) -> T:
    """Await `awaitable` until the loop-time deadline; past it raise `StreamStalled` with the
    deadline's words. A timeout raised from inside (the socket's) passes through unchanged."""
    when, words = deadline
    try:
        async with asyncio.timeout_at(when) as scope:
            return await awaitable
    except TimeoutError:
        if scope.expired():
            raise StreamStalled(words) from None
        raise


class IdleWatch:
    """Calls `on_idle` once the stream has been silent for `idle_s` (the relay stores the loop
    time of each chunk in `last`); `fired` says it did.

    One timer a stream, re-armed only when it comes due: a stream that keeps talking costs a
    store per chunk. The socket read timeout it replaces was cancelled and re-armed by aiohttp
    on every chunk received, a measurable share of claudex's cost per streamed event."""

    __slots__ = ("_handle", "_idle_s", "_loop", "_on_idle", "clock", "fired", "last")

    def __init__(self, idle_s: float, on_idle: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._idle_s = idle_s
        self._on_idle = on_idle
        self.clock = loop.time
        self.last = loop.time()
        self.fired = False
        self._handle: asyncio.TimerHandle | None = loop.call_at(self.last + idle_s, self._due)

    def _due(self) -> None:
        deadline = self.last + self._idle_s
        if self._loop.time() < deadline:  # a chunk came since: wait out the rest
            self._handle = self._loop.call_at(deadline, self._due)
            return
        self._handle = None
        self.fired = True
        self._on_idle()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
