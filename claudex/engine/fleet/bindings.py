"""Pool bindings shared by a fleet (DESIGN.md "Pools": "shared through Redis in a fleet"), so
every instance sends a conversation's turns to the same member, where its prompt cache is.

A binding (`pool`, `conversation` -> `member`, when it last served) is written by the instance
whose member served the turn: `{prefix}:binding:{pool}:{conversation}` with the bindings' idle
lifetime (1 h) as TTL, and announced on `{prefix}:bindings`; every other instance applies the
announcement to its own `Bindings` (engine/core/bindings.py) as it arrives. A request never
waits for the write. An instance that has no binding for a conversation (it started after the
conversation did, or missed the announcement while Redis was away) reads the key once, bounded
by the store's timeout; with Redis unreachable it decides alone, as a single instance does.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from claudex.engine.core.bindings import IDLE_S

if TYPE_CHECKING:
    from claudex.engine.fleet.store import FleetStore

log = logging.getLogger("claudex.fleet")

Apply = Callable[[str, str, str, float], None]  # pool, conversation, member, served (wall)


class FleetBindings:
    """What the pools' balancer (engine/core/pools.py `SharedBindings`) sees of the fleet."""

    def __init__(self, name: str, store: Callable[[], FleetStore | None],
                 wake: Callable[[], None]) -> None:
        self.name = name
        self._store = store  # the connected store, None while Redis is away
        self._wake = wake
        self.outbox: dict[tuple[str, str], tuple[str, float]] = {}
        self.apply: Apply | None = None  # set by the engine: into its own Bindings
        self.applied = 0   # bindings of other instances applied here
        self.read = 0      # lookups on a miss that found one

    async def lookup(self, pool: str, conversation: str) -> tuple[str, float] | None:
        store = self._store()
        if store is None:
            return None
        try:
            raw = await store.read_binding(pool, conversation)
        except Exception as exc:  # Redis slow or gone: decided here, as one instance would
            log.debug("fleet: binding lookup failed: %s", exc)
            return None
        found = _decode(raw)
        if found is None:
            return None
        self.read += 1
        return found["member"], found["served"]

    def publish(self, pool: str, conversation: str, member: str, served_wall: float) -> None:
        self.outbox[(pool, conversation)] = (member, served_wall)
        self._wake()

    def take(self) -> list[dict[str, Any]]:
        out, self.outbox = self.outbox, {}
        return [{"pool": pool, "conversation": conv, "member": member, "served": served,
                 "by": self.name} for (pool, conv), (member, served) in out.items()]

    def news(self, record: dict[str, Any]) -> None:
        """Another instance's binding, announced."""
        if record.get("by") == self.name or self.apply is None:
            return
        found = _decode(record)
        if found is None:
            return
        self.applied += 1
        self.apply(found["pool"], found["conversation"], found["member"], found["served"])


TTL_S = IDLE_S


def _decode(raw: object) -> dict[str, Any] | None:
    try:
        record = json.loads(raw) if isinstance(raw, str | bytes) else raw
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    if not all(isinstance(record.get(k), str) for k in ("pool", "conversation", "member")):
        return None
    served = record.get("served")
    if not isinstance(served, int | float) or isinstance(served, bool):
        return None
    return record
