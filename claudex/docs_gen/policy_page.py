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


def _retry_words() -> Mapping[Retry, str]:
    retry, proxy = RetrySettings(), ProxySettings()
    jitter = "full jitter" if retry.jitter == "full" else "no jitter"
    return {
        Retry.NO: "no",
        Retry.BACKOFF: (
            f"yes, with backoff (`[retry]`: {_num(retry.initial_delay)} s, "
            f"×{_num(retry.multiplier)}, at most {_num(retry.max_delay)} s, "
            f"{retry.max_attempts} attempts in all, {jitter}), honouring the provider's "
            f"`retry-after-ms` or `Retry-After` (seconds or an HTTP date); a wait over "
            f"`max_retry_after` ({_num(retry.max_retry_after)} s) is not waited; at a provider "
            f"claudex does not limit yet, retries are at most `retry_budget` "
            f"({proxy.retry_budget:.0%}) of its requests in the last "
            f"{_num(gate.BUDGET_WINDOW_S)} s plus {gate.BUDGET_FLOOR}"),
        Retry.AFTER_REFRESH: "once, after refreshing the OAuth token (the file re-read first, "
                             "in case another tool rotated it)",
        Retry.AT_CAP: "once, at the cap the provider stated (remembered for that model)",
    }


def _failover_words(rule: Rule) -> str:
    if not rule.failover:
        return "no: the answer goes to the client unchanged"
    if rule.retry is Retry.NO:
        return "yes, at once"
    return "yes, when the retry is spent or refused"


def _breaker_words() -> Mapping[BreakerEffect, str]:
    threshold = BreakerSettings().failure_threshold
    return {
        BreakerEffect.SUCCESS: "success: the failure count starts again, a half-open breaker "
                               "closes",
        BreakerEffect.FAILURE: f"failure: counts toward `failure_threshold` ({threshold} in a "
                               "row open it)",
        BreakerEffect.RELEASE: "none",
    }


HEALTH_WORDS: Mapping[HealthEffect, str] = {
    HealthEffect.NONE: "",
    HealthEffect.HEALTHY: "clears \"auth failing\"",
    HealthEffect.LIVE_FAILURE: "yellow: a failure in live traffic since the last probe",
    HealthEffect.AUTH_FAILING: "red: \"auth\" (API key) or \"needs login\" (OAuth)",
    HealthEffect.CREDENTIALS: "red: \"misconfigured\", with the reason",
}


def _row(outcome: str, when: str, rule: Rule) -> list[str]:
    retry, breaker = _retry_words(), _breaker_words()
    counted = code(rule.counter) if rule.counter else ""
    return [outcome, when, retry[rule.retry], _failover_words(rule), breaker[rule.breaker],
            HEALTH_WORDS[rule.health], counted]


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
    headers = ("outcome", "when", "same provider again", "fail over", "breaker",
               "health shows", "counted in")
    return "\n".join((
        "# Failure table",
        "",
        "What claudex does with each outcome of an attempt at one provider. The *outcome* is the "
        "word an attempt carries in status, the journal and the request detail; the trail and "
        "`x-claudex-attempts` show an HTTP answer's status instead "
        "(`grok:connect_error,deepseek:200`). *Counted in* names the provider statistic the "
        "answer counts in besides its successes and failures.",
        "",
        section("table", f"{table(headers, rows)}\n\n{_cooldown_words()}"),
        "",
    ))


def _cooldown_words() -> str:
    return (f"A 429 burst ({concurrency.BURST} within {_num(concurrency.WINDOW_S)} s) also "
            "brings the provider's adaptive concurrency limit down to what it accepted (in "
            "flight less the refused), instead of pausing it, then tries one more only now and "
            "then; only a wait over `max_retry_after` (a quota) or a 429 at claudex's "
            "only request in flight there cools the provider down until its reset time, "
            "skipped meanwhile.")
