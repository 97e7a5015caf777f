"""After a restart the panels' counters and sparklines start from the history journal.

At engine start, with history on, a thread reads what the journal kept from before this
lifetime: today's totals per provider (attempts sent, successes, failures, 429s, tokens and
their cost), the last 30 minutes per minute (requests, errors, tokens) and the latency samples
of the last five minutes. The totals and the minutes come from the per-minute aggregates the
journal keeps as it writes (database.py, version 2: at most a day's minutes times the providers
and outcomes, whatever the traffic was), the rows of the minute this engine started in from the
rows themselves; a journal whose aggregates are not built yet is read from its rows (grouped
queries, SQLite's json_each over each request's attempt trail: the same numbers, in time that
grows with the day's traffic). The latency samples are the newest rows of the last five minutes
(at most `_LATENCY_ROWS`). The engine's loop then adds it all to the live statistics in one
short step. Only rows written before this engine started are read, so
nothing this lifetime journals is counted twice. `/metrics` is not seeded: its counters and
histograms count this process's observations, as Prometheus expects of a restarted process.

Reading is read-only (database.py owns the schema, journal.py the writes); a journal that cannot
be read logs one warning and the counters start from zero, as they did before there was a journal.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from claudex.engine.addons.cost import CostTotals, Spend
from claudex.engine.addons.latency import CAPACITY, MINUTES, WINDOW_S
from claudex.engine.addons.stats import LOCAL_ESTIMATE, attempt_counts
from claudex.engine.core.classify import Outcome
from claudex.engine.core.policy import breaker_failure
from claudex.engine.core.runtime import ProviderRuntime
from claudex.engine.core.usage import TokenTotals, Usage
from claudex.engine.history.database import keeps_minutes

log = logging.getLogger("claudex.history")

_LATENCY_ROWS: Final = 20_000  # the newest request rows read for latency samples


@dataclass
class ProviderSeed:
    requests: int = 0
    successes: int = 0
    failures: int = 0
    rate_limited: int = 0
    tokens: Usage = field(default_factory=Usage)
    cost: Spend = field(default_factory=Spend)
    minutes: dict[int, list[int]] = field(default_factory=dict)  # minute -> [reqs, errs, toks]
    first_content: list[tuple[float, float]] = field(default_factory=list)  # (time, ms)
    durations: list[tuple[float, float]] = field(default_factory=list)

    def minute(self, minute: int) -> list[int]:
        return self.minutes.setdefault(minute, [0, 0, 0])


@dataclass
class Seed:
    providers: dict[str, ProviderSeed] = field(default_factory=dict)
    since: float | None = None  # the oldest journaled request the minute series covers

    def of(self, name: str) -> ProviderSeed:
        return self.providers.setdefault(name, ProviderSeed())


def local_midnight(now: float) -> float:
    """The start of today in local time, as wall seconds."""
    t = time.localtime(now)
    return time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0, 0, 0, -1))


# The outcomes the live statistics count as rate limited (policy.py's counter column).
_RATE_LIMITED: Final = frozenset({Outcome.RATE_LIMITED.value, Outcome.PLAN_LIMIT.value})


def _breaker_failure(outcome: str) -> bool:
    return breaker_failure(outcome)  # a word no row knows counts as a failure, as the ledger


# Each attempt of each request in a time range, by provider and outcome (and "answered by
# claudex itself"): the attempt trail is a JSON list, read by SQLite, not by Python row by row.
_ATTEMPT_COLUMNS: Final = (
    f"json_extract(a.value, '$.provider'), json_extract(a.value, '$.outcome'), "
    f"json_extract(a.value, '$.message') = '{LOCAL_ESTIMATE}', COUNT(*) "
    "FROM requests AS r, json_each(r.attempts) AS a "
    "WHERE r.time >= ? AND r.time < ? AND json_valid(r.attempts) ")
_DAY_ATTEMPTS: Final = f"SELECT {_ATTEMPT_COLUMNS} GROUP BY 1, 2, 3"
_MINUTE_ATTEMPTS: Final = (f"SELECT CAST(r.time / 60 AS INTEGER), {_ATTEMPT_COLUMNS} "
                           "GROUP BY 1, 2, 3, 4")
_DAY_USAGE: Final = (
    "SELECT provider, SUM(input_tokens), SUM(output_tokens), SUM(cache_read_tokens), "
    "SUM(cache_write_tokens), SUM(cost_usd), COUNT(cost_usd), "
    "SUM(cost_usd IS NULL AND COALESCE(input_tokens, output_tokens) IS NOT NULL) "
    "FROM requests WHERE time >= ? AND time < ? AND provider IS NOT NULL GROUP BY provider")
_MINUTE_TOKENS: Final = (
    "SELECT CAST(time / 60 AS INTEGER), provider, "
    "SUM(COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0) + "
    "COALESCE(cache_read_tokens, 0) + COALESCE(cache_write_tokens, 0)) FROM requests "
    "WHERE time >= ? AND time < ? AND provider IS NOT NULL GROUP BY 1, 2")
# The same from the per-minute aggregates database.py keeps, over whole minutes `?`..`?`.
_DAY_MINUTE_ATTEMPTS: Final = ("SELECT provider, outcome, local, SUM(count) FROM minute_attempts "
                               "WHERE minute >= ? AND minute < ? GROUP BY 1, 2, 3")
_DAY_MINUTE_USAGE: Final = (
    "SELECT provider, SUM(input_tokens), SUM(output_tokens), SUM(cache_read_tokens), "
    "SUM(cache_write_tokens), SUM(cost_usd), SUM(priced), SUM(unpriced) FROM minutes "
    "WHERE minute >= ? AND minute < ? GROUP BY provider")
_WINDOW_MINUTE_ATTEMPTS: Final = ("SELECT minute, provider, outcome, local, count "
                                  "FROM minute_attempts WHERE minute >= ? AND minute < ?")
_WINDOW_MINUTE_TOKENS: Final = (
    "SELECT minute, provider, input_tokens + output_tokens + cache_read_tokens + "
    "cache_write_tokens FROM minutes WHERE minute >= ? AND minute < ?")


def read_seed(path: Path, *, now: float, until: float, day_start: float) -> Seed | None:
    """What the journal at `path` knows from before `until` (this engine's start); None when
    it cannot be read (logged once). A journal not written yet is an empty seed."""
    if not path.exists():
        return Seed()
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
        try:
            return _read(conn, now=now, until=until, day_start=day_start)
        finally:
            conn.close()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):  # created just now by another engine, tables to come
            return Seed()
        log.warning("history: the journal could not be read for the panels' counters (%s); "
                    "they start from zero", exc)
        return None
    except Exception as exc:  # whatever the file holds: the counters are extras
        log.warning("history: the journal could not be read for the panels' counters (%s); "
                    "they start from zero", exc)
        return None


def _read(conn: sqlite3.Connection, *, now: float, until: float, day_start: float,
          minutes: bool | None = None) -> Seed:
    """The seed, from the per-minute aggregates where the journal keeps them (`minutes`: by
    default when it does) and from the rows for the minutes they do not cover whole (the one
    this engine started in); from the rows only otherwise. Both give the same numbers."""
    seed = Seed()
    window_start = (int(now // 60) - MINUTES + 1) * 60.0
    conn.execute("BEGIN")  # one snapshot for all the reads: another engine may be writing
    try:
        by_minute = keeps_minutes(conn) if minutes is None else minutes
        for lo, hi, whole in _spans(day_start, until, by_minute):
            _add_day(seed, conn, lo, hi, whole)
        for lo, hi, whole in _spans(window_start, until, by_minute):
            _add_window(seed, conn, lo, hi, whole)
        oldest = conn.execute("SELECT MIN(time) FROM requests WHERE time < ?",
                              (until,)).fetchone()[0]
        if isinstance(oldest, int | float):
            seed.since = max(float(oldest), window_start)
        _read_latency(conn, seed, now=now, until=until)
    finally:
        conn.execute("COMMIT")
    return seed


def _spans(lo: float, hi: float, by_minute: bool) -> list[tuple[float, float, bool]]:
    """`lo`..`hi` as the spans to read: (first minute, end minute, True) for the whole minutes
    the aggregates cover, (start, end, False) in seconds for the rows of the parts around them."""
    first, end = -int(-lo // 60), int(hi // 60)  # the whole minutes inside
    if not by_minute or first >= end:
        return [(lo, hi, False)] if lo < hi else []
    spans = [(float(first), float(end), True)]
    if lo < first * 60.0:
        spans.append((lo, first * 60.0, False))
    if end * 60.0 < hi:
        spans.append((end * 60.0, hi, False))
    return spans


def _add_day(seed: Seed, conn: sqlite3.Connection, lo: float, hi: float, whole: bool) -> None:
    """Today's totals per provider over one span."""
    span = (int(lo), int(hi)) if whole else (lo, hi)
    for provider, outcome, local, count in conn.execute(
            _DAY_MINUTE_ATTEMPTS if whole else _DAY_ATTEMPTS, span):
        if not isinstance(provider, str) or not isinstance(outcome, str):
            continue
        sent, _ = attempt_counts(outcome, LOCAL_ESTIMATE if local else "")
        if not sent:
            continue
        p = seed.of(provider)
        p.requests += count
        p.successes += count if outcome == "ok" else 0
        p.failures += count if _breaker_failure(outcome) else 0
        p.rate_limited += count if outcome in _RATE_LIMITED else 0
    for provider, tin, tout, tread, twrite, cost, priced, unpriced in conn.execute(
            _DAY_MINUTE_USAGE if whole else _DAY_USAGE, span):
        p = seed.of(provider)
        p.tokens.add(Usage(int(tin or 0), int(tout or 0), int(tread or 0), int(twrite or 0)))
        p.cost.add_sum(float(cost or 0.0), int(priced or 0), int(unpriced or 0))


def _add_window(seed: Seed, conn: sqlite3.Connection, lo: float, hi: float,
                whole: bool) -> None:
    """The last 30 minutes per minute over one span."""
    span = (int(lo), int(hi)) if whole else (lo, hi)
    for minute, provider, outcome, local, count in conn.execute(
            _WINDOW_MINUTE_ATTEMPTS if whole else _MINUTE_ATTEMPTS, span):
        if not isinstance(provider, str) or not isinstance(outcome, str):
            continue
        sent, error = attempt_counts(outcome, LOCAL_ESTIMATE if local else "")
        if sent:
            counts = seed.of(provider).minute(int(minute))
            counts[0] += sent * count
            counts[1] += error * count
    for minute, provider, tokens in conn.execute(
            _WINDOW_MINUTE_TOKENS if whole else _MINUTE_TOKENS, span):
        if tokens:
            seed.of(provider).minute(int(minute))[2] += int(tokens)


def _read_latency(conn: sqlite3.Connection, seed: Seed, *, now: float, until: float) -> None:
    rows = conn.execute(
        "SELECT time, provider, stream, endpoint, attempts FROM requests "
        "WHERE time > ? AND time < ? AND provider IS NOT NULL AND status < 400 "
        "ORDER BY time DESC LIMIT ?", (now - WINDOW_S, until, _LATENCY_ROWS))
    for at, provider, stream, endpoint, attempts in rows:
        if endpoint == "count_tokens":
            continue
        p = seed.of(provider)
        samples = p.first_content if stream else p.durations
        if len(samples) >= CAPACITY:
            continue
        served = _served_attempt(attempts, provider)
        if served is None:
            continue
        value = served.get("first_content_ms" if stream else "latency_ms")
        if isinstance(value, int | float):
            samples.append((float(at), float(value)))


def _served_attempt(attempts: Any, provider: str) -> dict[str, Any] | None:
    try:
        trail = json.loads(attempts) if attempts else []
    except ValueError:
        return None
    if not isinstance(trail, list) or not trail:
        return None
    last = trail[-1]
    if not isinstance(last, dict) or last.get("provider") != provider:
        return None
    return last if last.get("outcome") == "ok" else None


def apply_seed(seed: Seed, runtimes: dict[str, ProviderRuntime], tokens: TokenTotals,
               costs: CostTotals | None = None) -> None:
    """Add the journal's numbers to the live ones (on the engine's loop; a few steps per
    provider): counters into `stats.earlier`, token sums into `tokens` and their cost into
    `costs`, all shown in status beside this process's own, which /metrics keeps to."""
    if seed.since is not None:  # the journal saw the traffic from then on, none included
        for each in runtimes.values():
            each.stats.minutes.since = min(each.stats.minutes.since, seed.since)
    for name, p in seed.providers.items():
        rt = runtimes.get(name)
        if rt is None:
            continue  # a profile no longer configured
        stats = rt.stats
        for key, count in (("requests", p.requests), ("successes", p.successes),
                           ("failures", p.failures), ("rate_limited", p.rate_limited)):
            stats.earlier[key] = stats.earlier.get(key, 0) + count
        for minute, (requests, errors, toks) in p.minutes.items():
            stats.minutes.add(minute * 60.0, requests, errors, toks)
        stats.first_content.seed(p.first_content)
        stats.duration.seed(p.durations)
        if p.tokens.total:
            tokens.add(name, None, p.tokens)
        if costs is not None and (p.cost.priced or p.cost.unpriced):
            costs.by_provider.setdefault(name, Spend()).add_sum(p.cost.usd, p.cost.priced,
                                                                p.cost.unpriced)
