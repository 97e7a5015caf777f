"""The per-minute aggregates the journal keeps as it writes (engine/history/database.py, version
2) and the seed read from them (engine/history/seed.py): the same numbers as the rows give, for
the whole minutes and the minute the engine started in; a journal from before gains them once;
retention takes them with the rows; a restart minutes later seeds from them."""

from __future__ import annotations

import asyncio
import math
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

import claudex.engine.engine as engine_module
from claudex.engine.addons.stats import LOCAL_ESTIMATE
from claudex.engine.events import Event
from claudex.engine.history.database import HEADERS_REMASKED, MINUTES_KEPT
from claudex.engine.history.journal import Journal
from claudex.engine.history.seed import Seed, _read, _spans, local_midnight, read_seed
from tests.conftest import build_config, profile_toml
from tests.engine.history.test_journal import journal_with
from tests.engine.history.test_stats_seed import counters

NOW = local_midnight(1_750_000_000.0) + 12 * 3600.0 + 17.0  # noon and a bit
STARTED = NOW - 7.0  # the engine started in this minute, seven seconds ago


def row(provider: str | None, at: float, attempts: list[dict[str, Any]], *, status: int = 200,
        stream: bool = False, usage: dict[str, int] | None = None,
        cost: float | None = None, endpoint: str = "messages") -> Event:
    return Event("request", "r", provider, {
        "protocol": "anthropic", "endpoint": endpoint, "model": "m", "profile": provider,
        "provider": provider, "status": status, "stream": stream, "latency_ms": 5.0,
        "attempts": attempts, "trail": "", "dropped": [],
        "usage": usage if usage is not None else {"input_tokens": 10, "output_tokens": 2},
        "cost_usd": cost, "cost_basis": None if cost is None else "api"}, time=at)


def ok(provider: str, **more: Any) -> dict[str, Any]:
    return {"provider": provider, "outcome": "ok", "status": 200, "latency_ms": 700.0, **more}


def day_of_rows() -> list[Event]:
    """Every kind of row the seed counts, at every place in the day the reading cuts."""
    cached = {"input_tokens": 5, "output_tokens": 7, "cache_read_tokens": 100,
              "cache_write_tokens": 30}
    return [
        row("a", NOW - 86_400.0, [ok("a")], cost=0.5),  # yesterday: nowhere
        row("a", NOW - 5 * 3600.0, [ok("a")], cost=0.25),  # today, before the window
        row("b", NOW - 3 * 3600.0 + 0.5, [{"provider": "a", "outcome": "rate_limited",
                                            "status": 429}, ok("b")], usage=cached),
        row("a", NOW - 1500.0, [ok("a", message=LOCAL_ESTIMATE)], endpoint="count_tokens",
            usage={"input_tokens": 40}),  # answered by claudex: not sent, tokens counted
        row("b", NOW - 600.0, [{"provider": "a", "outcome": "server_error", "status": 503},
                               ok("b", first_content_ms=420.0)], stream=True, cost=0.125),
        row("b", NOW - 599.0, [{"provider": "a", "outcome": "server_error", "status": 503},
                               ok("b", first_content_ms=410.0)], stream=True, cost=0.125),
        row(None, NOW - 200.0, [{"provider": "a", "outcome": "timeout"},
                                {"provider": "b", "outcome": "breaker_open"}], status=502,
            usage={}),  # failed everywhere: no one served it
        row("a", NOW - 100.0, [{"provider": "a", "outcome": "breaker_open"}, ok("a")]),
        row("a", STARTED - 3.0, [ok("a")], cost=0.25),  # the engine's own minute, before it
        row("b", STARTED - 1.0, [{"provider": "a", "outcome": "connect_error"}, ok("b")]),
        row("a", NOW - 1.0, [ok("a")]),  # this lifetime's: not read
    ]


def assert_same(a: Seed | None, b: Seed | None) -> None:
    """The two seeds equal, the costs to a billionth (floats summed in another order)."""
    assert a is not None and b is not None
    assert a.since == b.since and a.providers.keys() == b.providers.keys()
    for name, x in a.providers.items():
        y = b.providers[name]
        assert math.isclose(x.cost.usd, y.cost.usd, rel_tol=1e-9, abs_tol=1e-12), name
        x.cost.usd = y.cost.usd
        assert x == y, name


