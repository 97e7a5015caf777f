"""How the console looks: the main screen in each colour state, help, and the panel grid and the
provider table with 3 and 60 profiles at 140x44 and 100x30 (pytest-textual-snapshot).

Everything on screen is fixed: the engine runs on a FakeClock (uptime, countdowns, error ages),
times are shown in UTC from fixed event times, probe results and statistics are set by hand, and
request rows come from events published with fixed times. Update after a deliberate change with
`pytest tests/console/test_console_snapshots.py --snapshot-update` and look at the report.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from textual.pilot import Pilot

from claudex.console.app import ConsoleApp
from claudex.console.link import LocalLink
from claudex.engine.clock import FakeClock
from claudex.engine.engine import Engine
from claudex.engine.events import Event
from tests.conftest import TEST_ENV, build_config
from tests.table_world import StatsLink, many_profiles_toml, set_scene, stats_for

SIZE = (140, 44)
SMALL = (100, 30)
START = 1_750_000_000.0  # wall time the fake clock starts at

PROFILES = """
[[profiles]]
name = "claude"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "FAKE_KEY"
default_model = "claude-sonnet-4-5"
backup_providers = ["claude-backup", "grok"]

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
default_model = "grok-3-beta"
"""

Scene = Callable[[Engine, FakeClock], list[Event]]


def utc_text(epoch: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(epoch))


def request(at: float, provider: str, trail: str, status: int = 200, ms: float = 420.0,
            *, protocol: str = "anthropic", model: str = "claude-sonnet-4-5",
            stream: bool = False) -> Event:
    attempts = [{"provider": part.split(" ")[0]} for part in trail.split(" -> ")]
    return Event("request", trail, provider, {
        "protocol": protocol, "model": model, "provider": provider, "status": status,
        "stream": stream, "latency_ms": ms, "attempts": attempts, "trail": trail,
    }, time=at)


def probe(engine: Engine, clock: FakeClock, name: str, latency_ms: float) -> None:
    health = engine.runtimes[name].health
    health.last_checked = clock.wall()
    health.last_ok = True
    health.latency_ms = latency_ms


def traffic(engine: Engine, name: str, requests: int, successes: int, failures: int = 0) -> None:
    stats = engine.runtimes[name].stats
    stats.requests, stats.successes, stats.failures = requests, successes, failures


def healthy(engine: Engine, clock: FakeClock, *, ago: float = 20.0) -> list[Event]:
    for name, ms in (("claude", 182.0), ("claude-backup", 240.0), ("grok", 131.0)):
        probe(engine, clock, name, ms)
    traffic(engine, "claude", 214, 214)
    traffic(engine, "grok", 37, 37)
    t = clock.wall() - ago
    rows = [request(t + i * 2, "claude", "claude 200", ms=380.0 + (i * 137) % 400,
                    stream=i % 3 == 1) for i in range(8)]
    rows.append(request(t + 17, "grok", "grok 200", ms=610.0, protocol="openai",
                        model="grok-3-beta"))
    return rows


def degraded(engine: Engine, clock: FakeClock) -> list[Event]:
    events = healthy(engine, clock)
    probe(engine, clock, "grok", 3450.0)  # slower than degraded_latency_ms (3000)
    backup = engine.runtimes["claude-backup"]
    backup.breaker.record_failure(None)
    backup.stats.last_error = "server_error: upstream returned 503"
    backup.stats.last_error_at = clock.wall() - 42
    traffic(engine, "claude-backup", 12, 11, 1)
    return events


def broken(engine: Engine, clock: FakeClock) -> list[Event]:
    events = healthy(engine, clock, ago=40.0)
    claude = engine.runtimes["claude"]
    clock.advance(-12)  # it opened 12 s ago: 18 s left of the 30 s recovery
    for _ in range(3):
        claude.breaker.record_failure(None)
    clock.advance(12)
    claude.health.probe_failures = 2
    claude.health.last_ok = False
    claude.health.latency_ms = None
    claude.health.error = "connection refused"
    claude.stats.last_error = "connect_error: connection refused (key sk-ant-api03-abcdefgh1234)"
    claude.stats.last_error_at = clock.wall() - 12
    traffic(engine, "claude", 217, 214, 3)
    traffic(engine, "claude-backup", 9, 9)
    t = clock.wall() - 13
    return [
        *events,
        request(t, "claude-backup", "claude connect_error -> claude-backup 200", ms=520.0),
        request(t + 1, "claude-backup", "claude connect_error -> claude-backup 200", ms=498.0,
                stream=True),
        request(t + 4, "claude-backup", "claude breaker_open -> claude-backup 200", ms=455.0),
        request(t + 9, "claude-backup", "claude breaker_open -> claude-backup 200", ms=470.0),
    ]


def slow(engine: Engine, clock: FakeClock) -> list[Event]:
    """grok's live traffic turned slow (issue 30): its streams' first content took 0.9 s for
    a while, then 8.1 s; the engine's own watch judges both readings."""
    events = healthy(engine, clock)
    stats = engine.runtimes["grok"].stats
    now = clock.wall()
    for i in range(40):
        stats.observe_first_content(now - 400 + i, 900.0)
    engine.slow.judge_all(now - 300)  # the baseline: 0.9 s
    for i in range(40):
        stats.observe_first_content(now - 60 + i, 8100.0)
    engine.slow.judge_all(now)
    assert engine.slow.names == {"grok"}
    return events


