"""Walk a profile's failover chain for one request (DESIGN.md, failure table and commit rule).

For each chain member: skip it if it cannot serve (recording why), otherwise try it. Each try
ends in an outcome (classify.py maps statuses and transport errors); what follows — trying the
same provider again, moving on, answering the client, the breaker and health effects — is that
outcome's row of the failure policy (policy.py), executed here without a decision of its own
(the retries themselves are carried out by retries.py). Streams are handed to
`streaming.open_stream`, which commits to a provider only at its first content event.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from claudex.config.model import Profile
from claudex.engine.addons.windows import windows_in_stream
from claudex.engine.breaker.circuit import BreakerState
from claudex.engine.core.addressing import map_model
from claudex.engine.core.answers import (
    all_failed,
    error_result,
    passed_headers,
    scrub_error_body,
    tag,
)
from claudex.engine.core.classify import (
    Outcome,
    classify_status,
    map_transport_error,
    plan_limit,
    stated_context_window,
    stated_token_limit,
)
from claudex.engine.core.conversation import conversation_of, first_turn
from claudex.engine.core.exchange import Exchange
from claudex.engine.core.gate import GatedResponse
from claudex.engine.core.hooks import Flow, addon_failed
from claudex.engine.core.ledger import Ledger
from claudex.engine.core.policy import OK_RULE, POLICY, BreakerEffect, Local, Rule
from claudex.engine.core.pools import CACHE_S, PoolTurn
from claudex.engine.core.request import Attempt, ForwardResult, ProxyRequest
from claudex.engine.core.retries import Retries
from claudex.engine.core.runtime import ProviderRuntime
from claudex.engine.core.stalls import StreamDeadlines, within
from claudex.engine.core.streaming import open_stream
from claudex.engine.core.tries import EngineCore, Seen, Tries
from claudex.engine.core.usage import Usage, usage_in_body
from claudex.engine.credentials.cache import AuthHeaders, CredentialError
from claudex.engine.events import Event
from claudex.engine.masking.secrets import SCRUBBER
from claudex.engine.routing.estimate import could_be_long, estimated_prompt_tokens
from claudex.providers import anthropic, openai, responses
from claudex.providers.translate import estimate_input_tokens
from claudex.providers.validation import error_body as request_error_body
from claudex.providers.validation_problems import InvalidRequest

log = logging.getLogger("claudex.engine")



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


def _skip_message(rt: ProviderRuntime | None, reason: str, now: float) -> str:
    if rt is None:
        return "no such profile"
    if reason == "breaker_open":
        retry = rt.breaker.snapshot().retry_in_s
        return f"breaker open (retry in {retry:.0f}s)" if retry else "breaker open"
    if reason == "forced_open":  # "tripped by operator: maintenance (12m left)"
        return rt.trip_text()
    if reason == "window_spent":  # "5-hour window spent until 14:05"
        return rt.spent_words()
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


def _unhook_frames(exc: BaseException) -> None:
    """Let go of a mapped transport error's frames. aiohttp keeps a refused connect's error in a
    local of a frame in its own traceback, and each frame holds its callers: the cycle kept the
    request's whole context (flow, exchange, ledger: ~11 KB) until a collection of the cyclic
    garbage, which a failing provider piles up (RSS +1.7 MB over 110 failovers)."""
    seen: BaseException | None = exc
    while seen is not None:
        seen.__traceback__ = None
        seen = seen.__cause__ or seen.__context__


def _base36(n: int) -> str:
    digits = ""
    while True:
        n, d = divmod(n, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[d] + digits
        if n == 0:
            return digits


def _queue_full(rt: ProviderRuntime) -> str:
    limit = rt.gate.limit.limit
    held = (f"{limit} at once, adaptive" if limit is not None
            else f"max_connections = {rt.gate.max_connections}")
    return (f"waited {rt.profile.queue_timeout:g} s (queue_timeout) for a slot "
            f"({held})")


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
        self._retries = Retries(core).by_kind  # how each kind of policy.Retry is carried out
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
                                  "context_too_small" else _skip_message(rt, reason, now),
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
            try:
                result = await self._serve(ledger, exchange)
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

    # -- one provider --------------------------------------------------------------------------

    async def _serve(self, ledger: Ledger, exchange: Exchange) -> ForwardResult | None:
        """Serve the request from one provider, or return None (after recording why) to fail
        over. Each try ends in an outcome whose row of the failure policy (engine/core/policy.py)
        says what follows; this loop only executes it. Every path settles the ledger's permit
        exactly once."""
        req, profile = exchange.req, ledger.rt.profile
        if req.endpoint == "count_tokens" and profile.protocol != "anthropic":
            ledger.release()
            return self._local_token_estimate(req, profile.name, ledger.trail.attempts)
        tries = Tries(exchange.url())
        while True:
            seen = await self._try(ledger, exchange, tries)
            rule = POLICY[seen.key]
            if rule is OK_RULE:  # the usual try: nothing to retry, no coroutine to ask
                return self._conclude(rule, ledger, exchange, seen, None)
            step = await self._retries[rule.retry](ledger, exchange, seen, tries)
            if step.again:
                ledger.note(seen.attempt, rule)
                if step.wait is not None:
                    await self.core.sleep(step.wait)
                continue
            if step.instead is not None:  # the retry could not happen: another row decides
                ledger.note(seen.attempt, rule)
                seen, rule = step.instead, POLICY[step.instead.key]
            return self._conclude(rule, ledger, exchange, seen, step.retry_after)

    def _conclude(self, rule: Rule, ledger: Ledger, exchange: Exchange, seen: Seen,
                  retry_after: float | None) -> ForwardResult | None:
        if rule.breaker is BreakerEffect.SUCCESS:
            if not ledger.streaming:  # a committed stream succeeds when it ends
                # A whole answer's attempt_ended waits for the client to have it (hooks.py).
                whole = seen.result is not None and seen.result.stream is None
                ledger.succeed(seen.attempt.status or 200, seen.attempt, later=whole)
        else:
            ledger.conclude(rule, seen.attempt, retry_after, seen.problem)
        if rule.failover:
            return None
        return tag(seen.result or self._passed_on(ledger, exchange, seen))

    async def _try(self, ledger: Ledger, exchange: Exchange, tries: Tries) -> Seen:
        """Send the request once and say what came of it (an outcome, never a decision)."""
        core, rt, req = self.core, ledger.rt, exchange.req
        profile = rt.profile
        ledger.not_sending()
        if tries.body is None:
            try:
                tries.body = exchange.body()
            except InvalidRequest as exc:  # the client's request is malformed: 400, no provider
                log.warning("%s: refused a %s %s request while translating it for %s (400, "
                            "not sent): %s", profile.name, req.protocol, req.endpoint,
                            exchange.upstream, exc)
                return Seen(Local.INVALID_REQUEST, ledger.attempt(
                    Local.INVALID_REQUEST, None, str(exc)[:200]), result=ForwardResult(
                    400, {"content-type": "application/json"}, None, ledger.trail.attempts,
                    body=request_error_body(req.protocol, exc.problem)))
            except Exception as exc:  # a claudex bug, not the provider's fault
                return Seen(Local.TRANSLATION_ERROR, ledger.attempt(
                    Local.TRANSLATION_ERROR, None, str(exc)[:200]))
        auth = rt.credentials.headers_now()  # the usual request: nothing to load, no await
        if auth is False:
            try:
                auth = await rt.credentials.auth_headers()
            except CredentialError as exc:
                return Seen(Local.CREDENTIALS, ledger.attempt(Local.CREDENTIALS, None,
                                                              str(exc)), problem=exc.reason)
        if rt.health.credentials_problem is not None:
            rt.health.credentials_problem = None
        # claudex's own queue (engine/core/gate.py): waiting here is never the provider's fault.
        if not rt.gate.take_now() and not await rt.gate.acquire(profile.queue_timeout):
            return Seen(Local.QUEUE_FULL, ledger.attempt(Local.QUEUE_FULL, None,
                                                          _queue_full(rt)))
        started = core.clock()
        alone = rt.gate.in_flight == 1  # a 429 then is a quota, not too much concurrency
        if tries.rate_limited == 0:
            rt.budget.request(started)
        ledger.sending(exchange, started)
        deadlines = StreamDeadlines.start(profile) if req.stream else None
        try:
            sending = core.transport.send(
                profile.name, "POST", tries.url, exchange.headers(auth),
                tries.body, connect_timeout=profile.connect_timeout,
                # A stream has deadlines of its own (engine/core/stalls.py): before the commit,
                # `within`; after it, the relay's idle watch. No socket read timer.
                read_timeout=profile.read_timeout if deadlines is None else None,
            )
            resp = GatedResponse(await (sending if deadlines is None
                                        else within(deadlines.headers(), sending)), rt.gate)
        except BaseException as exc:
            rt.gate.release()
            if not isinstance(exc, Exception):
                raise
            outcome, words = map_transport_error(exc)  # mapped at one place
            _unhook_frames(exc)
            return Seen(outcome, ledger.attempt(outcome, None, words))
        ledger.headers_arrived()
        status = resp.status
        oauth = profile.auth_type == "oauth" or profile.token_command is not None
        outcome = classify_status(status, oauth=oauth)
        # A whole 2xx tells its headers once it is known to be the answer served (then at
        # finish, hooks.py) or to fail over (_answer); every other answer tells them now.
        whole = outcome is Outcome.OK and deadlines is None and not exchange.chatgpt
        if not whole:
            self._tell_headers(ledger.flow, rt, status, resp.raw_headers)
        if outcome is Outcome.OK:
            return await self._answer(ledger, exchange, resp, status, deadlines, auth,
                                      headers_told=not whole)
        # Every non-2xx answer is small: read it whole for the message and pass-through.
        try:
            payload = await resp.read()
        except Exception:
            payload = b""
        payload = scrub_error_body(payload, auth, req)  # it may quote the key it was sent
        message = (anthropic.error_message(payload) if profile.protocol == "anthropic"
                   else responses.error_message(payload) if profile.protocol == "responses"
                   else openai.error_message(payload))
        limit = stated_token_limit(outcome, status, message)
        if limit is not None and req.endpoint != "count_tokens":
            outcome = Outcome.TOKEN_LIMIT
        elif status == 429 and plan_limit(outcome, status, resp.headers, payload):
            outcome = Outcome.PLAN_LIMIT
        elif outcome is Outcome.CLIENT_ERROR and req.endpoint != "count_tokens":
            refusal = stated_context_window(outcome, status, message, payload)
            if refusal is not None:
                self._learn_context_window(rt, exchange, refusal.window)
                if not exchange.addressed:  # the addressed profile's 400 goes to the client
                    outcome = Outcome.CONTEXT_EXCEEDED
        return Seen(outcome, ledger.attempt(outcome, status, message), resp=resp,
                     payload=payload, limit=limit, auth=auth, sent_at=started, alone=alone)

    def _tell_headers(self, flow: Flow, rt: ProviderRuntime, status: int,
                      headers: Sequence[tuple[bytes, bytes]]) -> None:
        for hook in self.core.hooks.upstream_headers:
            try:
                hook(flow, rt, status, headers)
            except Exception:
                addon_failed(hook)

    def _learn_context_window(self, rt: ProviderRuntime, exchange: Exchange,
                              stated: int | None) -> None:
        """Remember the window the provider stated for the model sent, or, when it did not say
        its size, just under the estimate of the prompt it refused (a later one as long is
        passed over); one event and one log line when it is new."""
        req = exchange.req
        if stated is not None:
            window = stated
        else:  # under this prompt's estimate, and under any refused before it
            window = estimated_prompt_tokens(req.protocol, req.body) - 1
            known = rt.context_limits.get(exchange.model or "")
            window = window if known is None else min(known, window)
        if window < 1 or not rt.learn_context_window(exchange.model, window):
            return
        said = "" if stated is not None else "about "
        words = (f"{rt.name}: context window {said}{window:,} tokens for "
                 f"{exchange.model or 'its model'} (refused a longer prompt); as a backup it is "
                 f"passed over by longer ones")
        self.core.events.publish(Event("limit", words, rt.name,
                                       {"model": exchange.model, "context_window": window}))
        log.info("%s", words)

    async def _answer(self, ledger: Ledger, exchange: Exchange, resp: GatedResponse,
                      status: int, deadlines: StreamDeadlines | None,
                      auth: AuthHeaders | None, *, headers_told: bool) -> Seen:
        """A 2xx: the stream up to its commit, or the whole answer; or why it failed."""
        rt = ledger.rt
        if deadlines is not None:
            streamed = await open_stream(ledger, exchange, resp, deadlines,
                                         self._learn_context_window)
            if isinstance(streamed, ForwardResult):
                return Seen(Outcome.OK, ledger.attempt(Outcome.OK, status), result=streamed)
            if auth is not None:
                SCRUBBER.note(auth.token)  # its failure message may quote the token
            outcome, words = streamed
            return Seen(outcome, ledger.attempt(outcome, status, words))
        try:
            raw = await resp.read()
            if exchange.chatgpt and b"codex.rate_limits" in raw[:4096]:  # the plan's windows
                windows_in_stream(ledger.flow, rt, raw[:4096])
            payload = exchange.answer(raw)
        except Exception as exc:
            mapped, words = map_transport_error(exc)
            if isinstance(exc, ValueError | RecursionError):  # not JSON we can use
                mapped, words = Outcome.SERVER_ERROR, "unreadable answer"
            if not headers_told:  # it fails over: told now (_try)
                self._tell_headers(ledger.flow, rt, status, resp.raw_headers)
            return Seen(mapped, ledger.attempt(mapped, status, words))
        hooks = self.core.hooks.upstream_headers
        if hooks and not headers_told:  # the answer served: told at finish (as Ledger.succeed)
            flow = ledger.flow
            if flow.later is None:
                flow.later = []
            flow.later.append((hooks, flow, rt, status, resp.raw_headers))
        headers = passed_headers(resp.raw_headers, translating=exchange.translating)
        headers["content-type"] = "application/json"
        return Seen(Outcome.OK, ledger.attempt(Outcome.OK, status), result=ForwardResult(
            status, headers, rt.profile.name, ledger.trail.attempts, body=payload))

    def _passed_on(self, ledger: Ledger, exchange: Exchange, seen: Seen) -> ForwardResult:
        """The provider's refusal of the client's own request, for the client unchanged."""
        assert seen.resp is not None and seen.attempt.status is not None
        status, payload = exchange.error_answer(seen.attempt.status, seen.payload)
        headers = passed_headers(seen.resp.raw_headers, translating=exchange.translating)
        headers["content-type"] = "application/json"
        return ForwardResult(status, headers, ledger.rt.name, ledger.trail.attempts,
                             body=payload)

    def _local_token_estimate(self, req: ProxyRequest, provider: str,
                              attempts: list[Attempt]) -> ForwardResult:
        # An OpenAI-compatible provider has no token-counting endpoint: estimate locally
        # instead of failing Claude Code's preflight call.
        estimate = max(1, estimate_input_tokens(req.body))
        attempts.append(Attempt(provider, "ok", 200, "local estimate"))
        body = json.dumps({"input_tokens": estimate}).encode()
        return tag(ForwardResult(200, {"content-type": "application/json"}, provider, attempts,
                                 body=body))