def from_rows(path: Path, *, now: float = NOW, until: float = STARTED,
              day_start: float | None = None) -> Seed:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return _read(conn, now=now, until=until, minutes=False,
                     day_start=local_midnight(now) if day_start is None else day_start)
    finally:
        conn.close()


def version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def test_the_minutes_give_the_numbers_the_rows_give(tmp_path: Path) -> None:
    journal = journal_with(tmp_path, day_of_rows(), wall=lambda: NOW)
    journal.close()
    assert version(journal.path) == MINUTES_KEPT
    expected = from_rows(journal.path)
    a, b = expected.providers["a"], expected.providers["b"]
    assert (a.requests, a.successes, a.failures, a.rate_limited) == (8, 3, 4, 1)
    assert (b.requests, b.successes) == (4, 4)
    assert a.tokens.input_tokens == 10 + 40 + 10 + 10 and a.cost.usd == 0.5
    assert b.tokens.cache_read_tokens == 100 and b.cost.priced == 2
    assert b.cost.unpriced == 2 and b.first_content == []
    seeded = read_seed(journal.path, now=NOW, until=STARTED, day_start=local_midnight(NOW))
    assert_same(seeded, expected)
    # A day that does not start on a minute: its first seconds are read from the rows.
    odd = local_midnight(NOW) + 3 * 3600.0 - 20.0
    conn = sqlite3.connect(f"file:{journal.path}?mode=ro", uri=True)
    assert_same(_read(conn, now=NOW, until=STARTED, day_start=odd),
                from_rows(journal.path, day_start=odd))
    conn.close()


