"""Quota windows as the providers' answers describe them (DESIGN.md "State that spans requests",
Windows; issue 22), and the answer that says a plan's window is spent.

Anthropic subscriptions (Claude Pro/Max; the names Claude Code itself reads,
`src/services/claudeAiLimits.ts`) send on every answer::

    anthropic-ratelimit-unified-status               allowed | allowed_warning | rejected
    anthropic-ratelimit-unified-representative-claim five_hour | seven_day | seven_day_opus | ...
    anthropic-ratelimit-unified-reset                epoch seconds (the representative claim's)
    anthropic-ratelimit-unified-W-utilization        0-1, per window W (5h, 7d, 7d_opus, ...)
    anthropic-ratelimit-unified-W-reset              epoch seconds
    anthropic-ratelimit-unified-W-status             allowed | allowed_warning | rejected
    anthropic-ratelimit-unified-W-surpassed-threshold  the warning threshold passed (0-1)

The ChatGPT backend (Codex subscriptions; openai/codex `codex-rs/codex-api/src/rate_limits.rs`)
sends `x-codex-{primary,secondary}-used-percent` (0-100), `-window-minutes` and `-reset-at`
(epoch s), and in its stream a `codex.rate_limits` event, `{"type": "codex.rate_limits",
"rate_limits": {"primary": {"used_percent", "window_minutes", "reset_at"}, "secondary": ...}}`.

API keys describe their rate limits as windows too, one per limit, `used` = 1 - remaining/limit:

    Anthropic (docs.anthropic.com/en/api/rate-limits, "Response headers"):
    anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}
        reset: RFC 3339 ("2025-08-21T12:40:59Z"), when the limit is fully replenished; the
        `tokens` ones are the most restrictive of the token limits in effect
    OpenAI (platform.openai.com/docs/guides/rate-limits, "Rate limits in headers"; Groq and
    other OpenAI-compatible providers send the same names):
    x-ratelimit-{limit,remaining,reset}-{requests,tokens}
        reset: a duration until the limit is back to its initial state ("1s", "6m0s", "12ms",
        Groq's "2m59.56s"), so the time the answer arrived goes with the headers

A spent window (the failure table's row): a 429 with `anthropic-ratelimit-unified-status:
rejected`, or the ChatGPT backend's `429 {"error": {"type": "usage_limit_reached" (or
"usage_not_included"), "resets_at": epoch s, "resets_in_seconds": N}}` (openai/codex
`codex-rs/core/src/api_bridge.rs`), which carries no Retry-After.

Reading is cheap when there is nothing to read: `read_windows` looks at each raw header's first
bytes and builds nothing unless a quota header is there. The windows addon keeps the raw quota
headers (`Described`) and reads them only when someone asks (status, the journal's writer).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeAlias, cast

_UNIFIED = b"anthropic-ratelimit-unified-"
_ANTHROPIC = b"anthropic-ratelimit-"   # the unified ones, and an API key's
_CODEX = b"x-codex-"
_OPENAI = b"x-ratelimit-"
PREFIX_BYTES = (_ANTHROPIC, _CODEX, _OPENAI)
FIRST_BYTES = (b"anthropi", b"x-codex-", b"x-rateli")  # each prefix's first 8 bytes
# An API key's limits, in the order shown (Anthropic's names; OpenAI has the first two).
API_LIMITS = ("requests", "tokens", "input-tokens", "output-tokens")

RawHeaders: TypeAlias = tuple[tuple[bytes, bytes], ...]

WARNING = "allowed_warning"
REJECTED = "rejected"
_STATUSES = frozenset({"allowed", WARNING, REJECTED})

# Claude's representative claims, as the window names of the per-window headers and in words.
CLAIM_WINDOWS = {"five_hour": "5h", "seven_day": "7d", "seven_day_opus": "7d_opus",
                 "seven_day_sonnet": "7d_sonnet", "overage": "overage"}
_WORDS = {"5h": "5-hour window", "7d": "weekly window", "7d_opus": "weekly Opus window",
          "7d_sonnet": "weekly Sonnet window", "overage": "extra usage"}
SPENT_TYPES = frozenset({"usage_limit_reached", "usage_not_included"})


@dataclass(frozen=True, slots=True)
class Window:
    """One quota window as an answer last reported it."""

    name: str                       # "5h", "7d", ... (ChatGPT's named by their length)
    used: float                     # share used, 0-1
    resets_at: float | None = None  # epoch seconds
    status: str | None = None       # allowed | allowed_warning | rejected (Anthropic's)
    warned: bool = False            # a warning threshold is passed (allowed_warning or surpassed)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "used": round(self.used, 4), "resets_at": self.resets_at,
                "status": self.status or ("rejected" if self.used >= 1.0 else "allowed"),
                "warning": self.warned}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Window | None:
        """A window as `to_json` wrote it (the journal's, the fleet's); None if it is not one."""
        name, used = data.get("name"), data.get("used")
        if not isinstance(name, str) or not isinstance(used, int | float):
            return None
        resets = data.get("resets_at")
        status = data.get("status")
        return Window(name, float(used), float(resets) if isinstance(resets, int | float)
                      else None, status if isinstance(status, str) else None,
                      bool(data.get("warning")))


# What an answer described: its quota headers as they came, with the wall time they arrived
# (an OpenAI reset is a duration from then), read by `described_windows` when asked; or the
# windows already read (a ChatGPT stream's event).
Described: TypeAlias = tuple[float, RawHeaders] | tuple[Window, ...]


def window_words(name: str) -> str:
    """`5h` -> "5-hour window"."""
    return _WORDS.get(name, f"{name} window")


def clock_text(epoch: float, now: float | None = None) -> str:
    """A reset time as the user reads it: `14:05` (local time), with the day when it is more
    than a day away (`Fri 14:05`)."""
    local = time.localtime(epoch)
    now = time.time() if now is None else now
    if epoch - now > 20 * 3600:
        return time.strftime("%a %H:%M", local)
    return time.strftime("%H:%M", local)


def _number(text: bytes | str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _minutes_name(minutes: float | None, fallback: str) -> str:
    if minutes is None or minutes <= 0:
        return fallback
    if minutes % 1440 == 0:
        return f"{int(minutes // 1440)}d"
    if minutes % 60 == 0:
        return f"{int(minutes // 60)}h"
    return f"{int(minutes)}m"


def read_windows(raw: Iterable[tuple[bytes, bytes]],
                 now_wall: float | None = None) -> tuple[Window, ...] | None:
    """The windows an answer's raw headers describe; None when it describes none (one pass
    over the headers, nothing built). `now_wall`: when the answer arrived (an OpenAI reset is
    a duration from then; default now)."""
    found: dict[bytes, bytes] | None = None
    for key, value in raw:
        if key[:8].lower() in FIRST_BYTES:
            lower = key.lower()
            if lower.startswith(PREFIX_BYTES):
                if found is None:
                    found = {}
                found[lower] = value
    if found is None:
        return None
    windows = _unified(found) + _codex(found) + _api_key(found, now_wall)
    return windows or None


def described_windows(described: Described) -> tuple[Window, ...]:
    """The windows of what an answer described (`Described`): read now if not yet."""
    if not described or isinstance(described[0], Window):
        return described  # type: ignore[return-value]
    at, raw = cast("tuple[float, RawHeaders]", described)
    return read_windows(raw, at) or ()


# Go's duration form (OpenAI's resets): "6m0s", "1s", "20ms", "2m59.56s", "1h2m3s".
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def duration_seconds(text: str) -> float | None:
    """A Go duration ("6m0s") in seconds; a bare number is seconds; None if it is neither."""
    text = text.strip()
    plain = _number(text)
    if plain is not None:
        return plain if plain >= 0 else None
    total, end = 0.0, 0
    for match in _DURATION.finditer(text):
        if match.start() != end:
            return None
        total += float(match.group(1)) * _UNIT_S[match.group(2)]
        end = match.end()
    return total if end and end == len(text) else None


def _rfc3339(text: str) -> float | None:
    """An RFC 3339 time ("2025-08-21T12:40:59Z") as epoch seconds; None if it is not one."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.timestamp() if moment.tzinfo is not None else None


