"""`make screenshots`, upstream proxies (issue 36), from the live demo: claude is reached through
the demo's own upstream proxy `corp` (claudex/demo/world.py), and the demo's keys really take it
down and make it answer 429 (claudex/demo/controls.py) — nothing in these pictures is laid over
the engine's status.

- `proxies`: `7` pressed, corp refusing connections: its breaker open after three refusals,
  `proxy corp open (connection refused)` on claude's panel, corp red in the strip, the trail
  `claude proxy_refused → claude-backup 200` (then `claude no_route → ...` while corp is open),
  claude's own breaker closed, the transition in the events.
- `proxy-429`: corp back up and reset, then `8`: corp answers CONNECT with 429 (Retry-After),
  claude backs off there as corp's [retry] says, the escalation sentence naming the proxy, corp
  yellow while it cools down, claude-backup serving.
"""

from __future__ import annotations

from typing import Final

from claudex.console.app import ConsoleApp
from claudex.console.hosting import host_demo
from claudex.console.link import LocalLink
from claudex.console.screenshots.shooter import Shooter
from claudex.demo.traffic import RequestKind
from claudex.demo.world import DEMO_PROXY

MIX: Final[tuple[RequestKind, ...]] = ("messages", "messages_stream", "chat", "messages",
                                       "responses", "messages")
# Through a dead corp: three refusals open its breaker (the demo's failure_threshold), then
# claude is skipped (no route) and claude-backup serves.
WHILE_DOWN: Final[tuple[RequestKind, ...]] = ("messages", "messages_stream", "messages",
                                              "chat", "messages")
WHILE_429: Final[tuple[RequestKind, ...]] = ("messages", "chat", "messages_stream")
PROXY_429_RETRY_AFTER: Final = "1"  # the shot's own wait, shorter than the demo's 2 s


async def take_proxy_screenshots(size: tuple[int, int]) -> dict[str, str]:
    """The "proxies" and "proxy-429" shots' names and SVGs."""
    hosted = await host_demo(None, health=False)
    try:
        traffic, world = hosted.traffic, hosted.world
        assert traffic is not None and world is not None and world.proxy is not None
        await hosted.engine.check_health_now()  # through corp for claude, while it is up
        app = ConsoleApp(LocalLink(hosted.engine), demo=hosted.controls)
        async with app.run_test(size=size) as pilot:
            shot = Shooter(app, pilot)
            await shot.settle()
            for kind in MIX:
                await traffic.send_one(kind)
            await pilot.press("7")  # the demo's key: corp down, connections refused
            for kind in WHILE_DOWN:
                await traffic.send_one(kind)
            await shot.shoot("proxies")

            await pilot.press("7")  # corp back up; reset, as `r` on its row would
            hosted.engine.reset(DEMO_PROXY)
            world.proxy.retry_after = PROXY_429_RETRY_AFTER
            await pilot.press("8")  # 429 to every CONNECT
            for kind in WHILE_429:
                await traffic.send_one(kind)
            await shot.shoot("proxy-429")
            return shot.pictures
    finally:
        await hosted.close()
