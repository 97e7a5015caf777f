"""The history journal's SQLite file: its schema, opening it (created if new, in WAL mode, private
to the user), bringing a file an older claudex wrote up to date, and the per-minute aggregates
kept beside the rows.

Migrations: columns a newer claudex added are added to an older file when it is opened, and
`PRAGMA user_version` says what the rows have been through. Version 1: the client headers of
rows written before the header policy (which masked only a list of credential names, so an
`api-key` or `x-goog-api-key` was kept in full) are masked again by the policy, once, and the
file is vacuumed and its WAL truncated so the old values' bytes are gone from the disk too. The
cost columns come with the old rows' input tokens brought to today's convention, once
(`_add_cost_columns`). Version 2: the per-minute aggregates below are built once from the rows
there are (`_keep_minutes`).

Per-minute aggregates: what the panels' counters are seeded with at start (seed.py) is summed
per minute and provider as the rows are written, so a start reads a few thousand small rows, not
the day's request rows and their attempt trails. `minutes` holds, per minute and serving
provider (the `provider` column), the four token counts and the cost (its sum, how many rows had
one, how many had tokens but no price); `minute_attempts` counts, per minute, the attempts in
the rows' trails by the provider tried, its outcome and whether claudex answered itself
(`local`: the count_tokens estimate). The writer adds a batch's sums in the transaction that
writes its rows (a few dictionary steps per row, a few upserts per batch), so they never
disagree; retention deletes the oldest rows, and the minutes before the oldest row left go with
them while the minute it is in is summed again from its rows (`_trim_minutes`). A claudex from
before version 2 writing to the same file at the same time adds rows the sums do not have (its
requests are missing from the next start's counters, nothing else).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, cast

from claudex.engine.addons.stats import LOCAL_ESTIMATE
from claudex.engine.core.request import Attempt
from claudex.engine.events import Event, Kept
from claudex.engine.masking.header_policy import shown_headers

log = logging.getLogger("claudex.history")


Connect = Callable[[str], sqlite3.Connection]


_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    rowid INTEGER PRIMARY KEY, event_id INTEGER, time REAL NOT NULL, protocol TEXT,
    endpoint TEXT, model TEXT, profile TEXT, provider TEXT, status INTEGER, outcome TEXT,
    latency_ms REAL, stream INTEGER, trail TEXT, attempts TEXT, dropped TEXT,
    input_tokens INTEGER, output_tokens INTEGER, cache_read_tokens INTEGER,
    request_id TEXT, route TEXT, headers TEXT, cache_write_tokens INTEGER, cost_usd REAL,
    cost_basis TEXT, routed TEXT, windows TEXT);
CREATE INDEX IF NOT EXISTS requests_time ON requests(time);
CREATE TABLE IF NOT EXISTS events (
    rowid INTEGER PRIMARY KEY, event_id INTEGER, time REAL NOT NULL, kind TEXT, profile TEXT,
    message TEXT, data TEXT);
CREATE INDEX IF NOT EXISTS events_time ON events(time);
"""


_REQUEST_COLUMNS: Final = ("event_id", "time", "protocol", "endpoint", "model", "profile",
                           "provider", "status", "outcome", "latency_ms", "stream", "trail",
                           "attempts", "dropped", "input_tokens", "output_tokens",
                           "cache_read_tokens", "request_id", "route", "headers",
                           "cache_write_tokens", "cost_usd", "cost_basis", "routed",
                           "windows")


# Columns added after the first schema: a database file from before gains them when opened.
# `windows`: the plan's quota windows the request's last answer described (issue 22), JSON.
_ADDED_REQUEST_COLUMNS: Final = (("request_id", "TEXT"), ("route", "TEXT"), ("headers", "TEXT"),
                                 ("routed", "TEXT"), ("windows", "TEXT"))


# Added with the cost (issue 24), together, with the old rows' input brought to the convention
# of core/usage.py (see `_add_cost_columns`).
_COST_COLUMNS: Final = (("cache_write_tokens", "INTEGER"), ("cost_usd", "REAL"),
                        ("cost_basis", "TEXT"))


_EVENT_COLUMNS: Final = ("event_id", "time", "kind", "profile", "message", "data")


# `PRAGMA user_version` once the rows' headers have been masked by the header policy.
HEADERS_REMASKED: Final = 1


# `PRAGMA user_version` once the per-minute aggregates are built (and kept by the writers).
MINUTES_KEPT: Final = 2


