"""Judging the soak: what each client got, and what the fake providers saw.

Outcomes of one request:
    ok            a complete, valid answer in the client's protocol
    error         one well-formed error in the client's protocol (e.g. every provider failed)
    stream_error  a committed stream that ended with one well-formed error event
    malformed     anything a client could not accept (a violation)
    lost          no answer: the connection failed or closed without one (a violation)
    late          no answer within the request's deadline (a violation)
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from claudex.demo.fake_provider import FakeProvider
from claudex.engine.core.request import PROXY_OUTCOMES, SKIP_OUTCOMES
from soak.protocol_check import (
    Malformed,
    anthropic_events,
    error_message,
    require,
    validate_anthropic,
    validate_anthropic_message,
    validate_openai,
    validate_openai_completion,
)
from soak.protocol_check_responses import validate_response_object, validate_responses
from soak.traffic import Exchange

BAD_OUTCOMES: Final = frozenset({"malformed", "lost", "late"})
# Attempts that never reach a provider (the x-claudex-attempts vocabulary in DESIGN.md).
_NO_UPSTREAM_CALL: Final = SKIP_OUTCOMES | {"credentials", "translation_error"}
_ID: Final = re.compile(r"soak-(\d+)")
# An attempt the upstream proxy stopped (issue 36): it never reached the provider and is never
# the provider's failure.
PROXY_TOKENS: Final = PROXY_OUTCOMES | {"no_route"}
# A provider's breaker opening this soon after its proxy was out, while the provider itself
# had no fault, was opened by the proxy's failures.
PROXY_BLAME_S: Final = 3.0


@dataclass(frozen=True)
class Verdict:
    outcome: str
    detail: str = ""


def judge(ex: Exchange, deadline_s: float) -> Verdict:
    if ex.timed_out:
        return Verdict("late", f"no answer after {ex.latency_s:.1f}s")
    if ex.transport_error is not None:
        return Verdict("lost", ex.transport_error)
    if ex.latency_s > deadline_s:
        return Verdict("late", f"took {ex.latency_s:.1f}s, deadline {deadline_s:.1f}s")
    try:
        return _judge_answer(ex)
    except Malformed as exc:
        return Verdict("malformed", f"{ex.status}: {exc}; body {ex.body[:160]!r}")
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        return Verdict("malformed", f"{ex.status}: {type(exc).__name__} {exc}; "
                                    f"body {ex.body[:160]!r}")


def _judge_answer(ex: Exchange) -> Verdict:
    protocol, headers = ex.spec.protocol, ex.headers or {}
    if ex.status == 200:
        require(headers.get("x-claudex-provider"), "a success without x-claudex-provider")
        if ex.spec.stream:
            require(headers.get("content-type", "").startswith("text/event-stream"),
                    "a stream without content-type text/event-stream")
            if protocol == "anthropic":
                summary_error = validate_anthropic(anthropic_events(ex.body)).error
            elif protocol == "responses":
                summary_error = validate_responses(ex.body).error
            else:
                summary_error = validate_openai(ex.body).error
            return Verdict("stream_error" if summary_error else "ok")
        payload = json.loads(ex.body)
        if protocol == "anthropic":
            validate_anthropic_message(payload)
        elif protocol == "responses":
            validate_response_object(payload)
        else:
            validate_openai_completion(payload)
        return Verdict("ok")
    require(ex.status is not None and (400 <= ex.status < 500 or ex.status == 502),
            f"status {ex.status}: neither a client error nor 'every provider failed' (502)")
    message = error_message(protocol, json.loads(ex.body))
    if ex.status == 429:
        require(headers.get("retry-after", "").isdigit(), "429 without a Retry-After")
    return Verdict("error", message[:120])


def attempt_tokens(ex: Exchange) -> list[tuple[str, str]]:
    """(provider, outcome-or-status) from the `x-claudex-attempts` header."""
    header = (ex.headers or {}).get("x-claudex-attempts", "")
    return [tuple(token.split(":", 1)) for token in header.split(",") if ":" in token]  # type: ignore[misc]


def failed_over(ex: Exchange) -> bool:
    """A success served by another provider than the one the client addressed."""
    return ex.status == 200 and (ex.headers or {}).get("x-claudex-provider") != ex.spec.profile


def upstream_calls(fakes: Iterable[FakeProvider]) -> dict[int, list[tuple[float, str]]]:
    """Soak request id -> [(arrival time, provider)] of every API call the fakes received."""
    calls: dict[int, list[tuple[float, str]]] = defaultdict(list)
    for fake in fakes:
        for recorded in fake.requests:
            if recorded.path.endswith("/models"):
                continue
            match = _ID.search(json.dumps(recorded.json))
            if match:
                calls[int(match.group(1))].append((recorded.time, fake.name))
    for arrivals in calls.values():
        arrivals.sort()
    return calls


def upstream_problem(ex: Exchange, arrivals: list[tuple[float, str]],
                     relayed: frozenset[str] = frozenset()) -> str | None:
    """No upstream call after a stream was committed; no call the attempt trail does not show;
    the serving provider's call is the last one."""
    if ex.status is None:
        return None
    if ex.status == 200 and ex.spec.stream and ex.headers_at is not None:
        late = [(at, p) for at, p in arrivals if at > ex.headers_at]
        if late:
            return (f"upstream call to {late[0][1]} {1000 * (late[0][0] - ex.headers_at):.1f} ms "
                    "after the stream was committed")
    reaching = [t for t in attempt_tokens(ex) if t[1] not in _NO_UPSTREAM_CALL]
    if len(arrivals) > len(reaching):
        return (f"{len(arrivals)} upstream calls but the trail shows {len(reaching)}: "
                f"{(ex.headers or {}).get('x-claudex-attempts')}")
    served_by = (ex.headers or {}).get("x-claudex-provider")
    if ex.status == 200 and arrivals and arrivals[-1][1] != served_by:
        # A fake records a request once it has read its body. claudex may have given up on a
        # provider (its read or first-byte timeout) before that provider's event loop, starved
        # on a busy machine, read what was sent: then it is recorded after the backup's answer,
        # though it was sent before. Only a provider the trail shows timed out, every time, may
        # be recorded last.
        outcomes: dict[str, set[str]] = defaultdict(set)
        for provider, outcome in reaching:
            outcomes[provider].add(outcome)
        served_at = max((at for at, p in arrivals if p == served_by), default=None)
        later = {p for at, p in arrivals if served_at is None or at > served_at}
        # The same for a provider reached through relays (`relayed`: the upstream proxy, the
        # TLS front) whose connection was cut (`disconnected`: the proxy went down): the
        # relays may still hand on what they had read.
        if served_at is None or any(
                not outcomes.get(p) or not outcomes[p] <= (
                    {"timeout", "disconnected"} if p in relayed else {"timeout"})
                for p in later):
            return (f"served by {served_by} but the last upstream call went to "
                    f"{arrivals[-1][1]}: trail {(ex.headers or {}).get('x-claudex-attempts')}")
    return None


