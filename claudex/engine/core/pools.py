"""Which member of a pool a request goes to first (DESIGN.md "Pools").

`PoolBalancer.turn` orders a pool's members for one request; the forwarding core tries them in
that order, skipping those that cannot serve, then the pool's own `backup_providers`. When a
member served, `served` records it: under `sticky`, the conversation (engine/core/conversation.py)
is bound to where its prompt cache now is (engine/core/bindings.py).

- `sticky` (default): a conversation's turns go to its member while that member is eligible. A
  new conversation goes to the eligible member with the most headroom: least window used
  (`ProviderRuntime.window_used()`), then fewest conversations bound (per unit of weight), then
  the highest weight. A turn whose member cannot serve is served by another, and the binding
  moves only when the member is out for longer than its cache lives (`CACHE_S`): window spent,
  tripped, disabled or misconfigured, or open (or cooling down) so long that by its return
  more than 5 minutes will have passed since it last served the conversation.
- `round_robin`: the members in turn, each `weight` times per round (smooth weighted order).
- `least_busy`: the member with the fewest requests in flight or queued per unit of weight.

Decisions stay here, in the core; what observes (shares of requests) is engine/addons/pools.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from claudex.config.model import Pool
from claudex.engine.breaker.circuit import BreakerState
from claudex.engine.core.bindings import Binding, Bindings
from claudex.engine.core.conversation import conversation_of
from claudex.engine.core.request import ProxyRequest
from claudex.engine.core.runtime import ProviderRuntime

_NONE: Final[frozenset[str]] = frozenset()

CACHE_S: Final = 300.0
"""How long a member's prompt cache outlives a turn: Anthropic's default cache lifetime is
5 minutes (docs.anthropic.com, prompt caching: "the cache has a 5-minute lifetime, refreshed
each time the cached content is used")."""


class SlowSource(Protocol):
    """The engine's slow watch (engine/health/slow_watch.py): the members new bindings avoid."""

    avoided: frozenset[str]


class SharedBindings(Protocol):
    """Bindings kept where every instance of a fleet reads them (engine/fleet/bindings.py).
    Times are wall-clock epoch seconds there."""

    async def lookup(self, pool: str, conversation: str) -> tuple[str, float] | None: ...

    def publish(self, pool: str, conversation: str, member: str, served_wall: float) -> None: ...


@dataclass
class PoolTurn:
    """One request's way through a pool: the members in the order to try, and what to
    record when one serves."""

    pool: Pool
    order: list[str]
    conversation: str | None = None  # sticky only
    bound: str | None = None         # the member the conversation was bound to
    move: bool = True                # whoever serves now takes the binding


class PoolBalancer:
    def __init__(self, runtimes: Callable[[], Mapping[str, ProviderRuntime]],
                 clock: Callable[[], float], wall: Callable[[], float],
                 bindings: Bindings, shared: SharedBindings | None = None, *,
                 slow: SlowSource | None = None) -> None:
        self._runtimes = runtimes
        self._slow = slow
        self._clock = clock
        self._wall = wall
        self.bindings = bindings
        self.shared = shared
        self._turns: dict[str, int] = {}  # round robin's position, per pool
        self._sequences: dict[str, tuple[Pool, list[str]]] = {}

    # -- ordering --------------------------------------------------------------------------

    async def turn(self, pool: Pool, req: ProxyRequest) -> PoolTurn:
        if pool.balance == "round_robin":
            return PoolTurn(pool, self._after_slow(self._round_robin(pool)))
        if pool.balance == "least_busy":
            return PoolTurn(pool, self._least_busy(pool))
        return await self._sticky(pool, req)

    def _avoided(self) -> frozenset[str]:
        return _NONE if self._slow is None else self._slow.avoided

    def _after_slow(self, order: list[str]) -> list[str]:
        """`[health] avoid_slow`: the slow members after the others, each side in its order
        (a slow member still serves when no other can: it is tried, only later)."""
        avoided = self._avoided()
        if not avoided or not any(m in avoided for m in order):
            return order
        return [m for m in order if m not in avoided] + [m for m in order if m in avoided]

    async def _sticky(self, pool: Pool, req: ProxyRequest) -> PoolTurn:
        conversation = conversation_of(req.protocol, req.headers, req.body).key
        binding = self.bindings.get(pool.name, conversation)
        if binding is None and self.shared is not None:
            binding = await self._shared_binding(pool, conversation)
        ranked = self._by_headroom(pool)
        if binding is None or binding.member not in pool.members:
            return PoolTurn(pool, ranked, conversation)
        member = binding.member
        order = [member, *(m for m in ranked if m != member)]
        return PoolTurn(pool, order, conversation, member, move=self._cold(binding))

    def _cold(self, binding: Binding) -> bool:
        """Whether `binding`'s member is out for longer than its cache of the conversation
        lives: when it is back, more than `CACHE_S` will have passed since it last served."""
        out = self.out_for(binding.member)
        if out is None:
            return False
        return math.isinf(out) or (self._clock() - binding.last_served) + out > CACHE_S

    async def _shared_binding(self, pool: Pool, conversation: str) -> Binding | None:
        assert self.shared is not None
        found = await self.shared.lookup(pool.name, conversation)
        if found is None:
            return None
        member, served_wall = found
        served = self._clock() - max(0.0, self._wall() - served_wall)
        return self.bindings.bind(pool.name, conversation, member, served)

    def _by_headroom(self, pool: Pool) -> list[str]:
        """Eligible members first, most headroom first (a slow one after the rest, with
        `avoid_slow`); then the others, in the pool's order."""
        runtimes = self._runtimes()
        counts = self.bindings
        avoided = self._avoided()
        ready: list[tuple[bool, float, float, int, int, str]] = []
        out: list[str] = []
        for index, member in enumerate(pool.members):
            rt = runtimes.get(member)
            if rt is None or self.out_for(member) is not None:
                out.append(member)
                continue
            weight = pool.weight(member)
            ready.append((member in avoided, round(rt.window_used(), 2),
                          counts.count(pool.name, member) / weight, -weight, index, member))
        ready.sort()
        return [entry[-1] for entry in ready] + out

    def _round_robin(self, pool: Pool) -> list[str]:
        cached = self._sequences.get(pool.name)
        if cached is None or cached[0] is not pool:  # a reload makes a new Pool
            cached = self._sequences[pool.name] = (pool, _weighted_sequence(pool))
        sequence = cached[1]
        at = self._turns.get(pool.name, 0)
        self._turns[pool.name] = at + 1
        start = at % len(sequence)
        order: list[str] = []
        for member in sequence[start:] + sequence[:start]:
            if member not in order:
                order.append(member)
        return order

    def _least_busy(self, pool: Pool) -> list[str]:
        runtimes = self._runtimes()
        rotated = self._round_robin(pool)  # ties go round
        avoided = self._avoided()
        loads: list[tuple[bool, bool, float, int, str]] = []
        for index, member in enumerate(rotated):
            rt = runtimes.get(member)
            if rt is None:
                loads.append((True, False, 0.0, index, member))
                continue
            busy = (rt.gate.in_flight + rt.gate.queued) / pool.weight(member)
            loads.append((self.out_for(member) is not None, member in avoided, busy, index,
                          member))
        loads.sort()
        return [entry[-1] for entry in loads]

    def out_for(self, member: str) -> float | None:
        """None when `member` may serve now; else how long it stays out (inf: until someone
        acts, or for a quota window's rest)."""
        rt = self._runtimes().get(member)
        if rt is None:
            return math.inf
        profile = rt.profile
        if not profile.enabled or profile.problem is not None:
            return math.inf
        if rt.window_spent_until > self._wall():
            return math.inf
        state = rt.breaker.state
        if state is BreakerState.FORCED_OPEN:
            return math.inf
        now = self._clock()
        if state is BreakerState.OPEN:
            return rt.breaker.snapshot().retry_in_s or 0.0
        if rt.cooling_down(now):
            return rt.cooldown_until - now
        return None

    # -- what served -----------------------------------------------------------------------

    def served(self, turn: PoolTurn, member: str) -> None:
        """`member` of `turn.pool` served the request."""
        conversation = turn.conversation
        if conversation is None or member not in turn.pool.members:
            return
        pool = turn.pool.name
        if turn.bound is not None and member != turn.bound and not turn.move:
            # The member failed this turn: out briefly, its cache stays warm and the binding
            # with it; out for long (its window spent by this very turn), the binding moves.
            binding = self.bindings.get(pool, conversation)
            if binding is not None and binding.member == turn.bound and not self._cold(binding):
                self.bindings.seen(pool, conversation)
                return
        self.bindings.bind(pool, conversation, member)
        if self.shared is not None:
            self.shared.publish(pool, conversation, member, self._wall())

    def apply_shared(self, pool: str, conversation: str, member: str,
                     served_wall: float) -> None:
        """Another instance of the fleet bound `conversation` to `member`."""
        served = self._clock() - max(0.0, self._wall() - served_wall)
        self.bindings.bind(pool, conversation, member, served)

    def status_json(self, pool: Pool, shares: Mapping[str, int]) -> dict[str, object]:
        counts = self.bindings.counts(pool.name)
        total = sum(shares.get(m, 0) for m in pool.members)
        return {
            "name": pool.name,
            "balance": pool.balance,
            "backup_providers": list(pool.backup_providers),
            "bindings": sum(counts.values()),
            "members": [{
                "name": member,
                "weight": pool.weight(member),
                "bindings": counts.get(member, 0),
                "requests": shares.get(member, 0),
                "share": round(shares.get(member, 0) / total, 4) if total else 0.0,
            } for member in pool.members],
        }


def _weighted_sequence(pool: Pool) -> list[str]:
    """Smooth weighted round robin (nginx's): each member `weight` times per round, spread."""
    weights = {member: pool.weight(member) for member in pool.members}
    total = sum(weights.values())
    current = dict.fromkeys(weights, 0)
    sequence: list[str] = []
    for _ in range(total):
        for member, weight in weights.items():
            current[member] += weight
        chosen = max(weights, key=lambda m: current[m])
        current[chosen] -= total
        sequence.append(chosen)
    return sequence