# A row's None values (a request's absent tokens, cost, windows: several a row) bound as NULL
# without the sqlite3 module's search for an adapter: it adapts every parameter that is not
# exactly an int, float, str or bytearray, and for None that search ends in an AttributeError
# it formats and drops (PrepareProtocol has no `__adapt__`), ~2,200 instructions a value
# (bench/served_instructions.py). Registered, the adapter is found in its table at once; it
# returns None, bound as NULL as before. Process-wide, and the same NULL for every caller.
sqlite3.register_adapter(type(None), cast("Callable[[None], None]", {}.get))


def _default_connect(path: str) -> sqlite3.Connection:
    return sqlite3.connect(path, timeout=5.0, isolation_level=None)


def open_database(path: Path, connect: Connect = _default_connect) -> sqlite3.Connection:
    """The journal's database, created if new, in WAL mode (raises sqlite3.Error / OSError)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = connect(str(path))
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.executescript(_SCHEMA)
    _migrate(conn)
    if path.exists():
        path.chmod(0o600)  # what was asked and by whom is nobody else's business
    return conn


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring a database written by an older claudex up to this schema (columns only added)."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(requests)")}
    for name, kind in _ADDED_REQUEST_COLUMNS:
        if name not in have:
            try:
                conn.execute(f"ALTER TABLE requests ADD COLUMN {name} {kind}")
            except (sqlite3.OperationalError, sqlite3.DatabaseError) as exc:
                if "duplicate column" in str(exc):  # another engine added it just now
                    continue
                # Read-only, locked past the busy timeout, refused: as the cost columns and the
                # remasking below, rows go without it (`request_columns`) and the next start
                # tries again.
                log.warning("history: the journal cannot gain its %s column now (%s); "
                            "trying again at the next start", name, exc)
                break
    if "cost_usd" not in have:
        _add_cost_columns(conn)  # what cannot be done now waits for the next start
    conn.execute("CREATE INDEX IF NOT EXISTS requests_request_id ON requests(request_id)")
    if conn.execute("PRAGMA user_version").fetchone()[0] < HEADERS_REMASKED:
        _remask_headers(conn)
    if conn.execute("PRAGMA user_version").fetchone()[0] == HEADERS_REMASKED:
        _keep_minutes(conn)


def _remask_headers(conn: sqlite3.Connection) -> None:
    """Version 1: every row's client headers through the header policy, then the file rebuilt
    (VACUUM: the pages the old values were on, and those rows retention deleted before, are not
    reused as they are) and its WAL emptied. Masking again changes nothing, so two engines
    opening one file at once, or a start interrupted half way, are harmless. The version is set
    only once the file is rebuilt; what cannot be done now (another engine busy with the file,
    no room for the rebuild) is said in the log and tried again at the next start, with the
    journal on meanwhile: its new rows are masked, and reading masks the old ones."""
    try:
        changed = _remask_rows(conn)
        conn.execute("VACUUM")
        conn.execute(f"PRAGMA user_version = {HEADERS_REMASKED}")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.OperationalError as exc:
        log.warning("history: the headers of rows written by an older claudex could not be "
                    "masked again now (%s); trying again at the next start", exc)
        return
    if changed:
        log.info("history: masked the client headers of %d rows written by an older claudex",
                 changed)


def _remask_rows(conn: sqlite3.Connection) -> int:
    """The rows' headers through the header policy, in one transaction; how many changed."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        rows = conn.execute("SELECT rowid, headers FROM requests WHERE headers IS NOT NULL")
        changed = [(masked, rowid) for rowid, text in rows.fetchall()
                   if (masked := _remasked(text)) != text]
        conn.executemany("UPDATE requests SET headers = ? WHERE rowid = ?", changed)
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise
    return len(changed)


def _remasked(text: object) -> str | None:
    """A headers cell as the header policy writes it; one that does not parse goes."""
    try:
        headers = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        headers = None
    if not isinstance(headers, dict):
        return None
    return json.dumps(shown_headers({str(k): str(v) for k, v in headers.items()}))


