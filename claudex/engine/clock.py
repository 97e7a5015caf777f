"""Injected time. Engine code takes these as parameters so tests never wait on real time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

Clock = Callable[[], float]
"""Monotonic seconds; used for every interval (breaker recovery, cooldowns, latency)."""

WallClock = Callable[[], float]
"""Epoch seconds; used only where the outside world speaks in dates (Retry-After, expiresAt)."""

Sleep = Callable[[float], Awaitable[None]]

monotonic: Clock = time.monotonic
wall: WallClock = time.time
sleep: Sleep = asyncio.sleep


class FakeClock:
    """A clock tests move by hand; `sleep` advances it instead of waiting."""

    def __init__(self, start: float = 1000.0, wall_start: float = 1_750_000_000.0) -> None:
        self.now = start
        self._wall_offset = wall_start - start
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.now + self._wall_offset

    def advance(self, seconds: float) -> None:
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += max(0.0, seconds)
        await asyncio.sleep(0)
