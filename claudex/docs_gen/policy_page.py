"""docs/reference/failures.md: the failure table, one line per row of `POLICY`
(engine/core/policy.py), with the numbers it depends on read from the settings' defaults."""

from __future__ import annotations

import re
from collections.abc import Mapping

from claudex.config.model import BreakerSettings, ProxySettings, RetrySettings
from claudex.docs_gen.markdown import code, section, table
from claudex.engine.core import concurrency, gate
from claudex.engine.core.policy import (
    AFTER_COMMIT,
    AFTER_COMMIT_WHEN,
    POLICY,
    WHEN,
    BreakerEffect,
    HealthEffect,
    Key,
    Retry,
    Rule,
)

SOURCES = ("claudex/engine/core/policy.py", "claudex/config/model.py")


def _num(value: float) -> str:
    return f"{value:g}"


RETRY_WORDS: Mapping[Retry, str] = {
    Retry.NO: "no",
    Retry.BACKOFF: "yes, with backoff",
    Retry.AFTER_REFRESH: "once, after a token refresh",
    Retry.AT_CAP: "once, at the stated cap",
    Retry.AFTER_RESET: "no; skipped until the window resets, then used again",
    Retry.WITHOUT_REFUSED: "yes, without what was refused (remembered), a few times at most",
    Retry.NEXT_HOP: "yes, at once, through the route's next upstream proxy",
    Retry.PROXY_BACKOFF: "yes, at the same upstream proxy with its own backoff; then the next "
                         "proxy",
}
BREAKER_WORDS: Mapping[BreakerEffect, str] = {
    BreakerEffect.SUCCESS: "success",
    BreakerEffect.FAILURE: "failure",
    BreakerEffect.RELEASE: "none",
}
HEALTH_WORDS: Mapping[HealthEffect, str] = {
    HealthEffect.NONE: "",
    HealthEffect.HEALTHY: "clears \"auth\"",
    HealthEffect.LIVE_FAILURE: "yellow",
    HealthEffect.AUTH_FAILING: "red: \"auth\" / \"needs login\"",
    HealthEffect.CREDENTIALS: "red: \"misconfigured\"",
    HealthEffect.UNTRUSTED: "red: \"certificate not trusted: issuer …\"",
}


def _failover_words(rule: Rule) -> str:
    if not rule.failover:
        return "no"
    if rule.retry is Retry.NO:
        return "yes, at once"
    return "yes, after the retry"


def _legend() -> str:
    """What the table's short words mean, with the numbers they depend on."""
    retry, proxy = RetrySettings(), ProxySettings()
    threshold = BreakerSettings().failure_threshold
    jitter = "full jitter" if retry.jitter == "full" else "no jitter"
    items = (
        ("With backoff", f"waits as `[retry]` says (first {_num(retry.initial_delay)} s, then "
         f"×{_num(retry.multiplier)}, at most {_num(retry.max_delay)} s a wait, "
         f"{retry.max_attempts} attempts in all, {jitter}); the provider's `retry-after-ms` or "
         "`Retry-After` (seconds or an HTTP date) wins. A wait over `max_retry_after` "
         f"({_num(retry.max_retry_after)} s) is not waited: the request fails over. At a "
         "provider claudex does not limit yet, retries are at most `retry_budget` "
         f"({proxy.retry_budget:.0%}) of its requests in the last {_num(gate.BUDGET_WINDOW_S)} s "
         f"plus {gate.BUDGET_FLOOR}; past it a 429 fails over at once."),
        ("After a token refresh", "the cached token is dropped and the source read again (another "
         "tool may have rotated it); if it is unchanged and a refresh token exists, it is "
         "refreshed, then the request is sent once more."),
        ("At the stated cap", "the request is sent once more with max_tokens at the largest "
         "value the provider said it takes, which is remembered for that provider and model."),
        ("Fail over", "*no* hands the answer to the client as it came: the served answer, "
         "or the provider's refusal of the client's own request, unchanged and in its format."),
        ("Breaker", f"a *failure* counts toward `failure_threshold` ({threshold} in a row open "
         "the breaker); a *success* starts the count again and closes a half-open breaker; "
         "*none* counts nothing."),
        ("Health", "*yellow*: a failure in live traffic since the last probe; *red*: the status "
         "says \"auth\" (API key) or \"needs login\" (OAuth), or \"misconfigured\" with the "
         "reason, or (a provider reached directly) \"certificate not trusted\" with the "
         "issuer's name, until a success, a probe's, a reset or a reload."),
        ("Cooling down", f"a 429 burst ({concurrency.BURST} within "
         f"{_num(concurrency.WINDOW_S)} s) brings the provider's adaptive concurrency limit "
         "down to what it accepted (in flight less the refused), instead of pausing it, then "
         "tries one more only now and then; only a wait over `max_retry_after` (a quota) or a "
         "429 at claudex's only request in flight there cools the provider down until its reset "
         "time, skipped meanwhile."),
    )
    return "\n".join(f"- **{name}**: {words}" for name, words in items)


def _row(outcome: str, when: str, rule: Rule) -> list[str]:
    counted = code(rule.counter) if rule.counter else ""
    return [outcome, when, RETRY_WORDS[rule.retry], _failover_words(rule),
            BREAKER_WORDS[rule.breaker], HEALTH_WORDS[rule.health], counted]


def _with_defaults(words: str) -> str:
    """`stream_commit_timeout` -> `stream_commit_timeout` (60 s): a `[proxy]` timeout named in
    the words gets its default beside it."""
    defaults = ProxySettings()

    def add(match: re.Match[str]) -> str:
        name = match.group(1)
        value = getattr(defaults, name, None)
        if name.endswith("_timeout") and isinstance(value, int | float):
            return f"{match.group(0)} ({_num(value)} s)"
        return match.group(0)

    return re.sub(r"`(\w+)`", add, words)


def _when(key: Key) -> str:
    try:
        return _with_defaults(WHEN[key])
    except KeyError:
        raise LookupError(f"POLICY row {key.value!r} has no words in WHEN "
                          "(claudex/engine/core/policy.py)") from None


def render() -> str:
    rows = [_row(code(rule.token), _when(key), rule) for key, rule in POLICY.items()]
    rows.append(_row(f"{code(AFTER_COMMIT.token)} after the commit",
                     _with_defaults(AFTER_COMMIT_WHEN), AFTER_COMMIT))
    headers = ("outcome", "when", "same provider again", "fail over", "breaker", "health",
               "counted in")
    return "\n".join((
        "# Failure table",
        "",
        "What claudex does with each outcome of an attempt at one provider. The *outcome* is the "
        "word an attempt carries in status, the journal and the request detail; the trail and "
        "`x-claudex-attempts` show an HTTP answer's status instead "
        "(`grok:connect_error,deepseek:200`). *Counted in* names the provider statistic the "
        "answer counts in besides its successes and failures.",
        "",
        section("table", f"{table(headers, rows)}\n\n{_legend()}"),
        "",
    ))

