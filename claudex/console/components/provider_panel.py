"""One panel per profile: colour and reason, breaker with its countdown, probe latency with a
sparkline of recent latencies, request and error counts, and the last error (masked)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.widgets import Sparkline, Static

from claudex.console.colors import variable
from claudex.console.format import (
    breaker_words,
    counts_words,
    last_error_words,
    probe_words,
    protocol_label,
    safe,
)
from claudex.console.messages import ProfileSelected

COLOUR_CLASSES = ("-green", "-yellow", "-red")


class ProviderPanel(Vertical):
    def __init__(self, name: str) -> None:
        super().__init__(classes="panel")
        self.profile_name = name
        self.border_title = escape(name)

    def compose(self) -> ComposeResult:
        yield Static("", classes="panel-status")
        yield Static("", classes="panel-breaker")
        with Horizontal(classes="panel-probe-row"):
            yield Static("", classes="panel-probe")
            yield Sparkline([], classes="panel-spark")
        yield Static("", classes="panel-counts")
        yield Static("", classes="panel-error")

    def on_click(self, event: events.Click) -> None:
        self.post_message(ProfileSelected(self.profile_name))

    def show(self, profile: Mapping[str, Any], history: Sequence[float], now_wall: float,
             *, selected: bool, is_default: bool = False, fault: str | None = None) -> None:
        health = profile.get("health") or {}
        breaker = profile.get("breaker") or {}
        stats = profile.get("stats") or {}
        colour = str(health.get("color") or "green")
        for cls in COLOUR_CLASSES:
            self.set_class(cls == f"-{colour}", cls)
        self.set_class(selected, "-selected")
        kind = protocol_label(str(profile.get("provider_type") or ""))
        default = " · default" if is_default else ""
        self.border_subtitle = f"{kind}{default}" + (f" · fake: {fault}" if fault else "")
        reason = escape(safe(str(health.get("reason") or colour), 80))
        self.query_one(".panel-status", Static).update(
            f"[{variable(colour)}]● [b]{colour}[/][/] {reason}")
        self.query_one(".panel-breaker", Static).update(
            f"[dim]breaker[/] {escape(breaker_words(breaker))}")
        self.query_one(".panel-probe", Static).update(escape(probe_words(health)))
        spark = self.query_one(".panel-spark", Sparkline)
        # Textual draws one sample as a full bar; two equal ones read as "flat", which is right.
        data = list(history)
        if len(data) == 1:
            data = data * 2
        if list(spark.data or []) != data:
            spark.data = data
        self.query_one(".panel-counts", Static).update(escape(counts_words(stats)))
        self.query_one(".panel-error", Static).update(
            f"[dim]{escape(last_error_words(stats, now_wall))}[/]")
