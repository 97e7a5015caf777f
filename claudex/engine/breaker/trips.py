"""Timed trips: the one duration parser (`20m`, `1h30m`, `90s`, `2h`), the words for time left,
and restoring the trips still in force from the history journal when an engine starts.

The parser is shared by the admin API, `claudex trip --for` and the console's trip dialog, so a
duration means the same everywhere and a bad one gets the same sentence.

Restore: a trip lives in the journal's events table as the breaker event that forced the breaker
open (its data carries `until`, wall-clock epoch seconds or null, and `trip_reason`), or as a
`trip` event when an operator changed the terms of a trip already in force. The last of those
per provider, unless a later breaker event moved the breaker out of forced-open (a reset, the
deadline passing), is the trip in force. Only events of the engine at the same address (their
`listen`) count: several engines may share one journal, and one's trips are not another's.
A timed trip whose deadline passed while the engine was down restores as nothing: the provider
starts closed, as it would after any restart.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

MAX_SECONDS: Final = 30 * 86400.0  # a trip longer than a month is a mistake; until reset exists
_UNITS: Final = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([dhms])")
_SHAPE = "a duration looks like 90s, 20m, 1h30m or 2h"


class DurationError(ValueError):
    """A duration that does not parse; the message says how one should look."""


def parse_duration(value: object) -> float:
    """Seconds from `90s` / `20m` / `1h30m` / `2h` / `1d`, a bare number of seconds (`90`), or a
    JSON number. Raises `DurationError` for anything else, zero, or more than 30 days."""
    if isinstance(value, bool):
        raise DurationError(f"{_SHAPE}, not {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _parse_text(value)
    else:
        raise DurationError(f"{_SHAPE}, not a {type(value).__name__}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise DurationError(f"a trip lasts more than 0 seconds ({_SHAPE})")
    if seconds > MAX_SECONDS:
        raise DurationError("a timed trip lasts at most 30 days; leave the duration out to trip "
                            "until reset")
    return seconds


def _parse_text(text: str) -> float:
    shown = text.strip()[:40]
    compact = text.strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", compact):
        return float(compact)
    pos, total, units = 0, 0.0, ""
    for match in _PART.finditer(compact):
        if compact[pos:match.start()].strip() or match.group(2) in units:
            raise DurationError(f"{_SHAPE}, not {shown!r}")
        if units and "dhms".index(match.group(2)) < "dhms".index(units[-1]):
            raise DurationError(f"{_SHAPE} (largest unit first), not {shown!r}")
        units += match.group(2)
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not units or compact[pos:].strip():
        raise DurationError(f"{_SHAPE}, not {shown!r}")
    return total


def duration_words(seconds: float) -> str:
    """`45s`, `12m`, `1h30m`, `2h`, `3d4h`: rounded up, so "1m left" is never 0 left. Reads back
    through `parse_duration`."""
    s = max(0, math.ceil(seconds - 1e-9))
    if s <= 90:
        return f"{s}s"
    minutes = math.ceil(s / 60)
    if minutes < 60:
        return f"{minutes}m"
    if minutes < 24 * 60:
        hours, rest = divmod(minutes, 60)
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    hours = math.ceil(s / 3600)
    days, rest = divmod(hours, 24)
    return f"{days}d{rest}h" if rest else f"{days}d"


def trip_words(reason: str | None, left_s: float | None) -> str:
    """How a skipped attempt or a panel says a trip: "tripped by operator: maintenance (12m
    left)", "tripped by operator (until reset)"."""
    head = "tripped by operator" + (f": {reason}" if reason else "")
    tail = "until reset" if left_s is None else f"{duration_words(left_s)} left"
    return f"{head} ({tail})"


@dataclass(frozen=True)
class Trip:
    """An operator's trip, as a breaker keeps it: `until` and `since` are readings of the
    breaker's (monotonic) clock; `until` None: until reset."""

    until: float | None = None
    reason: str | None = None
    since: float = 0.0  # when it began

    def words(self) -> str:
        """The transition's reason: "tripped by operator for 20m: maintenance"."""
        text = "tripped by operator"
        if self.until is not None:
            text += f" for {duration_words(self.until - self.since)}"
        return text + (f": {self.reason}" if self.reason else "")


