"""`make screenshots`: drive the demo console through real states and save SVG and PNG pictures.

    python -m claudex.console.screenshots [OUT_DIR]     (default: screenshots/; __main__.py)

States: all healthy; the primary down with failover in the request log, and one such request's
detail; its breaker half-open; the subscriptions' quota windows, one spent;
the profile editor (skipped while `claudex/console/editor.py` does not exist); help; a console
attached over HTTP to the demo's engine, and the same once that engine stopped answering; the
provider table with 60 profiles (table.py); upstream proxies, one refusing connections
(proxies.py, the proxies' status overlaid on the demo's). The demo
world, the engine and the proxy are the real ones; traffic is sent request by request and the
engine's clock is moved by hand (no waiting for the 15 s recovery), so every run shows the same
thing. PNGs come from `rsvg-convert` (Debian: librsvg2-bin).
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from claudex.console.app import ConsoleApp
from claudex.console.hosting import Hosted, host_demo
from claudex.console.http_link import HttpLink
from claudex.console.link import LocalLink
from claudex.console.screenshots.proxies import take_proxy_screenshots
from claudex.console.screenshots.shooter import Shooter
from claudex.console.screenshots.table import take_table_screenshots
from claudex.demo.traffic import RequestKind

SIZE: Final = (140, 44)
MIX: Final[tuple[RequestKind, ...]] = (
    "messages", "messages", "messages_stream", "chat", "messages", "messages_stream",
    "messages", "responses", "messages", "messages",
)


class MovableClock:
    """Monotonic time that can be pushed forward, so a breaker's recovery can pass at once."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


async def _traffic(hosted: Hosted, kinds: tuple[RequestKind, ...]) -> None:
    assert hosted.traffic is not None
    for kind in kinds:
        await hosted.traffic.send_one(kind)


async def _scenes(hosted: Hosted, shot: Shooter, clock: MovableClock) -> None:
    assert hosted.controls is not None
    pilot = shot.pilot
    await hosted.engine.check_health_now()
    await _traffic(hosted, MIX)
    await shot.shoot("healthy")

    shot.app.main_screen.note(hosted.controls.inject("claude", "down"))
    await _traffic(hosted, MIX)
    await hosted.engine.check_health_now()
    await shot.shoot("failover")
    # The detail of a request that failed over after a refused connection (a stream, if one
    # did): both attempts timed.
    rows = shot.app.main_screen._requests.visible_rows()
    tried = [i for i, row in enumerate(rows) if "connect_error" in row.trail]
    streamed = [i for i in tried if "stream" in rows[i].request]
    up = len(rows) - 1 - (streamed or tried or [len(rows) - 1])[-1]
    await pilot.press("tab", *(["up"] * up), "enter")
    await shot.shoot("request-detail")
    await pilot.press("escape", "tab")

    shot.app.main_screen.note(hosted.controls.inject("claude", "ok"))
    recovery = hosted.engine.runtimes["claude"].breaker.snapshot().retry_in_s or 0.0
    clock.advance(recovery + 0.5)
    await shot.shoot("half-open")

    if importlib.util.find_spec("claudex.console.editor") is not None:
        await pilot.press("e")
        await shot.settle()
        await pilot.pause(0.2)
        await shot.shoot("editor")
        await pilot.press("escape")
        await pilot.pause()
    else:
        print("skipped editor: claudex/console/editor.py does not exist yet")

    await pilot.press("question_mark")
    await shot.shoot("help")
    await pilot.press("escape")

    # The subscriptions' quota windows: claude's 5-hour window past its warning threshold,
    # codex's spent (its requests fail over until the reset).
    plan = hosted.world.fakes["claude"].plan if hosted.world is not None else None
    if plan is not None:
        plan.windows[0].used = int(plan.windows[0].capacity * 0.9)
    shot.app.main_screen.note(hosted.controls.inject("codex", "spend"))
    await _traffic(hosted, MIX)
    await shot.shoot("windows")

    # Slow is yellow (issue 30): claude's live traffic, fast for a while (the baseline the
    # watch learns), then every answer 1.2 s slower (the demo's key `4`).
    await _slow_scene(hosted, shot, "claude")


async def _slow_scene(hosted: Hosted, shot: Shooter, name: str) -> None:
    assert hosted.controls is not None and hosted.traffic is not None
    traffic = hosted.traffic  # its plain messages go to the demo's default profile, claude
    await asyncio.gather(*(traffic.send_one("messages") for _ in range(25)))
    hosted.engine.slow.judge_all()
    shot.app.main_screen.note(hosted.controls.inject(name, "slow"))
    await asyncio.gather(*(traffic.send_one("messages") for _ in range(25)))
    hosted.engine.slow.judge_all()
    shot.app.main_screen.note(hosted.controls.inject(name, "ok"))
    await shot.shoot("slow")


async def take_screenshots() -> dict[str, str]:
    """Each state's name and its SVG."""
    clock = MovableClock()
    hosted = await host_demo(None, health=False, clock=clock)
    try:
        app = ConsoleApp(LocalLink(hosted.engine), demo=hosted.controls)
        async with app.run_test(size=SIZE) as pilot:
            shot = Shooter(app, pilot)
            await _scenes(hosted, shot, clock)
            return shot.pictures
    finally:
        await hosted.close()


async def take_attached_screenshots() -> dict[str, str]:
    """The console attached to a served engine (`HttpLink`), then that engine gone."""
    hosted = await host_demo(None, health=False)
    link = HttpLink(hosted.server.url)
    try:
        await hosted.engine.check_health_now()
        await _traffic(hosted, MIX)
        await link.connect()
        app = ConsoleApp(link)
        async with app.run_test(size=SIZE) as pilot:
            shot = Shooter(app, pilot)
            for _ in range(50):  # the backlog arrives over the event stream
                if app.main_screen._requests.row_count >= len(MIX):
                    break
                await shot.settle()
            await shot.shoot("attached")
            await hosted.server.stop()
            for _ in range(50):
                if app.main_screen.has_class("-disconnected"):
                    break
                await shot.settle()
            await shot.shoot("attached-lost")
            return shot.pictures
    finally:
        await link.close()
        await hosted.close()


def to_png(svgs: list[Path], run: Callable[..., object] = subprocess.run) -> list[Path]:
    converter = shutil.which("rsvg-convert")
    if converter is None:
        print("rsvg-convert is missing, so no PNGs: apt-get install -y librsvg2-bin",
              file=sys.stderr)
        return []
    pngs = []
    for svg in svgs:
        png = svg.with_suffix(".png")
        run([converter, str(svg), "-o", str(png)], check=True)
        pngs.append(png)
        print(f"saved {png}")
    return pngs


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else Path("screenshots")
    # Breaker transitions log warnings; they belong in no terminal here.
    quiet = logging.getLogger("claudex")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    pictures = asyncio.run(take_screenshots())
    pictures.update(asyncio.run(take_attached_screenshots()))
    pictures.update(asyncio.run(take_table_screenshots(SIZE)))
    pictures.update(asyncio.run(take_proxy_screenshots(SIZE)))
    out.mkdir(parents=True, exist_ok=True)
    svgs = []
    for name, svg in pictures.items():
        path = out / f"{name}.svg"
        path.write_text(svg, encoding="utf-8")
        svgs.append(path)
        print(f"saved {path}")
    to_png(svgs)
    return 0
