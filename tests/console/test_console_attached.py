"""The console attached to a real `claudex serve` process through `HttpLink`.

Trip and reset with their confirm dialogs, the request log filled from the engine's backlog, the
profile editor saving the engine's file and asking it to reload, the engine killed and restarted
while the console stays attached, and the event stream's reconnect (no event lost or shown
twice)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from textual.widgets import Input

from claudex.console.app import ConsoleApp
from claudex.console.components import HeaderBar
from claudex.console.http_link import HttpLink
from claudex.console.link import LinkError
from claudex.console.screens import ConfirmScreen
from claudex.console.screens.trip_dialog import TripScreen
from claudex.demo.world import free_port
from claudex.engine.events import Event
from tests.cli.test_cli import spawn_serve, wait_until_serving
from tests.conftest import GLOBALS, anthropic_body, eventually, primary_backup_config, profile_toml
from tests.serve_world import Serve

SIZE = (140, 44)


@pytest.fixture
async def serve(fakes: Any, tmp_path: Path) -> AsyncIterator[Serve]:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    served = Serve(*primary_backup_config(tmp_path, f))
    await served.start()
    try:
        yield served
    finally:
        await served.kill()


async def settle(app: ConsoleApp, pilot: Any) -> None:
    await pilot.pause()
    await app.main_screen.refresh_now()
    await pilot.pause()


def header_text(app: ConsoleApp) -> str:
    header = app.main_screen.query_one(HeaderBar)
    return " ".join(str(s.render()) for s in header.query("Static"))


async def until(app: ConsoleApp, pilot: Any, predicate: Callable[[], bool]) -> None:
    """Refresh until `predicate()` holds (the engine is another process)."""
    async def step() -> bool:
        await settle(app, pilot)
        return predicate()

    for _ in range(200):
        if await step():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached in time")


async def finish_workers(app: ConsoleApp) -> None:
    """Wait for the workers that end (file reads, saves, reloads), not the event pump."""
    ending = [w for w in app.workers if w.group != "engine-events"]
    if ending:  # (an empty list means every worker to wait_for_complete)
        await app.workers.wait_for_complete(ending)


async def confirm(pilot: Any, app: ConsoleApp) -> None:
    await pilot.pause()
    assert isinstance(app.screen, ConfirmScreen)
    # The trip dialog asks for how long (enter with it blank: until reset); others say y.
    await pilot.press("enter" if isinstance(app.screen, TripScreen) else "y")
    await pilot.pause()


async def send_request(url: str) -> None:
    async with httpx.AsyncClient(timeout=10.0) as client:
        resp = await client.post(url + "/proxy/primary/v1/messages", json=anthropic_body(),
                                 headers={"anthropic-version": "2023-06-01"})
        assert resp.status_code == 200, resp.text


async def test_attached_header_panels_trip_and_reset(serve: Serve) -> None:
    await send_request(serve.url)  # before the console: it comes from the backlog
    link = HttpLink(serve.url)
    assert await link.connect()
    app = ConsoleApp(link)
    async with app.run_test(size=SIZE) as pilot:
        await until(app, pilot, lambda: app.main_screen._requests.row_count >= 1)
        text = header_text(app)
        assert f"attached to {link.target}" in text and "· up" in text
        assert app.main_screen.profile_names == ["primary", "backup"]
        assert app.main_screen.selected == "primary"
        await pilot.press("t")
        await confirm(pilot, app)
        assert await serve.breaker("primary") == "forced_open"
        await until(app, pilot, lambda: "forced_open" in str(
            app.main_screen.snapshot_data["profiles"][0]["breaker"]))
        await pilot.press("r")
        await confirm(pilot, app)
        assert await serve.breaker("primary") == "closed"
        await send_request(serve.url)
        await until(app, pilot, lambda: app.main_screen._requests.row_count >= 2)
        # Quitting an attached console leaves the engine running, without asking.
        await pilot.press("q")
        await pilot.pause()
    assert (await serve.status())["profiles"]
    await link.close()


async def test_read_only_attached_console_changes_nothing(serve: Serve) -> None:
    link = HttpLink(serve.url)
    await link.connect()
    app = ConsoleApp(link, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("t")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
    assert await serve.breaker("primary") == "closed"
    await link.close()


async def test_editor_saves_the_engines_file_and_the_engine_reloads(serve: Serve) -> None:
    status = await serve.status()
    moved_to = status["profiles"][1]["base_url"]  # primary now points at the backup's fake
    link = HttpLink(serve.url)
    await link.connect()
    app = ConsoleApp(link)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("e")
        await pilot.pause()
        await finish_workers(app)
        await pilot.pause()
        editor = app.screen
        assert type(editor).__name__ == "ProfileEditorScreen"
        editor.query_one("#field-base_url", Input).value = moved_to
        await pilot.pause()
        await finish_workers(app)
        await pilot.pause()
        await pilot.press("ctrl+s")
        for _ in range(100):
            await pilot.pause()
            if app.screen is app.main_screen:
                break
        assert app.screen is app.main_screen
        await finish_workers(app)
        assert serve.config.read_text().count(f'base_url = "{moved_to}"') == 2

        async def engine_has_it() -> bool:
            return (await serve.status())["profiles"][0]["base_url"] == moved_to

        for _ in range(200):
            if await engine_has_it():
                break
            await asyncio.sleep(0.02)
        assert await engine_has_it()
    await link.close()


async def test_editor_is_unavailable_for_an_engine_elsewhere(serve: Serve) -> None:
    link = HttpLink(serve.url)
    await link.connect()
    link.target = "10.9.8.7:13456"  # as if the engine ran on another machine
    app = ConsoleApp(link)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("e")
        await pilot.pause()
        assert app.screen is app.main_screen
        assert any("editor is unavailable" in n.message and "not on this machine" in n.message
                   for n in app._notifications)
    await link.close()


async def test_engine_restart_while_attached(serve: Serve) -> None:
    link = HttpLink(serve.url, retry_s=0.05)
    await link.connect()
    app = ConsoleApp(link)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.main_screen.profile_names == ["primary", "backup"]
        await serve.kill()
        await until(app, pilot, lambda: app.main_screen.has_class("-disconnected"))
        assert "NOT ANSWERING" in header_text(app)
        assert app.main_screen.profile_names == ["primary", "backup"]  # the last picture
        with pytest.raises(LinkError):
            await link.trip("primary")
        await pilot.press("t")
        await confirm(pilot, app)  # refused with a notification, not a traceback
        assert app.is_running
        await serve.start()
        await until(app, pilot, lambda: not app.main_screen.has_class("-disconnected"))
        assert "attached to" in header_text(app)
        assert (await serve.post("/_claudex/breakers/backup/trip")).status_code == 200
        await until(app, pilot, lambda: "forced_open" in str(
            app.main_screen.snapshot_data["profiles"][1]["breaker"]))
    await link.close()


class Gate:
    """A `sleep` for the link that waits until the test opens it (reconnects on cue)."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.waiting = 0

    async def __call__(self, seconds: float) -> None:
        self.waiting += 1
        await self.opened.wait()
        self.opened.clear()