def _api_window(name: str, limit: bytes | None, remaining: bytes | None,
                reset: float | None) -> Window | None:
    cap, left = _number(limit), _number(remaining)
    if cap is None or left is None or cap <= 0:
        return None
    return Window(name, min(1.0, max(0.0, (cap - left) / cap)), reset)


def _api_key(found: dict[bytes, bytes], now_wall: float | None) -> tuple[Window, ...]:
    out = []
    for name in API_LIMITS:
        at = _ANTHROPIC + name.encode()
        limit = found.get(at + b"-limit")
        if limit is not None:
            reset = found.get(at + b"-reset")
            w = _api_window(name, limit, found.get(at + b"-remaining"),
                            None if reset is None else _rfc3339(reset.decode("latin-1")))
            if w is not None:
                out.append(w)
    for name in API_LIMITS[:2]:
        limit = found.get(_OPENAI + b"limit-" + name.encode())
        if limit is not None:
            reset = found.get(_OPENAI + b"reset-" + name.encode())
            within = None if reset is None else duration_seconds(reset.decode("latin-1"))
            if within is not None:
                within += time.time() if now_wall is None else now_wall
            w = _api_window(name, limit, found.get(_OPENAI + b"remaining-" + name.encode()),
                            within)
            if w is not None:
                out.append(w)
    return tuple(out)


