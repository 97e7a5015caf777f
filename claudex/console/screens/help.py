"""`?`: every key of the main screen with what it does, the demo keys when there are any, and what
the colours mean."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


@dataclass(frozen=True)
class HelpLine:
    keys: str
    text: str
    note: str = ""  # e.g. "off: read-only"


COLOUR_LEGEND = (
    ("green", "breaker closed, last probe ok and fast, no failure in live traffic since"),
    ("yellow", "half-open, failures below the threshold, slow (a probe, or live traffic "
               "against its usual), cooling down after a rate limit, or a plan window spent"),
    ("red", "breaker open or tripped, auth failing, misconfigured, or the last two probes "
            "failed"),
)


def _table(rows: Sequence[tuple[Text, Text]]) -> Table:
    # A grid keeps wrapped descriptions indented under their own column.
    grid = Table.grid(padding=(0, 2))
    grid.add_column(justify="right", no_wrap=True, min_width=9)
    grid.add_column(ratio=1)
    for keys, text in rows:
        grid.add_row(keys, text)
    return grid


def help_body(actions: Sequence[HelpLine], demo: Sequence[HelpLine], *, read_only: bool,
              palette: Mapping[str, str]) -> RenderableType:
    key_style = f"bold {palette.get('accent', '')}".strip()

    def lines(items: Sequence[HelpLine]) -> Table:
        rows = []
        for item in items:
            text = Text(item.text)
            if item.note:
                text.append(f"  ({item.note})", style="dim")
            rows.append((Text(item.keys, style=key_style), text))
        return _table(rows)

    parts: list[RenderableType] = [Text("Keys", style="bold"), lines(actions), Text()]
    if demo:
        parts += [Text("Demo (1-6, 0: the selected provider's fake; 7, 8: the demo's proxy corp)",
                       style="bold"), lines(demo), Text()]
    parts.append(Text("Colours", style="bold"))
    parts.append(_table([
        (Text.assemble(("● ", palette.get(f"claudex-{colour}", "")), (colour, "bold")),
         Text(words)) for colour, words in COLOUR_LEGEND
    ]))
    parts.append(Text())
    if read_only:
        parts += [Text("Read-only: trip, reset, edit, add and delete are off.",
                       style=f"bold {palette.get('claudex-yellow', '')}".strip()), Text()]
    parts.append(Text("escape or ? closes this help", style="dim"))
    return Group(*parts)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "close", id="help.close"),
    ]

    def __init__(self, actions: Sequence[HelpLine], demo: Sequence[HelpLine] = (),
                 read_only: bool = False) -> None:
        super().__init__(classes="help")
        self.actions = actions
        self.demo = demo
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        body = help_body(self.actions, self.demo, read_only=self.read_only,
                         palette=self.app.theme_variables)
        with Vertical(id="help-box"):
            yield Static("[b]claudex console — help[/]", id="help-title")
            with VerticalScroll(id="help-body"):
                yield Static(body, id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)
