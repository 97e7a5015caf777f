"""Upstream proxies in the console (issue 36), from fabricated status dicts: each panel names its
route (`via corp`; nothing for a direct one), a route's trouble names the proxy on the panels
behind it, the proxies' strip (hidden without proxies) shows state, requests and last error, and
`t`/`r` on a proxy's row trip and reset it by name through the link, as they do a provider.

The engine is the real in-process one; `ProxyOverlayLink` overlays the route and
`upstream_proxies` parts of the status (the engine's own has the same shape) and records what
trip and reset were asked for the proxies' names.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from claudex.console.app import ConsoleApp
from claudex.console.components import ProviderPanel
from claudex.console.components.proxy_strip import (
    ProxyRow,
    ProxyStrip,
    proxy_words,
    route_label,
    route_trouble,
)
from claudex.console.format import event_colour
from claudex.console.screens import ConfirmScreen
from claudex.console.screens.trip_dialog import TripScreen
from claudex.console.screenshots.proxies import ProxyOverlayLink as ProxyLink
from claudex.engine.engine import Engine
from claudex.engine.events import Event, EventKind
from tests.conftest import TEST_ENV, build_config

SIZE = (140, 44)

PROFILES = """
[[profiles]]
name = "claude"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "FAKE_KEY"
backup_providers = ["claude-backup"]

[[profiles]]
name = "claude-backup"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "FAKE_KEY"

