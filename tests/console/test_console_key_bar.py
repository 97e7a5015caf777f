"""The main screen's key bar: at 100 columns the keys an operator needs in an incident (trip,
reset, on/off, sort, filter, help, quit) are in view, the least important are left out (never
cut at the edge), everything shows at 140, a resize decides again, and the demo's fault keys
stay in view at 100 columns."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from textual.widgets._footer import FooterKey

from claudex.console.app import ConsoleApp
from claudex.console.components.key_bar import DROP_ORDER, KeyBar
from claudex.console.hosting import Hosted, host_demo
from claudex.console.link import LocalLink
from claudex.engine.engine import Engine
from tests.conftest import TEST_ENV, build_config
from tests.table_world import many_profiles_toml

INCIDENT_KEYS = {"t", "r", "x", "s", "slash", "question_mark", "q"}


async def settle(app: ConsoleApp, pilot: Any) -> None:
    await pilot.pause()
    await app.main_screen.refresh_now()
    await pilot.pause()
    await pilot.pause()


def shown(app: ConsoleApp) -> list[str]:
    bar = app.main_screen.query_one(KeyBar)
    return [key.key for key in bar.query(FooterKey) if key.display]


def fits(app: ConsoleApp) -> bool:
    """Every key shown ends inside the screen (none cut at the right edge)."""
    width = app.size.width
    keys = [key for key in app.main_screen.query_one(KeyBar).query(FooterKey) if key.display]
    return all(key.region.right <= width for key in keys) and all(
        key.region.width > 0 for key in keys)


@pytest.fixture
async def sixty() -> AsyncIterator[Engine]:
    made = Engine(build_config(many_profiles_toml(60)), env=TEST_ENV)
    yield made
    await made.close()


async def test_at_100_columns_the_incident_keys_show_and_the_lesser_are_left_out(
    sixty: Engine
) -> None:
    app = ConsoleApp(LocalLink(sixty))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        assert app.main_screen.view == "table"
        bar = app.main_screen.query_one(KeyBar)
        assert INCIDENT_KEYS <= set(shown(app))
        assert bar.left_out and set(bar.left_out) <= set(DROP_ORDER)
        assert bar.left_out == list(DROP_ORDER[:len(bar.left_out)])  # the least important
        assert fits(app)
        # Into the request log: its `enter` joins the bar, which decides again.
        await pilot.press("tab")
        await settle(app, pilot)
        assert "enter" in shown(app) and INCIDENT_KEYS <= set(shown(app)) and fits(app)


async def test_at_140_columns_every_key_shows_and_a_resize_decides_again(
    sixty: Engine
) -> None:
    app = ConsoleApp(LocalLink(sixty))
    async with app.run_test(size=(140, 44)) as pilot:
        await settle(app, pilot)
        bar = app.main_screen.query_one(KeyBar)
        assert bar.left_out == [] and {"h", "e", "a", "d"} | INCIDENT_KEYS <= set(shown(app))
        assert fits(app)
        await pilot.resize_terminal(100, 30)
        await settle(app, pilot)
        assert "a" not in shown(app) and INCIDENT_KEYS <= set(shown(app)) and fits(app)
        await pilot.resize_terminal(140, 44)
        await settle(app, pilot)
        assert bar.left_out == [] and "a" in shown(app)


@pytest.fixture
async def demo() -> AsyncIterator[Hosted]:
    hosted = await host_demo(None, health=False)
    yield hosted
    await hosted.close()


async def test_the_demo_keeps_its_fault_keys_in_view_at_100_columns(demo: Hosted) -> None:
    assert demo.controls is not None
    app = ConsoleApp(LocalLink(demo.engine), demo=demo.controls)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        keys = set(shown(app))
        assert {"1", "2", "3", "4", "5", "0"} <= keys
        assert {"t", "r", "x", "question_mark", "q"} <= keys and fits(app)
