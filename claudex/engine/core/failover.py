"""Walk a profile's failover chain for one request (DESIGN.md, failure table and commit rule).

The request's life (`Forwarder.answer`, `finish`: its id, its route, the lifecycle hooks) and
its chain: who may serve it, in what order (a pool's balance, a plan's reserve, `avoid_slow`),
and for each member in turn, skip it if it cannot serve (recording why: breaker, cooldown, spent
window, a context window too small) or hand it to `OneProvider.serve` (one_provider.py), which
tries it and executes the failure policy's row for what came of it. The first answer for the
client ends the walk; none, and the all-failed answer says why.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from claudex.config.model import Profile
from claudex.engine.breaker.circuit import BreakerState
from claudex.engine.core.addressing import map_model
from claudex.engine.core.answers import all_failed, error_result, through_proxies_failed
from claudex.engine.core.conversation import conversation_of, first_turn
from claudex.engine.core.exchange import Exchange
from claudex.engine.core.hooks import Flow, addon_failed
from claudex.engine.core.ledger import Ledger
from claudex.engine.core.one_provider import OneProvider
from claudex.engine.core.pools import CACHE_S, PoolTurn
from claudex.engine.core.request import (
    CONFIG_SKIPS,
    PROXY_OUTCOMES,
    Attempt,
    ForwardResult,
    ProxyRequest,
)
from claudex.engine.core.runtime import ProviderRuntime
from claudex.engine.core.tries import EngineCore
from claudex.engine.core.usage import Usage, usage_in_body
from claudex.engine.network.proxy_state import ProxyBoard
from claudex.engine.network.routes import Hop
from claudex.engine.routing.estimate import could_be_long, estimated_prompt_tokens


def _passed_over(core: EngineCore, flow: Flow, rt: ProviderRuntime | None, skipped: Attempt,
                 wait: float | None = None) -> None:
    """A provider passed over unsent (breaker, window, reserve, slow ...): its line in the
    trail (`wait`: when it could serve again), and the `attempt_ended` hooks told of it."""
    flow.trail.skip(skipped, wait)
    if rt is None:
        return
    for hook in core.hooks.attempt_ended:
        try:
            hook(flow, rt, skipped, None)
        except Exception:
            addon_failed(hook)


def _skip_message(rt: ProviderRuntime | None, reason: str, now: float,
                  proxies: ProxyBoard) -> str:
    if rt is None:
        return "no such profile"
    if reason == "breaker_open":
        retry = rt.breaker.snapshot().retry_in_s
        return f"breaker open (retry in {retry:.0f}s)" if retry else "breaker open"
    if reason == "forced_open":  # "tripped by operator: maintenance (12m left)"
        return rt.trip_text()
    if reason == "window_spent":  # "5-hour window spent until 14:05"
        return rt.spent_words()
    if reason == "no_route" and rt.route is not None:  # "no route: proxy corp open (...)"
        return proxies.no_route(rt.route, now)
    return {
        "half_open_busy": "breaker half-open; its trial request is in flight",
        "cooling_down": f"rate limited; cooling down {max(0.0, rt.cooldown_until - now):.0f}s",
        "disabled": "profile disabled",
        "misconfigured": rt.profile.problem or "misconfigured",
        "round_cap": "round cap reached",
    }.get(reason, reason)


_RESERVED_KEPT = 10_000  # conversations remembered as started off a plan's reserve


def _skip_wait(rt: ProviderRuntime | None, reason: str, now: float,
               wall: Callable[[], float]) -> float | None:
    """How long a skipped provider stays out, when that is known (the all-failed 429's
    Retry-After): a cooldown's rest, a spent window's time to its reset."""
    if rt is None:
        return None
    if reason == "cooling_down":
        return max(0.0, rt.cooldown_until - now)
    if reason == "window_spent":
        return max(0.0, rt.window_spent_until - wall())
    return None




_PROXY_OUTCOMES = PROXY_OUTCOMES | {"no_route"}


def _proxies_to_blame(attempts: list[Attempt], proxies: ProxyBoard) -> list[Hop] | None:
    """When every provider tried failed for its upstream proxies (or had no route), the
    proxies to name in the client's error, in order; else None (the providers' own words)."""
    relevant = [a for a in attempts if a.outcome not in CONFIG_SKIPS
                and a.outcome != "round_cap"]
    if not relevant or any(a.outcome not in _PROXY_OUTCOMES for a in relevant):
        return None
    names: list[str] = []
    for attempt in relevant:
        if attempt.proxy is not None and attempt.proxy not in names:
            names.append(attempt.proxy)
        if attempt.outcome == "no_route":  # `no route: proxy corp open (...), proxy ...`
            for part in attempt.message.removeprefix("no route: ").split(", "):
                name = part.removeprefix("proxy ").split(" ", 1)[0]
                if part.startswith("proxy ") and name not in names:
                    names.append(name)
    hops = [state.hop for name in names if (state := proxies.get(name)) is not None]
    return hops or None


def _base36(n: int) -> str:
    digits = ""
    while True:
        n, d = divmod(n, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[d] + digits
        if n == 0:
            return digits




@dataclass
class Way:
    """Who may serve one request: the name it addressed (a profile or pool; None: no such
    name), the names to try in order, and for a pool the members' pool and the turns to tell
    which member served."""

    name: str | None
    names: list[str]
    addressed: frozenset[str] = frozenset()  # a pool's members: each is "the addressed one"
    pool_of: dict[str, str] = field(default_factory=dict)
    turns: list[PoolTurn] = field(default_factory=list)


class Forwarder:
    def __init__(self, core: EngineCore) -> None:
        self.core = core
        self._one = OneProvider(core)  # serves the request from one member (one_provider.py)
        # Request ids: this engine's start time and a counter, both base 36 (`mfy3k2-1c`).
        self._id_base = _base36(int(core.wall()))
        self._ids = itertools.count(1)
        # Conversations started on the backups because the plan was within its `reserve`.
        self._reserve_keys: OrderedDict[str, None] = OrderedDict()
        # ... and those started off a slow provider (`avoid_slow`): when each was last seen.
        self._slow_keys: OrderedDict[str, float] = OrderedDict()

    # -- chain -------------------------------------------------------------------------------

    def chain(self, req: ProxyRequest) -> tuple[Profile | None, list[str]]:
        """The addressed profile and the names to try (a profile's chain; pools: `_route`)."""
        config = self.core.config
        addressed = config.profile(req.profile) if req.profile else config.default_profile
        if addressed is None:
            return None, []
        names = [addressed.name]
        if req.failover:
            names += [n for n in addressed.backup_providers if n not in names]
        return addressed, names

    async def _route(self, req: ProxyRequest) -> Way:
        """Who may serve `req`, in order. A pool (DESIGN.md "Pools") stands for its members,
        ordered by its balance (engine/core/pools.py), then its own backups; a pool among a
        profile's backups stands for its members. A config without pools pays one check."""
        config = self.core.config
        pools = self.core.pools
        name = req.profile or config.default_name
        pool = config.pool(name) if pools is not None and name is not None else None
        if pool is None:
            addressed, names = self.chain(req)
            if addressed is None or pools is None or not config.pools:
                return Way(None if addressed is None else addressed.name, names)
            way = Way(addressed.name, [addressed.name])
            backups = names[1:]
        else:
            assert pools is not None
            way = Way(pool.name, [], addressed=frozenset(pool.members))
            backups = ["", *pool.backup_providers] if req.failover else [""]
        for backup in backups:
            inner = config.pool(backup) if backup else pool
            if inner is None:
                if backup not in way.names:
                    way.names.append(backup)
                continue
            turn = await pools.turn(inner, req)
            way.turns.append(turn)
            for member in turn.order:
                if member not in way.names:
                    way.names.append(member)
                    way.pool_of[member] = inner.name
        return way

    def _skip_reason(self, rt: ProviderRuntime | None, now: float) -> str | None:
        if rt is None:
            return "unknown_profile"
        if not rt.profile.enabled:
            return "disabled"
        if rt.profile.problem is not None:
            return "misconfigured"
        if rt.window_spent_until and rt.window_spent(self.core.wall()):
            return "window_spent"
        if rt.cooling_down(now):
            return "cooling_down"
        state = rt.breaker.state
        if state is BreakerState.FORCED_OPEN:
            return "forced_open"
        if state is BreakerState.OPEN:
            return "breaker_open"
        route = rt.route  # None: plain direct (the usual provider pays this check only)
        if route is not None and route.hops and not self.core.proxies.eligible(route.hops,
                                                                                 now):
            return "no_route"  # every proxy of its route is out: skipped like an open breaker
        return None

    # -- entry point ---------------------------------------------------------------------------

    async def forward(self, req: ProxyRequest) -> ForwardResult:
        """Serve `req` along its chain; the request is over (its `request_ended` hooks have
        run) when this returns, except for a stream, which ends at its last chunk."""
        result, flow = await self.answer(req)
        if flow is not None:
            self.finish(flow)
        return result

    async def answer(self, req: ProxyRequest) -> tuple[ForwardResult, Flow | None]:
        """Serve `req` along its chain; the answer names the request (`x-claudex-request-id`,
        also in its request event). The request's `Flow` goes through the lifecycle hooks
        (engine/core/hooks.py): started here; a stream's ended at its last chunk. A whole
        answer comes back with its flow: the caller hands the answer to the client first and
        then calls `finish(flow)` — the bookkeeping of a finished request (its usage read
        from the body, statistics, the request event, the journal's row) can wait until the
        client has its bytes, and so adds nothing to the client's latency. (None: a stream,
        which finishes itself.)"""
        core = self.core
        req.request_id = f"{self._id_base}-{_base36(next(self._ids))}"
        flow = Flow(req, core.clock(), core.wall())
        routing = core.routing  # None unless the config has routes (engine/routing/)
        if routing is not None and req.profile is None and req.endpoint != "count_tokens":
            routed = await routing.choose(req)
            if routed is not None:  # the route's profile is addressed: its own chain serves
                req.routed, req.profile = routed, routed.profile
        way = await self._route(req) if core.pools is not None else None
        if way is None:
            profile, names = self.chain(req)
            way = Way(None if profile is None else profile.name, names)
        if way.name is not None:
            flow.addressed = way.name
        hooks = core.hooks
        for hook in hooks.request_started:
            try:
                hook(flow)
            except Exception:
                addon_failed(hook)
        try:
            result = await self._forward(req, flow, way)
        except BaseException:
            self.finish(flow)  # cancelled, or a claudex bug: the request is over all the same
            raise
        result.headers["x-claudex-request-id"] = req.request_id
        if req.routed is not None:
            result.headers["x-claudex-route"] = req.routed.label
        flow.result = result
        flow.ms = (core.clock() - flow.started) * 1000.0
        stream = result.stream
        if stream is None:
            return result, flow

        # A stream ends at its last chunk (or the client leaving), not at its commit: it is
        # reported then, with the tokens its events told (it scans its own chunks).
        def done(usage: Usage | None) -> None:
            flow.usage = usage
            self.finish(flow)

        stream.count(done)
        return result, None

    def finish(self, flow: Flow) -> None:
        """The request is over: a whole answer's tokens read from its body (a stream's were
        counted from its events, and a request that raised has no result), then the
        `request_ended` hooks. `answer` says when a whole answer's caller calls this."""
        later = flow.later
        if later is not None:  # the served attempt's hooks (hooks.py): the client has its body
            flow.later = None
            for hooks, *arguments in later:
                for hook in hooks:
                    try:
                        hook(*arguments)
                    except Exception:
                        addon_failed(hook)
        result = flow.result
        if result is not None and result.body is not None and result.status < 400:
            flow.usage = usage_in_body(result.body)
        for hook in self.core.hooks.request_ended:
            try:
                hook(flow)
            except Exception:
                addon_failed(hook)

    async def _forward(self, req: ProxyRequest, flow: Flow, way: Way) -> ForwardResult:
        core = self.core
        names, pool_of = way.names, way.pool_of
        if way.name is None:
            name = req.profile or "(default)"
            return error_result(req, 404, f"No profile named {name!r} is configured.", [])
        trail = flow.trail
        head = core.runtimes.get(names[0]) if names else None
        if head is not None and head.profile.reserve and len(names) > 1 and not way.addressed \
                and head.windows and head.window_used() >= 1.0 - head.profile.reserve:
            names = self._reserved(req, flow, head, names)
        avoided = core.slow.avoided  # `[health] avoid_slow`: empty unless on and one is slow
        if avoided and len(names) > 1 and names[0] in avoided:
            names = self._around_slow(req, flow, way, names, avoided)
        now = core.clock()
        # Round cap: never try more providers than were eligible when the request started.
        cap = 1 if len(names) == 1 else sum(
            1 for n in names if self._skip_reason(core.runtimes.get(n), now) is None)
        tried = 0
        estimate: int | None = None  # the prompt's tokens, estimated once when a window asks
        too_small = ""
        for name in names:
            rt = core.runtimes.get(name)
            now = core.clock()
            reason = self._skip_reason(rt, now)
            if reason is None and tried >= cap:
                reason = "round_cap"
            permit = None
            # A backup whose context window is known (configured, or learned from its 400) is
            # passed over, without sending, by a request estimated over it.
            if reason is None and rt is not None and name != way.name and (
                    name not in way.addressed) and (
                    rt.context_limits or rt.profile.context_window is not None):
                window = rt.context_window(map_model(rt.profile, req.model, False,
                                                     core.config.model_aliases,
                                                     client=req.protocol))
                if window is not None and could_be_long(req.raw, window):
                    if estimate is None:
                        estimate = estimated_prompt_tokens(req.protocol, req.body)
                    if estimate > window:
                        reason = "context_too_small"
                        too_small = f"context {window:,} < ~{estimate:,}"
            if reason is None and rt is not None:
                permit = rt.breaker.try_acquire()
                if permit is None:
                    half_open = rt.breaker.state is BreakerState.HALF_OPEN
                    reason = "half_open_busy" if half_open else "breaker_open"
            if rt is None or permit is None:
                reason = reason or "unknown_profile"
                skipped = Attempt(name, reason, message=too_small if reason ==
                                  "context_too_small" else _skip_message(rt, reason, now,
                                                                         core.proxies),
                                  pool=pool_of.get(name) if pool_of else None)
                _passed_over(core, flow, rt, skipped, _skip_wait(rt, reason, now, core.wall))
                continue
            tried += 1
            ledger = Ledger(rt, permit, flow, core)
            if pool_of:
                ledger.pool = pool_of.get(name)
            exchange = Exchange(req, rt.profile, addressed=name == way.name
                                or name in way.addressed, aliases=core.config.model_aliases)
            exchange.max_tokens_cap = rt.max_tokens_cap(exchange.model)
            exchange.signatures = core.signatures
            exchange.wire = rt.wire
            try:
                result = await self._one.serve(ledger, exchange)
            finally:
                ledger.release()  # a no-op once settled; covers cancellation mid-attempt
            if result is not None:
                if result.provider is not None:
                    result.notes = exchange.portable_notes
                    if exchange.dropped:
                        result.dropped = exchange.dropped
                # (count_tokens is no turn: it binds nothing)
                if way.turns and result.provider is not None and core.pools is not None \
                        and req.endpoint != "count_tokens":
                    for turn in way.turns:
                        core.pools.served(turn, result.provider)
                attempts = trail.attempts
                if len(attempts) == 1:  # the usual request: served by the one it tried
                    flow.failed_over = attempts[0].provider != name
                else:
                    served = [a for a in attempts if not a.skipped]
                    flow.failed_over = (len({a.provider for a in served}) > 1
                                        or attempts[0].provider != name)
                return result
        narrowed = {n: limit for n in names if (rt := core.runtimes.get(n)) is not None
                    and (limit := rt.gate.limit.limit) is not None and rt.gate.limit.reason}
        wall = core.wall()
        spent = {n: rt.spent_words(wall) for n in names if (rt := core.runtimes.get(n))
                 is not None and rt.window_spent_until and rt.window_spent(wall)}
        through = _proxies_to_blame(trail.attempts, core.proxies)
        if through is not None:  # every provider failed for its proxies: the client hears so
            result, sentence = through_proxies_failed(req, trail, through)
        else:
            result, sentence = all_failed(req, trail, narrowed, spent)
        flow.all_failed = True
        core.escalate(sentence)
        return result

    def _reserved(self, req: ProxyRequest, flow: Flow, rt: ProviderRuntime,
                  names: list[str]) -> list[str]:
        """The addressed plan's window is within its `reserve` (DESIGN.md "Windows"): a new
        conversation (and a later turn of one that started so) starts on the backups, the plan
        last, so the user keeps that room for direct use; one already under way there stays."""
        key = conversation_of(req.protocol, req.headers, req.body).key
        reserved = self._reserve_keys
        if key not in reserved and not first_turn(req.protocol, req.body):
            return names
        reserved[key] = None
        reserved.move_to_end(key)
        if len(reserved) > _RESERVED_KEPT:
            reserved.popitem(last=False)
        top = max(rt.windows, key=lambda w: w.used)
        skipped = Attempt(rt.name, "reserve", message=(
            f"{top.name} {top.used:.0%} used: new conversations keep its reserve "
            f"({rt.profile.reserve:.0%}) for direct use"))
        _passed_over(self.core, flow, rt, skipped)
        return [*names[1:], names[0]]

    def _around_slow(self, req: ProxyRequest, flow: Flow, way: Way, names: list[str],
                     avoided: frozenset[str]) -> list[str]:
        """`[health] avoid_slow` and the first to try is slow (engine/health/slowness.py): a new
        conversation (a pool's new binding, a later turn of a conversation that started so)
        starts on the healthy ones, the slow ones after them in their order. One under way
        on the slow provider stays where its prompt cache is, and with nothing healthy able
        to serve the order is kept: slow still serves."""
        if way.turns and way.turns[0].bound is not None:
            return names  # a pool's conversation, bound where its cache is
        now = self.core.clock()
        moved = self._slow_keys
        key: str | None = None
        if not way.turns:
            key = conversation_of(req.protocol, req.headers, req.body).key
            seen = moved.get(key)
            if (seen is None or now - seen > CACHE_S) and not first_turn(req.protocol,
                                                                         req.body):
                return names
        runtimes = self.core.runtimes
        if not any(n not in avoided and self._skip_reason(runtimes.get(n), now) is None
                   for n in names):
            return names
        if key is not None:
            moved[key] = now
            moved.move_to_end(key)
            if len(moved) > _RESERVED_KEPT:
                moved.popitem(last=False)
        ahead: list[str] = []
        for name in names:
            if name not in avoided:
                break
            ahead.append(name)
        for name in ahead:  # the ones passed over before the first healthy one, as skips
            rt = runtimes.get(name)
            if rt is None or rt.slowness.verdict is None:
                continue
            _passed_over(self.core, flow, rt, Attempt(
                name, "slow", message=rt.slowness.verdict.words(),
                pool=way.pool_of.get(name) if way.pool_of else None))
        return [n for n in names if n not in avoided] + [n for n in names if n in avoided]
