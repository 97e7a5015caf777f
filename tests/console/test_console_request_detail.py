"""The request log as a list to read: tab into it, a highlighted row, Enter for the request's
detail (every attempt's timings and reasons), escape back to the same row; scrolling past the
oldest row reads older ones from the history journal, without duplicates; `/` finds requests
that are only in the journal. Hosted (an in-process engine with a journal) and attached to a
real `claudex serve`.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.widgets import Static

from claudex.console.app import ConsoleApp
from claudex.console.components import EventLog, RequestLog
from claudex.console.components.request_log import HistorySource
from claudex.console.http_link import HttpLink
from claudex.console.link import HistoryPage, LocalLink
from claudex.console.screens.request_detail import RequestDetailScreen
from claudex.engine.events import Event
from claudex.engine.history.journal import Journal
from tests.cli.test_cli import claudex
from tests.conftest import anthropic_body, build_config, primary_backup_config, profile_toml
from tests.console.test_console_snapshots import PROFILES
from tests.serve_world import Serve

SIZE = (140, 44)


async def settle(app: ConsoleApp, pilot: Any) -> None:
    await pilot.pause()
    await app.main_screen.refresh_now()
    await pilot.pause()


async def until(app: ConsoleApp, pilot: Any, predicate: Callable[[], bool],
                tries: int = 250) -> None:
    """Refresh until `predicate()` holds (workers and other processes take their time)."""
    for _ in range(tries):
        await settle(app, pilot)
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached in time")


def detail_text(app: ConsoleApp) -> str:
    screen = app.screen
    assert isinstance(screen, RequestDetailScreen)
    console = Console(width=SIZE[0], file=io.StringIO(), color_system=None)
    with console.capture() as capture:
        console.print(screen.body)
    return str(screen.query_one("#detail-title", Static).render()) + "\n" + capture.get()


def keys(log: RequestLog) -> list[object]:
    return [row.key for row in log.visible_rows()]


async def open_row(app: ConsoleApp, pilot: Any, *, up: int = 0) -> RequestLog:
    """tab into the log, `up` rows above the newest, enter."""
    log = app.main_screen.query_one(RequestLog)
    await pilot.press("tab")
    assert log.has_focus
    await pilot.press(*(["up"] * up), "enter")
    await pilot.pause()
    return log


# -- hosted -------------------------------------------------------------------------------------


@pytest.fixture
async def hosted(fakes: Any, proxy_factory: Any, tmp_path: Path) -> Any:
    made = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    config = build_config(profile_toml("primary", made["primary"], backups=["backup"])
                          + profile_toml("backup", made["backup"]))
    return await proxy_factory(config, fakes=made, journal=Journal(tmp_path / "h.sqlite3"))


async def test_enter_shows_every_attempt_and_escape_keeps_the_row(hosted: Any) -> None:
    app = ConsoleApp(LocalLink(hosted.engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert (await hosted.messages(anthropic_body(), profile="primary")).status_code == 200
        hosted.fakes["primary"].set_fault("down")
        resp = await hosted.messages(anthropic_body(), profile="primary")
        assert resp.headers["x-claudex-provider"] == "backup"
        assert (await hosted.messages(anthropic_body(), profile="backup")).status_code == 200
        log = app.main_screen.query_one(RequestLog)
        await until(app, pilot, lambda: log.row_count == 3)
        # The failed-over request is one above the newest.
        await open_row(app, pilot, up=1)
        assert isinstance(app.screen, RequestDetailScreen)
        text = detail_text(app)
        assert "primary connect_error" not in text.split("\n")[0]  # the title: who served it
        assert "→ backup 200 failover" in text
        assert "attempts (2)" in text
        assert "connect_error" in text and "#1 primary message:" in text
        assert " ms" in text and "route" in text and "client headers" in text
        cursor, scroll = log.cursor, log.scroll_y
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, RequestDetailScreen)
        assert app.screen is app.main_screen and log.has_focus
        assert (log.cursor, log.scroll_y) == (cursor, scroll)
        assert log.selected_row() is log.visible_rows()[1]
        # tab leaves the log: the arrows select profiles again.
        await pilot.press("tab")
        assert not log.has_focus
        await pilot.press("right")
        assert app.main_screen.selected == "backup"


async def test_the_keys_are_in_the_footer_and_help(hosted: Any) -> None:
    app = ConsoleApp(LocalLink(hosted.engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert any(line.keys == "tab" and "enter shows its attempts" in line.text
                   for line in app.main_screen.help_lines())
        tab = app.active_bindings["tab"].binding
        assert (tab.action, tab.description, tab.show) == ("focus_requests", "requests", True)
        assert "enter" not in app.active_bindings  # nothing to open from the panels
        await pilot.press("tab")
        enter = app.active_bindings["enter"].binding
        assert (enter.action, enter.description, enter.show) == ("open", "detail", True)


async def test_the_highlighted_row_and_the_stripes_have_their_own_colours(hosted: Any) -> None:
    app = ConsoleApp(LocalLink(hosted.engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        for _ in range(3):
            assert (await hosted.messages(anthropic_body(), profile="primary")).status_code == 200
        log = app.main_screen.query_one(RequestLog)
        await until(app, pilot, lambda: log.row_count == 3)

        def background(y: int) -> object:
            style = list(log.render_line(y))[1].style  # (0: the padding)
            return style.bgcolor if style is not None else None

        stripes = {background(1), background(2)}
        assert len(stripes) == 2  # the zebra stripes differ
        await pilot.press("tab", "up")
        assert log.cursor == 1
        assert background(2) not in stripes | {None}  # the highlighted row, row 2 on screen
        await pilot.press("tab")
        assert background(2) in stripes  # unfocused: no highlight


async def journal_only(engine: Any, journal: Journal, rows: list[Event]) -> None:
    """Rows in the journal the console never saw live (an earlier run's)."""
    for event in rows:
        journal.record(event)
    await asyncio.to_thread(journal.flush)


def old_request(i: int, at: float, trail: str = "primary 200") -> Event:
    return Event("request", trail, "primary", {
        "protocol": "anthropic", "model": f"old-model-{i}", "provider": "primary",
        "status": 200, "latency_ms": 5.0, "attempts": [{"provider": "primary"}],
        "trail": trail}, time=at, id=10_000 + i)


async def test_scrolling_past_the_oldest_row_reads_the_journal(hosted: Any) -> None:
    engine = hosted.engine
    assert engine.journal is not None
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        for _ in range(3):
            assert (await hosted.messages(anthropic_body(), profile="primary")).status_code == 200
        log = app.main_screen.query_one(RequestLog)
        await until(app, pilot, lambda: log.row_count == 3)
        oldest = log.visible_rows()[0].at
        await journal_only(engine, engine.journal,
                           [old_request(i, oldest - 100 + i) for i in range(5)])
        await pilot.press("tab", "home")  # the oldest row, and past it
        await until(app, pilot, lambda: log.row_count == 8)
        rows = log.visible_rows()
        # The journal also holds the three live rows (its page reaches the oldest): once each.
        assert len(set(keys(log))) == 8
        assert [r.from_history for r in rows] == [True] * 5 + [False] * 3
        assert [r.request for r in rows[:5]] == [f"anthropic old-model-{i}" for i in range(5)]
        assert log.selected_row() is rows[5]  # the cursor stayed on its row
        # Past those there is nothing more: the top says so, and asking again adds nothing.
        await pilot.press("home", "up")
        await until(app, pilot, lambda: log.top_note == "start of history")
        assert log.row_count == 8
        # Enter on a journal row shows it too.
        await pilot.press("home", "enter")
        await pilot.pause()
        assert "old-model-0" in detail_text(app)
        assert "read from the history journal" in detail_text(app)


async def test_the_filter_finds_requests_only_the_journal_has(hosted: Any) -> None:
    engine = hosted.engine
    assert engine.journal is not None
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert (await hosted.messages(anthropic_body(), profile="primary")).status_code == 200
        log = app.main_screen.query_one(RequestLog)
        await until(app, pilot, lambda: log.row_count == 1)
        at = log.visible_rows()[0].at
        await journal_only(engine, engine.journal, [
            old_request(1, at - 50, "primary server_error -> backup 200"),
            old_request(2, at - 40)])
        await pilot.press("slash", *"server_error")
        # The tail has none at once; the journal's match follows.
        await until(app, pilot, lambda: log.row_count == 1 and log.visible_rows()[0].from_history)
        row = log.visible_rows()[0]
        assert row.request == "anthropic old-model-1"
        assert log.top_note is not None and "1 older match from history" in log.top_note
        await pilot.press("escape")
        await until(app, pilot, lambda: log.row_count == 1 and not log.visible_rows()[0]
                    .from_history)


async def test_without_a_journal_the_log_says_history_is_off(fakes: Any,
                                                             proxy_factory: Any) -> None:
    made = await fakes(("primary", "anthropic"))
    proxy = await proxy_factory(build_config(profile_toml("primary", made["primary"])),
                                fakes=made)
    app = ConsoleApp(LocalLink(proxy.engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert (await proxy.messages(anthropic_body())).status_code == 200
        log = app.main_screen.query_one(RequestLog)
        await until(app, pilot, lambda: log.row_count == 1)
        await pilot.press("tab", "up", "up")
        await until(app, pilot, lambda: (log.top_note or "").startswith("history off: "))
        assert "not kept" in (log.top_note or "")
        assert "history off" in log.render_line(1).text  # the line above the oldest row
        assert log.row_count == 1


async def test_older_rows_do_not_block_and_tail_rows_that_leave_join_them() -> None:
    """A slow journal does not hold the log up; rows leaving the tail while older rows are
    shown stay shown (the view stays contiguous)."""
    from claudex.console.components.request_log import MAX_ROWS
    from claudex.console.format import RequestRow

    release = asyncio.Event()

    async def slow_source(until_at: float | None, text: str | None) -> HistoryPage:
        await release.wait()
        return HistoryPage(rows=[{"time": 1.0, "event_id": 1, "provider": "old",
                                  "status": 200, "attempts": [{}]}])

    def row(i: int) -> RequestRow:
        return RequestRow(time=f"t{i}", request="r", provider="p", trail="p 200", status=200,
                          latency_ms=1.0, failed_over=False, at=100.0 + i, key=100 + i)

    engine_config = build_config("")
    from claudex.engine.engine import Engine
    from tests.conftest import TEST_ENV
    engine = Engine(engine_config, env=TEST_ENV)
    app = ConsoleApp(LocalLink(engine))
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            log = app.main_screen.query_one(RequestLog)
            source: HistorySource = slow_source
            log.source = source
            log.add_rows_from([row(i) for i in range(MAX_ROWS)])
            log.load_older()
            await pilot.pause()
            assert log.top_note == "loading older requests from history…"
            log.add_rows_from([row(MAX_ROWS)])  # the UI goes on meanwhile
            assert log.row_count == MAX_ROWS
            release.set()
            await until(app, pilot, lambda: log.row_count == MAX_ROWS + 1)
            log.add_rows_from([row(MAX_ROWS + 1 + i) for i in range(3)])
            assert log.row_count == MAX_ROWS + 4
            assert [r.key for r in log.visible_rows()[:3]] == [1, 101, 102]
            assert len(set(keys(log))) == log.row_count
    finally:
        await engine.close()


async def test_the_event_log_scrolls_back_into_the_journal(hosted: Any) -> None:
    engine = hosted.engine
    assert engine.journal is not None
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        log = app.main_screen.query_one(EventLog)
        engine.events.publish(Event("reload", "config reloaded: live one", None, {}))
        await until(app, pilot, lambda: any("live one" in line.text for line in log.lines))
        live_at = engine.events.recent[-1].time
        await journal_only(engine, engine.journal, [
            Event("breaker", f"primary: breaker closed -> open (old {i})", "primary",
                  {"old": "closed", "new": "open"}, time=live_at - 60 + i, id=20_000 + i)
            for i in range(3)])
        log.load_older()
        await until(app, pilot, lambda: log.top_note == "start of history")
        text = [line.text for line in log.lines]
        assert text[0] == "start of history"
        olds = [i for i, line in enumerate(text) if "(old " in line]
        assert len(olds) == 3 and olds == sorted(olds)
        # The live event is in the journal too: shown once, below the journal's.
        lives = [i for i, line in enumerate(text) if "live one" in line]
        assert len(lives) == 1 and lives[0] > olds[-1]
        # New events still arrive at the bottom.
        engine.events.publish(Event("reload", "config reloaded: after", None, {}))
        await until(app, pilot, lambda: "after" in log.lines[-1].text)


async def test_the_event_log_says_history_off(fakes: Any, proxy_factory: Any) -> None:
    made = await fakes(("primary", "anthropic"))
    proxy = await proxy_factory(build_config(profile_toml("primary", made["primary"])),
                                fakes=made)
    app = ConsoleApp(LocalLink(proxy.engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        log = app.main_screen.query_one(EventLog)
        log.load_older()
        await until(app, pilot, lambda: (log.top_note or "").startswith("history off: "))
        assert log.lines[0].text.startswith("history off: not kept")


# -- attached -----------------------------------------------------------------------------------


@pytest.fixture
async def serve(fakes: Any, tmp_path: Path) -> AsyncIterator[tuple[Serve, dict[str, Any]]]:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    history = f'\n[history]\npath = "{tmp_path / "history.sqlite3"}"\n'
    served = Serve(*primary_backup_config(tmp_path, f, history))
    await served.start()
    try:
        yield served, f
    finally:
        await served.kill()


async def test_attached_detail_scroll_back_and_search(serve: tuple[Serve, Any]) -> None:
    served, f = serve
    # An earlier run of the engine: one failover, two plain requests, then a restart (the new
    # engine's event backlog starts empty; its journal is the same file).
    await served.send("primary")
    f["primary"].set_fault("down")
    await served.send("backup")
    f["primary"].set_fault("ok")
    await served.send("primary")
    await served.flush()
    await served.kill()
    await served.start()
    f["primary"].set_fault("down")
    await served.send("backup")  # the only live row: a failover
    f["primary"].set_fault("ok")
    link = HttpLink(served.url)
    assert await link.connect()
    app = ConsoleApp(link)
    try:
        async with app.run_test(size=SIZE) as pilot:
            log = app.main_screen.query_one(RequestLog)
            await until(app, pilot, lambda: log.row_count == 1)
            await open_row(app, pilot)
            text = detail_text(app)
            assert "attempts (2)" in text and "connect_error" in text
            assert "#1 primary message:" in text and " ms" in text
            assert "/proxy/primary/v1/messages" in text and "user-agent:" in text
            request_id = log.visible_rows()[0].record["request_id"]
            assert request_id and f"request {request_id} ·" in text
            # `claudex history --id` shows the same request, from the engine.
            code, out, err = await claudex("--config", str(served.config), "history",
                                           "--id", request_id)
            assert code == 0, err
            assert "attempts (2)" in out and "/proxy/primary/v1/messages" in out
            await pilot.press("escape")
            await pilot.pause()
            assert log.has_focus and log.cursor == 0
            # Past the oldest row: the earlier run's three, from the engine's journal.
            await pilot.press("up")
            await until(app, pilot, lambda: log.row_count == 4)
            assert len(set(keys(log))) == 4
            assert [r.from_history for r in log.visible_rows()] == [True, True, True, False]
            assert log.visible_rows()[1].trail == "primary connect_error → backup 200"
            # `/` for the earlier run's failover finds it in the journal.
            await pilot.press("tab", "slash", *"primary 200")
            await until(app, pilot, lambda: any(r.from_history for r in log.visible_rows()))
            assert all("primary 200" in r.trail for r in log.visible_rows())
            assert sum(r.from_history for r in log.visible_rows()) == 2
    finally:
        await link.close()


# -- snapshots ----------------------------------------------------------------------------------

SNAP_START = 1_750_000_000.0

SNAP_PROFILES = PROFILES  # the snapshot tests' three profiles


def failed_over_event(at: float) -> Event:
    """A stream that failed over twice, with every detail the engine records."""
    return Event("request", "failed over", "grok", {
        "request_id": "m3k9x2-41", "route": "/proxy/claude/v1/messages",
        "protocol": "anthropic", "endpoint": "messages", "model": "claude-sonnet-4-5",
        "profile": "claude", "provider": "grok", "status": 200, "stream": True,
        "latency_ms": 1840.2, "first_content_ms": 912.4,
        "attempts": [
            {"provider": "claude", "outcome": "connect_error", "status": None,
             "message": "connection refused", "latency_ms": 2.9, "model": "claude-sonnet-4-5",
             "breaker": "closed"},
            {"provider": "claude-backup", "outcome": "server_error", "status": 529,
             "message": "overloaded_error: Overloaded (key sk-ant-api03-abcdefgh12345678)",
             "latency_ms": 311.0, "headers_ms": 305.2, "model": "claude-sonnet-4-5",
             "max_tokens": 8192, "breaker": "half_open"},
            {"provider": "grok", "outcome": "ok", "status": 200, "message": "",
             "latency_ms": 1520.7, "headers_ms": 402.3, "first_content_ms": 598.8,
             "model": "grok-3-beta", "max_tokens": 8192, "breaker": "closed",
             "dropped": ["thinking", "cache_control"]},
        ],
        "trail": "claude connect_error -> claude-backup 529 -> grok 200",
        "dropped": ["thinking", "cache_control"],
        "notes": ["thinking off: last tool-use turn served elsewhere"],
        "headers": {"user-agent": "claude-cli/2.0.14 (external, cli)",
                    "anthropic-version": "2023-06-01",
                    "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
                    "x-api-key": "sk-…wxyz", "x-app": "cli", "content-type": "application/json"},
        "usage": {"input_tokens": 18342, "output_tokens": 412, "cache_read_tokens": 12000,
                  "cache_write_tokens": 1500},
        "cost_usd": 0.0741, "cost_basis": "api",
    }, time=at)


def snap_app() -> tuple[ConsoleApp, Any, Callable[[Any], Any]]:
    import time as time_module

    from claudex.engine.clock import FakeClock
    from claudex.engine.engine import Engine
    from tests.conftest import TEST_ENV

    clock = FakeClock(start=1000.0, wall_start=SNAP_START)
    engine = Engine(build_config(SNAP_PROFILES), clock=clock, wall=clock.wall,
                    sleep=clock.sleep, env=TEST_ENV)

    def utc_text(epoch: float) -> str:
        return time_module.strftime("%H:%M:%S", time_module.gmtime(epoch))

    app = ConsoleApp(LocalLink(engine), time_text=utc_text, wall=clock.wall)

    async def run_before(pilot: Any) -> None:
        await pilot.pause()
        engine.events.publish(failed_over_event(SNAP_START - 5))
        await pilot.pause()
        await app.main_screen.refresh_now()
        await pilot.pause()
        await pilot.press("tab", "enter")
        await pilot.pause()

    return app, engine, run_before


@pytest.mark.parametrize("size", [(140, 44), (100, 30)], ids=["140x44", "100x30"])
def test_request_detail_screen(snap_compare: Any, size: tuple[int, int]) -> None:
    app, engine, run_before = snap_app()
    try:
        assert snap_compare(app, terminal_size=size, run_before=run_before)
    finally:
        asyncio.run(engine.close())


async def test_a_console_started_later_fills_its_sparklines_from_the_journal(
    hosted: Any,
) -> None:
    for _ in range(3):
        assert (await hosted.messages(anthropic_body(), profile="primary")).status_code == 200
    journal = hosted.engine.journal
    assert journal is not None
    await asyncio.to_thread(journal.flush)
    app = ConsoleApp(LocalLink(hosted.engine))  # opened after the traffic: nothing seen live
    async with app.run_test(size=SIZE) as pilot:
        screen = app.main_screen
        await until(app, pilot, lambda: len(screen._history.get("primary", ())) == 3)
        assert "backup" not in screen._history  # it served nothing
        assert list(screen._panels["primary"].spark.data or []) == list(
            screen._history["primary"])
