"""A journal written before the header policy (issue 20) is masked again once, at the first start
after it: its rows' client headers through the policy, and the file rebuilt so the old values'
bytes are gone from the database, its WAL and its free pages; a migration that cannot be done
now leaves the journal on and is tried again at the next start."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx
import pytest

from claudex.engine.history.database import HEADERS_REMASKED, open_database
from claudex.engine.history.journal import Journal
from claudex.engine.masking.header_policy import masked_value, shown_headers
from claudex.engine.masking.secrets import mask_secret
from tests.cli.test_cli import claudex
from tests.conftest import anthropic_body, primary_backup_config
from tests.engine.masking.test_header_policy import (
    KEPT,
    PLANTED,
    Served,
    assert_headers_shown,
    assert_no_secret,
    journal_bytes,
    leaks,
)


def _old_journal(path: Path, rows: Iterable[dict[str, str]], deleted: dict[str, str]) -> None:
    """A journal as claudex wrote it before the header policy (credential names masked, every
    other header in full), left as a killed engine leaves it: rows still in the WAL, and a
    row retention deleted whose bytes are still in the database file's free pages."""
    live = sqlite3.connect(path, isolation_level=None)
    live.execute("PRAGMA journal_mode = WAL")
    # SQLite builds differ (Debian's zeroes deleted content, others leave it): as one that
    # leaves it, so the deleted row's bytes stay in the free pages it was on.
    live.execute("PRAGMA secure_delete = OFF")
    live.execute("PRAGMA wal_autocheckpoint = 0")
    live.executescript(_SCHEMA_BEFORE)
    insert = ("INSERT INTO requests (time, protocol, status, outcome, attempts, request_id, "
              "headers) VALUES (strftime('%s', 'now'), 'anthropic', 200, 'ok', '[]', ?, ?)")
    # Long enough that its secret is on an overflow page, which the delete frees whole.
    live.execute(insert, ("gone-1", json.dumps({"x-pad": "p" * 40_000, **deleted})))
    live.execute("DELETE FROM requests WHERE request_id = 'gone-1'")
    live.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # in the database file now
    for i, headers in enumerate(rows):  # these only in the WAL
        live.execute(insert, (f"old-{i}", json.dumps(headers)))
    # The files as they are now, with the writer still holding them (a crash leaves this).
    copies = {suffix: Path(f"{path}{suffix}").read_bytes() for suffix in ("", "-wal")}
    live.close()
    for suffix, content in copies.items():
        Path(f"{path}{suffix}").write_bytes(content)
    Path(f"{path}-shm").unlink(missing_ok=True)


# The journal's tables as the release before the header policy created them (user_version 0).
_SCHEMA_BEFORE = """
CREATE TABLE requests (
    rowid INTEGER PRIMARY KEY, event_id INTEGER, time REAL NOT NULL, protocol TEXT,
    endpoint TEXT, model TEXT, profile TEXT, provider TEXT, status INTEGER, outcome TEXT,
    latency_ms REAL, stream INTEGER, trail TEXT, attempts TEXT, dropped TEXT,
    input_tokens INTEGER, output_tokens INTEGER, cache_read_tokens INTEGER,
    request_id TEXT, route TEXT, headers TEXT);
CREATE INDEX requests_time ON requests(time);
CREATE INDEX requests_request_id ON requests(request_id);
CREATE TABLE events (
    rowid INTEGER PRIMARY KEY, event_id INTEGER, time REAL NOT NULL, kind TEXT, profile TEXT,
    message TEXT, data TEXT);
CREATE INDEX events_time ON events(time);
"""


def _as_written_before(headers: dict[str, str]) -> dict[str, str]:
    """What the release before kept of `headers`: four credential names masked (an auth
    scheme kept), every other value in full."""
    def masked(value: str) -> str:
        scheme, space, rest = value.partition(" ")
        if space and scheme.lower() in ("bearer", "basic", "token"):
            return f"{scheme} {mask_secret(rest.strip())}"
        return mask_secret(value)

    old = {"authorization", "x-api-key", "cookie", "proxy-authorization"}
    return {k: masked(v) if k in old else v for k, v in headers.items()}


