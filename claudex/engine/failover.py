"""Walk a profile's failover chain for one request (DESIGN.md, failure table and commit rule).

For each chain member: skip it if it cannot serve (recording why), otherwise send the request,
retrying the same provider only for rate limits and once after an OAuth refresh, and move on for
everything the failure table says to fail over on. A streamed answer is committed to a provider
only when its first content event arrives; until then every failure fails over transparently.
"""

from __future__ import annotations

import json
import logging
import math
import random
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from claudex.config.model import Config, Profile
from claudex.engine import backoff
from claudex.engine.breaker import BreakerState, Permit
from claudex.engine.classify import DISPOSITIONS, Outcome, classify_status, map_transport_error
from claudex.engine.clock import Clock, Sleep, WallClock
from claudex.engine.credentials import AuthHeaders, CredentialError
from claudex.engine.events import Event, EventBus
from claudex.engine.explain import all_failed_sentence
from claudex.engine.request import CONFIG_SKIPS, Attempt, ForwardResult, ProxyRequest
from claudex.engine.runtime import ProviderRuntime
from claudex.engine.stats import GlobalStats
from claudex.engine.transport import Transport, UpstreamResponse
from claudex.providers import anthropic, openai
from claudex.providers.sse import CommitWatcher, StreamSignal, TailScanner

log = logging.getLogger("claudex.proxy")

# Upstream response headers worth passing to the client; everything else (hop-by-hop, length,
# encoding, cookies) is the proxy's business.
_PASS_HEADERS = ("content-type", "request-id", "x-request-id", "openai-processing-ms")
_PASS_PREFIXES = ("anthropic-ratelimit-", "x-ratelimit-")


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

    def escalate(self, sentence: str) -> None: ...


@dataclass
class _Failure:
    """Why one provider could not serve; `retry_at` is set for rate limits."""

    attempt: Attempt
    retry_after: float | None = None


def map_model(profile: Profile, requested: str | None, addressed: bool) -> str | None:
    """A request keeps its model at the profile it addressed unless that profile maps it;
    at a backup it takes the backup's mapping or default model."""
    if requested:
        mapped = profile.models.get(requested)
        if mapped:
            return mapped
        lower = requested.lower()
        for family, target in profile.models.items():
            if family.lower() in lower:
                return target
        if addressed:
            return requested
    return profile.default_model or requested


def _merge_beta(*values: str | None) -> str | None:
    seen: list[str] = []
    for value in values:
        for item in (value or "").split(","):
            item = item.strip()
            if item and item not in seen:
                seen.append(item)
    return ",".join(seen) or None


