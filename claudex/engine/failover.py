"""Walk a profile's failover chain for one request (DESIGN.md, failure table and commit rule).

For each chain member: skip it if it cannot serve (recording why), otherwise send the request,
retrying the same provider only for rate limits and once after an OAuth refresh, and move on for
everything the failure table says to fail over on. Streams are handed to `streaming.open_stream`,
which commits to a provider only at its first content event.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Protocol

from claudex.config.model import Config, Profile
from claudex.engine import backoff
from claudex.engine.answers import (
    all_failed,
    error_result,
    passed_headers,
    scrub_error_body,
    tag,
)
from claudex.engine.breaker import BreakerState
from claudex.engine.classify import (
    Outcome,
    classify_status,
    map_transport_error,
    stated_token_limit,
)
from claudex.engine.clock import Clock, Sleep, WallClock
from claudex.engine.credentials import CredentialError
from claudex.engine.events import Event, EventBus
from claudex.engine.exchange import Exchange
from claudex.engine.gate import GatedResponse
from claudex.engine.ledger import Ledger, Trail
from claudex.engine.request import Attempt, ForwardResult, ProxyRequest
from claudex.engine.runtime import ProviderRuntime
from claudex.engine.secrets import SCRUBBER
from claudex.engine.signatures import SignatureMemory
from claudex.engine.stalls import StreamDeadlines, within
from claudex.engine.stats import GlobalStats
from claudex.engine.streaming import open_stream
from claudex.engine.transport import Transport
from claudex.providers import anthropic, openai, responses
from claudex.providers.translate import estimate_input_tokens
from claudex.providers.validation import InvalidRequest
from claudex.providers.validation import error_body as request_error_body

log = logging.getLogger("claudex.engine")


class EngineCore(Protocol):
    config: Config
    runtimes: dict[str, ProviderRuntime]
    transport: Transport
    clock: Clock
    wall: WallClock
    sleep: Sleep
    rand: Callable[[], float]
    events: EventBus
    totals: GlobalStats
    signatures: SignatureMemory

    def escalate(self, sentence: str) -> None: ...


def _skip_message(rt: ProviderRuntime | None, reason: str, now: float) -> str:
    if rt is None:
        return "no such profile"
    if reason == "breaker_open":
        retry = rt.breaker.snapshot().retry_in_s
        return f"breaker open (retry in {retry:.0f}s)" if retry else "breaker open"
    return {
        "forced_open": "breaker tripped by operator",
        "half_open_busy": "breaker half-open; its trial request is in flight",
        "cooling_down": f"rate limited; cooling down {max(0.0, rt.cooldown_until - now):.0f}s",
        "disabled": "profile disabled",
        "misconfigured": rt.profile.problem or "misconfigured",
        "round_cap": "round cap reached",
    }.get(reason, reason)


def _queue_full(rt: ProviderRuntime) -> str:
    limit = rt.gate.limit.limit
    held = (f"{limit} at once, adaptive" if limit is not None
            else f"max_connections = {rt.gate.max_connections}")
    return (f"waited {rt.profile.queue_timeout:g} s (queue_timeout) for a slot "
            f"({held})")


class Forwarder:
    def __init__(self, core: EngineCore) -> None:
        self.core = core

    # -- chain -------------------------------------------------------------------------------

    def chain(self, req: ProxyRequest) -> tuple[Profile | None, list[str]]:
        config = self.core.config
        addressed = config.profile(req.profile) if req.profile else config.default_profile
        if addressed is None:
            return None, []
        names = [addressed.name]
        if req.failover:
            names += [n for n in addressed.backup_providers if n not in names]
        return addressed, names

    def _skip_reason(self, rt: ProviderRuntime | None, now: float) -> str | None:
        if rt is None:
            return "unknown_profile"
        if not rt.profile.enabled:
            return "disabled"
        if rt.profile.problem is not None:
            return "misconfigured"
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
        core = self.core
        addressed, names = self.chain(req)
        if addressed is None:
            name = req.profile or "(default)"
            return error_result(req, 404, f"No profile named {name!r} is configured.", [])
        now = core.clock()
        core.totals.requests += 1
        core.totals.meter.hit(now)
        # Round cap: never try more providers than were eligible when the request started.
        cap = 1 if len(names) == 1 else sum(
            1 for n in names if self._skip_reason(core.runtimes.get(n), now) is None)
        trail = Trail()
        tried = 0
        for name in names:
            rt = core.runtimes.get(name)
            now = core.clock()
            reason = self._skip_reason(rt, now)
            if reason is None and tried >= cap:
                reason = "round_cap"
            permit = None
            if reason is None and rt is not None:
                permit = rt.breaker.try_acquire()
                if permit is None:
                    half_open = rt.breaker.state is BreakerState.HALF_OPEN
                    reason = "half_open_busy" if half_open else "breaker_open"
            if rt is None or permit is None:
                reason = reason or "unknown_profile"
                cooling = rt is not None and reason == "cooling_down"
                trail.skip(Attempt(name, reason, message=_skip_message(rt, reason, now)),
                           max(0.0, rt.cooldown_until - now) if rt and cooling else None)
                continue
            tried += 1
            ledger = Ledger(rt, permit, trail, core.clock, core.wall)
            exchange = Exchange(req, rt.profile, addressed=name == addressed.name,
                                aliases=core.config.model_aliases)
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
                        rt.stats.count_dropped(exchange.dropped)
                served = [a for a in trail.attempts if not a.skipped]
                if len({a.provider for a in served}) > 1 or trail.attempts[0].provider != name:
                    core.totals.failovers += 1
                return result
        narrowed = {n: limit for n in names if (rt := core.runtimes.get(n)) is not None
                    and (limit := rt.gate.limit.limit) is not None and rt.gate.limit.reason}
        result, sentence = all_failed(req, trail, narrowed)
        core.totals.all_failed += 1
        core.escalate(sentence)
        return result

    # -- one provider --------------------------------------------------------------------------

    async def _serve(self, ledger: Ledger, exchange: Exchange) -> ForwardResult | None:
        """Serve the request from one provider, or return None (after recording why) to fail
        over. Every path settles the ledger's permit exactly once."""
        core, rt, req = self.core, ledger.rt, exchange.req
        profile = rt.profile
        if req.endpoint == "count_tokens" and profile.protocol != "anthropic":
            ledger.release()
            return self._local_token_estimate(req, profile.name, ledger.trail.attempts)
        try:
            body = exchange.body()
        except InvalidRequest as exc:  # the client's request is malformed: 400, no provider
            log.warning("%s: refused a %s %s request while translating it for %s (400, not "
                        "sent): %s", profile.name, req.protocol, req.endpoint, exchange.upstream,
                        exc)
            ledger.note(Attempt(profile.name, "invalid_request", None, str(exc)[:200]))
            ledger.release()
            return tag(ForwardResult(400, {"content-type": "application/json"}, None,
                                     ledger.trail.attempts,
                                     body=request_error_body(req.protocol, exc.problem)))
        except Exception as exc:  # a claudex bug, not the provider's fault: no breaker failure
            ledger.trail.skip(Attempt(profile.name, "translation_error", None, str(exc)[:200]))
            ledger.release()
            return None
        url = exchange.url()
        refreshed = False
        capped_retry = False
        retry_number = 0
        while True:
            try:
                auth = await rt.credentials.auth_headers()
            except CredentialError as exc:
                rt.stats.last_error = str(exc)
                # Shown red as "misconfigured" even when no health probe runs to find it.
                rt.health.credentials_problem = exc.reason
                ledger.trail.skip(Attempt(profile.name, "credentials", message=str(exc)))
                ledger.release()
                return None
            if rt.health.credentials_problem is not None:
                rt.health.credentials_problem = None
            # claudex's own queue (engine/gate.py): waiting here is never the provider's fault.
            if not await rt.gate.acquire(profile.queue_timeout):
                ledger.trail.skip(Attempt(profile.name, "queue_full", None, _queue_full(rt)))
                ledger.release()
                return None
            started = core.clock()
            alone = rt.gate.in_flight == 1  # a 429 then is a quota, not too much concurrency
            rt.stats.requests += 1
            if retry_number == 0:
                rt.budget.request(started)
            deadlines = StreamDeadlines.start(profile) if req.stream else None
            try:
                sending = core.transport.send(
                    profile.name, "POST", url, exchange.headers(auth), body,
                    connect_timeout=profile.connect_timeout,
                    # A stream's socket may be silent up to the idle timeout once committed;
                    # before that its own, shorter deadlines apply (engine/stalls.py).
                    read_timeout=profile.read_timeout if deadlines is None
                    else profile.stream_idle_timeout,
                )
                resp = GatedResponse(await (sending if deadlines is None
                                            else within(deadlines.headers(), sending)), rt.gate)
            except BaseException as exc:
                rt.gate.release()
                if not isinstance(exc, Exception):
                    raise
                # Mapped at one place: classify.map_transport_error.
                outcome, words = map_transport_error(exc)
                ledger.fail(Attempt(profile.name, outcome.value, None, words,
                                    ledger.ms_since(started)))
                return None
            status = resp.status
            oauth = profile.auth_type == "oauth" or profile.token_command is not None
            outcome = classify_status(status, oauth=oauth)
            if outcome is Outcome.OK:
                if req.stream:
                    assert deadlines is not None
                    streamed = await open_stream(ledger, exchange, resp, started, deadlines)
                    if streamed is None and auth is not None:
                        SCRUBBER.note(auth.token)  # its failure message may quote the token
                    return streamed
                try:
                    payload = exchange.answer(await resp.read())
                except Exception as exc:
                    mapped, words = map_transport_error(exc)
                    if isinstance(exc, ValueError | RecursionError):  # not JSON we can use
                        mapped, words = Outcome.SERVER_ERROR, "unreadable answer"
                    ledger.fail(Attempt(profile.name, mapped.value, status, words,
                                        ledger.ms_since(started)))
                    return None
                ledger.succeed(status, started)
                headers = passed_headers(resp.raw_headers, translating=exchange.translating)
                headers["content-type"] = "application/json"
                return tag(ForwardResult(status, headers, rt.name, ledger.trail.attempts,
                                         body=payload))
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
            attempt = Attempt(profile.name, outcome.value, status, message,
                              ledger.ms_since(started))
            if outcome is Outcome.TOKEN_LIMIT and limit is not None:
                if capped_retry or limit == exchange.max_tokens_cap:
                    # Already at the stated limit and still refused: let a backup try.
                    ledger.trail.skip(attempt)
                    ledger.release()
                    return None
                capped_retry = True
                ledger.note(attempt)
                self._learn_token_limit(rt, exchange, limit)
                body = exchange.body()
                continue
            if outcome is Outcome.CLIENT_ERROR:
                rt.stats.client_errors += 1
                rt.stats.last_status = status
                ledger.note(attempt)
                ledger.release()
                status, payload = exchange.error_answer(status, payload)
                headers = passed_headers(resp.raw_headers, translating=exchange.translating)
                headers["content-type"] = "application/json"
                return tag(ForwardResult(status, headers, rt.name, ledger.trail.attempts,
                                         body=payload))
            if outcome is Outcome.RATE_LIMITED:
                retry_number += 1
                rt.stats.rate_limited += 1
                rt.stats.last_status = status
                now = core.clock()
                self._narrow(rt, now, started)
                cool = backoff.cooldown_seconds(resp.headers, profile.retry, core.wall())
                decision = backoff.rate_limit_decision(
                    retry_number, resp.headers, profile.retry, core.wall(), core.rand)
                # Reduce concurrency before pausing the provider (proxy-resilience seed): the
                # whole provider cools down only for a quota (a wait too long to honour) or
                # when it refused a request that was claudex's only one there.
                quota = decision.wait is None and cool > profile.retry.max_retry_after
                if quota or alone:
                    rt.cooldown_until = max(rt.cooldown_until, now + cool)
                # The retry budget guards a provider claudex does not limit yet; once the
                # adaptive limit holds, retries wait for a slot and cannot amplify the burst.
                if decision.wait is not None and rt.gate.limit.limit is None \
                        and not rt.budget.try_retry(now):
                    decision = backoff.RateLimitDecision(
                        None, f"retry budget spent ({profile.retry_budget:.0%} of recent "
                        "requests)")
                if decision.wait is None:
                    ledger.trail.skip(attempt, max(cool, 0.0))
                    ledger.release()
                    if rt.cooling_down(now):
                        core.events.publish(Event(
                            "cooldown", f"{rt.name}: rate limited, skipped for {cool:.0f}s "
                            f"({decision.reason})", rt.name, {"seconds": cool}))
                    return None
                ledger.note(attempt)
                await core.sleep(decision.wait)
                continue
            if outcome is Outcome.TOKEN_EXPIRED and not refreshed and auth is not None:
                ledger.note(attempt)
                refreshed = True
                if await rt.credentials.refresh_after_401(auth):
                    continue
                rt.health.auth_failing = True
                ledger.fail(Attempt(profile.name, "needs_login", status,
                                    "token rejected and refresh impossible"))
                return None
            if outcome in (Outcome.AUTH_ERROR, Outcome.TOKEN_EXPIRED):
                rt.health.auth_failing = True
            ledger.fail(attempt)
            return None

    def _narrow(self, rt: ProviderRuntime, now: float, sent_at: float) -> None:
        """A 429: let the adaptive limit see it; one event and one log line when it drops."""
        # This request's slot is already back: count it as still in flight at the burst.
        if rt.gate.limit.on_rate_limited(now, rt.gate.in_flight + 1, sent_at):
            snap = rt.gate.limit.snapshot(now)
            words = f"{rt.name}: reducing concurrency to {snap.limit} ({snap.reason})"
            self.core.events.publish(Event("limit", words, rt.name,
                                           {"concurrency": snap.limit, "reason": snap.reason}))
            log.info("%s", words)

    def _learn_token_limit(self, rt: ProviderRuntime, exchange: Exchange, limit: int) -> None:
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

    def _local_token_estimate(self, req: ProxyRequest, provider: str,
                              attempts: list[Attempt]) -> ForwardResult:
        # An OpenAI-compatible provider has no token-counting endpoint: estimate locally
        # instead of failing Claude Code's preflight call.
        estimate = max(1, estimate_input_tokens(req.body))
        attempts.append(Attempt(provider, "ok", 200, "local estimate"))
        body = json.dumps({"input_tokens": estimate}).encode()
        return tag(ForwardResult(200, {"content-type": "application/json"}, provider, attempts,
                                 body=body))
