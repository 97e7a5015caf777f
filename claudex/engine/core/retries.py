"""How the failure policy's retries (engine/core/policy.py `Retry`) are carried out at one provider:
each takes what a try came to and says whether to try again (`tries.Step`), and does the
bookkeeping that belongs to it — the adaptive limit and the cooldown for a 429, the token
refresh for a 401, the learned max_tokens cap for a stated limit."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from claudex.engine.core import backoff
from claudex.engine.core.concurrency import AdaptiveLimit
from claudex.engine.core.exchange import Exchange
from claudex.engine.core.ledger import Ledger
from claudex.engine.core.policy import Local, Retry
from claudex.engine.core.runtime import ProviderRuntime
from claudex.engine.core.tries import EngineCore, RetryHandler, Seen, Step, Tries
from claudex.engine.events import Event
from claudex.providers.windows import spent_details

log = logging.getLogger("claudex.engine")
MAX_MENDS = 3  # tries again without what a cloud refused, at most, per request and provider


class Retries:
    def __init__(self, core: EngineCore) -> None:
        self.core = core
        self.by_kind: dict[Retry, RetryHandler] = {
            Retry.NO: self.no_retry, Retry.BACKOFF: self.backoff,
            Retry.AFTER_REFRESH: self.after_refresh, Retry.AT_CAP: self.at_cap,
            Retry.AFTER_RESET: self.after_reset, Retry.WITHOUT_REFUSED: self.without_refused,
            Retry.NEXT_HOP: self.next_hop, Retry.PROXY_BACKOFF: self.proxy_backoff}
        self._timers: set[int] = set()  # limits (by id) with a decrease waiting to be said

    async def no_retry(self, ledger: Ledger, exchange: Exchange, seen: Seen,
                        tries: Tries) -> Step:
        return Step()

    async def backoff(self, ledger: Ledger, exchange: Exchange, seen: Seen,
                       tries: Tries) -> Step:
        """A 429: wait and try again as `[retry]` and the provider's headers say, or not."""
        core, rt = self.core, ledger.rt
        retry = rt.profile.retry
        tries.rate_limited += 1
        now = core.clock()
        self.narrow(rt, now, seen.sent_at)
        headers = seen.resp.headers if seen.resp is not None else {}
        cool = backoff.cooldown_seconds(headers, retry, core.wall())
        decision = backoff.rate_limit_decision(tries.rate_limited, headers, retry, core.wall(),
                                               core.rand)
        # Reduce concurrency before pausing the provider (proxy-resilience seed): the whole
        # provider cools down only for a quota (a wait too long to honour) or when it refused
        # a request that was claudex's only one there.
        quota = decision.wait is None and cool > retry.max_retry_after
        if quota or seen.alone:
            rt.cooldown_until = max(rt.cooldown_until, now + cool)
        # The retry budget guards a provider claudex does not limit yet; once the adaptive
        # limit holds, retries wait for a slot and cannot amplify the burst.
        if decision.wait is not None and rt.gate.limit.limit is None \
                and not rt.budget.try_retry(now):
            decision = backoff.RateLimitDecision(
                None, f"retry budget spent ({rt.profile.retry_budget:.0%} of recent requests)")
        if decision.wait is not None:
            return Step(again=True, wait=decision.wait)
        if rt.cooling_down(now):
            core.events.publish(Event(
                "cooldown", f"{rt.name}: rate limited, skipped for {cool:.0f}s "
                f"({decision.reason})", rt.name, {"seconds": cool}))
        return Step(retry_after=max(cool, 0.0))

    async def next_hop(self, ledger: Ledger, exchange: Exchange, seen: Seen,
                       tries: Tries) -> Step:
        """An upstream proxy failed (issue 36, seed 000): at once through the route's next
        eligible proxy, those that failed in this request excluded, at most as many as were
        eligible when it started; none left: the provider's part ends (nothing counted against
        it) and the chain goes on."""
        route = ledger.rt.route
        if tries.hop is not None:
            tries.failed_hops.append(tries.hop.name)
        if route is None or len(tries.failed_hops) >= tries.hop_cap:
            return Step()
        hops = self.core.proxies.eligible(route.hops, self.core.clock(), tries.failed_hops)
        if not hops:
            return Step()
        tries.hop, tries.proxy_rate_limited = hops[0], 0
        return Step(again=True)

    async def proxy_backoff(self, ledger: Ledger, exchange: Exchange, seen: Seen,
                            tries: Tries) -> Step:
        """The proxy answered CONNECT with 429 (seed 001): wait as the proxy's own `[retry]`
        and its Retry-After say and try the same proxy again, at most `max_attempts`; then the
        escalation sentence naming the proxy, the proxy cools down, and the next proxy."""
        core, hop = self.core, tries.hop
        assert hop is not None
        state = core.proxies.get(hop.name)
        retry = state.spec.retry if state is not None else ledger.rt.profile.retry
        tries.proxy_rate_limited += 1
        if state is not None:  # fewer tunnels at once through it (seed 001), as a provider's
            gate = state.gate  # this try's slot is already back: count it as in flight
            if gate.limit.on_rate_limited(core.clock(), gate.in_flight + 1, seen.sent_at or None):
                self._say_limit(hop.name, gate.limit,
                                lambda: core.proxies.get(hop.name) is state, "proxy ")
        headers = seen.proxy.headers if seen.proxy is not None else {}
        decision = backoff.rate_limit_decision(tries.proxy_rate_limited, headers, retry,
                                               core.wall(), core.rand)
        if decision.wait is not None:
            return Step(again=True, wait=decision.wait)
        core.escalate(f"Repeated rate-limit errors from the upstream proxy {hop.name} "
                      f"({hop.where}) — pausing retries here; consider reducing concurrent "
                      "requests or retrying later.")
        core.proxies.cool(hop.name, backoff.cooldown_seconds(headers, retry, core.wall()))
        step = await self.next_hop(ledger, exchange, seen, tries)
        if not step.again:
            return Step(retry_after=seen.proxy.retry_after if seen.proxy is not None else None)
        return step

    async def after_refresh(self, ledger: Ledger, exchange: Exchange, seen: Seen,
                             tries: Tries) -> Step:
        """A 401 on a token claudex can refresh: once, after refreshing it."""
        if tries.refreshed or seen.auth is None:
            return Step()
        tries.refreshed = True
        if await ledger.rt.credentials.refresh_after_401(seen.auth):
            return Step(again=True)
        return Step(instead=Seen(Local.NEEDS_LOGIN, ledger.attempt(
            Local.NEEDS_LOGIN, seen.attempt.status, "token rejected and refresh impossible")))

    async def at_cap(self, ledger: Ledger, exchange: Exchange, seen: Seen,
                      tries: Tries) -> Step:
        """A 400 stating the provider's max_tokens range: once more, at that cap."""
        limit = seen.limit
        if limit is None or tries.capped or limit == exchange.max_tokens_cap:
            return Step()  # already at the stated limit and still refused: a backup may try
        tries.capped = True
        self.learn_token_limit(ledger.rt, exchange, limit)
        tries.body = None  # built again, at the cap
        return Step(again=True)


    async def without_refused(self, ledger: Ledger, exchange: Exchange, seen: Seen,
                              tries: Tries) -> Step:
        """A cloud refused what the Anthropic API accepts (engine/clouds/): learn it (the
        profile leaves it out from now on, for this model), and try again with a body that
        differs; not when nothing more can be left out, nor past a few rounds."""
        wire, refusal, rt = exchange.wire, exchange.refused, ledger.rt
        if wire is None or refusal is None or tries.mended >= MAX_MENDS or tries.body is None:
            return Step()
        sent = tries.body
        while (words := wire.learn(refusal, exchange.on_wire)) is not None:
            self.core.events.publish(Event("limit", f"{rt.name}: {words}", rt.name,
                                           {"model": exchange.model, "refused": words}))
            log.info("%s: %s", rt.name, words)
            exchange.dropped = ()
            body = exchange.body()
            if body != sent:
                tries.mended += 1
                tries.body = body
                return Step(again=True)
        return Step()

    async def after_reset(self, ledger: Ledger, exchange: Exchange, seen: Seen,
                           tries: Tries) -> Step:
        """A spent plan window: nothing before its reset, so no retry; the provider is skipped
        until the reset the answer states (Anthropic's unified reset, ChatGPT's `resets_at` /
        `resets_in_seconds`), else its Retry-After."""
        core, rt = self.core, ledger.rt
        wall = core.wall()
        headers = seen.resp.headers if seen.resp is not None else {}
        spent = spent_details(headers, seen.payload, wall)
        until = spent.until
        if until is None or until <= wall:
            until = wall + backoff.cooldown_seconds(headers, rt.profile.retry, wall)
        self.mark_spent(rt, until, spent.window or _full_window(rt))
        return Step(retry_after=max(0.0, until - wall))

    def mark_spent(self, rt: ProviderRuntime, until: float, window: str | None) -> None:
        """`rt`'s plan window is spent until `until` (epoch s): one event and one log line
        when that is news (a later reset than the one known)."""
        if until <= rt.window_spent_until:
            return
        rt.window_spent_until, rt.window_spent_name = until, window
        words = f"{rt.name}: {rt.spent_words(self.core.wall())}"
        self.core.events.publish(Event("window", words, rt.name,
                                       {"until": round(until, 3), "window": window}))
        log.info("%s (skipped until then)", words)

    def narrow(self, rt: ProviderRuntime, now: float, sent_at: float) -> None:
        """A 429: let the adaptive limit see it; when it drops, say so once the round settles."""
        # This request's slot is already back: count it as still in flight at the burst.
        if rt.gate.limit.on_rate_limited(now, rt.gate.in_flight + 1, sent_at):
            self.say_limit(rt)

    def say_limit(self, rt: ProviderRuntime, *, due: bool = False) -> None:
        """One event and one log line per round of decreases, naming the limit as it is when
        they are said (what status shows then): `settle_s` after the round's first decrease,
        by a timer on the loop (with no loop, as in a test driving this by hand, the next
        call says it); `due`: that timer."""
        self._say_limit(rt.name, rt.gate.limit,
                        lambda: self.core.runtimes.get(rt.name) is rt, due=due)

    def _say_limit(self, name: str, limit: AdaptiveLimit, current: Callable[[], bool],
                   what: str = "", *, due: bool = False) -> None:
        """`say_limit` for the limit of `name`, a provider or (`what` "proxy ") an upstream
        proxy; `current`: the limit still belongs to the engine (not replaced by a reload)."""
        now = self.core.clock()
        snap = limit.announcement(now, due=due)
        if snap is not None:
            words = f"{what}{name}: reducing concurrency to {snap.limit} ({snap.reason})"
            self.core.events.publish(Event("limit", words, name,
                                           {"concurrency": snap.limit, "reason": snap.reason}))
            log.info("%s", words)
            return
        wait = limit.announce_in(now)
        if wait is None or id(limit) in self._timers:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._timers.add(id(limit))

        def fire() -> None:
            self._timers.discard(id(limit))
            if current():  # (not replaced by a reload meanwhile)
                self._say_limit(name, limit, current, what, due=True)

        loop.call_later(wait, fire)

    def learn_token_limit(self, rt: ProviderRuntime, exchange: Exchange, limit: int) -> None:
        """Remember the limit the provider stated, so the next request is capped before it is
        sent; one event and one log line, only when the limit is new."""
        if rt.token_limits.get(exchange.model or "") != limit:
            rt.learn_token_limit(exchange.model, limit)
            self.core.events.publish(Event(
                "limit", f"{rt.name}: max_tokens capped at {limit} for "
                f"{exchange.model or 'its model'} (the provider's stated limit)", rt.name,
                {"model": exchange.model, "max_tokens": limit}))
            log.info("%s: max_tokens capped at %d for %s (the provider's stated limit)",
                     rt.name, limit, exchange.model or "its model")
        exchange.max_tokens_cap = min(limit, exchange.max_tokens_cap or limit)


def _full_window(rt: ProviderRuntime) -> str | None:
    """The window the provider last reported full (a ChatGPT refusal does not name it)."""
    full = [w for w in rt.windows if w.used >= 1.0]
    return full[0].name if full else None
