"""Enter on a request row: the request in full — who asked for what by which route, what it
cost, and every attempt with its timings, the model and cap it was sent with, the breaker state
it met and what the upstream said; then the client's headers as received (values off the header
policy's allow-list masked by the engine, and by `claudex.text.history` again; nothing is ever
unmasked).

The same fields as `claudex history --id` (claudex/text/history.py builds both); escape returns
to the log as it was left (the log is not touched while this screen is up)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from claudex.console.format import TimeText, local_time_text, safe
from claudex.engine.core.request import SKIP_OUTCOMES
from claudex.text.history import (
    ATTEMPT_COLUMNS,
    ATTEMPT_LEGEND,
    NONE,
    attempt_cells,
    attempt_reasons,
    attempts_of,
    detail_fields,
    header_items,
)

OK_OUTCOMES = frozenset({"ok", "success"})


def _when(time_text: TimeText, wall: Callable[[], float]) -> Callable[[float], str]:
    """The time as the log shows it, with the date when it is not today's."""
    def when(epoch: float) -> str:
        day = time.strftime("%Y-%m-%d", time.localtime(epoch))
        today = time.strftime("%Y-%m-%d", time.localtime(wall()))
        return time_text(epoch) if day == today else f"{day} {time_text(epoch)}"
    return when


def title_text(record: Mapping[str, Any]) -> str:
    rid = record.get("request_id")
    served = record.get("provider") or "none"
    return safe(f"request {rid or ''} · {record.get('protocol') or '?'} "
                f"{record.get('model') or '-'} → {served} {record.get('status')} "
                f"{record.get('outcome') or ''}".replace("  ", " "), 200)


def outcome_colour(outcome: str, status: str) -> str:
    """Green served, yellow skipped or rate limited (nothing was asked, or it may pass), red
    failed."""
    if outcome in OK_OUTCOMES or (status.isdigit() and int(status) < 400):
        return "green"
    if outcome in SKIP_OUTCOMES or outcome == "rate_limited" or status == "429":
        return "yellow"
    return "red"


def detail_body(record: Mapping[str, Any], *, when: Callable[[float], str],
                palette: Mapping[str, str], from_history: bool = False,
                gap: int = 1) -> RenderableType:
    """`gap`: cells between the attempt table's columns (one fits 100 columns)."""
    label_style = "bold"
    accent = f"bold {palette.get('accent', '')}".strip()
    summary = Table.grid(padding=(0, 2))
    summary.add_column(justify="right", no_wrap=True, style=label_style)
    summary.add_column(ratio=1)
    for label, value in detail_fields(record, when):
        summary.add_row(label, Text(value, style="dim" if value == NONE else ""))
    if from_history:
        summary.add_row("", Text("read from the history journal", style="dim italic"))

    attempts = attempts_of(record)
    # No box: its column separators would cost a cell each, and 100 columns are tight.
    table = Table(box=None, padding=(0, gap, 0, 0), pad_edge=False, expand=False,
                  header_style="bold underline")
    for heading in ATTEMPT_COLUMNS:
        numeric = heading in ("#", "status", "headers", "content", "total", "cap")
        # The model may be long: it gives way first (cut with an ellipsis), the rest not.
        table.add_column(heading, justify="right" if numeric else "left",
                         no_wrap=True, overflow="ellipsis",
                         min_width=8 if heading == "model sent" else None,
                         ratio=1 if heading == "model sent" else None)
    reasons: list[RenderableType] = []
    for index, attempt in enumerate(attempts, 1):
        cells = attempt_cells(index, attempt)
        colour = palette.get(f"claudex-{outcome_colour(cells[2], cells[3])}", "")
        styled = [Text(cell, style="dim" if cell == NONE else "") for cell in cells]
        styled[2] = Text(cells[2], style=f"bold {colour}".strip())
        table.add_row(*styled)
        for label, text in attempt_reasons(attempt):
            line = Text.assemble((f"#{index} {attempt.get('provider') or ''} ", accent),
                                 (f"{label}: ", "bold"), text)
            reasons.append(line)

    headers = Table.grid(padding=(0, 1))
    headers.add_column(no_wrap=True, style="bold")
    headers.add_column(ratio=1)
    for name, value in header_items(record):
        headers.add_row(f"{name}:", value)

    parts: list[RenderableType] = [summary, Text(),
                                   Text(f"attempts ({len(attempts)})", style=accent)]
    if attempts:
        parts += [table, Text(), Text(ATTEMPT_LEGEND, style="dim"), Text(), *reasons]
    else:
        parts.append(Text(NONE, style="dim"))
    parts += [Text(), Text("client headers (as received, credentials masked)", style=accent)]
    parts.append(headers if header_items(record) else Text(NONE, style="dim"))
    return Group(*parts)


class RequestDetailScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "back to the log", id="detail.close"),
        Binding("up,k", "scroll(-1)", "scroll", show=False),
        Binding("down,j", "scroll(1)", "scroll", show=False),
    ]
    DEFAULT_CSS = """
    RequestDetailScreen {
        background: $surface;
    }
    RequestDetailScreen #detail-title {
        height: 1;
        padding: 0 1;
        background: $panel;
        text-style: bold;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    RequestDetailScreen #detail-body {
        padding: 1 2;
        scrollbar-size-vertical: 1;
    }
    """

    def __init__(self, record: Mapping[str, Any], *, time_text: TimeText = local_time_text,
                 wall: Callable[[], float] = time.time, from_history: bool = False) -> None:
        super().__init__(classes="request-detail")
        self.record = record
        self.time_text = time_text
        self.wall = wall
        self.from_history = from_history
        self.body: RenderableType = ""

    def compose(self) -> ComposeResult:
        yield Static(title_text(self.record), id="detail-title", markup=False)
        self.body = detail_body(self.record, when=_when(self.time_text, self.wall),
                                palette=self.app.theme_variables, from_history=self.from_history,
                                gap=2 if self.app.size.width >= 120 else 1)
        with VerticalScroll(id="detail-body"):
            yield Static(self.body, id="detail-text")
        yield Footer()

    def action_scroll(self, step: int) -> None:
        self.query_one("#detail-body", VerticalScroll).scroll_relative(
            y=step, animate=False)

    def action_close(self) -> None:
        self.dismiss(None)
