"""The provider table: one line per provider, for configs too big for a panel each.

Columns: a dot in the provider's colour, name, state, time left (an open breaker's countdown, a
timed trip's remaining time, ∞ for a trip until reset), requests/min, error % of the last five
minutes ("err 5m"), p50/p95 of total duration (non-streamed answers), time to first content
(p50, streams), tokens/min, what the tokens cost at API prices ("$ today": ≈ marks a
subscription's API-equivalent, + some answers unpriced), the plan's fullest quota window when
some provider has one ("window": `5h 42%`, yellow past its warning threshold), a sparkline of
requests per minute over the last 30 minutes (a minute with errors in red) and the last error.
Colour marks state only (the dot, a state that is not closed, error minutes); secondary text is
dim. The widths follow the widget's width: the sparkline takes 30, 15 or 10 cells, the last error
the rest (or nothing on a narrow screen).

Drawn like the request log (request_log.py): a `ScrollView` whose lines are `Strip`s built once
per row content and width, so a refresh in which three providers changed renders three lines;
the header line stays put. `show` is fed by the main screen's coalesced refresh (at most ~10 a
second) and does nothing when neither the rows nor the selection changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.css.scalar import Scalar
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from claudex.console.components.request_log import fit
from claudex.console.components.table_rows import (
    SORT_TEXT,
    TableRow,
    grouped,
    sort_rows,
    sparkline,
    table_row,
)
from claudex.console.messages import ProfileSelected

GAP: Final = 1
MIN_ERROR_WIDTH: Final = 12


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int
    right: bool = False


def columns_for(width: int, name_width: int, windows: bool = False) -> list[Column]:
    """The columns that fit in `width` cells; `windows`: some provider has a plan's quota
    windows, shown in a column of their own (none otherwise)."""
    fixed = [
        Column("dot", "", 1), Column("name", "provider", name_width),
        Column("state", "state", 9), Column("left", "left", 4, right=True),
        Column("rpm", "req/m", 5, right=True), Column("err", "err 5m", 6, right=True),
        Column("p50", "p50", 5, right=True), Column("p95", "p95", 5, right=True),
        Column("ttfc", "ttfc", 5, right=True), Column("tpm", "tok/m", 5, right=True),
        Column("cost", "$ today", 8, right=True),
        *([Column("window", "window", 7)] if windows else []),
    ]
    used = 1 + sum(c.width + GAP for c in fixed)  # one cell of margin on the left
    spark = next((w for w in (30, 15, 10) if width - used - w - GAP >= MIN_ERROR_WIDTH),
                 10)
    columns = [*fixed, Column("spark", "requests 30m" if spark >= 15 else "30m", spark)]
    used += spark + GAP
    if width - used >= MIN_ERROR_WIDTH:
        columns.append(Column("error", "last error", width - used))
    return columns


class ProviderTable(ScrollView, can_focus=False):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "provider-table--header", "provider-table--selected", "provider-table--even-row",
        "provider-table--dim",
    }
    DEFAULT_CSS = """
    ProviderTable {
        background: $surface;
        color: $foreground;
        & > .provider-table--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        & > .provider-table--selected {
            background: $primary 35%;
            text-style: bold;
        }
        & > .provider-table--even-row {
            background: $surface-lighten-1 40%;
        }
        &:dark > .provider-table--even-row {
            background: $surface-darken-1 40%;
        }
        & > .provider-table--dim {
            color: $text-muted;
        }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.palette: Mapping[str, str] = {}
        self.sort_by = "state"
        self.filter_text = ""
        self.selected: str | None = None
        self.rows: list[TableRow] = []       # shown: filtered and sorted
        self.total = 0                       # rows before the filter
        self._all: list[TableRow] = []
        self._name_width = 8
        self._windows = False  # a window column (some provider has quota windows)
        self._pools: list[Mapping[str, Any]] = []  # status `pools`: their members grouped
        self._strips: dict[str, tuple[tuple[Any, ...], Strip]] = {}
        self._styles: dict[str, Style] = {}

    # -- feeding -------------------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        """The providers shown, in the order shown (a pool's own row is none)."""
        return [row.name for row in self.rows if not row.pool]

    def show(self, profiles: Sequence[Mapping[str, Any]], now_wall: float,
             selected: str | None, pools: Sequence[Mapping[str, Any]] = ()) -> bool:
        """Show these profiles' rows (a pool's members beneath its own row); False when
        nothing changed."""
        rows = [table_row(p, now_wall) for p in profiles]
        if rows == self._all and selected == self.selected and list(pools) == self._pools:
            return False
        self._all = rows
        self._pools = list(pools)
        self._windows = any(row.window for row in rows)
        self.selected = selected
        self._rebuild()
        return True

    def set_sort(self, by: str) -> None:
        self.sort_by = by
        self._rebuild()

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip()
        self._rebuild()

    @property
    def title(self) -> str:
        shown = f"{len(self.rows)} of {self.total}" if self.filter_text else str(self.total)
        text = (f"providers · {shown} · sorted by {SORT_TEXT.get(self.sort_by, self.sort_by)}"
                " (s)")
        return text + (f" · filter: {self.filter_text}" if self.filter_text else "")

    def _rebuild(self) -> None:
        self.total = len(self._all)
        shown = [row for row in self._all if row.matches(self.filter_text)]
        self.rows = grouped(sort_rows(shown, self.sort_by), self._pools)
        self._name_width = min(20, max([8, *(len(row.label or row.name) for row in self.rows)]))
        if self.styles.max_height != Scalar.from_number(len(self.rows) + 3):
            # No taller than its rows (+ header and border): a short table gives lines back.
            self.styles.max_height = len(self.rows) + 3
        size = Size(self.scrollable_content_region.width, len(self.rows) + 1)
        if size != self.virtual_size:
            self.virtual_size = size
        if len(self._strips) > 4 * max(16, len(self._all)):
            self._strips.clear()
        self.refresh()

    def scroll_to_name(self, name: str | None) -> None:
        """Scroll just enough for `name`'s row to show."""
        shown = [row.name if not row.pool else None for row in self.rows]
        if name is not None and name in shown:
            index = shown.index(name)
            height = self.scrollable_content_region.height - 1  # under the header
            top = self.scroll_y
            if index < top:
                self.scroll_to(y=index, animate=False, immediate=True)
            elif height > 0 and index >= top + height:
                self.scroll_to(y=index - height + 1, animate=False, immediate=True)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)  # (inside the border; None on it)
        if offset is None or offset.y < 1:  # the header
            return
        index = int(self.scroll_y) + offset.y - 1
        if 0 <= index < len(self.rows) and not self.rows[index].pool:
            self.post_message(ProfileSelected(self.rows[index].name))

    def on_resize(self, event: events.Resize) -> None:
        self._strips.clear()
        self._rebuild()

    # -- drawing -------------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()
        self._styles.clear()

    def _style(self, component: str | None = None) -> Style:
        key = component or ""
        style = self._styles.get(key)
        if style is None:
            style = self.rich_style
            if component:
                style += self.get_component_rich_style(component)
            self._styles[key] = style
        return style

    def _colour(self, base: Style, colour: str, bold: bool = False) -> Style:
        value = self.palette.get(f"claudex-{colour}", "")
        return base + Style.parse(f"{'bold ' if bold else ''}{value}".strip() or "none")

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        scroll_y = self.scroll_offset.y
        columns = columns_for(width, self._name_width, self._windows)
        if y == 0:
            style = self._style("provider-table--header")
            return self._header(columns, style).crop_extend(0, width, style)
        base = self._style()
        index = scroll_y + y - 1
        if not 0 <= index < len(self.rows):
            return Strip.blank(width, base)
        row = self.rows[index]
        if row.pool:
            dim = base + Style(color=self._style("provider-table--dim").color)
            cached = self._strips.get("pool:" + row.name)
            if cached is None or cached[0] != (row, width, self._name_width):
                strip = self._row(row, columns, False, False).crop_extend(0, width, dim)
                cached = self._strips["pool:" + row.name] = ((row, width, self._name_width),
                                                            strip)
            return cached[1]
        selected = row.name == self.selected
        key = (row, selected, index % 2, width, self._name_width)
        cached = self._strips.get(row.name)
        if cached is not None and cached[0] == key:
            return cached[1]
        strip = self._row(row, columns, selected, index % 2 == 1).crop_extend(0, width, base)
        self._strips[row.name] = (key, strip)
        return strip

    def _header(self, columns: list[Column], style: Style) -> Strip:
        segments = [Segment(" ", style)]
        for column in columns:
            label = column.label
            if column.key == {"errors": "err", "p95": "p95", "name": "name",
                              "state": "state"}.get(self.sort_by):
                if len(label) >= column.width:
                    label = label.replace(" ", "")  # room for the mark: "err5m▼"
                label += "▼" if column.key != "name" else "▲"
            text = (label.rjust(column.width) if column.right else fit(label, column.width))
            segments += (Segment(text[-column.width:] if column.right else text, style),
                         Segment(" " * GAP, style))
        return Strip(segments)

    def _row(self, row: TableRow, columns: list[Column], selected: bool, even: bool) -> Strip:
        base = self._style("provider-table--selected" if selected
                           else "provider-table--even-row" if even else None)
        # Only the dim class's colour: its background would undo the row's.
        dim = base + Style(color=self._style("provider-table--dim").color)
        cells = row.cells()
        gap = Segment(" " * GAP, base)
        segments = [Segment("▶" if selected else " ", base)]
        for column in columns:
            key, width = column.key, column.width
            if key == "dot":
                dot = "◆" if row.pool else "●"
                segments += (Segment(dot, self._colour(base, row.colour)), gap)
                continue
            if row.pool and key not in ("name", "state", "error"):
                segments += (Segment(" " * width, base), gap)  # a pool has no numbers
                continue
            if key == "spark":
                segments += (*self._spark(row, width, base, dim), gap)
                continue
            if key == "name":
                text, style = row.label or row.name, base
            elif key == "error":
                text, style = row.last_error, dim
            else:
                text = cells.get(key, "")
                style = base
                if key == "state":
                    style = (self._colour(base, row.colour, bold=True)
                             if row.colour != "green" else dim)
                elif key == "window" and row.window_warned:
                    style = self._colour(base, "yellow")
                elif key == "left" or text in ("—", "0%", "0"):
                    style = dim
            text = text.rjust(width) if column.right else text
            segments += (Segment(fit(text, width), style), gap)
        return Strip(segments).simplify()

    def _spark(self, row: TableRow, width: int, base: Style, dim: Style) -> list[Segment]:
        text, flags = sparkline(row.minutes_requests, row.minutes_errors, width)
        red = self._colour(base, "red")
        segments: list[Segment] = []
        for char, flag in zip(text, flags, strict=True):
            segments.append(Segment(char, red if flag else dim))
        return segments
