"""Which pool member each conversation is bound to (DESIGN.md "Pools": bindings).

A binding says where a conversation's prompt cache is: the member that last served it, and
when. Bounded (`limit`, 50,000: the least recently seen goes first) and forgotten after
`idle_s` (1 h) without a turn. Pure bookkeeping with an injected clock: no I/O (a fleet shares
bindings through `claudex.engine.fleet.bindings`, which calls `bind` and `get` here).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

LIMIT: Final = 50_000
IDLE_S: Final = 3600.0


@dataclass
class Binding:
    pool: str
    member: str
    last_served: float  # the engine's clock when `member` last served the conversation
    last_seen: float    # ... when the conversation last had a turn, wherever it was served


class Bindings:
    def __init__(self, clock: Callable[[], float], *, limit: int = LIMIT,
                 idle_s: float = IDLE_S) -> None:
        self._clock = clock
        self.limit = limit
        self.idle_s = idle_s
        self._items: OrderedDict[tuple[str, str], Binding] = OrderedDict()  # oldest seen first
        self._counts: dict[tuple[str, str], int] = {}  # (pool, member) -> conversations bound

    def __len__(self) -> int:
        return len(self._items)

    def get(self, pool: str, conversation: str) -> Binding | None:
        self._expire(self._clock())
        return self._items.get((pool, conversation))

    def bind(self, pool: str, conversation: str, member: str,
             served_at: float | None = None) -> Binding:
        """`member` served `conversation` (at `served_at`, else now): bound there, fresh."""
        now = self._clock()
        key = (pool, conversation)
        old = self._items.pop(key, None)
        if old is not None:
            self._count(pool, old.member, -1)
        binding = Binding(pool, member, now if served_at is None else served_at, now)
        self._items[key] = binding
        self._count(pool, member, 1)
        self._expire(now)
        while len(self._items) > self.limit:
            self._drop(next(iter(self._items)))
        return binding

    def seen(self, pool: str, conversation: str) -> None:
        """A turn of a bound conversation was served elsewhere: it stays bound, and alive."""
        key = (pool, conversation)
        binding = self._items.get(key)
        if binding is not None:
            binding.last_seen = self._clock()
            self._items.move_to_end(key)

    def count(self, pool: str, member: str) -> int:
        return self._counts.get((pool, member), 0)

    def counts(self, pool: str) -> dict[str, int]:
        self._expire(self._clock())
        return {member: n for (name, member), n in self._counts.items() if name == pool and n}

    def _expire(self, now: float) -> None:
        items = self._items
        while items:
            key, binding = next(iter(items.items()))
            if now - binding.last_seen <= self.idle_s:
                return
            self._drop(key)

    def _drop(self, key: tuple[str, str]) -> None:
        binding = self._items.pop(key)
        self._count(binding.pool, binding.member, -1)

    def _count(self, pool: str, member: str, delta: int) -> None:
        key = (pool, member)
        left = self._counts.get(key, 0) + delta
        if left > 0:
            self._counts[key] = left
        else:
            self._counts.pop(key, None)
