"""One provider of the chain serving a request (DESIGN.md, failure table and commit rule).

Send the request, and say what came of it: each try ends in an outcome (classify.py maps
statuses and transport errors), and what follows — trying the same provider again, failing over,
answering the client, the breaker and health effects — is that outcome's row of the failure
policy (policy.py), executed here without a decision of its own (the retries themselves are
carried out by retries.py). A stream is handed to `streaming.open_stream`, which commits to the
provider only at its first content event. The chain's walk — who is tried, who is passed over and
why — is failover.py's; it hands each member it tries to `OneProvider.serve`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import ssl
from collections.abc import Sequence

import aiohttp

from claudex.config.model import Profile
from claudex.engine.addons.windows import windows_in_stream
from claudex.engine.breaker.circuit import Permit
from claudex.engine.core.answers import passed_headers, scrub_error_body, tag
from claudex.engine.core.classify import (
    PROXY_OUTCOMES,
    Outcome,
    classify_cloud,
    classify_status,
    cloud_words,
    map_transport_error,
    plan_limit,
    stated_context_window,
    stated_token_limit,
)
from claudex.engine.core.exchange import Exchange
from claudex.engine.core.gate import GatedResponse, ProviderGate
from claudex.engine.core.hooks import Flow, addon_failed
from claudex.engine.core.ledger import Ledger
from claudex.engine.core.policy import OK_RULE, POLICY, BreakerEffect, Local, Rule
from claudex.engine.core.request import Attempt, ForwardResult, ProxyRequest
from claudex.engine.core.retries import Retries
from claudex.engine.core.runtime import ProviderRuntime
from claudex.engine.core.stalls import StreamDeadlines, within
from claudex.engine.core.streaming import open_stream
from claudex.engine.core.tries import EngineCore, Seen, Tries
from claudex.engine.credentials.cache import AuthHeaders, CredentialError
from claudex.engine.events import Event
from claudex.engine.masking.secrets import SCRUBBER
from claudex.engine.network.failures import (
    ProxyFailure,
    ProxyKind,
    beyond_proxy,
    proxy_failure,
    status_failure,
    untrusted_words,
)
from claudex.engine.network.issuer import presented_issuer
from claudex.engine.network.routes import Hop
from claudex.engine.routing.estimate import estimated_prompt_tokens
from claudex.providers import anthropic, openai, responses
from claudex.providers.translate import estimate_input_tokens
from claudex.providers.validation import error_body as request_error_body
from claudex.providers.validation_problems import InvalidRequest

log = logging.getLogger("claudex.engine")


def _unhook_frames(exc: BaseException) -> None:
    """Let go of a mapped transport error's frames. aiohttp keeps a refused connect's error in a
    local of a frame in its own traceback, and each frame holds its callers: the cycle kept the
    request's whole context (flow, exchange, ledger: ~11 KB) until a collection of the cyclic
    garbage, which a failing provider piles up (RSS +1.7 MB over 110 failovers)."""
    seen: BaseException | None = exc
    while seen is not None:
        seen.__traceback__ = None
        seen = seen.__cause__ or seen.__context__


def _queue_full(rt: ProviderRuntime) -> str:
    limit = rt.gate.limit.limit
    held = (f"{limit} at once, adaptive" if limit is not None
            else f"max_connections = {rt.gate.max_connections}")
    return (f"waited {rt.profile.queue_timeout:g} s (queue_timeout) for a slot "
            f"({held})")


def _queue_full_at(proxy: str, gate: ProviderGate, profile: Profile) -> str:
    return (f"waited {profile.queue_timeout:g} s (queue_timeout) for a slot at proxy {proxy} "
            f"({gate.limit.limit} at once, adaptive)")


class OneProvider:
    def __init__(self, core: EngineCore) -> None:
        self.core = core
        self._retries = Retries(core).by_kind  # how each kind of policy.Retry is carried out
        # Who signed a certificate that did not verify, by (hop, host); hop None: direct.
        self._issuers: dict[tuple[Hop | None, str], str] = {}

    async def serve(self, ledger: Ledger, exchange: Exchange) -> ForwardResult | None:
        """Serve the request from one provider, or return None (after recording why) to fail
        over. Each try ends in an outcome whose row of the failure policy (engine/core/policy.py)
        says what follows; this loop only executes it. Every path settles the ledger's permit
        exactly once."""
        req, profile = exchange.req, ledger.rt.profile
        if req.endpoint == "count_tokens" and (profile.protocol != "anthropic" or (
                exchange.wire is not None and exchange.wire.counts_locally)):
            ledger.release()
            return self._local_token_estimate(req, profile.name, ledger.trail.attempts)
        tries = Tries(exchange.url())
        if ledger.rt.route is not None and ledger.rt.route.hops:  # through upstream proxies
            first = self._first_hop(ledger, tries)
            if first is not None:  # none eligible any more (since the chain looked)
                return self._conclude(POLICY[first.key], ledger, exchange, first, None)
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
        headers = exchange.headers(auth)
        wire = exchange.wire
        if wire is not None and wire.signer is not None:  # SigV4: over the exact bytes sent
            try:
                headers.update(await wire.signer.sign("POST", tries.url, headers, tries.body))
            except CredentialError as exc:
                return Seen(Local.CREDENTIALS, ledger.attempt(Local.CREDENTIALS, None,
                                                              str(exc)), problem=exc.reason)
        hop = tries.hop
        hop_permit = None
        if hop is not None:  # the proxy's own breaker admits the try (proxy_state.py)
            hop_permit = core.proxies.acquire(hop.name)
            if hop_permit is None:
                ledger.via = hop.name
                words = core.proxies.out_reason(hop.name, core.clock()) or "busy"
                return Seen(Outcome.PROXY_REFUSED, ledger.attempt(
                    Outcome.PROXY_REFUSED, None, f"proxy {hop.name} {words}"))
        # claudex's own queue (engine/core/gate.py): waiting here is never the provider's fault.
        if not rt.gate.take_now() and not await rt.gate.acquire(profile.queue_timeout):
            if hop is not None and hop_permit is not None:
                core.proxies.release(hop.name, hop_permit)
            return Seen(Local.QUEUE_FULL, ledger.attempt(Local.QUEUE_FULL, None,
                                                          _queue_full(rt)))
        hop_gate = None
        if hop is not None and hop_permit is not None:
            # Then the proxy's own slot (its adaptive limit, proxy_state.py): taken after the
            # provider's, so a request waiting here holds nothing other providers behind the
            # shared proxy need.
            hop_gate = core.proxies.gate(hop.name)
            if hop_gate is not None and not hop_gate.take_now() \
                    and not await hop_gate.acquire(profile.queue_timeout):
                rt.gate.release()
                core.proxies.release(hop.name, hop_permit)
                ledger.via = hop.name
                return Seen(Local.QUEUE_FULL, ledger.attempt(Local.QUEUE_FULL, None,
                                                              _queue_full_at(hop.name, hop_gate,
                                                                             profile)))
        started = core.clock()
        alone = rt.gate.in_flight == 1  # a 429 then is a quota, not too much concurrency
        if tries.rate_limited == 0:
            rt.budget.request(started)
        ledger.sending(exchange, started)
        deadlines = StreamDeadlines.start(profile) if req.stream else None
        try:
            if rt.route is None:  # plain direct: sent exactly as before routes existed
                sending = core.transport.send(
                    profile.name, "POST", tries.url, headers,
                    tries.body, connect_timeout=profile.connect_timeout,
                    # A stream has deadlines of its own (engine/core/stalls.py): before the
                    # commit, `within`; after it, the relay's idle watch. No socket read timer.
                    read_timeout=profile.read_timeout if deadlines is None else None,
                )
            else:  # through the hop (None: direct with the route's own TLS)
                ledger.via = None if hop is None else hop.name
                sending = core.transport.send(
                    profile.name, "POST", tries.url, headers, tries.body,
                    connect_timeout=profile.connect_timeout,
                    read_timeout=profile.read_timeout if deadlines is None else None,
                    via=hop, ssl=rt.route.ssl)
            resp = GatedResponse(await (sending if deadlines is None
                                        else within(deadlines.headers(), sending)), rt.gate,
                                 hop_gate)
        except BaseException as exc:
            rt.gate.release()
            if hop_gate is not None:
                hop_gate.release()
            if hop is not None:
                proxied = await self._through_hop_failed(ledger, hop, hop_permit, exc,
                                                         tries.url, started)
                if proxied is not None:
                    _unhook_frames(exc)
                    return proxied
                beyond = beyond_proxy(exc)  # the proxy says the provider is unreachable
                if beyond is not None:
                    _unhook_frames(exc)
                    return Seen(Outcome.CONNECT_ERROR, ledger.attempt(
                        Outcome.CONNECT_ERROR, None, f"through {hop.name}: {beyond}"))
            if not isinstance(exc, Exception):
                raise
            if isinstance(exc, aiohttp.ClientConnectorCertificateError):  # direct: the provider's
                _unhook_frames(exc)
                return await self._untrusted_provider(ledger, exc, tries.url)
            outcome, words = map_transport_error(exc)  # mapped at one place
            _unhook_frames(exc)
            return Seen(outcome, ledger.attempt(outcome, None, words))
        if hop is not None and hop_permit is not None:
            if resp.status == 407:  # a plain-http provider: the proxy's answer, not its
                resp.close()
                return self._proxy_seen(ledger, hop, hop_permit, status_failure(
                    407, resp.headers, core.wall()))
            core.proxies.succeeded(hop.name, hop_permit)  # it reached the provider
        ledger.headers_arrived()
        status = resp.status
        oauth = profile.auth_type == "oauth" or profile.token_command is not None or (
            wire is not None and wire.refreshes_on_401)
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
        cloud = wire.refusal(status, resp.headers, payload) if wire is not None else None
        if cloud is not None:  # a cloud's own error (classify.py reads its kind)
            outcome = classify_cloud(cloud)
            message = cloud_words(cloud)
            exchange.refused = cloud
            if outcome is Outcome.MODEL_UNAVAILABLE and wire is not None:
                self._model_unavailable(rt, wire.unavailable, exchange.model, message)
        else:
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

    # -- upstream proxies (issue 36) ----------------------------------------------------------

    def _first_hop(self, ledger: Ledger, tries: Tries) -> Seen | None:
        """Seed 000: the first eligible hop of the route; at most as many hops as are eligible
        now will be tried. None when one is chosen, else why the provider has no route."""
        core, route = self.core, ledger.rt.route
        assert route is not None
        hops = core.proxies.eligible(route.hops, core.clock())
        tries.hop_cap = len(hops)
        if hops:
            tries.hop = hops[0]
            return None
        words = core.proxies.no_route(route, core.clock())
        return Seen(Outcome.PROXY_REFUSED, ledger.attempt(Outcome.PROXY_REFUSED, None, words))

    async def _through_hop_failed(self, ledger: Ledger, hop: Hop, permit: Permit | None,
                                  exc: BaseException, url: str, sent_at: float) -> Seen | None:
        """A send through `hop` raised: the proxy's failure (its breaker counts it, never the
        provider's), or None: the provider's own (classify.py maps it)."""
        board = self.core.proxies
        if not isinstance(exc, Exception):  # cancelled: nobody's failure
            if permit is not None:
                board.release(hop.name, permit)
            return None
        failure = proxy_failure(exc, hop, self.core.wall())
        if failure is None:
            if permit is not None:  # the proxy connected; what failed is beyond it
                board.succeeded(hop.name, permit)
            return None
        if failure.kind is ProxyKind.UNTRUSTED:  # name who signed it, when it can be read
            issuer = await self._issuer(hop, url, ledger.rt.profile.connect_timeout)
            if issuer is not None:
                failure = dataclasses.replace(failure, words=untrusted_words(None, issuer))
        return self._proxy_seen(ledger, hop, permit, failure, sent_at)

    async def _untrusted_provider(self, ledger: Ledger,
                                  exc: aiohttp.ClientConnectorCertificateError,
                                  url: str) -> Seen:
        """A provider reached directly whose certificate does not verify (issue 36): no retry,
        the next provider at once, counted against the provider (the route's is its own), red
        with who signed it and the hint."""
        error = exc.certificate_error
        issuer = await self._issuer(None, url, ledger.rt.profile.connect_timeout)
        words = untrusted_words(error if isinstance(error, ssl.SSLCertVerificationError)
                                else None, issuer)
        log.warning("%s: %s", ledger.rt.name, words)
        return Seen(Outcome.UNTRUSTED_PROVIDER, ledger.attempt(
            Outcome.CERTIFICATE_UNTRUSTED, None, words))

    async def _issuer(self, hop: Hop | None, url: str, timeout_s: float) -> str | None:
        """The issuer of the certificate presented through `hop` (None: directly) for `url`'s
        host, read once per hop and host (engine/network/issuer.py) and remembered."""
        key = (hop, url.split("/", 3)[2] if url.count("/") >= 2 else url)
        issuer = self._issuers.get(key)
        if issuer is None:  # (not known yet, or could not be read last time: again)
            issuer = await presented_issuer(hop, url, timeout_s)
            if issuer is not None:
                if len(self._issuers) >= 64:
                    self._issuers.clear()
                self._issuers[key] = issuer
        return issuer

    def _proxy_seen(self, ledger: Ledger, hop: Hop, permit: Permit | None,
                    failure: ProxyFailure, sent_at: float = 0.0) -> Seen:
        self.core.proxies.failed(hop.name, permit, failure)
        outcome = PROXY_OUTCOMES[failure.kind]
        log.info("%s: upstream proxy %s (%s): %s", ledger.rt.name, hop.name, hop.where,
                 failure.words)
        return Seen(outcome, ledger.attempt(outcome, None, f"proxy {hop.name}: {failure.words}"),
                    proxy=failure, sent_at=sent_at)

    def _model_unavailable(self, rt: ProviderRuntime, said: set[str], model: str | None,
                           words: str) -> None:
        """A cloud cannot serve the profile's model (not enabled for the project, an id it does
        not know): its requests fail over; one event and one log line per model say why."""
        if (model or "") in said:
            return
        said.add(model or "")
        sentence = (f"{rt.name}: {model or 'its model'} cannot be used there ({words}); "
                    "requests for it fail over")
        self.core.events.publish(Event("limit", sentence, rt.name, {"model": model}))
        log.warning("%s", sentence)

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
