"""The proxy on its own thread: `EngineThread` and `ThreadedLink`, as `claudex console` and
`claudex demo` run them.

The engine, uvicorn and the demo world live on the engine thread's loop; the test plays the
console's side from its own loop, the way the console does: through the link and the demo
controls only. Nothing here sleeps to hope: every wait is for a condition, with a deadline.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from claudex.config.loader import parse_config
from claudex.console.app import ConsoleApp
from claudex.console.components import RequestLog
from claudex.console.engine_thread import EngineThread, EngineThreadError
from claudex.console.hosting import Hosted, HostError, host_config, host_demo
from claudex.console.launch import run_hosted
from claudex.console.screens import ConfirmScreen
from claudex.console.threaded_link import ThreadedLink
from claudex.engine.events import Event
from tests.conftest import TEST_ENV, anthropic_body, eventually

SIZE = (140, 44)


class Thing:
    """What a factory builds: remembers where it was built and whether it was closed."""

    def __init__(self) -> None:
        self.thread = threading.current_thread()
        self.loop = asyncio.get_running_loop()
        self.closed_on: threading.Thread | None = None

    async def close(self) -> None:
        self.closed_on = threading.current_thread()


async def make_thing() -> Thing:
    return Thing()


@pytest.fixture
def demo_thread() -> Iterator[tuple[EngineThread[Hosted], Hosted]]:
    thread: EngineThread[Hosted] = EngineThread(lambda: host_demo(None, health=False))
    hosted = thread.start()
    assert hosted.controls is not None
    hosted.controls.run_on_world = thread.call_and_wait
    try:
        yield thread, hosted
    finally:
        thread.stop()


def breaker_state(hosted: Hosted, name: str) -> str:
    # A read of one attribute chain: fine from the test's thread.
    return hosted.engine.runtimes[name].breaker.state.value


def refuses(url: str) -> bool:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.socket() as sock:
        return sock.connect_ex((host, int(port))) != 0


# -- EngineThread -----------------------------------------------------------------------------


def test_the_factory_runs_on_a_uvloop_of_its_own_thread_and_stop_closes_it() -> None:
    thread = EngineThread(make_thing)
    thing = thread.start()
    assert thread.running
    assert thing.thread is not threading.current_thread()
    assert type(thing.loop).__module__.startswith("uvloop")
    assert thread.call_and_wait(asyncio.get_running_loop) is thing.loop
    thread.stop()
    assert thing.closed_on is thing.thread
    assert not thread.running
    with pytest.raises(EngineThreadError):
        thread.call(lambda: None)
    thread.stop()  # twice is fine


def test_a_startup_error_is_raised_in_the_caller_and_the_thread_ends() -> None:
    async def refuse() -> Thing:
        raise HostError("Cannot listen on 127.0.0.1:1: taken.")

    thread = EngineThread(refuse)
    with pytest.raises(HostError, match="Cannot listen"):
        thread.start()
    assert not thread.running


def test_a_start_that_times_out_closes_what_is_built_later() -> None:
    built: list[Thing] = []

    async def slow() -> Thing:
        await asyncio.sleep(0.2)
        built.append(Thing())
        return built[-1]

    thread = EngineThread(slow)
    with pytest.raises(EngineThreadError, match="did not start within"):
        thread.start(timeout=0.01)
    assert not thread.running
    assert built and built[0].closed_on is built[0].thread


def test_a_taken_port_stops_claudex_console_with_one_sentence() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = parse_config(
            f'[proxy]\nport = {port}\n[health]\nenabled = false\n[[profiles]]\nname = "a"\n'
            'provider_type = "DirectAnthropic"\nbase_url = "http://127.0.0.1:9"\n'
            'api_key_env = "FAKE_KEY"\n', "t.toml", env=TEST_ENV)
        with pytest.raises(HostError, match=f"Cannot listen on 127.0.0.1:{port}") as caught:
            run_hosted(lambda: host_config(config, env=TEST_ENV))
    assert "\n" not in str(caught.value)
    assert not any(t.name == "claudex-engine" and t.is_alive() for t in threading.enumerate())


# -- ThreadedLink -----------------------------------------------------------------------------


async def test_trip_and_reset_reach_the_engine_on_its_thread(
    demo_thread: tuple[EngineThread[Hosted], Hosted],
) -> None:
    thread, hosted = demo_thread
    link = ThreadedLink(hosted.engine, thread)
    assert await link.trip("claude")
    assert breaker_state(hosted, "claude") == "forced_open"
    profiles = {p["name"]: p for p in (await link.fresh_snapshot())["profiles"]}
    assert profiles["claude"]["breaker"]["state"] == "forced_open"
    assert link.snapshot()["profiles"] == list(profiles.values())
    assert await link.reset("claude")
    assert breaker_state(hosted, "claude") == "closed"
    assert not await link.trip("nobody")


async def test_snapshots_are_taken_on_the_engine_thread(
    demo_thread: tuple[EngineThread[Hosted], Hosted], monkeypatch: pytest.MonkeyPatch,
) -> None:
    thread, hosted = demo_thread
    takers: list[threading.Thread] = []
    original = hosted.engine.snapshot

    def recording_snapshot() -> dict[str, Any]:
        takers.append(threading.current_thread())
        return original()

    monkeypatch.setattr(hosted.engine, "snapshot", recording_snapshot)
    link = ThreadedLink(hosted.engine, thread)
    await link.fresh_snapshot()
    engine_thread = thread.call_and_wait(threading.current_thread)
    assert engine_thread is not threading.current_thread()
    # The first one is taken when the link is made, so snapshot() always has one.
    assert takers == [engine_thread, engine_thread]


async def test_events_cross_to_the_console_loop_and_the_subscription_ends(
    demo_thread: tuple[EngineThread[Hosted], Hosted],
) -> None:
    thread, hosted = demo_thread
    link = ThreadedLink(hosted.engine, thread, forward_interval_s=0.02)
    received: list[Event] = []
    with link.subscribe() as queue:
        assert hosted.engine.events.has_subscribers
        await link.trip("grok")
        async with httpx.AsyncClient(base_url=hosted.server.url) as client:
            for _ in range(5):
                assert (await client.post("/v1/messages", json=anthropic_body())).status_code == 200

        async def until_five_requests() -> None:
            while sum(e.kind == "request" for e in received) < 5:
                received.append(await queue.get())

        await asyncio.wait_for(until_five_requests(), 5)
    assert any(e.kind == "breaker" and "grok" in e.message for e in received)
    await eventually(lambda: not hosted.engine.events.has_subscribers)
    assert [e.kind for e in link.recent_events()][-1] == "breaker"


async def test_demo_faults_and_traffic_are_set_on_the_world_thread(
    demo_thread: tuple[EngineThread[Hosted], Hosted],
) -> None:
    _, hosted = demo_thread
    controls, traffic = hosted.controls, hosted.traffic
    assert controls is not None and traffic is not None
    assert controls.inject("claude", "down") == "fake claude is down: connections are refused"
    assert controls.fault_of("claude") == "down"  # at once: the call waited for the world
    assert refuses(controls.fakes["claude"].base_url)
    assert controls.inject("claude", "nonsense").startswith("Could not set that fault")
    assert controls.inject("claude", "ok") == "fake claude answers normally again"
    assert controls.toggle_traffic() and traffic.running
    assert not controls.toggle_traffic() and not traffic.running
    # The demo's upstream proxy too (on the engine's uvloop thread, with claude behind it).
    proxy = controls.proxies["corp"]
    assert controls.toggle_proxy("down") == "upstream proxy corp is down: connections refused"
    assert proxy.mode == "down" and refuses(proxy.url)
    async with httpx.AsyncClient(base_url=hosted.server.url) as client:
        response = await client.post("/v1/messages", json=anthropic_body())
    assert response.headers["x-claudex-attempts"] == "claude:proxy_refused,claude-backup:200"
    assert controls.toggle_proxy("down") == "upstream proxy corp tunnels again"
    assert controls.toggle_proxy("429").startswith("upstream proxy corp answers 429")
    assert controls.proxy_mode() == "rate_limited"
    assert controls.toggle_proxy("429") == "upstream proxy corp tunnels again"


async def test_stop_lets_a_request_in_flight_finish_then_closes_the_port(
    demo_thread: tuple[EngineThread[Hosted], Hosted],
) -> None:
    thread, hosted = demo_thread
    assert hosted.controls is not None
    claude = hosted.controls.fakes["claude"]
    thread.call_and_wait(lambda: claude.set_fault("slow", latency_ms=600))  # caught in flight
    async with httpx.AsyncClient(base_url=hosted.server.url, timeout=10) as client:
        pending = asyncio.create_task(client.post("/v1/messages", json=anthropic_body()))
        await eventually(lambda: hosted.engine.totals.in_flight == 1)
        await asyncio.to_thread(thread.stop)
        response = await pending
    assert response.status_code == 200
    assert response.headers["x-claudex-provider"] == "claude"
    assert not thread.running
    assert refuses(hosted.server.url)


# -- the console over the threaded link --------------------------------------------------------


async def test_the_console_drives_an_engine_on_another_thread(
    demo_thread: tuple[EngineThread[Hosted], Hosted],
) -> None:
    thread, hosted = demo_thread
    link = ThreadedLink(hosted.engine, thread, forward_interval_s=0.02)
    app = ConsoleApp(link, demo=hosted.controls)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.main_screen
        await screen.refresh_now()
        assert screen.selected == "claude"
        await pilot.press("t")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press(*"5m", "enter")  # for five minutes
        await eventually(lambda: breaker_state(hosted, "claude") == "forced_open")
        await pilot.press("2")  # the selected fake answers 500s, set on the world's thread
        assert hosted.controls is not None and hosted.controls.fault_of("claude") == "500"
        async with httpx.AsyncClient(base_url=hosted.server.url) as client:
            resp = await client.post("/v1/messages", json=anthropic_body())
        assert resp.headers["x-claudex-provider"] == "claude-backup"
        log = screen.query_one(RequestLog)
        await eventually(lambda: len(log.rows_kept) == 1)
        await screen.refresh_now()
        row = log.visible_rows()[-1]
        assert row.provider == "claude-backup"
        assert row.trail == "claude forced_open → claude-backup 200"
        profiles = {p["name"]: p for p in screen.snapshot_data["profiles"]}
        assert profiles["claude"]["breaker"]["state"] == "forced_open"
        await pilot.press("g")
        assert hosted.traffic is not None and hosted.traffic.running
        await pilot.press("g")
        assert not hosted.traffic.running
        await eventually(lambda: hosted.engine.totals.in_flight == 0)
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running
    thread.stop()
    assert refuses(hosted.server.url)
