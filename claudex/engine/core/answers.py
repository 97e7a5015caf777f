"""The responses the engine hands back: success tagging, pass-through, the all-failed error.

Upstream error bodies may quote the credential they were sent ("invalid x-api-key sk-...");
every error body and message is scrubbed of secrets before it reaches the client, the status or
an event. Successful bodies are never scanned: that is the hot path.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from claudex.engine.core.answer_headers import KNOWN, PASSED, PASSED_SAME, kind
from claudex.engine.core.explain import all_failed_sentence
from claudex.engine.core.request import CONFIG_SKIPS, Attempt, ForwardResult, ProxyRequest, Trail
from claudex.engine.credentials.cache import AuthHeaders
from claudex.engine.masking.header_policy import masked_values
from claudex.engine.masking.secrets import SCRUBBER
from claudex.engine.network.routes import Hop
from claudex.providers import anthropic, openai


def passed_headers(upstream: Iterable[tuple[bytes, bytes]], *,
                   translating: bool = False) -> dict[str, str]:
    """The upstream answer's headers the client gets (engine/core/answer_headers.py says which:
    its type and request ids, and on the same-protocol path the provider's rate limits), by
    their lowered names."""
    out: dict[str, str] = {}
    wanted = PASSED if translating else PASSED | PASSED_SAME
    known = KNOWN
    for key, value in upstream:
        flags, name = known.get(key) or kind(key)
        if flags & wanted:
            out[name] = value.decode("latin-1")
    return out


def scrub_error_body(payload: bytes, auth: AuthHeaders | None, req: ProxyRequest) -> bytes:
    """An upstream's error body without any secret in it: the token this request was sent with
    is registered (so later messages are scrubbed of it too); what the client sent in headers
    the header policy masks (a passthrough client's own credential, an `api-key` forwarded
    as it came) is masked without being kept."""
    if auth is not None:
        SCRUBBER.note(auth.token)
    return SCRUBBER.data(payload, masked_values(req.headers))


def tag(result: ForwardResult) -> ForwardResult:
    if result.provider:
        result.headers["x-claudex-provider"] = result.provider
    if result.attempts:
        result.headers["x-claudex-attempts"] = ",".join(a.token() for a in result.attempts)
    return result


# An upstream's own words for a refused key ("invalid x-api-key") make Claude Code tell its user
# "Not logged in · Please run /login", although it is a claudex profile's key that is wrong: the
# client hears claudex's sentence; the upstream's words stay in the log, status and events.
_CREDENTIAL_OUTCOMES = frozenset({"auth_error", "needs_login", "token_expired"})


def _client_message(attempt: Attempt) -> str:
    if attempt.outcome in _CREDENTIAL_OUTCOMES:
        status = f" ({attempt.status})" if attempt.status is not None else ""
        return (f"the provider refused the credentials of claudex profile "
                f"{attempt.provider!r}{status}")
    return SCRUBBER.text(attempt.message) if attempt.message else attempt.message


def error_result(req: ProxyRequest, status: int, message: str, attempts: list[Attempt],
                 retry_after: float | None = None) -> ForwardResult:
    listed = [a.to_json() for a in attempts]
    for entry, attempt in zip(listed, attempts, strict=True):
        entry["message"] = _client_message(attempt)
    message = SCRUBBER.text(message)
    if req.protocol == "anthropic":
        body = anthropic.error_body(status, message, attempts=listed)
    else:
        body = openai.error_body(
            status, message, code="claudex_all_providers_failed" if attempts else None,
            attempts=listed)
    headers = {"content-type": "application/json"}
    if retry_after is not None:
        headers["retry-after"] = str(max(1, math.ceil(retry_after)))
    return tag(ForwardResult(status, headers, None, attempts, body=body))


_RATE_LIMITED = frozenset({"rate_limited", "cooling_down", "queue_full", "plan_limit",
                           "window_spent"})
# Passed over only to be tried later in the same request: the plan within its reserve, a slow
# provider with `avoid_slow`. What that later try met is what the answer says.
_TRIED_LAST = frozenset({"reserve", "slow"})


def all_failed(req: ProxyRequest, trail: Trail, narrowed: Mapping[str, int] | None = None,
               spent: Mapping[str, str] | None = None) -> tuple[ForwardResult, str]:
    """429 with Retry-After when every relevant attempt was rate limited (a spent plan window
    included, or no slot at claudex: `queue_full`), else 502. `narrowed`: adaptive concurrency
    limits in force; `spent`: the providers whose plan window is spent, in words."""
    relevant = [f for f in trail.failures if f.attempt.outcome not in CONFIG_SKIPS
                and f.attempt.outcome not in _TRIED_LAST]
    rate_limited = bool(relevant) and all(f.attempt.outcome in _RATE_LIMITED for f in relevant)
    # Scrubbed here too: the sentence is also logged and published as an escalation.
    sentence = SCRUBBER.text(all_failed_sentence(trail.attempts, rate_limited=rate_limited,
                                                 failover=req.failover, narrowed=narrowed,
                                                 spent=spent))
    if rate_limited:
        waits = [f.retry_after for f in relevant if f.retry_after is not None]
        retry_after = min(waits) if waits else 1.0
        return error_result(req, 429, sentence, trail.attempts, retry_after), sentence
    return error_result(req, 502, sentence, trail.attempts), sentence


def through_proxies_failed(req: ProxyRequest, trail: Trail,
                           hops: Sequence[Hop]) -> tuple[ForwardResult, str]:
    """Every provider was out of reach for its upstream proxies (issue 36): the client's error
    names the proxies, not the providers; 429 with Retry-After when they were all rate
    limiting, else 502."""
    attempts = trail.attempts
    named = ", ".join(f"{hop.name} ({hop.where})" for hop in hops)
    last = next((a for a in reversed(attempts) if a.proxy is not None or
                 a.outcome == "no_route"), None)
    said = ""
    if last is not None and last.message:
        said = ": " + last.message.removeprefix("no route: ").removeprefix(
            f"proxy {last.proxy}: " if last.proxy else "")
    limited = [f for f in trail.failures if f.attempt.outcome == "proxy_rate_limited"]
    plural = "proxies" if len(hops) > 1 else "proxy"
    sentence = SCRUBBER.text(f"No provider could be reached: the upstream {plural} {named} "
                             f"failed{said}.")
    if limited and len(limited) == len([f for f in trail.failures
                                        if f.attempt.outcome not in CONFIG_SKIPS]):
        waits = [f.retry_after for f in limited if f.retry_after is not None]
        return error_result(req, 429, sentence, attempts, min(waits) if waits else 1.0), \
            sentence
    return error_result(req, 502, sentence, attempts), sentence
