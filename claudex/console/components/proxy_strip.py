"""The upstream proxies' strip (issue 36): one row per `[[upstream_proxies]]` entry (or proxy
taken from the environment) under the providers, in the grid and the table alike — its colour,
name, where it is, its breaker, requests and failures, the profiles routed through it and its
last error. Hidden while the status has no proxies, so a config without any looks as before.

A row is clicked (or reached with the arrows past the last profile) to select it; `t`/`r` then
trip and reset the proxy by name, as they do a provider (screens/actions.py).

The route words a provider panel shows come from here too (`route_label`, `route_trouble`), so
the panels and the strip name a proxy the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.markup import escape

from claudex.console.colors import variable
from claudex.console.components.text_line import TextLine
from claudex.console.format import breaker_words, safe
from claudex.console.messages import ProxySelected
from claudex.text.status import mask_url_password

COLOURS = frozenset({"green", "yellow", "red"})


def route_of(profile: Mapping[str, Any]) -> Mapping[str, Any]:
    """A profile's route in status; {} (direct) when the engine reports none."""
    route = profile.get("route")
    return route if isinstance(route, Mapping) else {}


def route_label(profile: Mapping[str, Any]) -> str:
    """`via corp` for a profile reached through proxies; "" for a direct one (panels of a
    config without proxies look exactly as they did)."""
    label = str(route_of(profile).get("label") or "")
    return "" if label in ("", "direct") else safe(label, 40)


def route_trouble(profile: Mapping[str, Any]) -> str:
    """`proxy corp open (connection refused)` while the route is out or degraded, else ""."""
    return safe(str(route_of(profile).get("trouble") or ""), 120)


def proxy_colour(proxy: Mapping[str, Any]) -> str:
    """The proxy's health colour (a string in status; a profile-like dict tolerated)."""
    health = proxy.get("health")
    if isinstance(health, Mapping):
        health = health.get("color")
    return str(health) if health in COLOURS else "green"


def proxy_words(proxy: Mapping[str, Any]) -> str:
    """Plain words for one proxy: `http://proxy.corp:3128 · open · half-open in 11s · 120 req ·
    3 failed · last: connection refused · for claude, grok` (the URL as status masks it)."""
    breaker = proxy.get("breaker") if isinstance(proxy.get("breaker"), Mapping) else {}
    parts = [safe(mask_url_password(str(proxy.get("url") or "")), 60),
             breaker_words(breaker or {})]
    if proxy.get("enabled") is False:
        parts.insert(1, "disabled")
    # The engine's words for its colour when they say more than the breaker: "proxy auth
    # failed", a 429's cooldown, an untrusted certificate.
    reason = safe(str(proxy.get("health_reason") or ""), 80)
    if reason and reason != "ok" and reason not in parts[1]:
        parts.insert(2, reason)
    parts.append(f"{int(proxy.get('requests') or 0)} req")
    failures = int(proxy.get("failures") or 0)
    if failures:
        parts.append(f"{failures} failed")
    error = proxy.get("last_error")  # before the profiles: a narrow screen cuts the tail
    if error:
        parts.append(f"last: {safe(str(error), 120)}")
    profiles = [str(p) for p in proxy.get("profiles") or []]
    if profiles:
        parts.append("for " + ", ".join(profiles))
    return " · ".join(p for p in parts if p)


def proxy_markup(proxy: Mapping[str, Any], *, selected: bool) -> str:
    colour = proxy_colour(proxy)
    name = escape(str(proxy.get("name") or "?"))
    mark = "▶" if selected else " "
    return (f"{mark}[{variable(colour)}]●[/] [b]{name}[/] [dim]proxy[/] "
            f"{escape(proxy_words(proxy))}")


class ProxyRow(TextLine):
    def __init__(self, name: str) -> None:
        super().__init__(fixed_size=True, classes="proxy-row")
        self.proxy_name = name

    def on_click(self, event: events.Click) -> None:
        self.post_message(ProxySelected(self.proxy_name))


class ProxyStrip(Vertical):
    """Rows are remade only when the proxies' names change; otherwise each row's text is set
    (a `TextLine`: unchanged text is not redrawn)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "upstream proxies"
        self._names: list[str] = []
        self._rows: dict[str, ProxyRow] = {}

    @property
    def names(self) -> list[str]:
        return list(self._names)

    def compose(self) -> ComposeResult:
        return iter(())

    async def show(self, proxies: Sequence[Mapping[str, Any]], selected: str | None) -> None:
        names = [str(p.get("name")) for p in proxies]
        self.set_class(bool(names), "-visible")
        if names != self._names:
            await self.remove_children()
            self._rows = {name: ProxyRow(name) for name in names}
            await self.mount_all(list(self._rows.values()))
            self._names = names
        for proxy in proxies:
            name = str(proxy.get("name"))
            row = self._rows[name]
            row.set_class(name == selected, "-selected")
            row.set_text(proxy_markup(proxy, selected=name == selected))