@dataclass(frozen=True)
class SavedTrip:
    """A trip in force when an engine stopped, as its journal tells it."""

    provider: str
    until: float | None  # wall-clock epoch seconds; None: until reset
    reason: str | None
    since: float  # wall time the trip began


def trips_in_journal(path: Path, now_wall: float, listen: str | None = None) -> list[SavedTrip]:
    """The trips still in force at `now_wall` for the engine listening on `listen` according to
    the journal at `path` (none when the file does not exist or cannot be read). One journal may
    serve several engines (the user's state dir): each restores only what it was told (None:
    whichever engine it was)."""
    if not path.exists():
        return []
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error:
        return []
    try:
        rows = conn.execute(
            "SELECT e.profile, e.kind, e.time, e.data FROM events e JOIN "
            "(SELECT profile, MAX(rowid) AS last FROM events WHERE kind IN ('breaker', 'trip') "
            "AND profile IS NOT NULL AND (? IS NULL OR json_extract(data, '$.listen') = ?) "
            "GROUP BY profile) l ON e.rowid = l.last", (listen, listen)).fetchall()
    except sqlite3.Error:
        return []
    finally:
        conn.close()
    out: list[SavedTrip] = []
    for provider, kind, at, raw in rows:
        saved = _saved_trip(str(provider), str(kind), float(at), raw)
        if saved is not None and (saved.until is None or saved.until > now_wall):
            out.append(saved)
    return out


def _saved_trip(provider: str, kind: str, at: float, raw: object) -> SavedTrip | None:
    try:
        data: Any = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    if kind == "breaker" and data.get("new") != "forced_open":
        return None  # the last thing that happened moved it out of a trip
    until = data.get("until")
    if isinstance(until, bool) or not isinstance(until, int | float | None):
        return None
    reason = data.get("trip_reason")
    since = data.get("since")
    return SavedTrip(provider, None if until is None else float(until),
                     reason if isinstance(reason, str) and reason else None,
                     float(since) if isinstance(since, int | float) else at)


REASON_MAX: Final = 200


def clean_reason(reason: str | None) -> str | None:
    """An operator's reason as kept: one line, at most 200 characters, None when blank."""
    if reason is None:
        return None
    text = " ".join(reason.split())
    if not text:
        return None
    return text if len(text) <= REASON_MAX else text[: REASON_MAX - 1] + "…"


def trip_data(until: float | None, since: float, reason: str | None, now: float,
              now_wall: float) -> dict[str, Any]:
    """A trip's terms for an event (and so the journal): `until` and `since` as wall-clock epoch
    seconds, from readings of the monotonic clock that reads `now` when the wall reads
    `now_wall`."""
    def wall(t: float) -> float:
        return round(now_wall + (t - now), 3)

    return {"until": None if until is None else wall(until), "trip_reason": reason,
            "since": wall(since)}


def trip_terms(body: bytes) -> tuple[float | None, str | None]:
    """`(seconds, reason)` from an admin trip request's body: nothing (until reset, no reason),
    or a JSON object `{"for": "20m" | seconds | null, "reason": "..." | null}`. Raises
    `DurationError` with a sentence for anything else."""
    if not body.strip():
        return None, None
    try:
        data: Any = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise DurationError('the body is JSON: {"for": "20m", "reason": "..."}, both optional'
                            ) from None
    if not isinstance(data, dict):
        raise DurationError('the body is a JSON object: {"for": "20m", "reason": "..."}')
    unknown = sorted(set(data) - {"for", "reason"})
    if unknown:
        raise DurationError(f"unknown key {unknown[0][:40]!r}: a trip takes \"for\" and "
                            "\"reason\"")
    raw, reason = data.get("for"), data.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise DurationError("reason is a string")
    seconds = None if raw is None or raw == "" else parse_duration(raw)
    return seconds, clean_reason(reason)


def reset_words(name: str, ended: list[str], by: str | None = None) -> str:
    """`claude: reset by operator (breaker closed, 5-hour window no longer treated as spent)`;
    `by`: the fleet instance the reset was made on, when not this one."""
    where = f" on {by}" if by else ""
    return f"{name}: reset by operator{where} ({', '.join(ended) if ended else 'nothing to end'})"
