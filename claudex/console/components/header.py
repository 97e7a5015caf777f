"""The header: what the console is connected to, how busy it is, and how many providers are in
each colour. Says READ-ONLY when modifying actions are off."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.markup import escape

from claudex.console.colors import variable
from claudex.console.components.text_line import TextLine
from claudex.console.format import colour_counts, duration, short_path
from claudex.console.link import LinkState


class HeaderBar(Horizontal):
    def __init__(self, *, read_only: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.read_only = read_only
        self.extra = ""  # e.g. the demo's traffic state
        self.left = TextLine("claudex", id="header-left")
        self.right = TextLine("", fixed_size=True, id="header-right")  # see console.tcss

    def compose(self) -> ComposeResult:
        yield self.left
        yield self.right

    def show(self, snapshot: Mapping[str, Any], state: LinkState | None = None,
             now_wall: float = 0.0) -> None:
        listen = escape(str(snapshot.get("listen") or "?"))
        config = escape(short_path(snapshot.get("config_path")))
        mode = " [reverse $claudex-yellow] READ-ONLY [/]" if self.read_only else ""
        extra = f"  [dim]{escape(self.extra)}[/]" if self.extra else ""
        fleet = snapshot.get("fleet")  # engine/fleet/coordinator.py: only when [fleet] is set
        if isinstance(fleet, Mapping) and fleet.get("redis") == "unreachable":
            extra += "  [reverse $claudex-red] fleet: redis unreachable [/]"
        # Attached, the proxy's address is said only where it is not the engine's own.
        proxy = ("" if state is not None and state.mode == "attached"
                 and state.target == snapshot.get("listen")
                 else f" · proxy [b]http://{listen}[/]")
        left = (f"[b]claudex[/]{mode}  {self._where(snapshot, state, now_wall)}{proxy}"
                f"{extra}\n"
                f"[dim]config[/] {config}")
        profiles = list(snapshot.get("profiles") or [])
        counts = colour_counts(profiles)
        dots = "  ".join(f"[{variable(c)}]●[/] {counts[c]} {c}"
                         for c in ("green", "yellow", "red"))
        rate = float(snapshot.get("requests_per_s") or 0.0)
        history = snapshot.get("history") or {}
        if history.get("path") and not history.get("enabled"):  # a journal that gave up
            why = escape(str(history.get("problem") or "?"))[:60]
            dots = f"[$claudex-yellow]history off: {why}[/] · {dots}"
        right = (f"up {duration(float(snapshot.get('uptime_s') or 0.0))} · "
                 f"{rate:.1f} req/s · {int(snapshot.get('requests') or 0):,} requests · "
                 f"{int(snapshot.get('in_flight') or 0)} in flight\n"
                 f"{int(snapshot.get('failovers') or 0):,} failovers · {dots}")
        self.left.set_text(left)
        self.right.set_text(right)

    @staticmethod
    def _where(snapshot: Mapping[str, Any], state: LinkState | None, now_wall: float) -> str:
        """`hosting`, `attached to 127.0.0.1:13456 · up 3h`, or that it stopped answering."""
        if state is None or state.mode == "hosting":
            return "[dim]hosting[/]"
        target = escape(state.target)
        if state.connected:
            up = duration(float(snapshot.get("uptime_s") or 0.0))
            return f"attached to [b]{target}[/] · up {up}"
        lost = (f" for {duration(max(0.0, now_wall - state.lost_at))}"
                if state.lost_at is not None else "")
        # (Why is in the event log: the header has no room for it.)
        return f"[reverse $claudex-red] NOT ANSWERING [/] {target}{lost} · re-attaching…"