def context_relearned(exchanges: Iterable[Exchange]) -> list[str]:
    """No long request sent to a backup whose context window the engine already knew was too
    small for it: once a backup refused one (`context_exceeded`), a request started after that
    answer that meets the same backup with the same model (the client's protocol decides the
    model a backup gets) must pass it over unsent (`context_too_small`). The fault's window is
    always the same, so nothing learned goes stale."""
    learned: dict[tuple[str, str], float] = {}  # (backup, protocol) -> when claudex knew it
    problems: list[str] = []
    for ex in sorted(exchanges, key=lambda e: e.started):
        for provider, outcome in attempt_tokens(ex):
            if outcome != "context_exceeded":
                continue
            key = (provider, ex.spec.protocol)
            known = learned.get(key)
            if known is not None and ex.started > known:
                problems.append(f"request {ex.spec.id} ({ex.spec.protocol}): sent to {provider}, "
                                f"whose context window claudex learned "
                                f"{1000 * (ex.started - known):.0f} ms before")
            elif known is None and ex.status is not None:
                learned[key] = ex.ended
    return problems


# What a provider's attempt is called when nothing was sent to it (`slow` included: passed
# over by `avoid_slow`).
_NOT_SENT: Final = _NO_UPSTREAM_CALL
_RESET_MARGIN_S = 1.0  # a reset is said in whole seconds: the last one is not judged


