"""Bookkeeping for one provider attempt: the breaker permit, the attempt trail, what each attempt
shows in the request detail (timings, model sent, cap, breaker state met), and the lifecycle
hooks that tell the addons.

Every permit is handed back exactly once — as a success, a failure or a neutral release, as the
failure policy's row for the outcome says (engine/core/policy.py).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Protocol

from claudex.engine.breaker.circuit import Permit
from claudex.engine.clock import Clock, WallClock
from claudex.engine.core.classify import Outcome
from claudex.engine.core.hooks import Flow, Hooks, addon_failed
from claudex.engine.core.policy import (
    AFTER_COMMIT,
    CLIENT_GONE,
    OK_RULE,
    POLICY,
    BreakerEffect,
    HealthEffect,
    Rule,
    retried,
)
from claudex.engine.core.request import Attempt
from claudex.engine.core.runtime import ProviderRuntime

if TYPE_CHECKING:
    from claudex.engine.core.exchange import Exchange

_CAPPED_KEYS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def cap_applied(exchange: Exchange) -> int | None:
    """The max_tokens cap when it lowered what the client asked for, else None."""
    cap = exchange.max_tokens_cap
    if cap is None or exchange.req.endpoint == "count_tokens":
        return None
    body = exchange.req.body
    asked = [v for k in _CAPPED_KEYS if isinstance(v := body.get(k), int)]
    return cap if asked and max(asked) > cap else None


class Ledger:
    """Owns one permit of one provider for the duration of a request's attempts there, and
    tells the lifecycle hooks (engine/core/hooks.py) what each attempt came to: the core keeps
    the breaker, the health effects and claudex's own limits; statistics, the journal, traces
    and the rest are addons reading `attempt_sent` / `attempt_ended` / `stream_committed`."""

    def __init__(self, rt: ProviderRuntime, permit: Permit, flow: Flow, core: LedgerCore) -> None:
        self.rt = rt
        self.permit = permit
        self.flow = flow
        self.trail = flow.trail
        self.clock = core.clock
        self.wall = core.wall
        self.hooks = core.hooks
        self.settled = False
        self.streaming = False  # a committed stream owns the permit until it ends
        # The request detail of the try in progress (`sending` starts one).
        self.breaker_met = "half_open" if permit.probe else "closed"
        self._sent_at: float | None = None
        self._headers_ms: float | None = None
        self._content_ms: float | None = None
        self._model: str | None = None
        self._cap: int | None = None
        self._dropped: tuple[str, ...] = ()
        self._committed: int | None = None  # the committed stream's place in the trail
        self.pool: str | None = None  # the pool this provider serves in, for the trail
        self.via: str | None = None  # the upstream proxy the try in progress goes through

    def ms_since(self, started: float) -> float:
        return round((self.clock() - started) * 1000.0, 3)

    def _tell(self, attempt: Attempt, rule: Rule) -> None:
        """The `attempt_ended` hook: `attempt` at this provider is over, as `rule` says."""
        for hook in self.hooks.attempt_ended:
            try:
                hook(self.flow, self.rt, attempt, rule)
            except Exception:
                addon_failed(hook)

    # -- the request detail of one try -------------------------------------------------------

    def sending(self, exchange: Exchange, started: float) -> None:
        """A try at this provider starts now: what it sends, for its attempt."""
        self._sent_at = started
        self._headers_ms = self._content_ms = None
        self._model = exchange.model
        self._cap = cap_applied(exchange)
        self._dropped = exchange.dropped
        for hook in self.hooks.attempt_sent:
            try:
                hook(self.flow, self.rt, exchange)
            except Exception:
                addon_failed(hook)

    def headers_arrived(self) -> None:
        if self._sent_at is not None:
            self._headers_ms = self.ms_since(self._sent_at)

    def content_arrived(self) -> None:
        if self._sent_at is not None:
            self._content_ms = self.ms_since(self._sent_at)

    def attempt(self, outcome: str, status: int | None = None, message: str = "") -> Attempt:
        """The attempt of the try in progress; without one (nothing sent yet), a bare one."""
        name, outcome = self.rt.profile.name, str(outcome)  # an Outcome / Local member: its word
        if self._sent_at is None:
            return Attempt(name, outcome, status, message, pool=self.pool, proxy=self.via)
        return Attempt(name, outcome, status, message, self.ms_since(self._sent_at),
                       headers_ms=self._headers_ms, first_content_ms=self._content_ms,
                       model=self._model, max_tokens=self._cap, breaker=self.breaker_met,
                       dropped=self._dropped, pool=self.pool, proxy=self.via)

    def not_sending(self) -> None:
        """The try in progress ended before anything was sent (claudex's queue, credentials)."""
        self._sent_at = None

    # -- outcomes ------------------------------------------------------------------------------

    def note(self, attempt: Attempt, rule: Rule) -> None:
        """An attempt that leads to another try at the same provider (429 wait, 401 refresh)."""
        self.trail.attempts.append(attempt)
        self._tell(attempt, retried(rule))

    def succeed(self, status: int, attempt: Attempt | None = None, *,
                record_attempt: bool = True, later: bool = False) -> None:
        """The OK row: a breaker success, timed from the try's start (`sending`; `attempt`: the
        try's, made when its answer was read); a committed stream's (`record_attempt` False: its
        attempt joined the trail at the commit) when it ends, timed to its end. `later`: a
        whole answer's, whose `attempt_ended` is told at the request's finish (`Flow.later`)."""
        rt = self.rt
        assert self._sent_at is not None, "succeed() without a try in progress"
        self._settle()
        rt.breaker.record_success(self.permit)
        if rt.gate.limit.on_success(self.clock()):
            rt.gate.wake()  # the adaptive limit grew back by one
        rt.health.auth_failing = False  # the OK row's health effect (HEALTHY)
        rt.health.untrusted = None
        rt.credentials.mark_ok()
        if record_attempt:
            if attempt is None:
                attempt = self.attempt("ok", status)
            self.trail.attempts.append(attempt)
        else:
            attempt = self._stream_attempt_ended()
        if later:
            flow = self.flow
            if flow.later is None:
                flow.later = []
            flow.later.append((self.hooks.attempt_ended, flow, self.rt, attempt, OK_RULE))
        else:
            self._tell(attempt, OK_RULE)

    def conclude(self, rule: Rule, attempt: Attempt, retry_after: float | None = None,
                 problem: str | None = None) -> None:
        """This provider's part of the request ends as `rule` says: the attempt on the trail
        (as a failure when the request moves on), the permit handed back with the row's
        breaker effect, and the row's health effect."""
        if rule.failover:
            self.trail.skip(attempt, retry_after)
        else:
            self.trail.attempts.append(attempt)
        self._end(rule)
        if rule.health is HealthEffect.CREDENTIALS:
            # Shown red as "misconfigured" even when no health probe runs to find it.
            self.rt.health.credentials_problem = problem or attempt.message
        elif rule.health is HealthEffect.UNTRUSTED:  # red with the issuer's name and the hint
            self.rt.health.untrusted = attempt.message
        self._tell(attempt, rule)

    def broke_mid_stream(self, message: str) -> None:
        """A committed stream failed: nothing to fail over to, but it counts — and its attempt
        on the trail says so (the journal, the request detail and the per-minute errors read
        it), instead of the "ok" it joined with at the commit."""
        attempt = self.attempt("stream_error", 200, message)
        if self._committed is not None:
            done = self.trail.attempts[self._committed]
            attempt = self.trail.attempts[self._committed] = dataclasses.replace(
                done, outcome="stream_error", message=message)
        self._end(AFTER_COMMIT)
        self._tell(attempt, AFTER_COMMIT)

    def passed_on_in_stream(self) -> None:
        """A committed stream that carried the provider's refusal of the client's own request
        (a context window, at the addressed profile) ended: like its 400, the client's error
        row (no breaker failure, counted as a client error)."""
        attempt = self._stream_attempt_ended()
        rule = POLICY[Outcome.CLIENT_ERROR]
        self._end(rule)
        self._tell(attempt, rule)

    def _end(self, rule: Rule) -> None:
        """The permit goes back with the row's breaker effect; the row's health effect."""
        rt = self.rt
        if rule.breaker is BreakerEffect.FAILURE:
            self._settle()
            rt.breaker.record_failure(self.permit)
        else:
            self.release()
        if rule.health in (HealthEffect.LIVE_FAILURE, HealthEffect.AUTH_FAILING,
                           HealthEffect.UNTRUSTED):
            rt.health.live_failure_since_probe = True
        if rule.health is HealthEffect.AUTH_FAILING:
            rt.health.auth_failing = True

    def committed(self, outcome: str = "ok", message: str = "") -> None:
        """The stream's first content arrived: its attempt joins the trail as served (or, a
        refusal passed on in the stream, as `outcome`)."""
        self.content_arrived()
        self._committed = len(self.trail.attempts)
        self.trail.attempts.append(self.attempt(outcome, 200, message))
        for hook in self.hooks.stream_committed:
            try:
                hook(self.flow, self.rt)
            except Exception:
                addon_failed(hook)

    def _stream_attempt_ended(self) -> Attempt:
        """The committed stream's attempt, its duration now the whole stream's."""
        if self._committed is None or self._sent_at is None:
            return self.attempt("ok", 200)
        done = self.trail.attempts[self._committed]
        attempt = self.trail.attempts[self._committed] = dataclasses.replace(
            done, latency_ms=self.ms_since(self._sent_at))
        self._committed = None
        return attempt

    def stream_ended(self) -> None:
        """The committed stream ended (or the client left): its attempt's duration is the
        whole stream's. A stream the client left before its end tells its attempt ended as
        `CLIENT_GONE` (nothing counted: not the provider's doing)."""
        if self._committed is not None and self._sent_at is not None:
            attempt = self._stream_attempt_ended()
            if not self.settled:
                self._tell(attempt, CLIENT_GONE)

    def hand_to_stream(self) -> None:
        self.streaming = True

    def release(self, *, by_stream: bool = False) -> None:
        """A neutral end: the client's own error, a rate limit, or the client went away.
        While a committed stream owns the permit only the stream may release it."""
        if self.streaming and not by_stream:
            return
        if not self.settled:
            self._settle()
            self.rt.breaker.release(self.permit)

    def _settle(self) -> None:
        assert not self.settled, "a breaker permit was handed back twice"
        self.settled = True


class LedgerCore(Protocol):
    """What a ledger needs of the engine: its clocks and the lifecycle hooks."""

    clock: Clock
    wall: WallClock
    hooks: Hooks