def _response_headers(upstream: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in upstream.items():
        lower = key.lower()
        if lower in _PASS_HEADERS or lower.startswith(_PASS_PREFIXES):
            out[lower] = value
    return out


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

    def _skip_reason(self, rt: ProviderRuntime | None, req: ProxyRequest, now: float) -> str | None:
        if rt is None:
            return "unknown_profile"
        if not rt.profile.enabled:
            return "disabled"
        if rt.profile.problem is not None:
            return "misconfigured"
        if rt.profile.protocol != req.protocol and req.endpoint != "count_tokens":
            return "needs_translation"
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
            return self._error(req, 404, f"No profile named {name!r} is configured.", [])
        now = core.clock()
        core.totals.requests += 1
        core.totals.meter.hit(now)
        # Round cap: never try more providers than were eligible when the request started.
        cap = sum(
            1 for n in names if self._skip_reason(core.runtimes.get(n), req, now) is None
        )
        attempts: list[Attempt] = []
        failures: list[_Failure] = []
        tried = 0
        for name in names:
            rt = core.runtimes.get(name)
            reason = self._skip_reason(rt, req, core.clock())
            if reason is None and tried >= cap:
                reason = "round_cap"
            permit: Permit | None = None
            if reason is None and rt is not None:
                permit = rt.breaker.try_acquire()
                if permit is None:
                    reason = "half_open_busy" if rt.breaker.state is BreakerState.HALF_OPEN \
                        else "breaker_open"
            if reason is not None or rt is None or permit is None:
                attempt = Attempt(name, reason or "unknown_profile",
                                  message=self._skip_message(rt, reason))
                attempts.append(attempt)
                retry = max(0.0, rt.cooldown_until - core.clock()) if (
                    rt is not None and reason == "cooling_down") else None
                failures.append(_Failure(attempt, retry))
                continue
            tried += 1
            result = await self._try_provider(rt, permit, req, addressed, attempts, failures)
            if result is not None:
                if len([a for a in attempts if not a.skipped]) > 1 or attempts[0].provider != name:
                    core.totals.failovers += 1
                return result
        return self._all_failed(req, attempts, failures)

    def _skip_message(self, rt: ProviderRuntime | None, reason: str | None) -> str:
        if rt is None:
            return "no such profile"
        now = self.core.clock()
        if reason == "breaker_open":
            retry = rt.breaker.snapshot().retry_in_s
            return f"breaker open (retry in {retry:.0f}s)" if retry else "breaker open"
        return {
            "forced_open": "breaker tripped by operator",
            "half_open_busy": "breaker half-open; its trial request is in flight",
            "cooling_down": f"rate limited; cooling down {max(0.0, rt.cooldown_until - now):.0f}s",
            "disabled": "profile disabled",
            "misconfigured": rt.profile.problem or "misconfigured",
            "needs_translation": f"{rt.profile.provider_type} needs protocol translation",
            "round_cap": "round cap reached",
        }.get(reason or "", reason or "")

    # -- one provider --------------------------------------------------------------------------

    async def _try_provider(
        self,
        rt: ProviderRuntime,
        permit: Permit,
        req: ProxyRequest,
        addressed: Profile,
        attempts: list[Attempt],
        failures: list[_Failure],
    ) -> ForwardResult | None:
        """Serve the request from one provider, or return None (after recording why) to fail
        over. Owns `permit`: every path hands it back exactly once."""
        core = self.core
        profile = rt.profile
        if req.endpoint == "count_tokens" and profile.protocol != "anthropic":
            rt.breaker.release(permit)
            return self._local_token_estimate(req, profile.name, attempts)
        body = self._body_for(req, profile, addressed=profile.name == addressed.name)
        url = self._url_for(req, profile)
        refreshed = False
        retry_number = 0
        settled = False  # True once the permit has been handed back
        try:
            while True:
                try:
                    auth = await rt.credentials.auth_headers()
                except CredentialError as exc:
                    attempt = Attempt(profile.name, "credentials", message=str(exc))
                    attempts.append(attempt)
                    failures.append(_Failure(attempt))
                    rt.stats.last_error = str(exc)
                    settled = True
                    rt.breaker.release(permit)
                    return None
                headers = self._headers_for(req, profile, auth)
                started = core.clock()
                rt.stats.requests += 1
                try:
                    resp = await core.transport.send(
                        profile.name, "POST", url, headers, body,
                        connect_timeout=profile.connect_timeout,
                        read_timeout=profile.read_timeout,
                    )
                except Exception as exc:  # mapped at one place: classify.map_transport_error
                    outcome, words = map_transport_error(exc)
                    self._fail(rt, permit, Attempt(profile.name, outcome.value, None, words,
                                                   self._ms(started)), attempts, failures)
                    settled = True
                    return None
                status = resp.status
                outcome = classify_status(status, oauth=profile.auth_type == "oauth"
                                          or profile.token_command is not None)
                if outcome is Outcome.OK:
                    if req.stream:
                        result = await self._open_stream(rt, permit, req, resp, started,
                                                         attempts, failures)
                        settled = True
                        return result
                    try:
                        payload = await resp.read()
                    except Exception as exc:
                        outcome, words = map_transport_error(exc)
                        self._fail(rt, permit, Attempt(profile.name, outcome.value, status, words,
                                                       self._ms(started)), attempts, failures)
                        settled = True
                        return None
                    settled = True
                    self._succeed(rt, permit, status, started, attempts)
                    return self._success(req, rt, status, resp.headers, attempts, body=payload)
                # Every non-2xx answer is small: read it whole for the message and pass-through.
                try:
                    payload = await resp.read()
                except Exception:
                    payload = b""
                message = self._upstream_message(profile, payload)
                if outcome is Outcome.CLIENT_ERROR:
                    rt.stats.client_errors += 1
                    rt.stats.last_status = status
                    attempts.append(Attempt(profile.name, outcome.value, status, message,
                                            self._ms(started)))
                    settled = True
                    rt.breaker.release(permit)
                    result = ForwardResult(status, _response_headers(resp.headers), profile.name,
                                           attempts, body=payload)
                    self._tag(result)
                    return result
                if outcome is Outcome.RATE_LIMITED:
                    retry_number += 1
                    rt.stats.rate_limited += 1
                    rt.stats.last_status = status
                    attempt = Attempt(profile.name, outcome.value, status, message,
                                      self._ms(started))
                    attempts.append(attempt)
                    cool = backoff.cooldown_seconds(resp.headers, profile.retry, core.wall())
                    rt.cooldown_until = max(rt.cooldown_until, core.clock() + cool)
                    decision = backoff.rate_limit_decision(
                        retry_number, resp.headers, profile.retry, core.wall(), core.rand
                    )
                    if decision.wait is None:
                        failures.append(_Failure(attempt, max(cool, 0.0)))
                        settled = True
                        rt.breaker.release(permit)
                        self._event_cooldown(rt, cool, decision.reason)
                        return None
                    await core.sleep(decision.wait)
                    continue
                if outcome is Outcome.TOKEN_EXPIRED and not refreshed and auth is not None:
                    attempts.append(Attempt(profile.name, outcome.value, status, message,
                                            self._ms(started)))
                    refreshed = True
                    if await rt.credentials.refresh_after_401(auth):
                        continue
                    self._fail(rt, permit, Attempt(profile.name, "needs_login", status,
                                                   "token rejected and refresh impossible"),
                               attempts, failures)
                    rt.health.auth_failing = True
                    settled = True
                    return None
                if outcome in (Outcome.AUTH_ERROR, Outcome.TOKEN_EXPIRED):
                    rt.health.auth_failing = True
                self._fail(rt, permit, Attempt(profile.name, outcome.value, status, message,
                                               self._ms(started)), attempts, failures)
                settled = True
                return None
        finally:
            if not settled:  # cancelled (client went away) mid-attempt: a neutral outcome
                rt.breaker.release(permit)

    # -- streaming -----------------------------------------------------------------------------

    async def _open_stream(
        self,
        rt: ProviderRuntime,
        permit: Permit,
        req: ProxyRequest,
        resp: UpstreamResponse,
        started: float,
        attempts: list[Attempt],
        failures: list[_Failure],
    ) -> ForwardResult | None:
        """Buffer the upstream stream until its first content event; fail over before that."""
        profile = rt.profile
        proto = anthropic if profile.protocol == "anthropic" else openai
        watcher = CommitWatcher(proto.signal)
        held: list[bytes] = []
        chunks = resp.chunks().__aiter__()
        try:
            while True:
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    resp.close()
                    self._fail(rt, permit, Attempt(profile.name, Outcome.STREAM_ERROR.value, 200,
                                                   "stream ended before any content",
                                                   self._ms(started)), attempts, failures)
                    return None
                held.append(chunk)
                signal = watcher.feed(chunk)
                if signal is StreamSignal.CONTENT:
                    break
                if signal is StreamSignal.ERROR:
                    resp.close()
                    self._fail(rt, permit, Attempt(profile.name, Outcome.STREAM_ERROR.value, 200,
                                                   watcher.error_message or "error event",
                                                   self._ms(started)), attempts, failures)
                    return None
        except BaseException as exc:
            resp.close()
            if not isinstance(exc, Exception):  # cancelled: the client is gone
                rt.breaker.release(permit)
                raise
            outcome, words = map_transport_error(exc)
            if outcome is Outcome.DISCONNECTED:
                outcome = Outcome.STREAM_ERROR
            self._fail(rt, permit, Attempt(profile.name, outcome.value, 200,
                                           f"{words} before any content",
                                           self._ms(started)), attempts, failures)
            return None
        # Committed: from here on nothing is retried, so the request is never billed twice.
        attempts.append(Attempt(profile.name, "ok", 200, "", self._ms(started)))
        scanner = proto.tail_scanner()
        for piece in held:
            scanner.feed(piece)
        stream = self._relay(rt, permit, req, resp, chunks, held, scanner, started)
        result = ForwardResult(200, _response_headers(resp.headers), profile.name, attempts,
                               stream=stream)
        result.headers.setdefault("content-type", "text/event-stream")
        result.headers["cache-control"] = "no-cache"
        self._tag(result)
        return result

    async def _relay(
        self,
        rt: ProviderRuntime,
        permit: Permit,
        req: ProxyRequest,
        resp: UpstreamResponse,
        chunks: AsyncIterator[bytes],
        held: list[bytes],
        scanner: TailScanner,
        started: float,
    ) -> AsyncIterator[bytes]:
        settled = False
        try:
            yield b"".join(held)
            held.clear()
            try:
                async for chunk in chunks:
                    scanner.feed(chunk)
                    yield chunk
            except Exception as exc:
                _, words = map_transport_error(exc)
                message = f"{rt.name}: upstream {words} after the response started"
                settled = True
                self._stream_broke(rt, permit, message)
                yield self._sse_error(req, message)
                return
            if scanner.saw_error or not scanner.saw_end:
                message = (f"{rt.name}: upstream sent an error mid-stream" if scanner.saw_error
                           else f"{rt.name}: upstream stream ended early")
                settled = True
                self._stream_broke(rt, permit, message)
                if not scanner.saw_error:
                    yield self._sse_error(req, message)
                return
            settled = True
            rt.breaker.record_success(permit)
            rt.stats.successes += 1
            rt.stats.last_status = 200
            rt.stats.record(self._ms(started))
            rt.health.auth_failing = False
        finally:
            resp.close()
            if not settled:  # the client disconnected mid-stream: not the provider's fault
                rt.breaker.release(permit)

    def _stream_broke(self, rt: ProviderRuntime, permit: Permit, message: str) -> None:
        rt.breaker.record_failure(permit)
        rt.stats.failures += 1
        rt.stats.last_error = message
        rt.stats.last_error_at = self.core.wall()
        rt.health.live_failure_since_probe = True
        log.warning("%s", message)

    def _sse_error(self, req: ProxyRequest, message: str) -> bytes:
        if req.protocol == "anthropic":
            return anthropic.sse_error(message)
        return openai.sse_error(message)

    # -- bookkeeping ---------------------------------------------------------------------------

    def _ms(self, started: float) -> float:
        return round((self.core.clock() - started) * 1000.0, 3)

    def _succeed(self, rt: ProviderRuntime, permit: Permit, status: int, started: float,
                 attempts: list[Attempt]) -> None:
        latency = self._ms(started)
        rt.breaker.record_success(permit)
        rt.stats.successes += 1
        rt.stats.last_status = status
        rt.stats.record(latency)
        rt.health.auth_failing = False
        rt.credentials.mark_ok()
        attempts.append(Attempt(rt.name, "ok", status, "", latency))

    def _fail(self, rt: ProviderRuntime, permit: Permit, attempt: Attempt,
              attempts: list[Attempt], failures: list[_Failure]) -> None:
        attempts.append(attempt)
        failures.append(_Failure(attempt))
        if DISPOSITIONS.get(_outcome(attempt.outcome), DISPOSITIONS[Outcome.SERVER_ERROR]) \
                .breaker_failure:
            rt.breaker.record_failure(permit)
            rt.stats.failures += 1
        else:
            rt.breaker.release(permit)
        rt.stats.last_status = attempt.status
        rt.stats.last_error = f"{attempt.outcome}: {attempt.message}".strip(": ")
        rt.stats.last_error_at = self.core.wall()
        rt.health.live_failure_since_probe = True

    def _event_cooldown(self, rt: ProviderRuntime, seconds: float, reason: str) -> None:
        message = f"{rt.name}: rate limited, skipped for {seconds:.0f}s ({reason})"
        self.core.events.publish(Event("cooldown", message, rt.name, {"seconds": seconds}))

    def _upstream_message(self, profile: Profile, payload: bytes) -> str:
        if profile.protocol == "anthropic":
            return anthropic.error_message(payload)
        return openai.error_message(payload)

    # -- building the upstream request -----------------------------------------------------------

    def _url_for(self, req: ProxyRequest, profile: Profile) -> str:
        if profile.protocol == "anthropic":
            return anthropic.messages_url(profile.base_url, req.endpoint == "count_tokens")
        return openai.chat_url(profile.base_url)

    def _body_for(self, req: ProxyRequest, profile: Profile, addressed: bool) -> bytes:
        body = req.body
        changes: dict[str, Any] = {}
        model = map_model(profile, req.model, addressed)
        if model is not None and model != req.model:
            changes["model"] = model
        cap = profile.max_tokens
        if cap is not None and req.endpoint != "count_tokens":
            for key in ("max_tokens", "max_completion_tokens"):
                value = body.get(key)
                if isinstance(value, int) and value > cap:
                    changes[key] = cap
        if not changes:
            return req.raw  # untouched: forward the client's bytes without re-encoding
        return json.dumps({**body, **changes}, ensure_ascii=False,
                          separators=(",", ":")).encode()

    def _headers_for(self, req: ProxyRequest, profile: Profile,
                     auth: AuthHeaders | None) -> dict[str, str]:
        client = req.headers
        headers = {"content-type": "application/json"}
        if req.stream:
            headers["accept"] = "text/event-stream"
        if profile.protocol == "anthropic":
            headers["anthropic-version"] = client.get("anthropic-version") or \
                anthropic.DEFAULT_VERSION
            beta = _merge_beta(client.get("anthropic-beta"), auth.beta if auth else None)
            if beta:
                headers["anthropic-beta"] = beta
        if profile.auth_type == "passthrough":
            for key in ("authorization", "x-api-key"):
                value = client.get(key)
                if value:
                    headers[key] = value
        elif auth is not None:
            headers.update(auth.headers)
        headers.update(profile.custom_headers)
        return headers

    # -- answers -------------------------------------------------------------------------------

    def _tag(self, result: ForwardResult) -> None:
        if result.provider:
            result.headers["x-claudex-provider"] = result.provider
        result.headers["x-claudex-attempts"] = ",".join(a.token() for a in result.attempts)

    def _success(self, req: ProxyRequest, rt: ProviderRuntime, status: int,
                 upstream_headers: Mapping[str, str], attempts: list[Attempt],
                 body: bytes) -> ForwardResult:
        result = ForwardResult(status, _response_headers(upstream_headers), rt.name, attempts,
                               body=body)
        result.headers.setdefault("content-type", "application/json")
        self._tag(result)
        return result

    def _local_token_estimate(self, req: ProxyRequest, provider: str,
                              attempts: list[Attempt]) -> ForwardResult:
        # An OpenAI-compatible provider has no token-counting endpoint: estimate locally
        # (about four characters a token) instead of failing Claude Code's preflight call.
        text = json.dumps(
            {k: req.body.get(k) for k in ("system", "messages", "tools")}, ensure_ascii=False
        )
        estimate = max(1, math.ceil(len(text) / 4))
        attempts.append(Attempt(provider, "ok", 200, "local estimate"))
        result = ForwardResult(200, {"content-type": "application/json"}, provider, attempts,
                               body=json.dumps({"input_tokens": estimate}).encode())
        self._tag(result)
        return result

    def _error(self, req: ProxyRequest, status: int, message: str,
               attempts: list[Attempt], retry_after: float | None = None) -> ForwardResult:
        listed = [a.to_json() for a in attempts]
        if req.protocol == "anthropic":
            body = anthropic.error_body(status, message, attempts=listed)
        else:
            body = openai.error_body(status, message, code="claudex_all_providers_failed"
                                     if attempts else None, attempts=listed)
        headers = {"content-type": "application/json"}
        if retry_after is not None:
            headers["retry-after"] = str(max(1, math.ceil(retry_after)))
        result = ForwardResult(status, headers, None, attempts, body=body)
        if attempts:
            result.headers["x-claudex-attempts"] = ",".join(a.token() for a in attempts)
        return result

    def _all_failed(self, req: ProxyRequest, attempts: list[Attempt],
                    failures: list[_Failure]) -> ForwardResult:
        core = self.core
        core.totals.all_failed += 1
        relevant = [f for f in failures if f.attempt.outcome not in CONFIG_SKIPS]
        rate_limited = bool(relevant) and all(
            f.attempt.outcome in ("rate_limited", "cooling_down") for f in relevant
        )
        sentence = all_failed_sentence(attempts, rate_limited=rate_limited)
        core.escalate(sentence)
        if rate_limited:
            waits = [f.retry_after for f in relevant if f.retry_after is not None]
            retry_after = min(waits) if waits else 1.0
            return self._error(req, 429, sentence, attempts, retry_after=retry_after)
        return self._error(req, 502, sentence, attempts)


def _outcome(value: str) -> Outcome:
    try:
        return Outcome(value)
    except ValueError:
        return Outcome.SERVER_ERROR  # "needs_login" and friends: breaker failures


def default_rand() -> float:
    return random.random()
