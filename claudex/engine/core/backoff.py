"""Backoff and Retry-After arithmetic for rate-limited (429) requests. Pure: no I/O, no sleeping.

- `backoff_delay`: exponential backoff with optional "full jitter" (a uniform draw between zero
  and the exponential bound, as in AWS's "Exponential Backoff and Jitter"), which spreads out
  clients that were rate limited together.
- `parse_retry_after`: the server's requested wait, from `retry-after-ms` (milliseconds, sent by
  Anthropic and OpenAI) or `Retry-After` (delta-seconds or an HTTP-date in any of its three forms).
  Anything unparseable is ignored rather than trusted.
- `rate_limit_decision`: whether to wait and retry the same provider, and how long, or fail over.
- `cooldown_seconds`: how long other requests skip a rate-limited provider.

Time comes in as `now_wall` (epoch seconds), since HTTP-dates are wall-clock dates.
"""

from __future__ import annotations

import email.utils
import math
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from claudex.config.model import RetrySettings

# Non-negative decimal numbers only: no sign, exponent, underscores, "inf" or "nan", all of which
# float() would accept.
_NUMBER = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*")
# The RFC 850 form, whose two-digit year needs RFC 9110's windowing rule.
_RFC850 = re.compile(r"\s*[A-Za-z]+,\s*\d{1,2}-[A-Za-z]{3}-(\d{2})\s")


def backoff_delay(
    retry_number: int, settings: RetrySettings, rand: Callable[[], float] = random.random
) -> float:
    """The wait before retry `retry_number` (1 = the wait before the second attempt).

    The bound is min(max_delay, initial_delay * multiplier ** (retry_number - 1)); with
    jitter "full" the result is rand() times the bound, with "none" the bound itself.
    """
    if retry_number < 1:
        raise ValueError(f"retry_number counts from 1, got {retry_number}")
    try:
        grown = settings.initial_delay * settings.multiplier ** (retry_number - 1)
    except OverflowError:  # a huge retry number: the cap applies anyway
        grown = math.inf
    bound = max(0.0, min(settings.max_delay, grown))
    if settings.jitter == "none":
        return bound
    return rand() * bound


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive lookup that works on any Mapping (plain dicts included)."""
    value = headers.get(name)
    if value is not None:
        return value
    for key, candidate in headers.items():
        if key.lower() == name:
            return candidate
    return None


def _parse_number(text: str) -> float | None:
    if _NUMBER.fullmatch(text) is None:
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def _parse_http_date(text: str, now_wall: float) -> float | None:
    """Epoch seconds for an HTTP-date (IMF-fixdate, RFC 850 or asctime), else None."""
    parts = email.utils.parsedate_tz(text)
    if parts is None:
        return None
    year, month, day, hour, minute, second = parts[:6]
    two_digit = _RFC850.match(text)
    if two_digit is not None:
        # RFC 9110 §5.6.7: a two-digit year more than 50 years in the future means the most
        # recent past year with the same last two digits.
        now_year = datetime.fromtimestamp(now_wall, UTC).year
        year = now_year - now_year % 100 + int(two_digit.group(1))
        if year > now_year + 50:
            year -= 100
    try:
        # datetime() rejects day 32, hour 25 and the like, which parsedate_tz lets through.
        moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except (ValueError, OverflowError):
        # OverflowError: a year (or day...) too long for a C long ("Jan 1 00:00:00 9999999999").
        return None
    offset = parts[9] or 0  # asctime has no zone; HTTP-dates are always GMT
    return moment.timestamp() - offset


def parse_retry_after(headers: Mapping[str, str], now_wall: float) -> float | None:
    """Seconds the server asks us to wait, or None when it gave no usable answer.

    `retry-after-ms` wins when valid; otherwise `Retry-After` as delta-seconds or an HTTP-date.
    A date in the past means 0.0. Negative, non-finite or malformed values are ignored.
    """
    millis = _header(headers, "retry-after-ms")
    if millis is not None:
        value = _parse_number(millis)
        if value is not None:
            return value / 1000.0
    text = _header(headers, "retry-after")
    if text is None:
        return None
    seconds = _parse_number(text)
    if seconds is not None:
        return seconds
    when = _parse_http_date(text, now_wall)
    if when is None:
        return None
    return max(0.0, when - now_wall)


@dataclass(frozen=True)
class RateLimitDecision:
    wait: float | None  # None = do not wait, fail over now
    reason: str


def _seconds(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") + "s"


def rate_limit_decision(
    retry_number: int,
    headers: Mapping[str, str],
    settings: RetrySettings,
    now_wall: float,
    rand: Callable[[], float] = random.random,
) -> RateLimitDecision:
    """What to do after a 429 on attempt `retry_number` (attempts made so far at this provider).

    A wait the server asks for is honoured exactly (no jitter, never shortened), unless it is
    over `max_retry_after`; without one, exponential backoff applies.
    """
    if retry_number >= settings.max_attempts:
        return RateLimitDecision(
            None, f"attempts spent ({retry_number} of {settings.max_attempts})"
        )
    asked = parse_retry_after(headers, now_wall)
    if asked is not None:
        if asked > settings.max_retry_after:
            return RateLimitDecision(
                None,
                f"server asks for {_seconds(asked)}, over max_retry_after "
                f"({_seconds(settings.max_retry_after)})",
            )
        return RateLimitDecision(asked, f"server asks for {_seconds(asked)}")
    delay = backoff_delay(retry_number, settings, rand)
    return RateLimitDecision(delay, f"backoff {_seconds(delay)} before retry {retry_number}")


def cooldown_seconds(headers: Mapping[str, str], settings: RetrySettings, now_wall: float) -> float:
    """How long other requests skip a rate-limited provider.

    The server's wait when it gave one, uncapped (that is when its limit resets); otherwise
    `initial_delay`.
    """
    asked = parse_retry_after(headers, now_wall)
    return settings.initial_delay if asked is None else asked
