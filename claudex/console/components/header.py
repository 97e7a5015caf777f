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

    def show(self, snapshot: Mapping[str, Any]) -> None:
        listen = escape(str(snapshot.get("listen") or "?"))
        config = escape(short_path(snapshot.get("config_path")))
        mode = " [reverse $claudex-yellow] READ-ONLY [/]" if self.read_only else ""
        extra = f"  [dim]{escape(self.extra)}[/]" if self.extra else ""
        left = (f"[b]claudex[/]{mode}  proxy [b]http://{listen}[/]{extra}\n"
                f"[dim]config[/] {config}")
        profiles = list(snapshot.get("profiles") or [])
        counts = colour_counts(profiles)
        dots = "  ".join(f"[{variable(c)}]●[/] {counts[c]} {c}"
                         for c in ("green", "yellow", "red"))
        rate = float(snapshot.get("requests_per_s") or 0.0)
        right = (f"up {duration(float(snapshot.get('uptime_s') or 0.0))} · "
                 f"{rate:.1f} req/s · {int(snapshot.get('requests') or 0):,} requests · "
                 f"{int(snapshot.get('in_flight') or 0)} in flight\n"
                 f"{int(snapshot.get('failovers') or 0):,} failovers · {dots}")
        self.left.set_text(left)
        self.right.set_text(right)
