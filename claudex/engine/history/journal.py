"""The history journal: request summaries and events in SQLite, so an incident outlives the process.

What is kept: for a request, its time, client protocol, endpoint, model, profile, the provider that
answered, status, outcome (`ok`, `failover`, `failed`), latency, the attempt trail, what translation
dropped, tokens when known (input, output, cache read, cache write: the four parts core/usage.py
counts), what they cost at API prices (`cost_usd`, NULL when the price table does not know the
model; `cost_basis` says `api_equivalent` for a subscription login, whose real cost is its plan),
its request id, the route the client used, the client's headers (engine/masking/header_policy.py:
every name, values off its allow-list masked) and the route that chose its profile (`routed`:
"long_context -> gemini") and the plan's quota windows its last answer described (`windows`, JSON:
`{"provider": "claude", "windows": [{"name": "5h", "used": 0.42, ...}]}`); for every other event its
kind, profile, sentence and data. Never a body or a secret (the engine's events hold none: their
texts pass the scrubber before they are published, and headers are masked then).

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

The hot path pays one deque append: `record()` runs on the engine's loop as an event-bus sink, and
a writer thread takes what piled up every `flush_interval_s` and writes it in one transaction.
The database is in WAL mode with a busy timeout, so two engines (or `claudex history` reading)
can share one file. Anything SQLite or the file system refuses — a read-only path, a full disk,
a locked or corrupt file — turns the journal off: one warning in the log, `problem` says why
(the status shows "history off: <why>"), and requests go on unaffected.

Retention: rows older than `max_age_s` go, and when the file passes `max_bytes` the oldest
rows go until it is under (checked every `retention_every_s`).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Protocol, cast

import orjson
import platformdirs

from claudex.config.model import HistorySettings
from claudex.engine.addons.stats import LOCAL_ESTIMATE
from claudex.engine.core.answer_headers import KNOWN, PLAN
from claudex.engine.core.answer_headers import kind as header_kind
from claudex.engine.core.request import Attempt
from claudex.engine.core.usage import Usage
from claudex.engine.events import Event, Kept, built
from claudex.engine.masking.header_policy import shown_headers
from claudex.engine.masking.secrets import SCRUBBER
from claudex.providers.windows import Described, RawHeaders, Window, described_windows

log = logging.getLogger("claudex.history")

FLUSH_INTERVAL_S: Final = 0.5
RETENTION_EVERY_S: Final = 60.0
PENDING_MAX: Final = 50_000  # rows waiting for the writer; past it the oldest are dropped

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


def outcome_of(data: dict[str, Any]) -> str:
    """`ok` (served by the first provider tried), `failover` (served after another failed or
    was skipped) or `failed` (no provider answered well, or the stream it committed to broke:
    the client got an error event after a 200)."""
    attempts = data.get("attempts") or []
    status = data.get("status")
    last = attempts[-1] if attempts else None
    broke = isinstance(last, dict) and last.get("outcome") in _BROKE_AFTER_COMMIT
    if not isinstance(status, int) or status >= 400 or broke:
        return "failed"
    return "failover" if len(attempts) > 1 else "ok"


def outcome_of_attempts(status: int, attempts: Sequence[Attempt]) -> str:
    """`outcome_of` for a request as the engine has it (before its event is made)."""
    if status >= 400 or (attempts and attempts[-1].outcome in _BROKE_AFTER_COMMIT):
        return "failed"
    return "failover" if len(attempts) > 1 else "ok"


# The served attempt's outcome when the stream broke after its commit (engine/core/ledger.py
# `broke_mid_stream`); before the commit the same failure is followed by another attempt or
# ends in an error status.
_BROKE_AFTER_COMMIT = frozenset({"stream_error"})


def _request_row(event: Event) -> tuple[Any, ...]:
    d = event.data
    usage = d.get("usage") or {}
    return (event.id, event.time, d.get("protocol"), d.get("endpoint"), d.get("model"),
            d.get("profile"), d.get("provider"), d.get("status"), outcome_of(d),
            d.get("latency_ms"), 1 if d.get("stream") else 0, d.get("trail"),
            json.dumps(d.get("attempts") or []), json.dumps(d.get("dropped") or []),
            usage.get("input_tokens"), usage.get("output_tokens"),
            usage.get("cache_read_tokens"), d.get("request_id") or None, d.get("route") or None,
            json.dumps(d["headers"]) if d.get("headers") is not None else None,
            usage.get("cache_write_tokens"), d.get("cost_usd"), d.get("cost_basis"),
            d.get("routed") or None,
            json.dumps(d["windows"]) if d.get("windows") is not None else None)


class RequestFacts(Protocol):
    """What a finished request's deferred event (engine/addons/request_report.py
    `RequestRecord`) holds: the journal makes its row from these, in its writer thread, without
    building the event."""

    id: int
    time: float
    protocol: str
    endpoint: str
    model: str | None
    profile: str | None
    provider: str | None
    status: int
    ms: float
    stream: bool

    @property
    def attempts(self) -> list[Attempt]: ...

    dropped: tuple[str, ...]
    usage: Usage | None
    request_id: str
    route: str
    headers: Mapping[str, str]
    cost_usd: float | None
    cost_basis: str | None
    routed: str | None
    windows: tuple[str, Described] | None
    plan: bool  # whether `windows` has a plan's (the quota-windows addon looked)

    def trail(self) -> str: ...


def _facts_row(r: RequestFacts) -> tuple[Any, ...]:
    """The same row `_request_row` makes of its event, made directly (orjson, and each header
    set's JSON once: this runs for every request)."""
    attempts = r.attempts
    usage = r.usage
    outcome = outcome_of_attempts(r.status, attempts)
    return (r.id, r.time, r.protocol, r.endpoint, r.model, r.profile, r.provider, r.status,
            outcome, round(r.ms, 2), 1 if r.stream else 0, r.trail(),
            orjson.dumps([a.to_json() for a in attempts]).decode(),
            orjson.dumps(r.dropped).decode(),
            usage.input_tokens if usage is not None else None,
            usage.output_tokens if usage is not None else None,
            usage.cache_read_tokens if usage is not None else None,
            r.request_id or None, r.route or None, _client_headers_json(r.headers),
            usage.cache_write_tokens if usage is not None else None, r.cost_usd, r.cost_basis,
            r.routed, None if r.windows is None or not r.plan else _windows_json(r.windows))


# The journal keeps a plan's windows (a subscription's: Anthropic's unified headers, ChatGPT's
# x-codex-*), not an API key's rate limits: those come with every answer of an API-key provider,
# change with each one, and reading them (RFC 3339 resets, a dozen headers) cost ~19 µs of this
# process's CPU a row; status and /metrics show an API key's limits as they are now. Which
# headers are a plan's: engine/core/answer_headers.py, one lookup a header.


def _windows_json(seen: tuple[str, Described]) -> str | None:
    provider, described = seen
    if described and not isinstance(described[0], Window):
        at, raw = cast("tuple[float, RawHeaders]", described)
        known = KNOWN
        plan = tuple(pair for pair in raw if (known.get(pair[0]) or header_kind(pair[0]))[0] & PLAN)
        if not plan:
            return None
        described = (at, plan)
    windows = described_windows(described)  # read here, in the writer thread
    if not windows:
        return None
    return orjson.dumps({"provider": provider,
                         "windows": [w.to_json() for w in windows]}).decode()


_HEADERS_JSON: dict[int, tuple[dict[str, str], str]] = {}


def _headers_json(shown: dict[str, str]) -> str:
    """`shown`'s JSON, remembered by identity: the header policy gives the same dict for the
    same header set, and a client sends the same set request after request. Only the writer
    thread calls this."""
    known = _HEADERS_JSON.get(id(shown))
    if known is not None and known[0] is shown:
        return known[1]
    if len(_HEADERS_JSON) >= 256:
        _HEADERS_JSON.clear()
    text = orjson.dumps(shown).decode()
    _HEADERS_JSON[id(shown)] = (shown, text)
    return text


_CLIENT_HEADERS_JSON: dict[int, tuple[Mapping[str, str], int, str]] = {}


def _client_headers_json(headers: Mapping[str, str]) -> str:
    """The JSON of what is shown of a client's `headers`, remembered by the mapping's identity
    while no secret is registered: request records share one mapping per distinct header set
    (engine/addons/request_report.py), so a row skips `shown_headers`' key tuple, its hash and
    its comparison. Only the writer thread calls this."""
    generation = SCRUBBER.generation
    known = _CLIENT_HEADERS_JSON.get(id(headers))
    if known is not None and known[0] is headers and known[1] == generation:
        return known[2]
    if len(_CLIENT_HEADERS_JSON) >= 256:
        _CLIENT_HEADERS_JSON.clear()
    text = _headers_json(shown_headers(headers))
    _CLIENT_HEADERS_JSON[id(headers)] = (headers, generation, text)
    return text


def _row_of(item: Kept) -> tuple[Any, ...]:
    return _request_row(item) if isinstance(item, Event) else _facts_row(
        item)  # type: ignore[arg-type]


def _event_row(event: Event) -> tuple[Any, ...]:
    return (event.id, event.time, event.kind, event.profile, event.message,
            json.dumps(event.data, default=str))


ROWS_AT_ONCE: Final = 128  # request rows the writer builds at a time (one transaction for all)
WRITER_CACHE_KIB: Final = 256  # the writer connection's page cache (SQLite's default: 2,000)
_OPEN_TRIES: Final = 10  # opening a file another engine is creating: ~2.3 s in all


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


class Journal:
    def __init__(self, path: Path, *, max_age_s: float = 30 * 86400.0,
                 max_bytes: int = 200 * 1024 * 1024, wall: Callable[[], float] = time.time,
                 connect: Connect = _default_connect,
                 flush_interval_s: float = FLUSH_INTERVAL_S,
                 retention_every_s: float = RETENTION_EVERY_S) -> None:
        self.path = path
        self.max_age_s = max_age_s
        self.max_bytes = max_bytes
        self._wall = wall
        self._connect = connect
        self._flush_interval_s = flush_interval_s
        self._retention_every_s = retention_every_s
        self._pending: deque[Kept] = deque(maxlen=PENDING_MAX)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._flushed = threading.Condition()
        self._written = 0  # events written (or given up on) so far
        self._recorded = 0
        self._thread: threading.Thread | None = None
        self.problem: str | None = None  # set once the journal is off
        self._keep: tuple[int, ...] | None = None
        self._insert = (f"INSERT INTO requests ({', '.join(_REQUEST_COLUMNS)}) "
                        f"VALUES ({', '.join('?' * len(_REQUEST_COLUMNS))})")

    # -- the hot path --------------------------------------------------------------------------

    def record(self, event: Kept) -> None:
        """Queue `event` for the writer (an event-bus sink: never blocks, never raises); a
        request's deferred event is written from its facts, never built."""
        if self.problem is None:
            self._pending.append(event)
            self._recorded += 1

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None and self.problem is None:
            self._thread = threading.Thread(target=self._run, name="claudex-journal",
                                            daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Write what is pending and stop the writer (blocks up to a few seconds)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(10.0)
            self._thread = None

    def flush(self, timeout_s: float = 10.0) -> None:
        """Wait until everything recorded so far is written (tests, `close`)."""
        target = self._recorded
        self._wake.set()
        with self._flushed:
            self._flushed.wait_for(lambda: self._written >= target or self.problem is not None
                                   or self._thread is None, timeout_s)

    def status(self) -> dict[str, Any]:
        return {"enabled": self.problem is None, "path": str(self.path), "problem": self.problem}

    # -- the writer thread ---------------------------------------------------------------------

    def _run(self) -> None:
        for attempt in range(_OPEN_TRIES):
            try:
                conn = open_database(self.path, self._connect)
                # The writer only appends (rowids, times and request ids all grow) and adds
                # to the last minutes' sums: it touches the right edge of each b-tree. SQLite's
                # default page cache (2 MB) filled with pages it never reads again, resident
                # for the life of the process; what it does read is in the OS's cache anyway.
                conn.execute(f"PRAGMA cache_size = -{WRITER_CACHE_KIB}")
                columns = request_columns(conn)
                break
            except sqlite3.OperationalError as exc:
                # Two engines creating one new file at once: before it is in WAL mode, SQLite
                # answers one of them "database is locked" at once (a lock it cannot wait for,
                # so the busy timeout does not apply). That one opens again once the other is
                # done, instead of turning history off.
                if "locked" not in str(exc) or attempt == _OPEN_TRIES - 1:
                    self._turn_off(exc)
                    return
                time.sleep(0.05 * (attempt + 1))
            except (sqlite3.Error, OSError) as exc:
                self._turn_off(exc)
                return
        # Which of a row's values go in: all, unless a migration waits for the next start.
        self._keep = None if columns == _REQUEST_COLUMNS else \
            tuple(_REQUEST_COLUMNS.index(c) for c in columns)
        self._insert = (f"INSERT INTO requests ({', '.join(columns)}) "
                        f"VALUES ({', '.join('?' * len(columns))})")
        last_retention = -1e18
        try:
            while True:
                self._wake.wait(self._flush_interval_s)
                self._wake.clear()
                stopping = self._stop.is_set()
                self._write_pending(conn)
                now = self._wall()
                if self.problem is None and now - last_retention >= self._retention_every_s:
                    last_retention = now
                    self._apply_retention(conn)
                if stopping or self.problem is not None:
                    return
        finally:
            conn.close()
            with self._flushed:
                self._flushed.notify_all()

    def _write_pending(self, conn: sqlite3.Connection) -> None:
        batch: list[Kept] = []
        while self._pending:
            batch.append(self._pending.popleft())
        if batch:
            kept = [e for e in batch if e.kind == "request"]
            others = [_event_row(built(e)) for e in batch
                      if e.kind not in ("request", "health")]
            try:
                conn.execute("BEGIN IMMEDIATE")
                # Read in the transaction: another engine may have built the sums just now.
                sums = bool(kept) and conn.execute(
                    "PRAGMA user_version").fetchone()[0] >= MINUTES_KEPT
                # The rows of a slice at a time: under load half a second's batch is a thousand
                # rows and more (~580 bytes each), and all of them at once were a peak of ~0.7
                # MB that Python's allocator kept for the life of the process.
                for at in range(0, len(kept), ROWS_AT_ONCE):
                    part = kept[at:at + ROWS_AT_ONCE]
                    rows = [_row_of(e) for e in part]
                    if self._keep is None:
                        conn.executemany(self._insert, rows)
                    else:
                        keep = self._keep
                        conn.executemany(self._insert, [tuple(row[i] for i in keep)
                                                        for row in rows])
                    if sums:
                        usage, attempts = _minute_sums(part, rows)
                        conn.executemany(_ADD_MINUTES, usage)
                        conn.executemany(_ADD_MINUTE_ATTEMPTS, attempts)
                    del rows
                conn.executemany(f"INSERT INTO events ({', '.join(_EVENT_COLUMNS)}) "
                                 f"VALUES ({', '.join('?' * len(_EVENT_COLUMNS))})", others)
                conn.execute("COMMIT")
            except (sqlite3.Error, OSError) as exc:
                _rollback(conn)
                self._turn_off(exc)
        with self._flushed:
            self._written += len(batch)
            self._flushed.notify_all()

    def _apply_retention(self, conn: sqlite3.Connection) -> None:
        try:
            cutoff = self._wall() - self.max_age_s
            deleted = conn.execute("DELETE FROM requests WHERE time < ?", (cutoff,)).rowcount
            conn.execute("DELETE FROM events WHERE time < ?", (cutoff,))
            for _ in range(10):
                size = self._size(conn)
                if size <= self.max_bytes:
                    break
                # The oldest rows, in the share the file is over (and at least a tenth).
                share = max(0.1, 1.0 - self.max_bytes / size + 0.05)
                for table in ("requests", "events"):
                    conn.execute(f"DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM "
                                 f"{table} ORDER BY time LIMIT (SELECT CAST(COUNT(*) * ? AS "
                                 f"INTEGER) + 1 FROM {table}))", (share,))
                if keeps_minutes(conn):  # before the rebuild, so their pages go with it
                    _trim_minutes(conn)
                deleted = 0
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                conn.execute("VACUUM")
            if deleted > 0 and keeps_minutes(conn):
                _trim_minutes(conn)
        except (sqlite3.Error, OSError) as exc:
            self._turn_off(exc)

    @staticmethod
    def _size(conn: sqlite3.Connection) -> int:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * size)

    def _turn_off(self, exc: BaseException) -> None:
        why = str(exc) or type(exc).__name__
        if self.problem is None:
            self.problem = f"{why} ({self.path})"
            log.warning("history off: %s; requests go on without it", self.problem)
        self._pending.clear()
        with self._flushed:
            self._flushed.notify_all()


def default_history_path() -> Path:
    return platformdirs.user_state_path("claudex") / "history.sqlite3"


def history_path(settings: HistorySettings) -> Path:
    return Path(settings.path).expanduser() if settings.path else default_history_path()


def journal_from_settings(settings: HistorySettings) -> Journal | None:
    """The journal `[history]` asks for (not started), or None when it is off."""
    if not settings.enabled:
        return None
    return Journal(history_path(settings), max_age_s=settings.max_age_days * 86400.0,
                   max_bytes=int(settings.max_mb * 1024 * 1024))


def _rollback(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error:
        pass