async def collect(queue: asyncio.Queue[Event], into: list[Event]) -> None:
    while True:
        into.append(await queue.get())


async def test_event_stream_reconnect_loses_nothing_and_repeats_nothing(serve: Serve) -> None:
    gate = Gate()
    link = HttpLink(serve.url, sleep=gate)
    await link.connect()
    seen: list[Event] = []
    with link.subscribe() as queue:
        reader = asyncio.create_task(collect(queue, seen))
        try:
            assert (await serve.post("/_claudex/breakers/primary/trip")).status_code == 200
            await eventually(lambda: any(e.kind == "breaker" for e in seen), 10)
            await serve.kill()
            await eventually(lambda: gate.waiting == 1, 10)  # lost, waiting to reconnect
            assert any(e.kind == "link" and "stopped answering" in e.message for e in seen)
            await serve.start()
            # Published before the console reconnects: the new engine's backlog has them.
            assert (await serve.post("/_claudex/breakers/backup/trip")).status_code == 200
            assert (await serve.post("/_claudex/breakers/backup/reset")).status_code == 200
            gate.opened.set()
            await eventually(lambda: sum(e.kind == "breaker" and e.profile == "backup"
                                         for e in seen) >= 2, 10)
            await send_request(serve.url)
            await eventually(lambda: any(e.kind == "request" for e in seen), 10)
        finally:
            reader.cancel()
    engine_events = [e for e in seen if e.kind != "link"]
    ids = [e.id for e in engine_events]
    assert ids == sorted(ids) and len(ids) == len(set(ids))  # in order, nothing twice
    backup = [e.data.get("new") for e in engine_events
              if e.kind == "breaker" and e.profile == "backup"]
    assert backup == ["forced_open", "closed"]
    await link.close()


