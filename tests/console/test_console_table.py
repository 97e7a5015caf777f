"""The provider table: the default view above twelve profiles, `v` toggling it with the grid,
sorting (the worst error rate on top), the `/` filter, the selection kept by name across
refreshes and sorts with the verbs acting on it, "—" for what the engine does not report, and
enabling / disabling a profile with `x` (the file keeps its comments; read-only refuses; attached,
the engine's file), and a console attached to a real `claudex serve` with 60 profiles sorting
them by the error rates their traffic made."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from claudex.config.loader import load_config
from claudex.console.app import ConsoleApp
from claudex.console.components import RequestLog
from claudex.console.components.provider_table import ProviderTable, columns_for
from claudex.console.components.table_rows import sort_rows, sparkline, table_row
from claudex.console.http_link import HttpLink
from claudex.console.link import LocalLink
from claudex.console.screens import ConfirmScreen
from claudex.demo.world import free_port
from claudex.engine.engine import Engine
from claudex.engine.events import Event
from tests.conftest import GLOBALS, TEST_ENV, anthropic_body, build_config, eventually, profile_toml
from tests.console.test_console_attached import Serve, finish_workers, serve, until
from tests.table_world import StatsLink, erring, many_profiles_toml, stats_for

__all__ = ["serve"]  # the attached engine's fixture, used below

SIZE = (140, 44)


async def settle(app: ConsoleApp, pilot: Any) -> None:
    await pilot.pause()
    await app.main_screen.refresh_now()
    await pilot.pause()


def table_of(app: ConsoleApp) -> ProviderTable:
    return app.main_screen.query_one(ProviderTable)


@pytest.fixture
async def sixty() -> AsyncIterator[Engine]:
    made = Engine(build_config(many_profiles_toml(60)), env=TEST_ENV)
    yield made
    await made.close()


# -- rows, without the screen -------------------------------------------------------------------


def test_a_profile_without_the_new_keys_shows_dashes() -> None:
    row = table_row({"name": "old", "breaker": {"state": "closed"},
                     "health": {"color": "green"}, "stats": {"requests": 3}}, 0.0)
    cells = row.cells()
    for key in ("rpm", "err", "p50", "p95", "ttfc", "tpm"):
        assert cells[key] == "—", key
    assert sparkline(row.minutes_requests, row.minutes_errors, 10)[0].strip() == "—"


def test_time_left_of_an_open_breaker_and_of_a_trip() -> None:
    opened = table_row({"name": "a", "breaker": {"state": "open", "retry_in_s": 18.2}}, 0.0)
    assert opened.left == "18s" and opened.state == "open"
    timed = table_row({"name": "b", "breaker": {"state": "forced_open",
                                                 "until": 1000.0 + 20 * 60}}, 1000.0)
    assert timed.left == "20m" and timed.state == "tripped"
    said = table_row({"name": "b", "breaker": {"state": "forced_open", "reason": "maintenance"},
                      "stats": {"last_error": "server_error: 503"}}, 0.0)
    assert said.last_error == "trip: maintenance"  # the reason, while the trip holds
    forever = table_row({"name": "c", "breaker": {"state": "forced_open", "until": None}}, 0.0)
    assert forever.left == "∞"
    assert table_row({"name": "d", "enabled": False}, 0.0).state == "disabled"


def test_sparkline_squeezes_minutes_and_marks_the_ones_with_errors() -> None:
    requests = [0] * 28 + [4, 8]
    errors = [0] * 29 + [1]
    text, flags = sparkline(requests, errors, 30)
    assert text[-1] == "█" and text[-2] == "▄" and text[:28] == " " * 28
    assert flags[-1] and not any(flags[:-1])
    text, flags = sparkline(requests, errors, 10)  # three minutes a cell
    assert len(text) == 10 and text[-1] == "█" and flags == (False,) * 9 + (True,)


def minutes_with(requests: dict[int, int], errors: dict[int, int]) -> dict[str, list[int]]:
    """A 30-minute `stats.minutes` with these counts `n` minutes ago (0: the current one)."""
    return {"requests": [requests.get(29 - i, 0) for i in range(30)],
            "errors": [errors.get(29 - i, 0) for i in range(30)], "tokens": [0] * 30}


def test_sorts() -> None:
    rows = [table_row({"name": name, "health": {"color": colour},
                       "breaker": {"state": state},
                       "stats": {"minutes": minutes_with({0: 100}, {0: round(rate * 100)})
                                 if rate is not None else None,
                                 "latency": {"duration_p95_ms": p95}}}, 0.0)
            for name, colour, state, rate, p95 in (
                ("a", "green", "closed", 0.01, 900), ("b", "red", "open", None, None),
                ("c", "yellow", "half_open", 0.4, 3000), ("d", "green", "closed", 0.2, 100))]
    assert [r.name for r in sort_rows(rows, "state")] == ["b", "c", "a", "d"]
    assert [r.name for r in sort_rows(rows, "errors")] == ["c", "d", "a", "b"]
    assert [r.name for r in sort_rows(rows, "p95")] == ["c", "a", "d", "b"]
    assert [r.name for r in sort_rows(rows, "name")] == ["a", "b", "c", "d"]


def test_the_error_rate_is_the_last_five_minutes_so_failing_now_sorts_above_failed_before(
) -> None:
    # "before" failed hard 8 minutes ago and has answered well since: its 30-minute error
    # rate (what the engine's `error_rate` says, 60 %) is above "now"'s (25 %), which is
    # failing at this minute.
    before = table_row({"name": "before", "stats": {
        "error_rate": 0.6, "minutes": minutes_with({8: 10, 3: 2, 0: 1}, {8: 9})}}, 0.0)
    now = table_row({"name": "now", "stats": {
        "error_rate": 0.25, "minutes": minutes_with({20: 30, 1: 6, 0: 2}, {1: 4, 0: 2})}}, 0.0)
    idle = table_row({"name": "idle", "stats": {
        "error_rate": 1.0, "minutes": minutes_with({6: 3}, {6: 3})}}, 0.0)
    assert before.error_rate == 0.0 and now.error_rate == 0.75
    assert idle.error_rate is None and idle.cells()["err"] == "—"  # nothing sent in 5 min
    assert [r.name for r in sort_rows([before, idle, now], "errors")] == [
        "now", "before", "idle"]
    assert now.cells()["err"] == "75%"
    assert [c.label for c in columns_for(135, 12) if c.key == "err"] == ["err 5m"]


def test_columns_fit_the_width() -> None:
    for width in (95, 135, 200):
        columns = columns_for(width, 12)
        assert 1 + sum(c.width + 1 for c in columns) <= width + 1
    assert [c.key for c in columns_for(135, 12)][-2:] == ["spark", "error"]
    assert next(c for c in columns_for(135, 12) if c.key == "spark").width == 30


# -- the screen ---------------------------------------------------------------------------------


async def test_table_is_the_default_above_twelve_profiles_and_v_toggles(sixty: Engine) -> None:
    app = ConsoleApp(LocalLink(sixty))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        main = app.main_screen
        assert main.view == "table" and table_of(app).display
        assert len(table_of(app).rows) == 60
        assert main.check_action("cycle_sort", ()) is True
        await pilot.press("v")
        await settle(app, pilot)
        assert main.view == "grid" and not table_of(app).display
        assert main.check_action("cycle_sort", ()) is False  # the grid has no sort
        await pilot.press("v")
        await settle(app, pilot)
        assert main.view == "table"


async def test_three_profiles_open_on_the_grid() -> None:
    engine = Engine(build_config(many_profiles_toml(3)), env=TEST_ENV)
    try:
        app = ConsoleApp(LocalLink(engine))
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert app.main_screen.view == "grid"
    finally:
        await engine.close()


async def test_sort_by_error_rate_puts_the_worst_on_top(sixty: Engine) -> None:
    stats = {name: stats_for(i) for i, name in enumerate(sixty.runtimes)}
    stats["p37"] = erring(stats["p37"], 0.93)
    stats["p12"] = erring(stats["p12"], 0.51)
    app = ConsoleApp(StatsLink(sixty, stats))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        table = table_of(app)
        assert table.sort_by == "state"
        await pilot.press("s")
        await settle(app, pilot)
        assert table.sort_by == "errors"
        assert "sorted by 5-minute error %" in str(table.border_title)
        assert table.names[:2] == ["p37", "p12"]
        rates = [r.error_rate or 0.0 for r in table.rows]
        assert rates == sorted(rates, reverse=True)
        # A new picture with another worst provider: it goes on top at the next refresh.
        stats["p05"] = erring(stats["p05"], 0.99)
        await settle(app, pilot)
        assert table.names[:3] == ["p05", "p37", "p12"]


async def test_selection_is_kept_by_name_and_the_verbs_act_on_it(sixty: Engine) -> None:
    stats = {name: stats_for(i) for i, name in enumerate(sixty.runtimes)}
    app = ConsoleApp(StatsLink(sixty, stats))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        main, table = app.main_screen, table_of(app)
        await pilot.press("s")  # by error rate: the selection moves in the order shown
        await settle(app, pilot)
        first = table.names.index(str(main.selected))
        await pilot.press("down", "down")
        await settle(app, pilot)
        chosen = table.names[(first + 2) % 60]
        assert main.selected == chosen and table.selected == chosen
        stats[chosen] = erring(stats[chosen], 1.0)  # it moves to the top
        await settle(app, pilot)
        assert table.names[0] == chosen and main.selected == chosen
        await pilot.press("s", "s")  # by name
        await settle(app, pilot)
        assert main.selected == chosen
        sixty.trip(chosen)
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.title_text == f"Reset {chosen}?"
        await pilot.press("y")
        await settle(app, pilot)
        assert sixty.runtimes[chosen].breaker.state.value == "closed"


async def test_a_click_on_a_row_selects_it(sixty: Engine) -> None:
    app = ConsoleApp(LocalLink(sixty))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        names = table_of(app).names
        await pilot.click(ProviderTable, offset=(10, 4))  # border, header, rows 0, 1, 2
        await settle(app, pilot)
        assert app.main_screen.selected == names[2]
        await pilot.click(ProviderTable, offset=(10, 1))  # the header selects nothing
        await settle(app, pilot)
        assert app.main_screen.selected == names[2]


async def test_the_table_redraws_at_most_ten_times_a_second_under_a_burst(
    sixty: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = ConsoleApp(LocalLink(sixty))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        table = table_of(app)
        fed: list[int] = []
        show = table.show

        def counted(*args: Any, **kwargs: Any) -> bool:
            fed.append(1)
            return show(*args, **kwargs)

        monkeypatch.setattr(table, "show", counted)
        loop = asyncio.get_running_loop()
        started = loop.time()
        for i in range(600):
            sixty.events.publish(Event("request", f"r{i}", "p01", {
                "protocol": "anthropic", "model": "m", "provider": "p01", "status": 200,
                "latency_ms": 1.0, "attempts": [{}], "trail": "p01 200"}))
        log = app.main_screen.query_one(RequestLog)
        await eventually(lambda: len(log.rows_kept) == 500)
        elapsed = loop.time() - started
        assert 1 <= len(fed) <= elapsed / 0.1 + 2


async def test_the_filter_narrows_the_table(sixty: Engine) -> None:
    sixty.trip("p07")
    app = ConsoleApp(LocalLink(sixty))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("slash", *"tripped")
        await settle(app, pilot)
        table = table_of(app)
        assert table.names == ["p07"]
        assert "1 of 60" in str(table.border_title)
        await pilot.press("escape")
        await settle(app, pilot)
        assert len(table.names) == 60


# -- enable / disable ---------------------------------------------------------------------------

COMMENTED = """# my providers, by hand
[health]
enabled = false

