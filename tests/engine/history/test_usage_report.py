"""`claudex usage`: the usage report over a journal with known rows (per day, profile and model;
API cost and a subscription's API-equivalent apart; unpriced answers counted, never $0), and the
journal's cost columns: added to an old journal once, its OpenAI and Responses rows' input
brought to claudex's convention (the cached part out of it)."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from claudex.cli import main
from claudex.engine.events import Event, EventBus
from claudex.engine.history.database import open_database
from claudex.engine.history.journal import Journal
from claudex.engine.history.usage_report import read_usage
from claudex.text.usage import summary

DAY = 86400.0


def a_moment_of(days_ago: int) -> float:
    """A moment already past on the local calendar day `days_ago` days back: noon for an earlier
    day; for today, noon only once it has passed (before noon, a minute ago, or midnight itself in
    the first minute of the day) - the report counts no row from the future."""
    now = time.time()
    t = time.localtime(now - days_ago * DAY)
    noon = time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 12, 0, 0, 0, 0, -1))
    if days_ago > 0 or noon <= now:
        return noon
    midnight = time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0, 0, 0, -1))
    return max(midnight, now - 60)


def row(at: float, provider: str | None, *, model: str = "claude-sonnet-4-5", status: int = 200,
        trail: int = 1, usage: dict[str, int] | None = None, cost: float | None = None,
        basis: str = "api") -> Event:
    return Event("request", "r", provider, {
        "protocol": "anthropic", "endpoint": "messages", "model": model, "profile": None,
        "provider": provider, "status": status, "stream": True, "latency_ms": 5.0,
        "attempts": [{"provider": provider or "x"}] * trail, "trail": "", "dropped": [],
        "usage": usage, "cost_usd": cost, "cost_basis": basis if usage else None,
    }, time=at)


U = {"input_tokens": 10, "output_tokens": 100, "cache_read_tokens": 1000,
     "cache_write_tokens": 50}


def known_journal(tmp_path: Path) -> Path:
    events = [
        row(a_moment_of(0), "claude-max", usage=U, cost=0.5, basis="api_equivalent"),
        row(a_moment_of(0), "claude-max", usage=U, cost=0.25, basis="api_equivalent"),
        row(a_moment_of(0), "anthropic-key", usage=U, cost=0.125, trail=2),  # a failover
        row(a_moment_of(1), "local", model="my-model", usage=U, cost=None),  # unpriced
        row(a_moment_of(1), None, status=502, trail=2),                      # failed everywhere
        row(a_moment_of(10), "anthropic-key", usage=U, cost=100.0),          # outside 7 days
    ]
    journal = Journal(tmp_path / "h.sqlite3")
    bus = EventBus()
    bus.sinks.append(journal.record)
    journal.start()
    for event in events:
        bus.publish(event)
    journal.flush()
    journal.close()
    return journal.path


def test_per_day(tmp_path: Path) -> None:
    report = read_usage(known_journal(tmp_path), since=time.time() - 7 * DAY, by="day")
    today, yesterday = time.strftime("%Y-%m-%d", time.localtime(a_moment_of(0))), \
        time.strftime("%Y-%m-%d", time.localtime(a_moment_of(1)))
    assert [r.key for r in report.rows] == [yesterday, today]
    y, t = report.rows
    assert (t.requests, t.failovers, t.failed) == (3, 1, 0)
    assert (t.input_tokens, t.output_tokens, t.cache_read_tokens, t.cache_write_tokens) == \
        (30, 300, 3000, 150)
    assert t.cost_usd == pytest.approx(0.125) and t.api_equivalent_usd == pytest.approx(0.75)
    assert (y.requests, y.failed, y.unpriced, y.cost_usd, y.api_equivalent_usd) == \
        (2, 1, 1, 0.0, 0.0)
    total = report.total
    assert (total.requests, total.unpriced) == (5, 1)
    assert total.total_usd == pytest.approx(0.875)
    words = summary(report)
    assert "5 requests" in words and "1 failed over, 1 failed" in words
    assert "$0.1250 at API prices on API keys" in words
    assert "$0.7500 API-equivalent on subscriptions (without them: $0.8750 in all)" in words
    assert "1 answers unpriced" in words


def test_per_profile_and_model(tmp_path: Path) -> None:
    path = known_journal(tmp_path)
    by_profile = read_usage(path, since=time.time() - 7 * DAY, by="profile")
    assert [r.key for r in by_profile.rows] == ["claude-max", "anthropic-key", "(none)", "local"]
    assert by_profile.rows[0].api_equivalent_usd == pytest.approx(0.75)
    by_model = read_usage(path, since=time.time() - 30 * DAY, by="model")
    assert [(r.key, r.requests) for r in by_model.rows] == [("claude-sonnet-4-5", 5),
                                                            ("my-model", 1)]
    assert by_model.total.cost_usd == pytest.approx(100.125)


def test_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = known_journal(tmp_path)
    config = tmp_path / "c.toml"
    config.write_text(f'[history]\npath = "{path}"\n\n[[profiles]]\nname = "a"\n'
                      'provider_type = "DirectAnthropic"\nbase_url = "https://api.anthropic.com"\n'
                      'api_key = "sk-test"\n')
    assert main(["--config", str(config), "usage", "--json", "--by", "profile"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["by"] == "profile" and data["total"]["requests"] == 5
    assert data["total"]["api_equivalent_usd"] == pytest.approx(0.75)
    assert main(["--config", str(config), "usage", "--since", "30d"]) == 0
    out = capsys.readouterr().out
    assert "usage by day" in out and "$ API-equivalent" in out and "6 requests" in out
    assert main(["--config", str(config), "usage", "--since", "soon"]) == 1
    assert "--since takes a duration ago" in capsys.readouterr().err


def test_an_empty_or_missing_journal(tmp_path: Path) -> None:
    report = read_usage(tmp_path / "none.sqlite3", since=0.0)
    assert report.rows == [] and summary(report).startswith("No requests in the journal")


# -- the journal's cost columns ------------------------------------------------------------------

_OLD_SCHEMA = """
CREATE TABLE requests (
    rowid INTEGER PRIMARY KEY, event_id INTEGER, time REAL NOT NULL, protocol TEXT,
    endpoint TEXT, model TEXT, profile TEXT, provider TEXT, status INTEGER, outcome TEXT,
    latency_ms REAL, stream INTEGER, trail TEXT, attempts TEXT, dropped TEXT,
    input_tokens INTEGER, output_tokens INTEGER, cache_read_tokens INTEGER,
    request_id TEXT, route TEXT, headers TEXT);
