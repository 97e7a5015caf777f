"""How upstream proxies look (issue 36): the main screen with `corp` refusing connections (its
breaker open, the trouble named on the panels routed through it) and `corp-2` serving
claude-backup, at 140x44 and 100x30, and the table view with the same strip. Built like the other
snapshots (tests/console/test_console_snapshots.py: fake clock, fixed times) with the proxies'
status overlaid (claudex/console/screenshots/proxies.py). Update after a deliberate change with
`pytest tests/console/test_console_proxies_snapshot.py --snapshot-update`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from textual.pilot import Pilot

from claudex.console.app import ConsoleApp
from claudex.console.screenshots.proxies import ProxyOverlayLink
from claudex.engine.clock import FakeClock
from claudex.engine.engine import Engine
from tests.conftest import TEST_ENV, build_config
from tests.console.test_console_snapshots import PROFILES, SIZE, SMALL, START, healthy, utc_text


@pytest.mark.parametrize("view", ["grid", "table"])
@pytest.mark.parametrize("size", [SIZE, SMALL], ids=["140x44", "100x30"])
def test_proxies(snap_compare: Any, size: tuple[int, int], view: str) -> None:
    clock = FakeClock(start=1000.0, wall_start=START)
    engine = Engine(build_config(PROFILES), clock=clock, wall=clock.wall, sleep=clock.sleep,
                    env=TEST_ENV)
    clock.advance(3723)
    requests = healthy(engine, clock)
    engine.events.recent.clear()
    app = ConsoleApp(ProxyOverlayLink(engine), time_text=utc_text, wall=clock.wall)

    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.pause()
        for event in requests:
            engine.events.publish(event)
        if view == "table":
            await pilot.press("v")
        await pilot.pause()
        await app.main_screen.refresh_now()
        await pilot.pause()

    try:
        assert snap_compare(app, terminal_size=size, run_before=run_before)
    finally:
        asyncio.run(engine.close())