[[profiles]]
name = "alpha"          # the main one
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "FAKE_KEY"
backup_providers = ["beta"]
# enabled = true        (switch it off here)

[[profiles]]
name = "beta"
provider_type = "OpenAICompatible"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "FAKE_KEY"  # same key
"""


async def test_x_disables_then_enables_keeping_the_comments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", TEST_ENV["FAKE_KEY"])
    path = tmp_path / "profiles.toml"
    path.write_text(COMMENTED)
    engine = Engine(load_config(path))
    try:
        app = ConsoleApp(LocalLink(engine))
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await pilot.press("right")  # beta
            await settle(app, pilot)
            await pilot.press("x")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmScreen)
            assert "enabled = false" in app.screen.message
            await pilot.press("y")
            await eventually(lambda: not engine.runtimes["beta"].profile.enabled)
            await settle(app, pilot)
            text = path.read_text()
            assert text == COMMENTED + "enabled = false\n"  # after beta's last key
            beta = next(p for p in app.main_screen.snapshot_data["profiles"]
                        if p["name"] == "beta")
            assert beta["enabled"] is False and beta["health"]["reason"] == "disabled"
            await pilot.press("x")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmScreen)
            assert "enabled = true" in app.screen.message
            await pilot.press("y")
            await eventually(lambda: engine.runtimes["beta"].profile.enabled)
            assert path.read_text() == COMMENTED + "enabled = true\n"
    finally:
        await engine.close()


async def test_read_only_refuses_and_the_file_is_byte_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", TEST_ENV["FAKE_KEY"])
    path = tmp_path / "profiles.toml"
    path.write_bytes(COMMENTED.encode())
    before = path.read_bytes()
    engine = Engine(load_config(path))
    try:
        app = ConsoleApp(LocalLink(engine), read_only=True)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert app.main_screen.check_action("toggle_enabled", ()) is None  # shown off
            await pilot.press("x")  # off in the footer: the key does nothing
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmScreen)
            app.main_screen.action_toggle_enabled()  # reached another way, it says no
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmScreen)
            assert any("Read-only" in n.message for n in app._notifications)
            await finish_workers(app)
        assert path.read_bytes() == before
        assert engine.runtimes["alpha"].profile.enabled
    finally:
        await engine.close()


async def test_attached_disable_writes_the_engines_file_and_it_reloads(serve: Serve) -> None:
    link = HttpLink(serve.url)
    await link.connect()
    app = ConsoleApp(link)
    async with app.run_test(size=SIZE) as pilot:
        await until(app, pilot, lambda: app.main_screen.selected == "primary")
        await pilot.press("right")  # backup
        await until(app, pilot, lambda: app.main_screen.selected == "backup")
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await pilot.pause()
        await finish_workers(app)
        assert "enabled = false" in serve.config.read_text()
        await until(app, pilot, lambda: any(
            p["name"] == "backup" and p["enabled"] is False
            for p in app.main_screen.snapshot_data["profiles"]))
    await link.close()


async def test_attached_to_a_served_engine_with_60_profiles_the_table_sorts_by_error_rate(
    fakes: Any, tmp_path: Path
) -> None:
    """The issue's "done when": a real `claudex serve` with 60 profiles, real traffic, the
    console attached over HTTP; sorted by error rate, the worst providers are on top."""
    f = await fakes(("good", "anthropic"), ("flaky", "anthropic"))
    port = free_port()
    names = [f"p{i:02d}" for i in range(1, 61)]
    worst = ["p57", "p58", "p59", "p60"]  # 3 errors each, then 0, 1, 3 and 9 successes
    text = (GLOBALS.replace("[proxy]", f"[proxy]\nport = {port}")
            + "\n[breaker]\nfailure_threshold = 100\n"
            + "".join(profile_toml(n, f["flaky" if n in worst else "good"]) for n in names))
    path = tmp_path / "profiles.toml"
    path.write_text(text)
    path.chmod(0o600)
    served = Serve(path, port)
    await served.start()
    try:
        async with httpx.AsyncClient(base_url=served.url, timeout=10.0) as client:
            async def send(name: str, times: int) -> None:
                for _ in range(times):
                    await client.post(f"/proxy/{name}/v1/messages", json=anthropic_body(),
                                      headers={"anthropic-version": "2023-06-01",
                                               "x-claudex-failover": "off"})

            await send("p01", 3)
            f["flaky"].set_fault("500")
            for name in worst:
                await send(name, 3)
            f["flaky"].set_fault("ok")
            for name, oks in zip(worst, (0, 1, 3, 9), strict=True):
                await send(name, oks)
        link = HttpLink(served.url)
        await link.connect()
        app = ConsoleApp(link)
        async with app.run_test(size=SIZE) as pilot:
            await until(app, pilot, lambda: len(table_of(app).rows) == 60)
            assert app.main_screen.view == "table"
            await pilot.press("s")
            await until(app, pilot, lambda: table_of(app).sort_by == "errors")
            assert table_of(app).names[:4] == worst
            rates = [table_of(app).rows[i].error_rate for i in range(5)]
            assert rates[:4] == [1.0, 0.75, 0.5, 0.25] and rates[4] == 0.0
        await link.close()
    finally:
        await served.kill()