async def test_wrong_token_is_said_not_crashed(fakes: Any, tmp_path: Path) -> None:
    f = await fakes(("primary", "anthropic"))
    port = free_port()
    path = tmp_path / "profiles.toml"
    path.write_text(GLOBALS.replace("[proxy]", f'[proxy]\nport = {port}\n'
                                    'auth_token_env = "ATTACH_TOKEN"')
                    + profile_toml("primary", f["primary"]))
    proc = await spawn_serve(path, stdout=asyncio.subprocess.DEVNULL,
                             env={"ATTACH_TOKEN": "tok-attached-0123"})
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_until_serving(url, proc)
        wrong = HttpLink(url, headers={"authorization": "Bearer nope"})
        assert not await wrong.connect()
        assert "401" in (wrong.state().problem or "")
        await wrong.close()
        right = HttpLink(url, headers={"authorization": "Bearer tok-attached-0123"})
        assert await right.connect()
        assert await right.trip("primary")
        await right.close()
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.communicate()




async def test_console_attaches_only_where_an_engine_answers(serve: Serve) -> None:
    from claudex.console.launch import engine_answers

    assert await asyncio.to_thread(engine_answers, serve.url, {})
    assert not await asyncio.to_thread(engine_answers, f"http://127.0.0.1:{free_port()}", {})


async def test_several_engines_each_with_its_own_screen(fakes: Any, tmp_path: Path,
                                                        serve: Serve) -> None:
    f = await fakes(("solo", "anthropic"))
    port = free_port()
    path = tmp_path / "second.toml"
    path.write_text(GLOBALS.replace("[proxy]", f"[proxy]\nport = {port}")
                    + profile_toml("solo", f["solo"]))
    second = Serve(path, port)
    await second.start()
    first_link, second_link = HttpLink(serve.url), HttpLink(second.url)
    try:
        await first_link.connect()
        await second_link.connect()
        app = ConsoleApp(first_link, more_links=[second_link])
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            one, two = app.contexts
            assert app.screen is one and "engine 1/2" in header_text(app)
            await pilot.press("n")
            await pilot.pause()
            assert app.screen is two
            await two.refresh_now()
            await pilot.pause()
            assert two.profile_names == ["solo"] and "engine 2/2" in header_text_of(two)
            assert f"attached to {second_link.target}" in header_text_of(two)
            await pilot.press("t")
            await confirm(pilot, app)
            assert await second.breaker("solo") == "forced_open"
            assert await serve.breaker("primary") == "closed"  # the other engine: untouched
            await pilot.press("n")
            await pilot.pause()
            assert app.screen is one and one.profile_names == ["primary", "backup"]
    finally:
        await first_link.close()
        await second_link.close()
        await second.kill()


def header_text_of(screen: Any) -> str:
    header = screen.query_one(HeaderBar)
    return " ".join(str(s.render()) for s in header.query("Static"))
