"""The history journal: what it keeps, retention, a database that refuses, two writers on one
file, and history that survives a `claudex serve` restart (`GET /_claudex/history`, `claudex
history`)."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console

from claudex.demo.world import free_port
from claudex.engine.events import Event, EventBus
from claudex.engine.history.journal import Journal
from claudex.engine.history.query import HistoryQuery, HistoryQueryError, parse_query, read_history
from claudex.engine.history.rows import outcome_of
from claudex.text.status import render_status
from tests.cli.test_cli import claudex, spawn_serve, wait_until_serving
from tests.conftest import GLOBALS, anthropic_body, build_config, profile_toml
from tests.server.test_admin_api import two


def request_event(provider: str, status: int, trail: list[str], at: float) -> Event:
    attempts = [{"provider": p} for p in trail]
    return Event("request", f"anthropic m -> {provider} {status}", provider, {
        "protocol": "anthropic", "endpoint": "messages", "model": "m", "profile": trail[0],
        "provider": provider, "status": status, "stream": False, "latency_ms": 12.5,
        "attempts": attempts, "trail": " -> ".join(trail), "dropped": [],
        "usage": {"input_tokens": 10, "output_tokens": 3},
    }, time=at)


def journal_with(tmp_path: Path, events: list[Event], **kw: Any) -> Journal:
    journal = Journal(tmp_path / "h.sqlite3", **kw)
    bus = EventBus()
    bus.sinks.append(journal.record)
    journal.start()
    for event in events:
        bus.publish(event)
    journal.flush()
    return journal


def test_outcomes() -> None:
    assert outcome_of({"status": 200, "attempts": [{}]}) == "ok"
    assert outcome_of({"status": 200, "attempts": [{}, {}]}) == "failover"
    assert outcome_of({"status": 502, "attempts": [{}]}) == "failed"
    assert outcome_of({"status": None}) == "failed"


def test_requests_and_events_are_kept_and_filtered(tmp_path: Path) -> None:
    journal = journal_with(tmp_path, [
        request_event("a", 200, ["a"], 1000.0),
        request_event("b", 200, ["a", "b"], 2000.0),
        Event("breaker", "a: breaker closed -> open", "a", {"new": "open"}, time=2001.0),
        request_event("b", 502, ["b"], 3000.0),
        Event("health", "round", time=3001.0),  # not worth keeping
    ], wall=lambda: 5000.0)
    journal.close()
    everything = read_history(journal.path, HistoryQuery())
    assert [r["outcome"] for r in everything["requests"]] == ["ok", "failover", "failed"]
    assert [e["kind"] for e in everything["events"]] == ["breaker"]
    second = everything["requests"][1]
    assert second["trail"] == "a -> b" and second["input_tokens"] == 10
    assert second["attempts"] == [{"provider": "a"}, {"provider": "b"}]
    window = read_history(journal.path, HistoryQuery(since=1500.0, until=2500.0))
    assert [r["time"] for r in window["requests"]] == [2000.0]
    failovers = read_history(journal.path, HistoryQuery(outcome="failover"))
    assert len(failovers["requests"]) == 1 and failovers["events"] == []
    tried_a = read_history(journal.path, HistoryQuery(provider="a"))
    assert len(tried_a["requests"]) == 2 and len(tried_a["events"]) == 1
    newest = read_history(journal.path, HistoryQuery(limit=1))
    assert [r["time"] for r in newest["requests"]] == [3000.0]
    assert (journal.path.stat().st_mode & 0o777) == 0o600


def test_query_parsing() -> None:
    q = parse_query({"since": "2h", "until": "10m", "outcome": "failed", "limit": "5"}, 10_000.0)
    assert (q.since, q.until, q.outcome, q.limit) == (2_800.0, 9_400.0, "failed", 5)
    assert parse_query({"since": "1234.5"}, 0.0).since == 1234.5
    for bad in ({"since": "yesterday"}, {"outcome": "meh"}, {"limit": "x"}, {"limit": "0"}):
        with pytest.raises(HistoryQueryError):
            parse_query(bad, 0.0)


def test_retention_by_age_and_by_size(tmp_path: Path) -> None:
    now = 100_000.0
    old = [request_event("a", 200, ["a"], now - 5_000.0 - i) for i in range(5)]
    fresh = [request_event("a", 200, ["a"], now - i) for i in range(5)]
    journal = journal_with(tmp_path, old + fresh, max_age_s=1_000.0, wall=lambda: now)
    journal.close()  # retention runs on the writer's first pass
    # (the first pass ran before anything was written; a second journal's pass sees it all)
    again = Journal(journal.path, max_age_s=1_000.0, wall=lambda: now)
    again.start()
    again.close()
    kept = read_history(journal.path, HistoryQuery())["requests"]
    assert sorted(r["time"] for r in kept) == sorted(e.time for e in fresh)

    many = [request_event("a", 200, ["a"] * 20, now - i) for i in range(3000)]
    big = journal_with(tmp_path / "big", many, wall=lambda: now)
    big.close()
    before = len(read_history(big.path, HistoryQuery(limit=10_000))["requests"])
    small = Journal(big.path, max_bytes=200_000, wall=lambda: now)
    small.start()
    small.close()
    after = read_history(big.path, HistoryQuery(limit=10_000))["requests"]
    assert before == 3000 and 0 < len(after) < before
    assert min(r["time"] for r in after) > now - 3000  # the oldest went first
    conn = sqlite3.connect(big.path)
    pages, free, size = (conn.execute(f"PRAGMA {p}").fetchone()[0]
                         for p in ("page_count", "freelist_count", "page_size"))
    conn.close()
    assert (pages - free) * size <= 200_000  # the pages in use


def test_a_database_that_refuses_turns_history_off_once(tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    def full_disk(path: str) -> sqlite3.Connection:
        raise sqlite3.OperationalError("database or disk is full")

    journal = Journal(tmp_path / "h.sqlite3", connect=full_disk)
    journal.start()
    journal.flush()
    journal.record(request_event("a", 200, ["a"], 1.0))  # dropped, never raises
    journal.close()
    assert journal.status()["enabled"] is False
    assert "database or disk is full" in (journal.problem or "")
    assert sum("history off" in r.message for r in caplog.records) == 1

    corrupt = tmp_path / "corrupt.sqlite3"
    corrupt.write_bytes(b"this is not a database" * 100)
    broken = Journal(corrupt)
    broken.start()
    broken.flush()
    broken.close()
    assert "not a database" in (broken.problem or "")


class FailingWrites:
    """A connection whose writes fail as a full disk's do, after it opened fine."""

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.fail = False

    def execute(self, sql: str, *args: Any) -> Any:
        if self.fail and sql.startswith("INSERT"):
            raise sqlite3.OperationalError("database or disk is full")
        return self.conn.execute(sql, *args)

    def executemany(self, sql: str, rows: Any) -> Any:
        if self.fail:
            raise sqlite3.OperationalError("database or disk is full")
        return self.conn.executemany(sql, rows)

    def executescript(self, sql: str) -> Any:
        return self.conn.executescript(sql)

    def close(self) -> None:
        self.conn.close()


