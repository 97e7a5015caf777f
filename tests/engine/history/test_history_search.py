"""Searching the history journal (`q`, `kind`, `request_id`, `until`), through the file reader,
`GET /_claudex/history`, the links' `history()`, and `claudex history --id` / `--search`."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from claudex.console.link import LocalLink, read_journal
from claudex.engine.engine import Engine
from claudex.engine.events import Event, EventBus
from claudex.engine.history.database import open_database
from claudex.engine.history.journal import Journal
from claudex.engine.history.query import (
    HistoryQuery,
    HistoryQueryError,
    like_pattern,
    parse_query,
    read_history,
)
from claudex.text.history import detail_lines, history_lines, record_from_event
from tests.cli.test_cli import claudex
from tests.conftest import TEST_ENV, build_config


def request_event(request_id: str, provider: str, status: int, trail: list[str], at: float,
                  *, message: str = "", model: str = "m") -> Event:
    attempts = [{"provider": p, "outcome": "server_error" if p != provider else "ok",
                 "status": 503 if p != provider else status, "message": message,
                 "latency_ms": 40.0, "headers_ms": 12.0, "model": model}
                for p in trail]
    return Event("request", f"anthropic {model} -> {provider} {status}", provider, {
        "request_id": request_id, "route": f"/proxy/{trail[0]}/v1/messages",
        "headers": {"user-agent": "claude-cli/2.0", "x-api-key": "sk-…wxyz"},
        "protocol": "anthropic", "endpoint": "messages", "model": model, "profile": trail[0],
        "provider": provider, "status": status, "stream": False, "latency_ms": 80.0,
        "attempts": attempts, "trail": " -> ".join(f"{p} {503 if p != provider else status}"
                                                   for p in trail),
        "dropped": [], "usage": {"input_tokens": 10, "output_tokens": 3},
    }, time=at)


def ensure_detail_columns(path: Path) -> None:
    """The request id, route and headers columns, whether or not this journal's schema has them
    yet (the engine side adds them)."""
    conn = open_database(path)
    have = {row[1] for row in conn.execute("PRAGMA table_info(requests)")}
    for column in ("request_id", "route", "headers"):
        if column not in have:
            conn.execute(f"ALTER TABLE requests ADD COLUMN {column} TEXT")
    conn.close()


def write_journal(path: Path, events: list[Event]) -> None:
    """The events as the journal keeps them, with the detail columns filled in by hand when the
    journal's own writer does not know them yet."""
    ensure_detail_columns(path)
    journal = Journal(path)
    bus = EventBus()
    bus.sinks.append(journal.record)
    journal.start()
    for event in events:
        bus.publish(event)
    journal.flush()
    journal.close()
    conn = sqlite3.connect(path, isolation_level=None)
    for event in events:
        if event.kind == "request":
            conn.execute("UPDATE requests SET request_id = COALESCE(request_id, ?), "
                         "route = COALESCE(route, ?), headers = COALESCE(headers, ?) "
                         "WHERE time = ?", (event.data["request_id"], event.data["route"],
                                            json.dumps(event.data["headers"]), event.time))
    conn.close()


T = float(int(time.time()) - 600)  # recent: older rows would go by retention
EVENTS = [
    request_event("r1", "a", 200, ["a"], T),
    request_event("r2", "b", 200, ["a", "b"], T + 1, message="upstream said 50% off_peak"),
    request_event("r3", "a", 502, ["a"], T + 2, model="grok-3"),
    Event("breaker", "a: breaker closed -> open (3 consecutive failures)", "a",
          {"old": "closed", "new": "open"}, time=T + 3),
]


@pytest.fixture
def journal_file(tmp_path: Path) -> Path:
    path = tmp_path / "h.sqlite3"
    write_journal(path, EVENTS)
    return path


def ids(found: dict[str, Any]) -> list[str]:
    return [r["request_id"] for r in found["requests"]]


