"""One plain sentence that says why a request could not be served by anyone."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from claudex.engine.core.request import Attempt


def _names(names: Sequence[str]) -> str:
    unique = list(dict.fromkeys(names))
    if len(unique) <= 1:
        return unique[0] if unique else "the provider"
    return ", ".join(unique[:-1]) + " and " + unique[-1]


def all_failed_sentence(attempts: Sequence[Attempt], *, rate_limited: bool,
                        failover: bool = True, narrowed: Mapping[str, int] | None = None,
                        spent: Mapping[str, str] | None = None) -> str:
    """`narrowed`: providers whose adaptive concurrency limit holds, and the limit; `spent`:
    providers whose plan window is spent, in words ("5-hour window spent until 14:05")."""
    # A client that pinned the request to one profile had no backup asked at all.
    no_backup = ("and no backup could serve the request" if failover
                 else "(x-claudex-failover: off, so no backup was tried)")
    if spent and attempts:
        return _spent_sentence(attempts, spent, no_backup)
    return _sentence(attempts, rate_limited=rate_limited, no_backup=no_backup,
                     narrowed=narrowed or {})


# What became of a provider of the chain, in a few words, beside a spent window.
_STATE_WORDS = {
    "connect_error": "is down", "timeout": "is down", "disconnected": "is down",
    "server_error": "is down", "stream_error": "is down", "breaker_open": "is down",
    "half_open_busy": "is down", "forced_open": "is tripped", "rate_limited": "is rate limited",
    "cooling_down": "is rate limited", "queue_full": "is busy", "auth_error":
    "refused its credentials", "needs_login": "needs a new login", "credentials":
    "has no credentials", "disabled": "is disabled", "misconfigured": "is misconfigured",
}


def _spent_sentence(attempts: Sequence[Attempt], spent: Mapping[str, str],
                    no_backup: str) -> str:
    """`claude's 5-hour window is spent until 14:05 and deepseek is down.`"""
    last: dict[str, Attempt] = {}
    for attempt in attempts:
        last[attempt.provider] = attempt
    parts = []
    for name, attempt in last.items():
        if name in spent:
            window, _, until = spent[name].partition(" spent ")
            parts.append(f"{name}'s {window} is spent {until}")
        elif attempt.outcome == "round_cap":
            continue
        else:
            parts.append(f"{name} {_STATE_WORDS.get(attempt.outcome, 'failed')}")
    if len(parts) == 1:  # (a profile's name is written as it is, lower case included)
        return f"{parts[0]} {no_backup}."
    return ", ".join(parts[:-1]) + " and " + parts[-1] + "."


def _sentence(attempts: Sequence[Attempt], *, rate_limited: bool, no_backup: str,
              narrowed: Mapping[str, int]) -> str:
    if not attempts:
        return "No provider could serve the request."
    if rate_limited:
        names = [a.provider for a in attempts
                 if a.outcome in ("rate_limited", "cooling_down", "queue_full")]
        limits = [f"{n} to {narrowed[n]}" for n in dict.fromkeys(names) if n in narrowed]
        if limits:
            return (f"Repeated rate-limit errors from {_names(names)} — reducing concurrency "
                    f"({', '.join(limits)} at once); retry later or reduce concurrent requests.")
        return (f"Repeated rate-limit errors from {_names(names)} — pausing retries; "
                "reduce concurrent requests or retry later.")
    tried = [a for a in attempts if not a.skipped]
    if not tried:
        reasons = {a.outcome for a in attempts}
        skipped = _names([a.provider for a in attempts])
        if reasons <= {"breaker_open", "forced_open", "half_open_busy", "cooling_down"}:
            return (f"Every provider in the chain is unavailable ({skipped}): breakers are open; "
                    "retry shortly or reset one with `claudex reset NAME`.")
        if reasons <= {"needs_translation"}:
            return (f"{skipped} speak a different API protocol and claudex cannot translate it "
                    "yet; address a profile of the client's protocol.")
        details = "; ".join(f"{a.provider}: {a.message or a.outcome}" for a in attempts)
        return f"No provider in the chain could take the request ({details})."
    last = tried[-1]
    same = [a.provider for a in tried if a.outcome == last.outcome]
    who = _names(same)
    outcome = last.outcome
    if outcome == "connect_error":
        return (f"Could not connect to {who} ({last.message}) {no_backup}; check that the "
                "provider is reachable.")
    if outcome == "timeout":
        return f"{who} did not answer in time {no_backup}."
    if outcome == "server_error":
        return (f"{who} returned server errors (last: {last.status}) {no_backup}; the provider "
                "may be overloaded or down.")
    if outcome == "auth_error":
        return (f"{who} rejected the credentials claudex sent ({last.status}); check the key "
                f"configured for that claudex profile (`claudex check`).")
    if outcome == "needs_login":
        return (f"{who} needs a new login: the OAuth token was rejected and could not be "
                "refreshed.")
    if outcome in ("stream_error", "disconnected"):
        return f"{who} dropped the connection before answering {no_backup}."
    if outcome == "context_exceeded":
        return (f"The conversation is longer than {who}'s context window ({last.message}) "
                f"{no_backup}; compact it (/compact in Claude Code) or add a backup with a "
                "larger window.")
    if outcome == "credentials":
        return f"Could not get credentials for {who}: {last.message}."
    return f"Every provider failed; the last, {last.provider}, reported {outcome} ({last.message})."
