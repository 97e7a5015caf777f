"""The operations console, driven with Textual's Pilot against a real in-process engine.

Breaker actions and their confirm dialogs, read-only mode, quitting with requests in flight, the
request log showing a failover trail after a fake provider goes down (traffic sent request by
request, never by sleeping), the coalesced refresh, filtering, selection and the demo keys.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import types
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from textual.command import CommandPalette
from textual.screen import ModalScreen
from textual.widgets import Input

from claudex.config.loader import load_config, parse_config
from claudex.console.app import ConsoleApp
from claudex.console.commands import palette_commands
from claudex.console.components import ChainView, EventLog, HeaderBar, ProviderPanel, RequestLog
from claudex.console.components.proxy_strip import ProxyStrip
from claudex.console.components.request_log import MAX_ROWS
from claudex.console.format import RequestRow
from claudex.console.hosting import Hosted, HostError, host_config, host_demo
from claudex.console.launch import watch_config
from claudex.console.link import LocalLink
from claudex.console.messages import ConfigRejected
from claudex.console.screens import ConfirmScreen, HelpScreen
from claudex.console.screens.trip_dialog import TripScreen
from claudex.engine.engine import Engine
from claudex.engine.events import Event
from tests.conftest import TEST_ENV, anthropic_body, build_config, eventually, profile_toml

SIZE = (140, 44)

TWO_PROFILES = """
[[profiles]]
name = "alpha"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "FAKE_KEY"
backup_providers = ["beta"]