def test_the_seed_reads_the_whole_minutes_from_the_aggregates(tmp_path: Path) -> None:
    journal = journal_with(tmp_path, day_of_rows(), wall=lambda: NOW)
    journal.close()
    expected = from_rows(journal.path)
    # The rows' trails and tokens emptied behind the aggregates' back (an UPDATE is no
    # insert): what the whole minutes held still comes back, so it is read from the minutes.
    conn = sqlite3.connect(journal.path)
    conn.execute("UPDATE requests SET input_tokens = 0, output_tokens = 0, attempts = '[]' "
                 "WHERE time < ?", (int(STARTED // 60) * 60.0,))
    conn.commit()
    conn.close()
    seeded = read_seed(journal.path, now=NOW, until=STARTED, day_start=local_midnight(NOW))
    assert seeded is not None
    for seed in (seeded, expected):
        seed.providers["b"].first_content = []  # the one part read from rows (latency samples)
        seed.providers["a"].durations = []
    assert_same(seeded, expected)
    assert from_rows(journal.path).providers["a"].requests == 2  # the rows' own minute only


def test_the_spans_are_whole_minutes_and_the_seconds_around_them() -> None:
    assert _spans(600.0, 1000.0, True) == [(10.0, 16.0, True), (960.0, 1000.0, False)]
    assert _spans(590.0, 960.0, True) == [(10.0, 16.0, True), (590.0, 600.0, False)]
    assert _spans(610.0, 650.0, True) == [(610.0, 650.0, False)]  # no whole minute inside
    assert _spans(600.0, 1000.0, False) == [(600.0, 1000.0, False)]
    assert _spans(1000.0, 900.0, True) == []


def test_a_journal_from_before_gains_its_minutes_once_and_reads_its_rows_until_then(
        tmp_path: Path) -> None:
    journal = journal_with(tmp_path, day_of_rows()[:6], wall=lambda: NOW)
    journal.close()
    conn = sqlite3.connect(journal.path)  # as the release before left it: version 1, no sums
    conn.executescript("DROP TABLE minutes; DROP TABLE minute_attempts; "
                       f"PRAGMA user_version = {HEADERS_REMASKED};")
    # And a row with a trail that is not JSON: its tokens are summed, no attempt, as the rows'
    # reading skips its trail.
    conn.execute("INSERT INTO requests (time, provider, status, attempts, input_tokens) "
                 "VALUES (?, 'a', 200, 'not json', 3)", (NOW - 900.0,))
    conn.commit()
    conn.close()
    expected = from_rows(journal.path)
    before = read_seed(journal.path, now=NOW, until=STARTED, day_start=local_midnight(NOW))
    assert_same(before, expected)  # read from the rows meanwhile
    again = journal_with(tmp_path, day_of_rows()[6:], wall=lambda: NOW)  # the next start
    again.close()
    assert version(journal.path) == MINUTES_KEPT
    conn = sqlite3.connect(journal.path)
    assert conn.execute("SELECT SUM(count) FROM minute_attempts").fetchone()[0] == 17
    conn.close()
    assert_same(read_seed(journal.path, now=NOW, until=STARTED, day_start=local_midnight(NOW)),
                from_rows(journal.path))
    third = Journal(journal.path, wall=lambda: NOW)  # migrated: not built again
    third.start()
    third.close()
    conn = sqlite3.connect(journal.path)
    assert conn.execute("SELECT SUM(count) FROM minute_attempts").fetchone()[0] == 17
    conn.close()


def test_retention_takes_the_minutes_with_the_rows(tmp_path: Path) -> None:
    # Kept for an hour and a half: the cut falls 30 s into a minute of rows.
    cut = int((NOW - 5400.0) // 60) * 60.0 + 30.0
    rows = [row("a", cut - 20.0 + 10.0 * i, [ok("a")], cost=0.25) for i in range(5)]
    journal = journal_with(tmp_path, day_of_rows() + rows, wall=lambda: cut + 5400.0,
                           max_age_s=5400.0, retention_every_s=0.0)
    journal.close()
    conn = sqlite3.connect(journal.path)
    assert conn.execute("SELECT MIN(time) FROM requests").fetchone()[0] == cut + 0.0
    conn.close()
    everything = {"now": NOW, "until": STARTED, "day_start": 0.0}
    with_minutes = sqlite3.connect(f"file:{journal.path}?mode=ro", uri=True)
    assert_same(_read(with_minutes, **everything), from_rows(journal.path, **everything))
    with_minutes.close()
    assert from_rows(journal.path, **everything).providers["a"].cost.usd == 0.25 * 3 + 0.25


async def test_a_restart_minutes_later_seeds_from_the_minutes(
        fakes: Any, proxy_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = await fakes(("grok", "openai"), ("deepseek", "openai"))
    config = build_config(profile_toml("grok", f["grok"], backups=["deepseek"])
                          + profile_toml("deepseek", f["deepseek"]))
    path = tmp_path / "history.sqlite3"
    # The rows carry the real time; each lifetime's clock runs ahead of it by what has "passed",
    # and the day started an hour before the test (so a run near midnight reads one day).
    ahead = [0.0]
    day_start = time.time() - 3600.0
    monkeypatch.setattr(engine_module, "local_midnight", lambda now: day_start)

    def wall() -> float:
        return time.time() + ahead[0]

    async def lifetime() -> Any:
        journal = Journal(path, flush_interval_s=0.01, wall=wall)
        proxy = await proxy_factory(config, fakes=f, journal=journal, wall=wall)
        assert proxy.engine.seeding is not None
        await asyncio.wait_for(proxy.engine.seeding, 20.0)
        return proxy

    first = await lifetime()
    for _ in range(2):
        assert (await first.chat(profile="grok")).status_code == 200
    f["grok"].set_fault("500")
    assert (await first.chat(profile="grok")).status_code == 200  # deepseek serves
    before = counters((await first.client.get("/_claudex/status")).json())
    assert before["grok"]["requests"] == 3 and before["deepseek"]["successes"] == 1
    await first.server.stop()
    f["grok"].set_fault("ok")
    assert version(path) == MINUTES_KEPT
    ahead[0] = 120.0  # two minutes on: the first lifetime's minute is a whole one
    second = await lifetime()
    assert counters((await second.client.get("/_claudex/status")).json()) == before
    assert (await second.chat(profile="grok")).status_code == 200
    await second.server.stop()
    ahead[0] = 240.0
    third = await lifetime()  # and again: the sums went on as the second lifetime wrote
    after = counters((await third.client.get("/_claudex/status")).json())
    assert after["grok"]["requests"] == 4 and after["grok"]["successes"] == 3
    assert after["grok"]["minute_requests"] == 4 and after["grok"]["samples"] == 3
    await third.server.stop()