def make_app(scene: Scene, *, read_only: bool = False, profiles: str = PROFILES,
             stats: bool = False
             ) -> tuple[ConsoleApp, Engine, Callable[[Pilot[None]], Awaitable[None]]]:
    clock = FakeClock(start=1000.0, wall_start=START)
    engine = Engine(build_config(profiles), clock=clock, wall=clock.wall, sleep=clock.sleep,
                    env=TEST_ENV)
    clock.advance(3723)  # uptime 1h02m
    for second in range(1, 10):
        for _ in range(3):
            engine.totals.meter.hit(clock() - second)
    engine.totals.requests = 263
    requests = scene(engine, clock)
    engine.totals.failovers = sum(1 for e in requests if len(e.data["attempts"]) > 1)
    # Transitions made while setting the scene carry real times; show fixed ones instead.
    engine.events.recent.clear()
    if "claude" in engine.runtimes and engine.runtimes["claude"].breaker.state.value == "open":
        engine.events.publish(Event("breaker", "claude: breaker closed -> open "
                                    "(3 consecutive failures)", "claude",
                                    {"old": "closed", "new": "open"}, time=clock.wall() - 12))
    # The table's statistics (per minute, latency percentiles), the same on every run.
    link = (StatsLink(engine, {name: stats_for(i) for i, name in enumerate(engine.runtimes)})
            if stats else LocalLink(engine))
    app = ConsoleApp(link, read_only=read_only, time_text=utc_text, wall=clock.wall)

    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.pause()
        for event in requests:
            engine.events.publish(event)
        await pilot.pause()
        await app.main_screen.refresh_now()
        await pilot.pause()

    return app, engine, run_before


@pytest.fixture
def engines() -> Iterator[list[Engine]]:
    made: list[Engine] = []
    yield made
    for engine in made:
        asyncio.run(engine.close())


@pytest.mark.parametrize("scene", [healthy, degraded, broken, slow],
                         ids=["green", "yellow", "red", "slow"])
def test_main_screen(snap_compare: Any, engines: list[Engine], scene: Scene) -> None:
    app, engine, run_before = make_app(scene)
    engines.append(engine)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_main_screen_read_only(snap_compare: Any, engines: list[Engine]) -> None:
    app, engine, run_before = make_app(healthy, read_only=True)
    engines.append(engine)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_help(snap_compare: Any, engines: list[Engine]) -> None:
    app, engine, run_before = make_app(healthy)
    engines.append(engine)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before,
                        press=["question_mark"])


def many(engine: Engine, clock: FakeClock) -> list[Event]:
    set_scene(engine, clock)
    t = clock.wall() - 30
    return [request(t + i * 3, f"p{i % 7 + 1:02d}", f"p{i % 7 + 1:02d} 200", ms=300.0 + i * 41)
            for i in range(6)]


@pytest.mark.parametrize("size", [SIZE, SMALL], ids=["140x44", "100x30"])
@pytest.mark.parametrize("count", [3, 60])
@pytest.mark.parametrize("view", ["grid", "table"])
def test_grid_and_table(snap_compare: Any, engines: list[Engine], view: str, count: int,
                        size: tuple[int, int]) -> None:
    scene = healthy if count == 3 else many
    app, engine, run_before = make_app(scene, profiles=PROFILES if count == 3
                                       else many_profiles_toml(count), stats=True)
    engines.append(engine)

    async def in_view(pilot: Pilot[None]) -> None:
        # Chosen before the first rows arrive (as `v` would), so the request log settles in
        # the box of this view (it follows its newest row after each layout).
        await pilot.pause()
        app.main_screen.set_view(view, chosen=True)
        await run_before(pilot)

    assert snap_compare(app, terminal_size=size, run_before=in_view)