def test_q_searches_provider_model_status_id_and_messages(journal_file: Path) -> None:
    def search(text: str) -> dict[str, Any]:
        return read_history(journal_file, HistoryQuery(text=text))

    assert ids(search("grok")) == ["r3"]                # model
    assert ids(search("502")) == ["r3"]                 # status
    assert ids(search("r2")) == ["r2"]                  # request id
    assert ids(search("FAILOVER")) == ["r2"]            # outcome, any case
    assert ids(search("off_peak")) == ["r2"]            # an attempt's message
    assert ids(search("b 200")) == ["r2"]               # the trail
    assert [e["kind"] for e in search("consecutive")["events"]] == ["breaker"]
    assert search("consecutive")["requests"] == []


def test_like_wildcards_in_q_are_literal(journal_file: Path) -> None:
    assert like_pattern("50%_x\\") == "%50\\%\\_x\\\\%"
    assert ids(read_history(journal_file, HistoryQuery(text="50%"))) == ["r2"]
    # `_` and `%` would match anything if they were wildcards.
    assert ids(read_history(journal_file, HistoryQuery(text="b_2"))) == []   # not "b 200"
    assert ids(read_history(journal_file, HistoryQuery(text="a%b"))) == []   # not "a 503 -> b"
    assert ids(read_history(journal_file, HistoryQuery(text="b 2"))) == ["r2"]


def test_kind_until_limit_and_request_id(journal_file: Path) -> None:
    only = read_history(journal_file, HistoryQuery(kind="requests", until=T + 1.5, limit=1))
    assert ids(only) == ["r2"] and only["events"] == []
    events = read_history(journal_file, HistoryQuery(kind="events"))
    assert events["requests"] == [] and len(events["events"]) == 1
    one = read_history(journal_file, HistoryQuery(request_id="r2"))
    assert ids(one) == ["r2"] and one["events"] == []
    row = one["requests"][0]
    assert row["route"] == "/proxy/a/v1/messages"
    assert row["headers"]["user-agent"] == "claude-cli/2.0"
    assert [a["provider"] for a in row["attempts"]] == ["a", "b"]


def test_parse_query_reads_the_new_parameters() -> None:
    query = parse_query({"q": " grok ", "kind": "events", "request_id": "r9"}, 0.0)
    assert (query.text, query.kind, query.request_id) == ("grok", "events", "r9")
    with pytest.raises(HistoryQueryError, match="kind is one of"):
        parse_query({"kind": "rows"}, 0.0)