def _unified(found: dict[bytes, bytes]) -> tuple[Window, ...]:
    names = []
    for key in found:
        if key.startswith(_UNIFIED) and key.endswith(b"-utilization"):
            names.append(key[len(_UNIFIED):-len(b"-utilization")].decode("latin-1"))
    overall = found.get(_UNIFIED + b"status", b"").decode("latin-1")
    claim = CLAIM_WINDOWS.get(
        found.get(_UNIFIED + b"representative-claim", b"").decode("latin-1"))
    out = []
    for name in names:
        at = _UNIFIED + name.encode()
        used = _number(found.get(at + b"-utilization"))
        if used is None:
            continue
        status = found.get(at + b"-status", b"").decode("latin-1") or None
        if status not in _STATUSES:
            status = overall if name == claim and overall in _STATUSES else None
        surpassed = _number(found.get(at + b"-surpassed-threshold"))
        warned = status == WARNING or (surpassed is not None and used >= surpassed)
        reset = _number(found.get(at + b"-reset"))
        if reset is None and name == claim:
            reset = _number(found.get(_UNIFIED + b"reset"))
        out.append(Window(name, max(0.0, used), reset, status, warned))
    if not out and overall in _STATUSES and claim is not None:
        # Only the overall status: the representative claim's window, its share unknown.
        used = 1.0 if overall == REJECTED else 0.0
        out.append(Window(claim, used, _number(found.get(_UNIFIED + b"reset")), overall,
                          overall == WARNING))
    return tuple(out)


def _codex(found: dict[bytes, bytes]) -> tuple[Window, ...]:
    out = []
    for which, fallback in ((b"primary", "5h"), (b"secondary", "7d")):
        at = _CODEX + which
        percent = _number(found.get(at + b"-used-percent"))
        if percent is None:
            continue
        name = _minutes_name(_number(found.get(at + b"-window-minutes")), fallback)
        used = max(0.0, percent / 100.0)
        out.append(Window(name, used, _number(found.get(at + b"-reset-at")),
                          REJECTED if used >= 1.0 else None, False))
    return tuple(out)


def windows_in_event(event: Mapping[str, Any]) -> tuple[Window, ...]:
    """The windows of a ChatGPT `codex.rate_limits` stream event."""
    limits = event.get("rate_limits")
    if not isinstance(limits, dict):
        return ()
    out = []
    for which, fallback in (("primary", "5h"), ("secondary", "7d")):
        w = limits.get(which)
        if not isinstance(w, dict) or not isinstance(w.get("used_percent"), int | float):
            continue
        minutes = w.get("window_minutes")
        name = _minutes_name(float(minutes) if isinstance(minutes, int | float) else None,
                             fallback)
        used = max(0.0, float(w["used_percent"]) / 100.0)
        reset = w.get("reset_at")
        out.append(Window(name, used, float(reset) if isinstance(reset, int | float) else None,
                          REJECTED if used >= 1.0 else None, False))
    return tuple(out)


# -- a spent window ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Spent:
    """A 429 that says the plan's window is spent: until when (epoch s, None when the answer
    does not say) and which window, in words when known."""

    until: float | None
    window: str | None  # "5h", ...


def _chatgpt_error(payload: bytes) -> dict[str, Any] | None:
    if b"usage_" not in payload:
        return None
    try:
        body = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("type") in SPENT_TYPES:
        return error
    return None


def spent_window(status: int, headers: Mapping[str, str], payload: bytes) -> bool:
    """Whether a 429 says the plan's window is spent (not a transient rate limit)."""
    if status != 429:
        return False
    if headers.get("anthropic-ratelimit-unified-status", "").strip().lower() == REJECTED:
        return True
    return _chatgpt_error(payload) is not None


def spent_details(headers: Mapping[str, str], payload: bytes, now_wall: float) -> Spent:
    """When the spent window resets, from the best source the answer has: Anthropic's unified
    reset (or the representative claim's window's), ChatGPT's `resets_at`, then its
    `resets_in_seconds`; None when it states none (the caller falls back to Retry-After)."""
    claim = CLAIM_WINDOWS.get(headers.get("anthropic-ratelimit-unified-representative-claim",
                                          "").strip())
    until = _number(headers.get("anthropic-ratelimit-unified-reset"))
    if until is None and claim is not None:
        until = _number(headers.get(f"anthropic-ratelimit-unified-{claim}-reset"))
    if until is not None:
        return Spent(until, claim)
    error = _chatgpt_error(payload)
    if error is not None:
        at, within = error.get("resets_at"), error.get("resets_in_seconds")
        if isinstance(at, int | float) and not isinstance(at, bool) and math.isfinite(at):
            return Spent(float(at), None)
        if isinstance(within, int | float) and not isinstance(within, bool) \
                and math.isfinite(within):
            return Spent(now_wall + max(0.0, float(within)), None)
    return Spent(None, claim)
