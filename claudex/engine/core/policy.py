"""The failure policy (DESIGN.md, failure table) as data: what claudex does with each outcome
of an attempt at one provider.

Everything that decides what an outcome does lives in `POLICY` below: one row per outcome —
upstream outcomes (`classify.Outcome`, found by `classify.py`, the only place that reads status
codes and transport errors) and claudex's own (`Local`: its queue, the credentials, the
translation, a refused token refresh). A row says:

``retry``
    whether the same provider is tried again, and how: ``BACKOFF`` waits as `[retry]` and the
    provider's `retry-after-ms` / `Retry-After` say, up to `max_attempts`, and not at all when
    the wait is over `max_retry_after` or the retry budget is spent (the provider then cools
    down when it was a quota or claudex's only request there); ``AFTER_REFRESH`` once, after
    refreshing the OAuth token (a refresh that cannot happen becomes ``Local.NEEDS_LOGIN``);
    ``AT_CAP`` once, at the max_tokens the provider stated (remembered for the profile);
    ``AFTER_RESET`` not before the plan's window resets: the provider is "window spent until
    HH:MM" (the reset the answer states, else its Retry-After) and skipped until then.
    ``WITHOUT_REFUSED`` again without what a cloud refused of the Anthropic API (a field it
    named, the betas it does not take), remembered for the profile and model; at most a few
    times a request, and not when nothing is left to drop.
    ``NEXT_HOP``: an upstream proxy failed (issue 36): the same provider at once through the
    route's next eligible proxy (seed 000: those that failed in this request excluded, at most
    as many as were eligible when it started); ``PROXY_BACKOFF``: the proxy answered 429: the
    same proxy again after the proxy's own `[retry]` backoff (its Retry-After honoured), then
    the escalation sentence naming the proxy, then ``NEXT_HOP``. A proxy's rows never touch the
    provider's breaker or health: the proxy's own state is engine/network/proxy_state.py's.
``failover``
    when not retried (or the retries are spent): True moves on along the chain; False hands the
    answer to the client (the served answer, or the provider's refusal of the client's own
    request, unchanged).
``breaker``
    ``SUCCESS``, ``FAILURE`` (counts toward opening it) or ``RELEASE`` (neutral: the permit goes
    back, nothing is counted).
``health``
    what the provider's health shows: ``LIVE_FAILURE`` (a failure in live traffic since the
    last probe: yellow), ``AUTH_FAILING`` (that, and the status says "auth" / "needs login":
    red), ``CREDENTIALS`` (claudex could not read the secret: red, "misconfigured"),
    ``HEALTHY`` (auth failing cleared), ``UNTRUSTED`` (a provider's certificate that did not
    verify: red with the issuer's name, until a success, a probe's, a reset or a reload) or
    ``NONE``.
``token``
    the outcome word the attempt carries (`x-claudex-attempts`, the request log, status).
``counter``
    the provider statistic the answer counts in, besides `failures` / `successes`, which follow
    the breaker effect.

After a stream has committed (its first content reached the client) nothing is retried and
nothing fails over, whatever went wrong: that is `AFTER_COMMIT` (a breaker failure, passed to
the client as an SSE `error` event).

The forwarding loop (`one_provider.py`, for each member `failover.py` tries) classifies, looks the
row up, and executes it; it makes no decision of its own, and `ledger.py` applies the breaker and
health effects.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from claudex.engine.core.classify import Outcome


class Local(StrEnum):
    """Outcomes claudex decides itself, before or instead of an upstream answer."""

    INVALID_REQUEST = "invalid_request"      # translation found the client's request malformed
    TRANSLATION_ERROR = "translation_error"  # a claudex bug building the body: not sent
    CREDENTIALS = "credentials"              # the profile's secret cannot be read
    QUEUE_FULL = "queue_full"                # no slot at the provider within queue_timeout
    NEEDS_LOGIN = "needs_login"              # a rejected OAuth token that cannot be refreshed


class Retry(StrEnum):
    NO = "no"
    BACKOFF = "backoff"
    AFTER_REFRESH = "after_refresh"
    AT_CAP = "at_cap"
    AFTER_RESET = "after_reset"
    WITHOUT_REFUSED = "without_refused"
    NEXT_HOP = "next_hop"
    PROXY_BACKOFF = "proxy_backoff"


class BreakerEffect(StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"
    RELEASE = "release"


class HealthEffect(StrEnum):
    NONE = "none"
    HEALTHY = "healthy"
    LIVE_FAILURE = "live_failure"
    AUTH_FAILING = "auth_failing"
    CREDENTIALS = "credentials"
    UNTRUSTED = "untrusted"


Counter = Literal["rate_limited", "client_errors"]
Key = Outcome | Local


@dataclass(frozen=True)
class Rule:
    retry: Retry
    failover: bool
    breaker: BreakerEffect
    health: HealthEffect
    token: str
    counter: Counter | None = None
    # Set on the copy `retried()` gives: the attempt led to another try at the same provider,
    # so only the row's counter applied (no breaker or health effect: the request goes on).
    retried: bool = False


_R, _B, _H = Retry, BreakerEffect, HealthEffect


def _row(key: Key, retry: Retry, failover: bool, breaker: BreakerEffect, health: HealthEffect,
         counter: Counter | None = None, token: str | None = None) -> tuple[Key, Rule]:
    return key, Rule(retry, failover, breaker, health, token or key.value, counter)


POLICY: dict[Key, Rule] = dict((
    #     outcome                  retry same         fail over  breaker     health
    _row(Outcome.OK,               _R.NO,             False,     _B.SUCCESS, _H.HEALTHY),
    _row(Outcome.CLIENT_ERROR,     _R.NO,             False,     _B.RELEASE, _H.NONE,
         "client_errors"),
    _row(Outcome.TOKEN_LIMIT,      _R.AT_CAP,         True,      _B.RELEASE, _H.NONE),
    _row(Outcome.CONTEXT_EXCEEDED, _R.NO,             True,      _B.RELEASE, _H.NONE),
    _row(Outcome.RATE_LIMITED,     _R.BACKOFF,        True,      _B.RELEASE, _H.NONE,
         "rate_limited"),
    _row(Outcome.PLAN_LIMIT,       _R.AFTER_RESET,    True,      _B.RELEASE, _H.NONE,
         "rate_limited"),
    _row(Outcome.AUTH_ERROR,       _R.NO,             True,      _B.FAILURE, _H.AUTH_FAILING),
    _row(Outcome.TOKEN_EXPIRED,    _R.AFTER_REFRESH,  True,      _B.FAILURE, _H.AUTH_FAILING),
    _row(Outcome.SERVER_ERROR,     _R.NO,             True,      _B.FAILURE, _H.LIVE_FAILURE),
    _row(Outcome.CONNECT_ERROR,    _R.NO,             True,      _B.FAILURE, _H.LIVE_FAILURE),
    _row(Outcome.TIMEOUT,          _R.NO,             True,      _B.FAILURE, _H.LIVE_FAILURE),
    _row(Outcome.DISCONNECTED,     _R.NO,             True,      _B.FAILURE, _H.LIVE_FAILURE),
    _row(Outcome.STREAM_ERROR,     _R.NO,             True,      _B.FAILURE, _H.LIVE_FAILURE),
    _row(Outcome.UNSUPPORTED_FIELD, _R.WITHOUT_REFUSED, True,     _B.RELEASE, _H.NONE),
    _row(Outcome.MODEL_UNAVAILABLE, _R.NO,            True,      _B.FAILURE, _H.LIVE_FAILURE),
    _row(Outcome.PROXY_REFUSED,    _R.NEXT_HOP,       True,      _B.RELEASE, _H.NONE),
    _row(Outcome.PROXY_AUTH_FAILED, _R.NEXT_HOP,      True,      _B.RELEASE, _H.NONE),
    _row(Outcome.PROXY_REJECTED,   _R.NEXT_HOP,       True,      _B.RELEASE, _H.NONE),
    _row(Outcome.PROXY_BAD_GATEWAY, _R.NEXT_HOP,      True,      _B.RELEASE, _H.NONE),
    _row(Outcome.PROXY_RATE_LIMITED, _R.PROXY_BACKOFF, True,     _B.RELEASE, _H.NONE),
    _row(Outcome.CERTIFICATE_UNTRUSTED, _R.NEXT_HOP,  True,      _B.RELEASE, _H.NONE),
    _row(Outcome.UNTRUSTED_PROVIDER, _R.NO,           True,      _B.FAILURE, _H.UNTRUSTED,
         token=Outcome.CERTIFICATE_UNTRUSTED.value),  # direct: the route's is the provider's
    _row(Local.INVALID_REQUEST,    _R.NO,             False,     _B.RELEASE, _H.NONE),
    _row(Local.TRANSLATION_ERROR,  _R.NO,             True,      _B.RELEASE, _H.NONE),
    _row(Local.CREDENTIALS,        _R.NO,             True,      _B.RELEASE, _H.CREDENTIALS),
    _row(Local.QUEUE_FULL,         _R.NO,             True,      _B.RELEASE, _H.NONE),
    _row(Local.NEEDS_LOGIN,        _R.NO,             True,      _B.FAILURE, _H.AUTH_FAILING),
))

AFTER_COMMIT = Rule(Retry.NO, False, BreakerEffect.FAILURE, HealthEffect.LIVE_FAILURE,
                    Outcome.STREAM_ERROR.value)
"""Any failure of a stream after its commit: nothing can be retried or failed over."""

OK_RULE = POLICY[Outcome.OK]

_RETRIED: dict[Rule, Rule] = {
    rule: Rule(rule.retry, rule.failover, BreakerEffect.RELEASE, HealthEffect.NONE, rule.token,
               rule.counter, retried=True) for rule in POLICY.values()}


def retried(rule: Rule) -> Rule:
    """`rule` as it applied to an attempt that was tried again: its counter, nothing else."""
    return _RETRIED[rule]

CLIENT_GONE = Rule(Retry.NO, False, BreakerEffect.RELEASE, HealthEffect.NONE, "client_gone")
"""A committed stream the client left before its end: the permit goes back, nothing is counted
(it is not the provider's doing). Only the lifecycle hooks see this row."""



def breaker_failure(outcome: str) -> bool:
    """Whether an attempt's outcome word counted against its provider's breaker; a word no
    row knows (an older journal's) counts as a failure of the provider."""
    for kind in (Outcome, Local):
        if outcome in kind.__members__.values():
            return POLICY[kind(outcome)].breaker is BreakerEffect.FAILURE
    return True


@dataclass(frozen=True)
class Disposition:
    """The older, three-column view of a row (`classify.DISPOSITIONS`): use `POLICY`."""

    retry_same: bool
    failover: bool
    breaker_failure: bool


def dispositions() -> dict[Outcome, Disposition]:
    return {o: Disposition(POLICY[o].retry is not Retry.NO, POLICY[o].failover,
                           POLICY[o].breaker is BreakerEffect.FAILURE) for o in Outcome}


# When each row applies, in words: the failure table of the docs (docs/reference/failures.md,
# written by `make docs-gen`) prints them beside the row's decisions, so the table users read
# is this module's. A new row of `POLICY` needs its words here (tests/docs say so).
WHEN: dict[Key, str] = {
    Outcome.OK: "a 2xx answer (a stream: its first content arrived)",
    Outcome.CLIENT_ERROR: "400, 404, 409, 413, 422 and any other 4xx not below: the provider "
                          "refuses the client's own request",
    Outcome.TOKEN_LIMIT: "a 400 stating the provider's max_tokens range (\"valid range of "
                         "max_tokens is [1, 8192]\")",
    Outcome.CONTEXT_EXCEEDED: "at a backup, a 400 stating the conversation is over the "
                              "provider's context window (\"maximum context length is 8192 "
                              "tokens\", \"prompt is too long: 18159 tokens > 8192 maximum\"); "
                              "the window is remembered for the model and a later request "
                              "estimated over it passes that backup over without sending "
                              "(`context_too_small`). At the addressed profile the 400 goes to "
                              "the client unchanged, so it can compact",
    Outcome.RATE_LIMITED: "429 rate limit; Bedrock's ThrottlingException and "
                          "ModelNotReadyException (429) and ServiceQuotaExceededException (a "
                          "400, never passed to the client as its own mistake); Vertex's "
                          "RESOURCE_EXHAUSTED (429)",
    Outcome.PLAN_LIMIT: "429 saying the plan's window is spent: `anthropic-ratelimit-unified-"
                        "status: rejected`, or the ChatGPT backend's `usage_limit_reached` / "
                        "`usage_not_included`",
    Outcome.AUTH_ERROR: "401 at a profile with an API key, or 403 (Bedrock's AccessDenied, "
                        "InvalidSignature, UnrecognizedClient, ExpiredToken; Vertex's "
                        "PERMISSION_DENIED)",
    Outcome.TOKEN_EXPIRED: "401 at an OAuth profile or one with a `token_command`; Vertex's "
                           "401 UNAUTHENTICATED (a new access token is minted)",
    Outcome.SERVER_ERROR: "500, 502, 503, 504, 529 and any other 5xx; Bedrock's "
                          "ModelTimeoutException (408) and ModelStreamErrorException / "
                          "ModelErrorException (424)",
    Outcome.CONNECT_ERROR: "connection refused, DNS failure, no connection within "
                           "`connect_timeout`",
    Outcome.TIMEOUT: "an answer not streamed with no first byte within `read_timeout`; a "
                     "stream with no response headers or first event within "
                     "`stream_first_byte_timeout`, or no content within "
                     "`stream_commit_timeout`, where `message_start` and pings are not content",
    Outcome.DISCONNECTED: "the provider closed the connection before answering",
    Outcome.STREAM_ERROR: "a stream that failed before its first content (an error event, a cut "
                          "connection, an exception frame in Bedrock's event stream)",
    Outcome.UNSUPPORTED_FIELD: "Bedrock refuses what the Anthropic API accepts: `<field>: Extra "
                               "inputs are not permitted` (the field is dropped) or `invalid "
                               "beta flag` (which does not name the flag: the betas Bedrock "
                               "documents are kept, then none); remembered for the profile and "
                               "model and named in the trail",
    Outcome.MODEL_UNAVAILABLE: "the model cannot be used at this profile: Vertex's 400 "
                               "FAILED_PRECONDITION (not enabled for the project) or 404 "
                               "NOT_FOUND, Bedrock's invalid model identifier or "
                               "ResourceNotFoundException; said in an event",
    Outcome.PROXY_REFUSED: "the upstream proxy refuses the connection, its name does not "
                           "resolve, it does not answer within `connect_timeout`, or TLS to it "
                           "fails: the proxy's breaker counts it, the next proxy of the route "
                           "is tried at once",
    Outcome.PROXY_AUTH_FAILED: "the upstream proxy answered CONNECT with 407 (or 401, as "
                               "tinyproxy does for a bad password), or a SOCKS5 proxy refused "
                               "the user and password: the proxy is \"auth failed\" (red) "
                               "until a success, a reset or a reload; the next proxy",
    Outcome.PROXY_REJECTED: "the upstream proxy answered CONNECT with 403, or a SOCKS5 rule "
                            "refused the connection: the next proxy",
    Outcome.PROXY_BAD_GATEWAY: "the upstream proxy answered CONNECT with 502, 503 or 504: the "
                               "next proxy",
    Outcome.PROXY_RATE_LIMITED: "the upstream proxy answered CONNECT with 429: backoff at that "
                                "proxy per its `[retry]` (Retry-After honoured), at most "
                                "`max_attempts`; then the escalation naming the proxy, the "
                                "proxy cools down, the next proxy. A burst of them narrows the "
                                "proxy's own adaptive concurrency limit (tries through it "
                                "queue for a slot), which its successes grow back",
    Outcome.CERTIFICATE_UNTRUSTED: "through an upstream proxy, a certificate that does not "
                                   "verify (a TLS-intercepting proxy whose CA is not trusted: "
                                   "`set ca_bundle`): the proxy is red, the next proxy",
    Outcome.UNTRUSTED_PROVIDER: "a provider reached directly (no proxy) whose certificate does "
                                "not verify (a TLS-intercepting network, a private CA not in "
                                "`ca_bundle`): no retry, the next provider at once; the "
                                "provider is red with the issuer's name "
                                "(`certificate not trusted: issuer CN=Zscaler Root CA — set "
                                "ca_bundle`)",
    Local.INVALID_REQUEST: "translation found the client's request malformed: nothing is sent, "
                           "the client gets a 400 in its own format",
    Local.TRANSLATION_ERROR: "claudex could not build the request for this provider (a claudex "
                             "bug): nothing is sent there",
    Local.CREDENTIALS: "the profile's secret cannot be read (variable unset, credentials file "
                       "missing or unreadable)",
    Local.QUEUE_FULL: "no slot at the provider within `queue_timeout`: `max_connections` or the "
                      "adaptive concurrency limit reached (claudex's own wait)",
    Local.NEEDS_LOGIN: "an OAuth token the provider refused and claudex cannot refresh",
}
AFTER_COMMIT_WHEN = ("anything that fails after a stream committed (its first content reached "
                     "the client): an error event, a cut connection, silence for "
                     "`stream_idle_timeout`")
