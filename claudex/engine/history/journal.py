"""The history journal: request summaries and events in SQLite, so an incident outlives the process.

What a row holds is rows.py; the file, its migrations and its per-minute sums are database.py;
this module is the writer.

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

import logging
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import platformdirs

from claudex.config.model import HistorySettings
from claudex.engine.events import Kept, built
from claudex.engine.history.database import (
    _ADD_MINUTE_ATTEMPTS,
    _ADD_MINUTES,
    _EVENT_COLUMNS,
    _REQUEST_COLUMNS,
    MINUTES_KEPT,
    Connect,
    _default_connect,
    _minute_sums,
    _rollback,
    _trim_minutes,
    keeps_minutes,
    open_database,
    request_columns,
)
from claudex.engine.history.rows import _event_row, _row_of

log = logging.getLogger("claudex.history")


FLUSH_INTERVAL_S: Final = 0.5


RETENTION_EVERY_S: Final = 60.0


PENDING_MAX: Final = 50_000  # rows waiting for the writer; past it the oldest are dropped


ROWS_AT_ONCE: Final = 128  # request rows the writer builds at a time (one transaction for all)


WRITER_CACHE_KIB: Final = 256  # the writer connection's page cache (SQLite's default: 2,000)


_OPEN_TRIES: Final = 10  # opening a file another engine is creating: ~2.3 s in all


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
