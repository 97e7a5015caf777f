"""Deadlines of a streamed request before it commits (DESIGN.md failure table).

A streamed answer normally starts within seconds, so a provider that accepts the connection
and then sends nothing (or only `message_start` and pings) is abandoned long before the
non-streamed `read_timeout`: no response headers or first event within
`stream_first_byte_timeout`, or no content within `stream_commit_timeout`, both counted from
sending. Either raises `StreamStalled`, which fails over like a read timeout. After the commit,
silence is bounded by the socket read timeout, set to `stream_idle_timeout` for streams.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

from claudex.config.model import Profile
from claudex.engine.classify import StreamStalled

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
