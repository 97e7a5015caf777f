"""A fabricated upstream-proxy status for the console's tests (issue 36): `ProxyOverlayLink`
lays `upstream_proxies` and each profile's `route` (the engine's status contract) over a real
engine's status, so the panels and the strip can be tested and snapshotted in states a test
engine without proxies cannot reach, at fixed times. The live picture comes from the demo's own
proxy (claudex/console/screenshots/proxies.py); these tests keep to what the console makes of the
shape.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from claudex.console.link import LocalLink
from claudex.engine.engine import Engine

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