async def test_requests_go_on_when_the_disk_fills(fakes: Any, proxy_factory: Any,
                                                  tmp_path: Path) -> None:
    made: list[FailingWrites] = []

    def connect(path: str) -> Any:
        made.append(FailingWrites(path))
        return made[-1]

    journal = Journal(tmp_path / "h.sqlite3", connect=connect, flush_interval_s=0.01)
    proxy = await two(fakes, proxy_factory, journal=journal)
    journal.start()
    assert (await proxy.chat(profile="grok")).status_code == 200
    await asyncio.to_thread(journal.flush)
    made[0].fail = True
    for _ in range(3):
        assert (await proxy.chat(profile="grok")).status_code == 200
    await asyncio.to_thread(journal.flush)
    whole = (await proxy.client.get("/_claudex/status")).json()
    status = whole["history"]
    assert status["enabled"] is False and "disk is full" in status["problem"]
    console = Console(record=True, width=200)
    render_status(whole, console)
    assert "history off: database or disk is full" in console.export_text()
    assert (await proxy.chat(profile="grok")).status_code == 200
    await asyncio.to_thread(journal.close)
    kept = read_history(journal.path, HistoryQuery())["requests"]
    assert len(kept) == 1  # the one written before the disk filled


def test_two_processes_write_one_file(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from claudex.engine.events import Event, EventBus
        from claudex.engine.history.journal import Journal
        journal = Journal(Path({str(path)!r}), flush_interval_s=0.001)
        bus = EventBus()
        bus.sinks.append(journal.record)
        journal.start()
        for i in range(300):
            bus.publish(Event("request", "", sys.argv[1], {{"provider": sys.argv[1],
                              "status": 200, "attempts": [{{}}]}}))
            if i % 50 == 0:
                journal.flush()
        journal.close()
        assert journal.problem is None, journal.problem
    """)
    import subprocess

    procs = [subprocess.Popen([sys.executable, "-c", script, name]) for name in ("x", "y")]
    assert [p.wait(60) for p in procs] == [0, 0]
    rows = read_history(path, HistoryQuery(limit=10_000))["requests"]
    assert sorted({r["provider"] for r in rows}) == ["x", "y"]
    assert sum(r["provider"] == "x" for r in rows) == 300
    assert sum(r["provider"] == "y" for r in rows) == 300


async def test_history_survives_a_serve_restart(fakes: Any, tmp_path: Path) -> None:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    port = free_port()
    history = tmp_path / "state" / "history.sqlite3"
    path = tmp_path / "profiles.toml"
    path.write_text(GLOBALS.replace("[proxy]", f"[proxy]\nport = {port}")
                    + f'\n[history]\npath = "{history}"\n'
                    + profile_toml("primary", f["primary"], backups=["backup"])
                    + profile_toml("backup", f["backup"]))
    url = f"http://127.0.0.1:{port}"

    async def start() -> asyncio.subprocess.Process:
        proc = await spawn_serve(path, stdout=asyncio.subprocess.DEVNULL)
        await wait_until_serving(url, proc)
        return proc

    proc = await start()
    try:
        async with httpx.AsyncClient(base_url=url, timeout=10.0) as client:
            await client.post("/_claudex/breakers/primary/trip")
            resp = await client.post("/proxy/primary/v1/messages", json=anthropic_body(),
                                     headers={"anthropic-version": "2023-06-01"})
            assert resp.status_code == 200
            first = (await client.get("/_claudex/history")).json()  # flushes the journal
            assert [r["trail"] for r in first["requests"]] == [
                "primary forced_open -> backup 200"]
        proc.send_signal(signal.SIGKILL)  # no goodbye: what was written stays
        await proc.communicate()
        # No engine: `claudex history` reads the file itself.
        code, out, err = await claudex("--config", str(path), "history", "--since", "10m")
        assert code == 0, err
        assert "primary forced_open -> backup 200" in out and "failover" in out
        proc = await start()
        async with httpx.AsyncClient(base_url=url, timeout=10.0) as client:
            after = (await client.get("/_claudex/history", params={
                "since": "10m", "outcome": "failover"})).json()
            assert [r["provider"] for r in after["requests"]] == ["backup"]
            events = (await client.get("/_claudex/history",
                                       params={"provider": "primary"})).json()["events"]
            assert any(e["kind"] == "breaker" and "forced_open" in e["message"] for e in events)
            bad = await client.get("/_claudex/history", params={"since": "soon"})
            assert bad.status_code == 400 and "since" in bad.json()["error"]
        code, out, err = await claudex("--config", str(path), "history", "--json")
        assert code == 0, err
        assert json.loads(out)["requests"][0]["outcome"] == "failover"
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
            await proc.communicate()


async def test_an_engine_without_history_says_so(fakes: Any, proxy_factory: Any) -> None:
    proxy = await proxy_factory(build_config(""))
    resp = await proxy.client.get("/_claudex/history")
    assert resp.status_code == 409 and "no history" in resp.json()["error"]
