"""`make screenshots`, upstream proxies (issue 36): the demo console with two proxies, `corp`
refusing connections (its breaker open, the trouble named on claude's panel) and `corp-2` (SOCKS)
carrying claude-backup's requests.

The proxies' part of the status is overlaid on the demo engine's real one (`ProxyOverlayLink`)
until the demo has a proxy of its own to take down (the fault proxy of claudex/demo): the shape
is the engine's status contract (`upstream_proxies`, each profile's `route`), so the picture shows
what the panels and the strip make of it. The console's snapshot test of the same scene
(tests/console/test_console_proxies_snapshot.py) uses the same overlay.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from claudex.console.app import ConsoleApp
from claudex.console.hosting import host_demo
from claudex.console.link import LocalLink
from claudex.console.screenshots.shooter import Shooter
from claudex.demo.traffic import RequestKind
from claudex.engine.engine import Engine
from claudex.engine.events import Event

PROXIES: Final[tuple[Mapping[str, Any], ...]] = (
    {"name": "corp", "url": "http://alice:****@proxy.corp:3128",
     "breaker": {"state": "open", "consecutive_failures": 3, "retry_in_s": 11.0},
     "health": "red", "requests": 214, "failures": 3,
     "last_error": "connection refused", "profiles": ["claude", "grok"]},
    {"name": "corp-2", "url": "socks5h://proxy2.corp:1080",
     "breaker": {"state": "closed", "consecutive_failures": 0, "retry_in_s": None},
     "health": "green", "requests": 58, "failures": 0, "last_error": None,
     "profiles": ["claude-backup"]},
)
MIX: Final[tuple[RequestKind, ...]] = ("messages", "messages_stream", "chat", "messages",
                                       "responses", "messages")
CORP_TROUBLE: Final = "proxy corp open (connection refused)"
ROUTES: Final[Mapping[str, Mapping[str, Any]]] = {
    "claude": {"label": "via corp", "proxies": ["corp"], "trouble": CORP_TROUBLE},
    "grok": {"label": "via corp", "proxies": ["corp"], "trouble": CORP_TROUBLE},
    "claude-backup": {"label": "via corp-2", "proxies": ["corp-2"], "trouble": None},
    "codex": {"label": "direct", "proxies": [], "trouble": None},
}


class ProxyOverlayLink(LocalLink):
    """The engine's status with `route` on each named profile and `upstream_proxies` laid over
    it; trips and resets of a proxy's name are recorded, not sent (the engine under the overlay
    has no such proxy)."""

    def __init__(self, engine: Engine,
                 proxies: tuple[Mapping[str, Any], ...] | list[Mapping[str, Any]] = PROXIES,
                 routes: Mapping[str, Mapping[str, Any]] = ROUTES) -> None:
        super().__init__(engine)
        self.proxies = list(proxies)
        self.routes = routes
        self.asked: list[tuple[str, str]] = []

    def snapshot(self) -> dict[str, Any]:
        snapshot = super().snapshot()
        for profile in snapshot.get("profiles") or []:
            if profile["name"] in self.routes:
                profile["route"] = copy.deepcopy(dict(self.routes[profile["name"]]))
        if self.proxies:
            snapshot["upstream_proxies"] = [copy.deepcopy(dict(p)) for p in self.proxies]
        return snapshot

    def _is_proxy(self, name: str) -> bool:
        return any(p.get("name") == name for p in self.proxies)

    async def trip(self, name: str, seconds: float | None = None,
                   reason: str | None = None) -> bool:
        if self._is_proxy(name):
            self.asked.append(("trip", name))
            return True
        return await super().trip(name, seconds, reason)

    async def reset(self, name: str) -> bool:
        if self._is_proxy(name):
            self.asked.append(("reset", name))
            return True
        return await super().reset(name)


async def take_proxy_screenshots(size: tuple[int, int]) -> dict[str, str]:
    """The "proxies" shot's name and SVG."""
    hosted = await host_demo(None, health=False)
    try:
        traffic = hosted.traffic
        assert traffic is not None
        await hosted.engine.check_health_now()
        app = ConsoleApp(ProxyOverlayLink(hosted.engine), demo=hosted.controls)
        async with app.run_test(size=size) as pilot:
            shot = Shooter(app, pilot)
            await shot.settle()
            for kind in MIX:
                await traffic.send_one(kind)
            # The transition the engine announces when corp's breaker opens.
            # (kind "proxy": the engine's word for a proxy's events, issue 36)
            hosted.engine.events.publish(Event(
                "proxy", CORP_TROUBLE.replace(" open ", " opened "), "corp",
                {"proxy": "corp", "old": "closed", "new": "open"}))
            await shot.shoot("proxies")
            return shot.pictures
    finally:
        await hosted.close()