[[profiles]]
name = "beta"
provider_type = "OpenAICompatible"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "FAKE_KEY"
"""


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    made = Engine(build_config(TWO_PROFILES), env=TEST_ENV)
    yield made
    await made.close()


def state(engine: Engine, name: str) -> str:
    return engine.runtimes[name].breaker.state.value


def header_text(app: ConsoleApp) -> str:
    header = app.main_screen.query_one(HeaderBar)
    return " ".join(str(s.render()) for s in header.query("Static"))


async def settle(app: ConsoleApp, pilot: Any) -> None:
    """Let the event pump run, then refresh at once (instead of waiting for the tick)."""
    await pilot.pause()
    await app.main_screen.refresh_now()
    await pilot.pause()


# -- breaker actions --------------------------------------------------------------------------


async def test_trip_confirmed_forces_the_breaker_open(engine: Engine) -> None:
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.main_screen.selected == "alpha"
        await pilot.press("t")
        assert isinstance(app.screen, TripScreen)  # a ConfirmScreen asking for how long
        await pilot.press("enter")  # blank: until reset
        await pilot.pause()
        assert state(engine, "alpha") == "forced_open"
        assert state(engine, "beta") == "closed"


@pytest.mark.parametrize("key", ["escape"])
async def test_trip_cancelled_changes_nothing(engine: Engine, key: str) -> None:
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("t")
        assert isinstance(app.screen, TripScreen)
        await pilot.press(key)
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert state(engine, "alpha") == "closed"


async def test_reset_confirmed_closes_and_cancel_keeps_it_open(engine: Engine) -> None:
    engine.trip("beta")
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("right")  # select beta
        assert app.main_screen.selected == "beta"
        await pilot.press("r")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await pilot.pause()
        assert state(engine, "beta") == "forced_open"
        await pilot.press("r", "y")
        await pilot.pause()
        assert state(engine, "beta") == "closed"


async def test_confirm_buttons_work_by_mouse(engine: Engine) -> None:
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("t")
        await pilot.click("#yes")
        await pilot.pause()
        assert state(engine, "alpha") == "forced_open"


async def test_read_only_refuses_every_modifying_action(engine: Engine) -> None:
    app = ConsoleApp(LocalLink(engine), read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert "READ-ONLY" in header_text(app)
        for key in ("t", "r", "e", "a", "d"):
            await pilot.press(key)
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmScreen), key
        # Reached another way (the command palette, run_action), the action refuses too.
        await app.main_screen.run_action("trip")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert state(engine, "alpha") == "closed"
        titles = [title for title, _, _ in palette_commands(app.main_screen)]
        assert not any(t.startswith(("Trip", "Reset", "Edit", "Add", "Delete")) for t in titles)
        assert "Health-check every provider now" in titles


async def test_palette_lists_actions_and_profiles(engine: Engine) -> None:
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        commands = {title: callback for title, callback, _ in palette_commands(app.main_screen)}
        assert "Select beta" in commands
        assert not any(t.startswith("Demo") for t in commands)  # no demo, no demo keys
        trip = next(cb for t, cb in commands.items() if t.startswith("Trip"))
        await trip()
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("escape", "colon")  # k9s' ":" opens the palette too
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)


async def test_help_lists_the_actions(engine: Engine) -> None:
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        keys = {line.keys for line in app.screen.actions}
        assert {"t", "r", "h", "e", "a", "d", "/", "?", "q"} <= keys
        assert not app.screen.demo
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


# -- quit -------------------------------------------------------------------------------------


async def test_quit_without_requests_in_flight_exits_at_once(engine: Engine) -> None:
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


async def test_ctrl_q_asks_too_while_requests_are_in_flight(engine: Engine) -> None:
    engine.totals.in_flight = 1
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert "1 request is in flight" in app.screen.message
    engine.totals.in_flight = 0


async def test_quit_asks_while_requests_are_in_flight(engine: Engine) -> None:
    engine.totals.in_flight = 2
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert "2 requests are in flight" in app.screen.message
        await pilot.press("n")
        await pilot.pause()
        assert app.is_running
        await pilot.press("q", "y")
        await pilot.pause()
        assert not app.is_running
    engine.totals.in_flight = 0


# -- request log, failover, refresh -----------------------------------------------------------


async def test_request_log_shows_failover_after_a_provider_goes_down(
    fakes: Any, proxy_factory: Any
) -> None:
    made = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    config = build_config(profile_toml("primary", made["primary"], backups=["backup"])
                          + profile_toml("backup", made["backup"]))
    proxy = await proxy_factory(config, fakes=made)
    app = ConsoleApp(LocalLink(proxy.engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert (await proxy.messages(anthropic_body())).status_code == 200
        made["primary"].set_fault("down")
        resp = await proxy.messages(anthropic_body())
        assert resp.headers["x-claudex-provider"] == "backup"
        log = app.main_screen.query_one(RequestLog)
        await eventually(lambda: len(log.rows_kept) == 2)
        await settle(app, pilot)
        first, second = log.visible_rows()
        assert (first.provider, first.trail, first.failed_over) == ("primary", "primary 200", False)
        assert second.provider == "backup"
        assert second.trail == "primary connect_error → backup 200"
        assert second.failed_over and second.status == 200
        assert log.row_count == 2


async def test_refresh_is_coalesced_under_a_burst(engine: Engine) -> None:
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.main_screen
        loop = asyncio.get_running_loop()
        before, started = screen.refresh_count, loop.time()
        for i in range(600):
            engine.events.publish(Event("request", f"r{i}", "alpha", {
                "protocol": "anthropic", "model": "m", "provider": "alpha", "status": 200,
                "latency_ms": 1.0, "attempts": [{}], "trail": "alpha 200"}))
        log = screen.query_one(RequestLog)
        await eventually(lambda: len(log.rows_kept) == 500)  # the log keeps the last 500
        elapsed = loop.time() - started
        # At most one refresh per 0.1 s (plus the one in progress), not one per request.
        assert screen.refresh_count - before <= elapsed / 0.1 + 2
        # The log shows every kept row (no filter), the newest last.
        assert log.row_count == MAX_ROWS
        assert log.visible_rows()[-1] is log.rows_kept[-1]


def numbered_rows(start: int, count: int) -> list[RequestRow]:
    return [RequestRow(time=f"t{i:04d}", request="anthropic m", provider="alpha",
                       trail="alpha 200", status=200, latency_ms=1.0, failed_over=False)
            for i in range(start, start + count)]


async def test_request_log_at_its_end_stays_there_when_its_box_changes_height(
    engine: Engine,
) -> None:
    """A panel growing a line (a route's trouble) shrinks the log and back: the log at its end
    stays at its end, so the next rows are in view (seen in the demo's proxy screenshots)."""
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        log = app.main_screen.query_one(RequestLog)
        log.add_rows_from(numbered_rows(0, 50))
        await pilot.pause()
        assert log.scroll_y == log.max_scroll_y > 0
        await pilot.resize_terminal(SIZE[0], SIZE[1] + 6)  # the log grows: the scroll clamps
        await settle(app, pilot)
        await pilot.resize_terminal(*SIZE)  # and shrinks back
        await settle(app, pilot)
        assert log.scroll_y == log.max_scroll_y
        log.add_rows_from(numbered_rows(50, 2))
        await pilot.pause()
        assert log.render_line(log.size.height - 1).text.startswith(" t0051 ")


async def test_request_log_follows_the_end_only_while_the_operator_is_there(
    engine: Engine,
) -> None:
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        log = app.main_screen.query_one(RequestLog)
        log.add_rows_from(numbered_rows(0, MAX_ROWS))
        await pilot.pause()
        assert log.scroll_y == log.max_scroll_y > 0
        assert "time" in log.render_line(0).text and "attempts" in log.render_line(0).text
        last = log.size.height - 1
        assert log.render_line(last).text.startswith(f" t{MAX_ROWS - 1:04d} ")
        # Scrolled up to read: new rows neither move the view nor drag it to the end, even
        # when the oldest rows leave the buffer under it.
        log.scroll_to(y=100, animate=False, immediate=True)
        top = log.render_line(1).text
        log.add_rows_from(numbered_rows(MAX_ROWS, 3))
        await pilot.pause()
        assert log.scroll_y == 97 and log.render_line(1).text == top
        assert len(log.rows_kept) == log.row_count == MAX_ROWS
        # Back at the end, it follows again.
        log.scroll_end(animate=False, immediate=True)
        log.add_rows_from(numbered_rows(MAX_ROWS + 3, 2))
        await pilot.pause()
        assert log.render_line(last).text.startswith(f" t{MAX_ROWS + 4:04d} ")


async def test_filter_narrows_the_request_log(engine: Engine) -> None:
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        for provider, status in (("alpha", 200), ("beta", 503), ("alpha", 429)):
            engine.events.publish(Event("request", "", provider, {
                "protocol": "anthropic", "model": "m", "provider": provider, "status": status,
                "latency_ms": 3.0, "attempts": [{}], "trail": f"{provider} {status}"}))
        log = app.main_screen.query_one(RequestLog)
        await eventually(lambda: len(log.rows_kept) == 3)
        await pilot.press("slash")
        assert app.focused is app.main_screen.query_one("#filter", Input)
        await pilot.press("5", "0", "3")
        await pilot.pause()
        assert [r.provider for r in log.visible_rows()] == ["beta"]
        assert log.row_count == 1
        # Typing into the filter is not a command: "t" did not open a dialog.
        await pilot.press("t")
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert log.row_count == 3 and log.filter_text == ""


async def test_selection_moves_and_the_chain_follows(engine: Engine) -> None:
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        chain = app.main_screen.query_one(ChainView)
        assert "alpha" in str(chain.render()) and "beta" in str(chain.render())
        await pilot.press("j")
        await settle(app, pilot)
        assert app.main_screen.selected == "beta"
        assert "no backups" in str(chain.render())
        await pilot.press("k")
        assert app.main_screen.selected == "alpha"
        beta_panel = app.main_screen.query(ProviderPanel).last()
        await pilot.click(beta_panel)
        assert app.main_screen.selected == "beta"


async def test_event_log_shows_breaker_transitions(engine: Engine) -> None:
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        events = app.main_screen.query_one(EventLog)
        before = events.lines_written
        engine.trip("beta")  # as if from the admin API: the console sees the event
        await eventually(lambda: events.lines_written > before)
        await settle(app, pilot)
        text = "\n".join(line.text for line in events.lines)
        assert "beta: breaker closed -> forced_open" in text


async def test_an_outage_repeating_itself_takes_one_event_line_a_refresh(engine: Engine) -> None:
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        events = app.main_screen.query_one(EventLog)
        before = events.lines_written
        for _ in range(50):
            engine.escalate("All providers failed for alpha.")
            engine.events.publish(Event("request", "", "alpha", {"status": 502, "trail": ""}))
        engine.trip("beta")
        log = app.main_screen.query_one(RequestLog)
        await eventually(lambda: len(log.rows_kept) == 50)
        await settle(app, pilot)
        assert events.lines_written == before + 2
        text = [line.text for line in events.lines[-2:]]
        assert text[0].endswith("All providers failed for alpha. (×50)")
        assert "beta: breaker closed -> forced_open" in text[1]


async def test_health_check_key_probes_now(engine: Engine) -> None:
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        rounds = engine.health.rounds
        await pilot.press("h")
        await eventually(lambda: engine.health.rounds == rounds + 1)
        await settle(app, pilot)
        profiles = app.main_screen.snapshot_data["profiles"]
        assert all(p["health"]["error"] == "connection refused" for p in profiles)


async def test_config_problem_shows_a_banner(engine: Engine) -> None:
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.post_message(ConfigRejected("profiles.toml", ["profiles.toml:3: port: not a number"]))
        await pilot.pause()
        banner = app.main_screen.query_one("#banner")
        assert banner.has_class("-visible")
        assert "previous config stays live" in str(banner.render())


class FlakyLink(LocalLink):
    """A link whose snapshot fails while `broken` is set."""

    broken = False

    def snapshot(self) -> dict[str, Any]:
        if self.broken:
            raise KeyError("profiles")
        return super().snapshot()


async def test_a_failing_refresh_shows_a_banner_and_the_console_keeps_running(
    engine: Engine,
) -> None:
    link = FlakyLink(engine)
    app = ConsoleApp(link)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        banner = app.main_screen.query_one("#banner")
        link.broken = True
        await settle(app, pilot)
        assert app.is_running and banner.has_class("-visible")
        assert "could not refresh" in str(banner.render())
        link.broken = False
        await settle(app, pilot)
        assert not banner.has_class("-visible")


# -- profiles: delete -------------------------------------------------------------------------


async def test_delete_confirmed_removes_the_profile_and_applies_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("claudex.config.editing")
    monkeypatch.setenv("FAKE_KEY", TEST_ENV["FAKE_KEY"])
    path = tmp_path / "profiles.toml"
    path.write_text("# mine\n[health]\nenabled = false\n" + TWO_PROFILES)
    engine = Engine(load_config(path))
    try:
        app = ConsoleApp(LocalLink(engine))
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await pilot.press("d")
            assert isinstance(app.screen, ConfirmScreen)
            assert "backup chain of alpha" not in app.screen.message  # alpha itself
            await pilot.press("escape", "right", "d")
            assert "backup chain of alpha" in app.screen.message
            await pilot.press("y")
            await eventually(lambda: list(engine.runtimes) == ["alpha"])
            await settle(app, pilot)
            assert list(engine.runtimes) == ["alpha"]
            assert "beta" not in path.read_text()
            assert path.read_text().startswith("# mine\n")
            assert app.main_screen.profile_names == ["alpha"]
    finally:
        await engine.close()


async def test_hot_reload_applies_a_valid_change_and_bans_an_invalid_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", TEST_ENV["FAKE_KEY"])
    path = tmp_path / "profiles.toml"
    text = "[health]\nenabled = false\n" + TWO_PROFILES
    path.write_text(text)
    engine = Engine(load_config(path))
    engine.trip("alpha")  # state of an unchanged profile survives a reload
    try:
        link = LocalLink(engine)
        app = ConsoleApp(link)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            watcher = watch_config(path, link, app)
            path.write_text(text.replace("127.0.0.1:9/v1", "127.0.0.1:10/v1"))
            await watcher.check_now()
            await settle(app, pilot)
            beta = engine.config.profile("beta")
            assert beta is not None and beta.base_url == "http://127.0.0.1:10/v1"
            assert state(engine, "alpha") == "forced_open"
            banner = app.main_screen.query_one("#banner")
            assert not banner.has_class("-visible")

            path.write_text(text.replace('backup_providers = ["beta"]',
                                         'backup_providers = ["nobody"]'))
            await watcher.check_now()
            await settle(app, pilot)
            assert banner.has_class("-visible")
            assert "nobody" in str(banner.render())
            assert engine.config.profile("alpha").backup_providers == ("beta",)  # type: ignore[union-attr]
    finally:
        await engine.close()


class FakeEditor(ModalScreen[bool]):
    """Stands in for the profile editor: records what it was opened on, saves at once."""

    opened: ClassVar[list[tuple[Path, str | None]]] = []

    def __init__(self, config_path: Path, profile_name: str | None) -> None:
        super().__init__()
        self.opened.append((config_path, profile_name))
        self.config_path = config_path

    def on_mount(self) -> None:
        text = self.config_path.read_text()
        self.config_path.write_text(text.replace("127.0.0.1:9/v1", "127.0.0.1:11/v1"))
        self.dismiss(True)


async def test_edit_opens_the_editor_and_a_save_applies_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", TEST_ENV["FAKE_KEY"])
    fake_module = types.ModuleType("claudex.console.editor")
    fake_module.ProfileEditorScreen = FakeEditor  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "claudex.console.editor", fake_module)
    FakeEditor.opened.clear()
    path = tmp_path / "profiles.toml"
    path.write_text("[health]\nenabled = false\n" + TWO_PROFILES)
    engine = Engine(load_config(path))
    try:
        app = ConsoleApp(LocalLink(engine))
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await pilot.press("j", "e")
            await eventually(lambda: engine.config.profile("beta") is not None
                             and engine.config.profile("beta").base_url  # type: ignore[union-attr]
                             == "http://127.0.0.1:11/v1")
            await pilot.press("a")
            await pilot.pause()
            assert FakeEditor.opened == [(path, "beta"), (path, None)]
    finally:
        await engine.close()


# -- demo -------------------------------------------------------------------------------------


@pytest.fixture
async def demo() -> AsyncIterator[Hosted]:
    hosted = await host_demo(None, health=False)
    yield hosted
    await hosted.close()


async def test_demo_fault_key_breaks_the_selected_fake_and_traffic_fails_over(
    demo: Hosted,
) -> None:
    assert demo.controls is not None and demo.traffic is not None and demo.world is not None
    app = ConsoleApp(LocalLink(demo.engine), demo=demo.controls)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.main_screen.selected == "claude"
        await pilot.press("1")
        assert demo.controls.fault_of("claude") == "down"
        for _ in range(4):
            assert await demo.traffic.send_one("messages") == 200
        # The demo's fourth provider speaks the Responses API, to Responses clients.
        assert await demo.traffic.send_one("responses") == 200
        assert await demo.traffic.send_one("messages") == 200
        await settle(app, pilot)
        profiles = {p["name"]: p for p in app.main_screen.snapshot_data["profiles"]}
        assert profiles["codex"]["provider_type"] == "OpenAIResponses"
        assert profiles["codex"]["stats"]["successes"] == 1
        assert profiles["claude"]["health"]["color"] == "red"
        rows = app.main_screen.query_one(RequestLog).visible_rows()
        assert rows[-1].provider == "claude-backup"
        assert rows[-1].trail.startswith("claude ")
        await pilot.press("0")
        assert demo.controls.fault_of("claude") == "ok"
        await pilot.press("g")
        assert demo.traffic.running
        await pilot.press("g")
        assert not demo.traffic.running


async def test_demo_proxy_keys_take_corp_down_and_make_it_answer_429(demo: Hosted) -> None:
    """claude is reached through the demo's own upstream proxy corp (real sockets: the fault
    proxy, a TLS front, the fakes): `7` takes corp down and claude-backup serves with claude's
    breaker closed and nothing counted against it, until corp's breaker opens and the panels,
    the strip and the events say so; `7` again brings corp back; `8` makes corp answer 429 until
    the escalation names it."""
    assert demo.controls is not None and demo.traffic is not None and demo.world is not None
    proxy = demo.world.proxy
    assert proxy is not None
    proxy.retry_after = "0"  # the escalation without the demo's 2 s wait
    app = ConsoleApp(LocalLink(demo.engine), demo=demo.controls)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert await demo.traffic.send_one("messages") == 200
        assert proxy.connects["ok"] == 1  # claude's request went through corp (CONNECT)
        await pilot.press("7")
        assert proxy.mode == "down" and not proxy.listening
        for _ in range(4):  # corp's breaker opens at the third refusal (the demo's threshold)
            assert await demo.traffic.send_one("messages") == 200
        await settle(app, pilot)
        rows = app.main_screen.query_one(RequestLog).visible_rows()
        assert [r.provider for r in rows[-4:]] == ["claude-backup"] * 4
        assert rows[-4].trail == "claude proxy_refused → claude-backup 200"
        assert rows[-1].trail == "claude no_route → claude-backup 200"  # corp open: skipped
        snapshot = app.main_screen.snapshot_data
        claude = next(p for p in snapshot["profiles"] if p["name"] == "claude")
        assert claude["breaker"]["state"] == "closed"
        assert claude["breaker"]["consecutive_failures"] == 0
        assert claude["stats"]["failures"] == 0
        assert claude["route"] == {"label": "via corp", "proxies": ["corp"],
                                   "trouble": "proxy corp open (connection refused)"}
        (corp,) = snapshot["upstream_proxies"]
        assert corp["breaker"]["state"] == "open" and corp["health"] == "red"
        assert corp["last_error"] == "connection refused"
        panel = next(p for p in app.main_screen.query(ProviderPanel)
                     if p.profile_name == "claude")
        assert "via corp" in str(panel.border_subtitle)
        assert "proxy corp open (connection refused)" in panel.route_line.text
        assert app.main_screen.query_one(ProxyStrip).names == ["corp"]
        events = "\n".join(line.text for line in app.main_screen.query_one(EventLog).lines)
        assert "proxy corp opened (connection refused)" in events
        await pilot.press("7")
        assert proxy.mode == "ok"
        for _ in range(100):  # the listener is back within a few loop turns
            if proxy.listening:
                break
            await asyncio.sleep(0.01)
        assert demo.engine.reset("corp")  # as `r` on corp's row: no wait for half-open
        assert await demo.traffic.send_one("messages") == 200
        await settle(app, pilot)
        rows = app.main_screen.query_one(RequestLog).visible_rows()
        assert rows[-1].provider == "claude" and rows[-1].trail == "claude 200"
        await pilot.press("8")
        assert proxy.mode == "rate_limited"
        assert await demo.traffic.send_one("messages") == 200
        await settle(app, pilot)
        rows = app.main_screen.query_one(RequestLog).visible_rows()
        assert rows[-1].provider == "claude-backup"
        assert rows[-1].trail == ("claude proxy_rate_limited → claude proxy_rate_limited → "
                                  "claude-backup 200")
        assert proxy.connects["rate_limited"] == 2  # corp's max_attempts in the demo config
        said = [e.message for e in demo.engine.events.recent]
        assert any(m.startswith("Repeated rate-limit errors from the upstream proxy corp")
                   for m in said), said
        await pilot.press("8")
        assert proxy.mode == "ok"


async def test_demo_keys_are_hidden_outside_the_demo(engine: Engine) -> None:
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.main_screen.check_action("fault", ("down",)) is False
        assert app.main_screen.check_action("traffic", ()) is False


# -- hosting ----------------------------------------------------------------------------------


async def test_a_taken_port_is_reported_in_words() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        text = f"[proxy]\nport = {port}\n[health]\nenabled = false\n{TWO_PROFILES}"
        config = parse_config(text, "t.toml", env=TEST_ENV)
        with pytest.raises(HostError, match=f"Cannot listen on 127.0.0.1:{port}"):
            await host_config(config, env=TEST_ENV)


async def test_hosted_console_serves_the_proxy(demo: Hosted) -> None:
    async with httpx.AsyncClient(base_url=demo.server.url) as client:
        resp = await client.post("/v1/messages", json=anthropic_body())
    assert resp.status_code == 200
    assert resp.headers["x-claudex-provider"] == "claude"