"""


def _old_journal(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(_OLD_SCHEMA)
    rows: list[tuple[Any, ...]] = [
        (1.0, "openai", 300, 5, 100),     # OpenAI's prompt_tokens: 300, 100 of them cached
        (2.0, "responses", 50, 5, 80),    # more cached than stated: never below zero
        (3.0, "anthropic", 20, 5, 100),   # Anthropic's input_tokens: already without them
        (4.0, "openai", None, None, None),
    ]
    conn.executemany("INSERT INTO requests (time, protocol, input_tokens, output_tokens, "
                     "cache_read_tokens, outcome) VALUES (?, ?, ?, ?, ?, 'ok')", rows)
    conn.commit()
    conn.close()


def test_an_old_journal_gains_the_columns_once(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    _old_journal(path)
    for _ in range(2):  # a second opening changes nothing more
        open_database(path).close()
        conn = sqlite3.connect(path)
        got = conn.execute("SELECT protocol, input_tokens, cache_read_tokens, "
                           "cache_write_tokens, cost_usd, cost_basis FROM requests "
                           "ORDER BY time").fetchall()
        conn.close()
        assert got == [("openai", 200, 100, None, None, None),
                       ("responses", 0, 80, None, None, None),
                       ("anthropic", 20, 100, None, None, None),
                       ("openai", None, None, None, None, None)]
    report = read_usage(path, since=0.0, until=10.0, by="day")
    assert (report.total.requests, report.total.unpriced) == (4, 3)  # old rows: not priced


def test_a_report_reads_a_journal_older_than_the_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    _old_journal(path)  # not opened by an engine since: no cost columns yet
    report = read_usage(path, since=0.0, until=10.0, by="day")
    assert report.total.requests == 4 and report.total.cache_write_tokens == 0


def test_rows_go_on_being_written_when_the_cost_columns_must_wait(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A file that may not be altered now (here: an authorizer refusing ALTER TABLE, as a lock
    held past the busy timeout would): rows are written without the cost, and the next start
    adds the columns."""
    path = tmp_path / "old.sqlite3"
    _old_journal(path)

    def no_alter(name: str) -> sqlite3.Connection:
        conn = sqlite3.connect(name, timeout=5.0, isolation_level=None)
        conn.set_authorizer(lambda action, *_: sqlite3.SQLITE_DENY
                            if action == sqlite3.SQLITE_ALTER_TABLE else sqlite3.SQLITE_OK)
        return conn

    journal = Journal(path, connect=no_alter, max_age_s=1e12)  # its rows are from 1970
    bus = EventBus()
    bus.sinks.append(journal.record)
    journal.start()
    bus.publish(row(5.0, "a", usage=U, cost=0.5))
    journal.flush()
    journal.close()
    assert journal.problem is None
    assert "cost columns could not be added" in caplog.text
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM requests WHERE time = 5.0").fetchone()[0] == 1
    conn.close()
    open_database(path).close()  # the next start
    report = read_usage(path, since=0.0, until=10.0)
    assert report.total.requests == 5 and report.total.cache_write_tokens == 0