def test_a_journal_from_before_request_ids_is_searched_without_them(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript("""
    CREATE TABLE requests (rowid INTEGER PRIMARY KEY, event_id INTEGER, time REAL NOT NULL,
        protocol TEXT, endpoint TEXT, model TEXT, profile TEXT, provider TEXT, status INTEGER,
        outcome TEXT, latency_ms REAL, stream INTEGER, trail TEXT, attempts TEXT, dropped TEXT,
        input_tokens INTEGER, output_tokens INTEGER, cache_read_tokens INTEGER);
    CREATE TABLE events (rowid INTEGER PRIMARY KEY, event_id INTEGER, time REAL NOT NULL,
        kind TEXT, profile TEXT, message TEXT, data TEXT);
    INSERT INTO requests (time, provider, status, outcome, trail, attempts, dropped)
        VALUES (5.0, 'grok', 200, 'ok', 'grok 200', '[]', '[]');
    """)
    conn.close()
    assert [r["provider"] for r in read_history(path, HistoryQuery(text="grok"))["requests"]] \
        == ["grok"]
    assert read_history(path, HistoryQuery(request_id="r1"))["requests"] == []


def test_read_journal_says_why_there_is_none(tmp_path: Path, journal_file: Path) -> None:
    assert "not kept" in (read_journal(None, "requests", None, 10, None).problem or "")
    journal = Journal(journal_file)
    page = read_journal(journal, "requests", T + 1, 10, None)
    assert page.problem is None and [r["request_id"] for r in page.rows] == ["r1", "r2"]
    journal.problem = "disk I/O error (h.sqlite3)"
    assert read_journal(journal, "requests", None, 10, None).problem == journal.problem


async def test_local_link_reads_the_engines_journal(journal_file: Path) -> None:
    engine = Engine(build_config(""), env=TEST_ENV, journal=Journal(journal_file))
    try:
        page = await LocalLink(engine).history("requests", text="grok", limit=5)
        assert [r["request_id"] for r in page.rows] == ["r3"]
        events = await LocalLink(engine).history("events")
        assert [e["kind"] for e in events.rows] == ["breaker"]
    finally:
        await engine.close()


async def test_threaded_link_reads_the_journal_off_both_loops(journal_file: Path) -> None:
    from claudex.console.engine_thread import EngineThread
    from claudex.console.threaded_link import ThreadedLink

    async def make() -> Engine:
        return Engine(build_config(""), env=TEST_ENV, journal=Journal(journal_file))

    thread: EngineThread[Engine] = EngineThread(make)
    engine = thread.start()
    try:
        link = ThreadedLink(engine, thread)
        page = await link.history("requests", until=T + 1.5, text="a")
        assert [r["request_id"] for r in page.rows] == ["r1", "r2"]
        assert (await link.history("events", text="nothing like it")).rows == []
    finally:
        thread.stop()


async def test_the_history_route_searches(journal_file: Path, proxy_factory: Any) -> None:
    proxy = await proxy_factory(build_config(""), journal=Journal(journal_file))
    resp = await proxy.client.get("/_claudex/history", params={
        "q": "off_peak", "kind": "requests", "until": str(T + 1.5), "limit": "5"})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert ids(body) == ["r2"] and body["events"] == []
    bad = await proxy.client.get("/_claudex/history", params={"kind": "nope"})
    assert bad.status_code == 400 and "kind" in bad.json()["error"]


def test_detail_lines_show_every_attempt_and_masked_headers() -> None:
    event = request_event("r2", "b", 200, ["a", "b"], 1001.0,
                          message="overloaded; key sk-ant-api03-abcdefgh12345678")
    event.data["headers"]["authorization"] = "Bearer sk-ant-api03-abcdefgh12345678"
    record = record_from_event(event)
    text = "\n".join(detail_lines(record, when=lambda t: f"t={t:.0f}"))
    assert "request id  r2" in text and "t=1001" in text
    assert "route       /proxy/a/v1/messages" in text
    assert "status      200 · failover" in text
    assert "tokens      10 in / 3 out" in text
    assert "attempts (2)" in text and "server_error" in text and "12 ms" in text
    assert "#1 message: overloaded" in text
    assert "x-api-key: sk-…wxyz" in text and "user-agent: claude-cli/2.0" in text
    assert "abcdefgh12345678" not in text


def test_missing_fields_read_as_a_dash() -> None:
    lines = detail_lines({"time": 5.0, "attempts": [{"provider": "a"}]}, when=str)
    text = "\n".join(lines)
    assert "request id  —" in text and "client headers  —" in text
    assert "  1  a         —" in text


def test_the_listing_shows_the_request_id(journal_file: Path) -> None:
    lines = history_lines(read_history(journal_file, HistoryQuery(kind="requests")))
    assert [line.split()[2] for line in lines] == ["r1", "r2", "r3"]


async def test_claudex_history_id_and_search_from_the_file(journal_file: Path,
                                                           tmp_path: Path) -> None:
    config = tmp_path / "profiles.toml"
    config.write_text(f'[proxy]\nport = 9\n[history]\npath = "{journal_file}"\n')
    config.chmod(0o600)
    code, out, err = await claudex("--config", str(config), "history", "--id", "r2")
    assert code == 0, err
    assert "attempts (2)" in out and "upstream said 50% off_peak" in out
    code, out, err = await claudex("--config", str(config), "history", "--id", "r2", "--json")
    assert code == 0, err
    assert json.loads(out)["request_id"] == "r2"
    code, out, err = await claudex("--config", str(config), "history", "--id", "nope")
    assert code != 0 and "No request 'nope'" in err
    code, out, err = await claudex("--config", str(config), "history", "-q", "grok")
    assert code == 0, err
    assert "r3" in out and "r1" not in out