def _add_cost_columns(conn: sqlite3.Connection) -> None:
    """The cost columns, and the old rows' input tokens in today's convention, in one
    transaction (so exactly once, whichever engine gets there first).

    Before, `input_tokens` was the number the client's protocol reported: Anthropic's leaves the
    cached part out, OpenAI's and Responses' include it. It is now the part neither read from nor
    written to a cache in every row (core/usage.py), so an OpenAI or Responses row gives its
    cached part back (an old row knows no cache writes: they went uncounted then)."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        for name, kind in _COST_COLUMNS:
            conn.execute(f"ALTER TABLE requests ADD COLUMN {name} {kind}")
        conn.execute("UPDATE requests SET input_tokens = MAX(0, input_tokens - cache_read_tokens) "
                     "WHERE protocol IN ('openai', 'responses') AND input_tokens IS NOT NULL "
                     "AND cache_read_tokens > 0")
        conn.execute("COMMIT")
    except (sqlite3.OperationalError, sqlite3.DatabaseError) as exc:  # refused, locked, denied
        _rollback(conn)
        if "duplicate column" in str(exc):  # another engine migrated it just now
            return
        # A file this engine may not change now (read-only, locked past the busy timeout): its
        # rows are written without the cost (`request_columns`), and the next start tries again.
        log.warning("history: the cost columns could not be added to the journal now (%s); its "
                    "rows go without them until the next start", exc)


# The attempt trail's parts the seed counts by (seed.py's `_ATTEMPT_COLUMNS` reads the same from
# the rows): the provider tried, its outcome and whether claudex answered itself.
_LOCAL: Final = LOCAL_ESTIMATE.replace("'", "''")


_ATTEMPT_PARTS: Final = (
    "json_extract(a.value, '$.provider'), json_extract(a.value, '$.outcome'), "
    f"COALESCE(json_extract(a.value, '$.message') = '{_LOCAL}', 0)")


_ATTEMPT_KEPT: Final = ("a.type = 'object' AND json_type(a.value, '$.provider') = 'text' AND "
                        "json_type(a.value, '$.outcome') = 'text'")


_MINUTE_TABLES: Final = (
    "CREATE TABLE IF NOT EXISTS minutes ("
    "minute INTEGER NOT NULL, provider TEXT NOT NULL, input_tokens INTEGER NOT NULL, "
    "output_tokens INTEGER NOT NULL, cache_read_tokens INTEGER NOT NULL, "
    "cache_write_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL, priced INTEGER NOT NULL, "
    "unpriced INTEGER NOT NULL, PRIMARY KEY (minute, provider)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS minute_attempts ("
    "minute INTEGER NOT NULL, provider TEXT NOT NULL, outcome TEXT NOT NULL, "
    "local INTEGER NOT NULL, count INTEGER NOT NULL, "
    "PRIMARY KEY (minute, provider, outcome, local)) WITHOUT ROWID")


_USAGE_SUMS: Final = ("input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, "
                     "cost_usd, priced, unpriced")


_ADD_MINUTES: Final = (
    f"INSERT INTO minutes (minute, provider, {_USAGE_SUMS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (minute, provider) DO UPDATE SET "
    + ", ".join(f"{c} = {c} + excluded.{c}" for c in _USAGE_SUMS.split(", ")))


_ADD_MINUTE_ATTEMPTS: Final = (
    "INSERT INTO minute_attempts (minute, provider, outcome, local, count) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (minute, provider, outcome, local) "
    "DO UPDATE SET count = count + excluded.count")


# The same sums made from the rows of the minutes `?`..`?` (the migration, and the minute
# retention cut through); `time` bounds first, so the index finds the rows.
_ROWS_OF_MINUTES: Final = ("time >= ? * 60.0 - 1 AND time < ? * 60.0 + 1 AND "
                           "CAST(time / 60 AS INTEGER) >= ? AND CAST(time / 60 AS INTEGER) < ?")


_FILL_MINUTES: Final = (
    f"INSERT INTO minutes (minute, provider, {_USAGE_SUMS}) "
    "SELECT CAST(time / 60 AS INTEGER), provider, SUM(COALESCE(input_tokens, 0)), "
    "SUM(COALESCE(output_tokens, 0)), SUM(COALESCE(cache_read_tokens, 0)), "
    "SUM(COALESCE(cache_write_tokens, 0)), SUM(COALESCE(cost_usd, 0.0)), COUNT(cost_usd), "
    "SUM(cost_usd IS NULL AND COALESCE(input_tokens, output_tokens) IS NOT NULL) "
    f"FROM requests WHERE provider IS NOT NULL AND {_ROWS_OF_MINUTES} GROUP BY 1, 2")


_FILL_MINUTE_ATTEMPTS: Final = (
    "INSERT INTO minute_attempts (minute, provider, outcome, local, count) "
    f"SELECT CAST(r.time / 60 AS INTEGER), {_ATTEMPT_PARTS}, COUNT(*) "
    "FROM requests AS r, json_each(CASE WHEN json_valid(r.attempts) THEN r.attempts "
    f"ELSE '[]' END) AS a WHERE {_ATTEMPT_KEPT} AND "
    f"{_ROWS_OF_MINUTES.replace('time', 'r.time')} GROUP BY 1, 2, 3, 4")


_ALL_MINUTES: Final = (-(2**62), 2**62)


def _minute_sums(items: list[Kept], rows: list[tuple[Any, ...]]
                 ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """What the request `rows` (made of `items`) add to the per-minute aggregates: the same
    sums `_fill_minutes` makes of the rows in SQL (the trail from the attempts the row's JSON is
    made of, a minute as SQLite's `CAST(time / 60 AS INTEGER)`)."""
    usage: dict[tuple[int, str], list[Any]] = {}
    attempts: dict[tuple[int, str, str, int], int] = {}
    for item, row in zip(items, rows, strict=True):
        minute = int(row[1] / 60)
        trail = (item.data.get("attempts") or ()) if isinstance(item, Event) else \
            item.attempts  # type: ignore[attr-defined]
        provider: object
        outcome: object
        message: object
        for a in trail:
            if isinstance(a, Attempt):
                provider, outcome, message = a.provider, a.outcome, a.message
            elif isinstance(a, dict):
                provider, outcome, message = a.get("provider"), a.get("outcome"), a.get("message")
            else:
                continue
            if isinstance(provider, str) and isinstance(outcome, str):
                key = (minute, provider, outcome, 1 if message == LOCAL_ESTIMATE else 0)
                attempts[key] = attempts.get(key, 0) + 1
        served = row[6]
        if served is None:
            continue
        sums = usage.get((minute, served))
        if sums is None:
            sums = usage[(minute, served)] = [0, 0, 0, 0, 0.0, 0, 0]
        tin, tout, cost = row[14], row[15], row[21]
        sums[0] += tin or 0
        sums[1] += tout or 0
        sums[2] += row[16] or 0
        sums[3] += row[20] or 0
        if cost is not None:
            sums[4] += cost
            sums[5] += 1
        elif tin is not None or tout is not None:
            sums[6] += 1
    return ([(m, p, *sums) for (m, p), sums in usage.items()],
            [(*key, count) for key, count in attempts.items()])


def _fill_minutes(conn: sqlite3.Connection, first: int, end: int) -> None:
    """The aggregates of the minutes `first`..`end` (exclusive) from their rows (none kept)."""
    bounds = (float(max(first, -(2**40))), float(min(end, 2**40)), first, end)
    conn.execute(_FILL_MINUTES, bounds)
    conn.execute(_FILL_MINUTE_ATTEMPTS, bounds)


def _keep_minutes(conn: sqlite3.Connection) -> None:
    """Version 2: the per-minute aggregates built from the rows there are, in one transaction
    (so exactly once, and no row is written meanwhile: the writers add to the sums in the
    transaction that writes their rows, once they see the version). A journal whose
    cost columns wait for the next start, or that cannot be changed now, waits with it: its
    seed reads the rows meanwhile."""
    if "cost_usd" not in {str(row[1]) for row in conn.execute("PRAGMA table_info(requests)")}:
        return
    try:
        conn.execute("BEGIN IMMEDIATE")
        if conn.execute("PRAGMA user_version").fetchone()[0] != HEADERS_REMASKED:
            conn.execute("COMMIT")  # another engine migrated it just now
            return
        for table in _MINUTE_TABLES:
            conn.execute(table)
        conn.execute("DELETE FROM minutes")
        conn.execute("DELETE FROM minute_attempts")
        _fill_minutes(conn, *_ALL_MINUTES)
        conn.execute(f"PRAGMA user_version = {MINUTES_KEPT}")
        conn.execute("COMMIT")
    except (sqlite3.OperationalError, sqlite3.DatabaseError) as exc:  # refused, locked, denied
        _rollback(conn)
        log.warning("history: the journal's per-minute sums could not be built now (%s); "
                    "the next start tries again, and reads the rows meanwhile", exc)


def _trim_minutes(conn: sqlite3.Connection) -> None:
    """After retention deleted the oldest rows: the aggregates of minutes before the oldest row
    left go, and that row's minute is summed again from what is left of it."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        oldest = conn.execute("SELECT CAST(MIN(time) / 60 AS INTEGER) FROM requests").fetchone()[0]
        if oldest is None:
            conn.execute("DELETE FROM minutes")
            conn.execute("DELETE FROM minute_attempts")
        else:
            conn.execute("DELETE FROM minutes WHERE minute <= ?", (oldest,))
            conn.execute("DELETE FROM minute_attempts WHERE minute <= ?", (oldest,))
            _fill_minutes(conn, oldest, oldest + 1)
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise


def keeps_minutes(conn: sqlite3.Connection) -> bool:
    """Whether the journal's per-minute aggregates are built and kept (version 2 or later)."""
    return bool(conn.execute("PRAGMA user_version").fetchone()[0] >= MINUTES_KEPT)


def request_columns(conn: sqlite3.Connection) -> tuple[str, ...]:
    """The request columns the journal's table has (all of them, unless a migration waits)."""
    have = {str(row[1]) for row in conn.execute("PRAGMA table_info(requests)")}
    return tuple(c for c in _REQUEST_COLUMNS if c in have)


def _rollback(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error:
        pass