def spent_window_resent(exchanges: Iterable[Exchange], spent: Iterable[tuple[str, float]],
                        operator_resets: Iterable[tuple[str, float]] = ()) -> list[str]:
    """No request sent to a provider whose spent window the engine knew of: once a request's
    answer said the provider's window was spent (`plan_limit`), a request started after that
    answer and before the reset of the spell that refused it (`spent`: (provider, reset),
    monotonic; less the reset's rounding) must pass the provider over unsent (`window_spent`)
    — unless an operator reset that provider meanwhile (`operator_resets`: (provider, when the
    reset was asked), monotonic): a reset ends the spent window's mark too
    (docs/subscriptions.md), and the next request may try the plan again."""
    resets = sorted(spent, key=lambda s: s[1])
    by_operator = sorted(operator_resets, key=lambda s: s[1])
    ordered = sorted(exchanges, key=lambda e: e.started)
    known: list[tuple[str, float, float]] = []  # (provider, known from, known until)
    for ex in ordered:
        if ex.status is None:
            continue
        for provider, outcome in attempt_tokens(ex):
            if outcome != "plan_limit":
                continue
            # The spell that refused it: the first to reset after the request started (its
            # answer may end after that reset, and another spell may have begun by then:
            # that one was not what this request was told).
            reset = next((r for p, r in resets if p == provider and r > ex.started), None)
            if reset is None:
                continue
            until = reset - _RESET_MARGIN_S
            ended = next((t for p, t in by_operator if p == provider and t > ex.ended), None)
            if ended is not None:
                until = min(until, ended)
            known.append((provider, ex.ended, until))
    problems: list[str] = []
    for ex in ordered:
        for provider, outcome in attempt_tokens(ex):
            if outcome in _NOT_SENT:
                continue
            for name, since, until in known:
                if name == provider and since < ex.started < until:
                    problems.append(
                        f"request {ex.spec.id}: sent to {provider} ({outcome}), whose window "
                        f"claudex knew was spent {1000 * (ex.started - since):.0f} ms before "
                        f"(known spent for {until - ex.started:.1f} s more)")
                    break
    return problems


def proxy_problems(exchanges: Iterable[Exchange], proxied: str, seen: Counter[str], *,
                   tunnels: int, tls_connections: int, cuts: Iterable[float],
                   opens: Iterable[tuple[str, float]],
                   proxy_out: Iterable[tuple[float, float]],
                   disturbed: Iterable[tuple[float, float]]) -> list[str]:
    """A proxy's failure is the proxy's (issue 36), judged four ways:

    - a proxy outcome (`proxy_refused`, `proxy_rate_limited`, `no_route`...) appears only at
      `proxied`, the one provider behind a proxy (counted into `seen`, by outcome);
    - never a silent bypass: `proxied`'s TLS front was connected to no more often
      (`tls_connections`, handshakes that failed included) than the proxy opened tunnels to it
      (`tunnels`: CONNECTs in mode ok);
    - while the proxy was out (`proxy_out`: (from, until), monotonic) and `proxied` had no
      fault of its own (`disturbed`: (from, until), its faults' durations plus the longest a
      request already sent may take to fail), a request's trail shows no failure of
      `proxied`'s own at it (a `proxy_refused` taken for a connect error, a proxy's 429 for the
      provider's);
    - nor did `proxied`'s breaker open then (`opens`: (provider, at) of every transition to
      open, the engine's monotonic clock — this process's too), or within `PROXY_BLAME_S` of
      the proxy coming back.

    Not judged: what a proxy going down (`cuts`: when, monotonic) did to the requests in flight
    through it. It drops its tunnels; claudex sees the provider's connection close
    (`disconnected`, or a stream cut) and charges the provider, as it cannot tell who closed
    it — counted into `seen` as "cut in flight", with the breaker openings within
    `PROXY_BLAME_S` after a cut ("breaker opened after a cut")."""
    problems: list[str] = []
    outs, own, cut_at = list(proxy_out), list(disturbed), list(cuts)

    def proxy_only(began: float, ended: float) -> bool:
        return (any(a <= ended and began <= b + PROXY_BLAME_S for a, b in outs)
                and not any(a <= ended and began <= b for a, b in own))

    for ex in exchanges:
        trail = (ex.headers or {}).get("x-claudex-attempts")
        for provider, outcome in attempt_tokens(ex):
            if outcome in PROXY_TOKENS:
                seen[outcome] += 1
                if provider != proxied:
                    problems.append(f"request {ex.spec.id}: {provider}:{outcome} — {provider} "
                                    f"is direct: trail {trail}")
            elif (provider == proxied and outcome not in _NO_UPSTREAM_CALL
                  and not outcome.startswith("2") and proxy_only(ex.started, ex.ended)):
                if any(ex.started <= c <= ex.ended for c in cut_at):
                    seen["cut in flight"] += 1
                    continue
                problems.append(f"request {ex.spec.id}: {provider}:{outcome} while only its "
                                f"proxy was out: trail {trail}")
    if tls_connections > tunnels:
        problems.append(f"{proxied}'s TLS front accepted {tls_connections} connections but its "
                        f"proxy opened {tunnels} tunnels: some went around the proxy")
    for provider, at in opens:
        if provider == proxied and proxy_only(at, at):
            if any(c <= at <= c + PROXY_BLAME_S for c in cut_at):
                seen["breaker opened after a cut"] += 1
                continue
            problems.append(f"{proxied}'s breaker opened while only its proxy was out "
                            f"(engine clock {at:.3f}): a proxy failure counted against it")
    return problems