[[profiles]]
name = "grok"
provider_type = "OpenAICompatible"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "FAKE_KEY"
"""

CORP_OPEN = {
    "name": "corp", "url": "http://alice:****@proxy.corp:3128",
    "breaker": {"state": "open", "consecutive_failures": 3, "retry_in_s": 18.0},
    "health": "red", "requests": 120, "failures": 3,
    "last_error": "connection refused", "profiles": ["claude"],
}
CORP_2 = {
    "name": "corp-2", "url": "socks5h://proxy2.corp:1080",
    "breaker": {"state": "closed", "consecutive_failures": 0, "retry_in_s": None},
    "health": "green", "requests": 41, "failures": 0, "last_error": None,
    "profiles": ["claude-backup"],
}
ROUTES: dict[str, dict[str, Any]] = {
    "claude": {"label": "via corp", "proxies": ["corp"],
               "trouble": "proxy corp open (connection refused)"},
    "claude-backup": {"label": "via corp-2", "proxies": ["corp-2"], "trouble": None},
    "grok": {"label": "direct", "proxies": [], "trouble": None},
}


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    made = Engine(build_config(PROFILES), env=TEST_ENV)
    yield made
    await made.close()


async def settle(app: ConsoleApp, pilot: Any) -> None:
    await pilot.pause()
    await app.main_screen.refresh_now()
    await pilot.pause()


def panel(app: ConsoleApp, name: str) -> ProviderPanel:
    return next(p for p in app.main_screen.query(ProviderPanel) if p.profile_name == name)


def test_route_words_from_status() -> None:
    assert route_label({"route": ROUTES["claude"]}) == "via corp"
    assert route_label({"route": ROUTES["grok"]}) == ""  # direct: no label
    assert route_label({}) == ""  # no route key: direct
    assert route_trouble({"route": ROUTES["claude"]}) == "proxy corp open (connection refused)"
    assert route_trouble({"route": ROUTES["claude-backup"]}) == ""
    assert route_trouble({"route": None}) == ""


def test_proxy_words_say_state_requests_profiles_and_last_error() -> None:
    words = proxy_words(CORP_OPEN)
    assert words.startswith("http://alice:****@proxy.corp:3128 · open · half-open in 18s")
    assert "120 req · 3 failed · last: connection refused · for claude" in words
    assert proxy_words(CORP_2) == "socks5h://proxy2.corp:1080 · closed · 41 req · for claude-backup"


def test_proxy_words_say_the_engines_reason_and_disabled() -> None:
    auth = {**CORP_2, "health": "red", "health_reason": "proxy auth failed"}
    assert "closed · proxy auth failed · 41 req" in proxy_words(auth)
    assert "· disabled · closed" in proxy_words({**CORP_2, "enabled": False})
    assert "ok" not in proxy_words({**CORP_2, "health_reason": "ok"}).split(" · ")


def test_proxy_words_mask_a_secret_in_an_error() -> None:
    proxy = {**CORP_2, "last_error": "407 from proxy (key sk-ant-api03-abcdefgh12345678)"}
    assert "abcdefgh12345678" not in proxy_words(proxy)


async def test_panels_name_their_route_and_the_proxy_in_trouble(engine: Engine) -> None:
    app = ConsoleApp(ProxyLink(engine, [CORP_OPEN, CORP_2], ROUTES))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        claude, backup, grok = (panel(app, n) for n in ("claude", "claude-backup", "grok"))
        assert "via corp" in str(claude.border_subtitle)
        assert "via corp-2" in str(backup.border_subtitle)
        assert "via" not in str(grok.border_subtitle)
        assert claude.has_class("-route-trouble")
        assert "proxy corp open (connection refused)" in claude.route_line.text
        assert claude.route_line.display and not backup.route_line.display
        # The provider's own colour is its own: a proxy's failure is the proxy's.
        assert claude.has_class("-green")


async def test_no_proxies_no_strip_and_panels_as_before(engine: Engine) -> None:
    app = ConsoleApp(ProxyLink(engine, [], {}))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        strip = app.main_screen.query_one(ProxyStrip)
        assert not strip.display
        assert not list(strip.query(ProxyRow))
        assert str(panel(app, "claude").border_subtitle) == "anthropic · default"
        assert not panel(app, "claude").route_line.display


async def test_strip_rows_follow_the_status(engine: Engine) -> None:
    link = ProxyLink(engine, [CORP_OPEN, CORP_2], ROUTES)
    app = ConsoleApp(link)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        strip = app.main_screen.query_one(ProxyStrip)
        assert strip.display
        rows = list(strip.query(ProxyRow))
        assert [r.proxy_name for r in rows] == ["corp", "corp-2"]
        assert "open" in rows[0].text and "last: connection refused" in rows[0].text
        assert "41 req" in rows[1].text
        link.proxies = [{**CORP_2, "requests": 42}]  # corp gone from the config
        await settle(app, pilot)
        rows = list(strip.query(ProxyRow))
        assert [r.proxy_name for r in rows] == ["corp-2"] and "42 req" in rows[0].text
        link.proxies = []
        await settle(app, pilot)
        assert not strip.display


async def test_t_and_r_on_a_proxy_row_trip_and_reset_it_by_name(engine: Engine) -> None:
    link = ProxyLink(engine, [CORP_OPEN, CORP_2], ROUTES)
    app = ConsoleApp(link)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.main_screen
        await pilot.press("right", "right", "right")  # past grok: the first proxy's row
        await settle(app, pilot)
        assert screen.selected_proxy == "corp"
        row = next(r for r in screen.query(ProxyRow) if r.proxy_name == "corp")
        assert row.has_class("-selected")
        assert not any(p.has_class("-selected") for p in screen.query(ProviderPanel))
        await pilot.press("t")
        assert isinstance(app.screen, TripScreen)
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("r")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await pilot.pause()
        assert link.asked == [("trip", "corp"), ("reset", "corp")]
        # The providers' breakers were not touched.
        assert all(rt.breaker.state.value == "closed" for rt in engine.runtimes.values())
        await pilot.press("right")
        assert screen.selected_proxy == "corp-2"
        await pilot.press("right")  # round to the first profile
        assert screen.selected_proxy is None and screen.selected == "claude"


async def test_clicking_a_proxy_row_selects_it_and_edit_says_it_is_a_proxy(
        engine: Engine) -> None:
    link = ProxyLink(engine, [CORP_OPEN, CORP_2], ROUTES)
    app = ConsoleApp(link)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.click(ProxyRow)
        await settle(app, pilot)
        assert app.main_screen.selected_proxy == "corp"
        await pilot.press("d")  # delete works on profiles
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert any("corp is an upstream proxy" in str(n.message)
                   for n in app._notifications)
        await pilot.click(ProviderPanel)
        await settle(app, pilot)
        assert app.main_screen.selected_proxy is None


async def test_a_proxy_gone_from_the_status_is_no_longer_selected(engine: Engine) -> None:
    link = ProxyLink(engine, [CORP_OPEN], ROUTES)
    app = ConsoleApp(link)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.main_screen.select_proxy("corp")
        await settle(app, pilot)
        link.proxies = []
        await settle(app, pilot)
        assert app.main_screen.selected_proxy is None
        assert panel(app, app.main_screen.selected or "").has_class("-selected")


async def test_the_table_view_keeps_the_strip(engine: Engine) -> None:
    app = ConsoleApp(ProxyLink(engine, [CORP_OPEN], ROUTES))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("v")
        await settle(app, pilot)
        assert app.main_screen.view == "table"
        assert app.main_screen.query_one(ProxyStrip).display


@pytest.mark.parametrize(("data", "colour"), [
    ({"new": "open"}, "red"), ({"new": "half_open"}, "yellow"), ({"new": "closed"}, "green"),
    ({"state": "auth_failed"}, "red"), ({"state": "untrusted"}, "red"),
    ({"state": "cooling"}, "yellow"), ({"state": "ok"}, "green"),
])
def test_proxy_events_take_their_state_colour(data: dict[str, str], colour: str) -> None:
    """The engine's proxy events (kind "proxy", helper netwire's ProxyBoard) in the event log."""
    event = Event(cast("EventKind", "proxy"), "proxy corp ...", "corp", {"proxy": "corp", **data})
    assert event_colour(event) == colour


async def test_the_palette_selects_a_proxy(engine: Engine) -> None:
    from claudex.console.commands import palette_commands

    app = ConsoleApp(ProxyLink(engine, [CORP_OPEN, CORP_2], ROUTES))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        commands = {title: callback for title, callback, _ in palette_commands(app.main_screen)}
        commands["Select upstream proxy corp-2"]()
        assert app.main_screen.selected_proxy == "corp-2"