async def test_a_journal_written_before_is_masked_again_at_the_first_start(
    fakes: Any, tmp_path: Path
) -> None:
    path = tmp_path / "history.sqlite3"
    old_rows = [_as_written_before({**PLANTED, **KEPT}), {"api-key": PLANTED["api-key"]}]
    _old_journal(path, old_rows, {"x-my-token": PLANTED["x-my-token"]})
    before = journal_bytes(tmp_path)
    assert {"api-key", "x-goog-api-key", "x-my-token"} <= set(leaks(before))  # the old state
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    config, port = primary_backup_config(tmp_path, f, f'\n[history]\npath = "{path}"\n')
    # With no engine answering, `claudex history` reads the file itself: masked already.
    code, out, err = await claudex("--config", str(config), "history", "--json")
    assert code == 0, err
    assert_no_secret("claudex history --json, from the old file", out)
    # The first start after the fix: once its journal has written a row, the old ones are
    # masked again and the file holds none of their secrets (database, WAL, free pages).
    serve = Served(config, port)
    await serve.start()
    try:
        async with httpx.AsyncClient(base_url=serve.url, timeout=10.0) as client:
            resp = await client.post("/proxy/primary/v1/messages", json=anthropic_body())
            assert resp.status_code == 200
            history = (await client.get("/_claudex/history")).json()
        assert_no_secret("the journal's files after the first start", journal_bytes(tmp_path))
        olds = [r for r in history["requests"] if str(r["request_id"]).startswith("old-")]
        assert len(olds) == 2
        assert_headers_shown(olds[0]["headers"])
        assert olds[1]["headers"] == {"api-key": masked_value(PLANTED["api-key"])}
    finally:
        log_text = await serve.stop()
    assert "masked the client headers of 2 rows written by an older claudex" in log_text
    assert_no_secret("the journal's files after shutdown", journal_bytes(tmp_path))
    conn = open_database(path)  # once: a second opening has nothing to do
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] >= HEADERS_REMASKED
    finally:
        conn.close()


def test_masking_again_is_harmless_and_a_cell_that_does_not_parse_goes(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    _old_journal(path, [{"x-goog-api-key": PLANTED["x-goog-api-key"]}], {})
    conn = sqlite3.connect(path)
    conn.execute("UPDATE requests SET headers = 'not json' WHERE request_id = 'old-0'")
    conn.execute("INSERT INTO requests (time, request_id, headers) VALUES (1e10, 'new', ?)",
                 (json.dumps(shown_headers({"x-api-key": "sk-ant-0123456789abcd"})),))
    conn.commit()
    conn.close()
    journal = Journal(path, flush_interval_s=0.01)
    journal.start()
    journal.close()  # the writer opened the file (and migrated it) before it stopped
    assert journal.problem is None
    conn = open_database(path)
    try:
        cells = dict(conn.execute("SELECT request_id, headers FROM requests").fetchall())
    finally:
        conn.close()
    assert cells == {"old-0": None, "new": '{"x-api-key": "sk-\\u2026abcd"}'}


def test_a_migration_that_cannot_be_done_now_leaves_the_journal_on_and_waits(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "history.sqlite3"
    _old_journal(path, [{"api-key": PLANTED["api-key"]}], {})

    def read_only(name: str) -> sqlite3.Connection:  # as a file nobody may write is opened
        return sqlite3.connect(f"file:{name}?mode=ro", uri=True, isolation_level=None)

    conn = open_database(path, read_only)  # no error: the journal is not turned off for it
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 0  # to be done next time
    finally:
        conn.close()
    assert "could not be masked again now" in caplog.text
    assert "trying again at the next start" in caplog.text
    conn = open_database(path)  # the next start, with the file writable
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] >= HEADERS_REMASKED
    finally:
        conn.close()
    assert_no_secret("the journal's files", journal_bytes(tmp_path))
