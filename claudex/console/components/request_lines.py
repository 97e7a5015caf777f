"""How the request log draws: a fixed header line, then one `Strip` per shown row, each rendered
once (when it first scrolls into view) and cached by its place; the highlighted row is drawn
fresh, and a note line may sit above the oldest row. The rows, the cursor and the note belong
to `RequestLog` (request_log.py); this base class only reads them.

Why not a `DataTable`: every `add_row` invalidated the table's line cache, so each refresh under
load re-rendered every visible cell through Rich, and a trimmed table had to be rebuilt. Here a
refresh that adds rows only repaints this widget, and once the log is full its virtual size
stays put, so adding rows costs no layout either.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import ClassVar, Final

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.cache import LRUCache
from textual.scroll_view import ScrollView
from textual.strip import Strip

from claudex.console.format import RequestRow

CELL_PADDING: Final = 1

COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("time", "time", 8),
    ("request", "request", 34),
    ("provider", "served by", 14),
    ("trail", "attempts", 44),
    ("status", "status", 6),
    ("latency", "latency", 9),
)
LINE_WIDTH: Final = sum(width + 2 * CELL_PADDING for _, _, width in COLUMNS)
# Narrower than LINE_WIDTH (a 100-column terminal), the attempts and then the request give up
# room down to these, so status and latency stay in view instead of behind a scrollbar.
_SHRINKS: Final = ((3, 24), (1, 22))  # (column index, narrowest width)


def column_widths(available: int) -> tuple[int, ...]:
    """Each column's width for a log `available` cells wide (never wider than COLUMNS says)."""
    widths = [width for _, _, width in COLUMNS]
    over = LINE_WIDTH - available
    for index, narrowest in _SHRINKS:
        if over <= 0:
            break
        give = min(over, widths[index] - narrowest)
        widths[index] -= give
        over -= give
    return tuple(widths)


def line_width(widths: tuple[int, ...]) -> int:
    return sum(width + 2 * CELL_PADDING for width in widths)


def fit(text: str, width: int) -> str:
    """`text` in exactly `width` cells: padded, or cut with an ellipsis."""
    if cell_len(text) > width:
        return set_cell_size(text, width - 1) + "…"
    return set_cell_size(text, width)


class RequestLines(ScrollView, can_focus=False):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "request-log--header", "request-log--even-row", "request-log--odd-row",
        "request-log--cursor", "request-log--history", "request-log--note",
    }
    DEFAULT_CSS = """
    RequestLines {
        background: $surface;
        color: $foreground;
        & > .request-log--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        & > .request-log--even-row {
            background: $surface-lighten-1 50%;
        }
        &:dark > .request-log--even-row {
            background: $surface-darken-1 40%;
        }
        & > .request-log--cursor {
            background: $primary 50%;
            text-style: bold;
        }
        & > .request-log--history {
            color: $text-muted;
        }
        & > .request-log--note {
            color: $text-muted;
            text-style: italic;
        }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        # Set by RequestLog: the shown rows (place, seq, row), the highlighted index, the note.
        self._shown: deque[tuple[int, int, RequestRow]] = deque()
        self.cursor: int | None = None
        self.top_note: str | None = None
        self.palette: Mapping[str, str] = {}
        self._strips: LRUCache[int, Strip] = LRUCache(1024)  # place -> line
        self._header: Strip | None = None
        self._styles: dict[str, Style] = {}
        self.widths: tuple[int, ...] = column_widths(LINE_WIDTH)

    @property
    def _top(self) -> int:
        return 1 if self.top_note else 0

    # -- drawing -------------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()
        self._header = None
        self._styles.clear()

    def _style(self, *components: str) -> Style:
        """The log's own style, plus component classes' (cached: `rich_style` walks up every
        ancestor, and a frame draws a few dozen lines)."""
        key = " ".join(components)
        style = self._styles.get(key)
        if style is None:
            style = self.rich_style
            for component in components:
                style += self.get_component_rich_style(component)
            self._styles[key] = style
        return style

    def _resized(self) -> None:
        """Set the virtual size from the rows and the columns' widths (RequestLog does)."""

    def fit_columns(self, available: int) -> bool:
        """Lay the columns out for `available` cells; True when that changed them (the cached
        lines are then dropped)."""
        widths = column_widths(available)
        if widths == self.widths:
            return False
        self.widths = widths
        self._strips.clear()
        self._header = None
        return True

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if width > 0 and self.fit_columns(width):
            self.call_after_refresh(self._resized)
        scroll_x, scroll_y = self.scroll_offset
        if y == 0:  # the header stays put and spans the whole width
            header_style = self._style("request-log--header")
            strip = self._header or self._header_strip(header_style)
            return strip.crop_extend(scroll_x, scroll_x + width, header_style)
        base = self._style()
        line = scroll_y + y - 1
        if self.top_note and line == 0:
            note = self._style("request-log--note")
            text = fit(" " * CELL_PADDING + self.top_note, max(width, 1))
            return Strip([Segment(text, note)], cell_len(text))
        index = line - self._top
        if not 0 <= index < len(self._shown):
            return Strip.blank(width, base)
        place, _, row = self._shown[index]
        if index == self.cursor and self.has_focus:  # drawn fresh: it moves
            strip = self._row_strip(place, row, cursor=True)
        else:
            strip = self._strips.get(place) or self._row_strip(place, row)
        return strip.crop_extend(scroll_x, scroll_x + width, base)

    def _header_strip(self, style: Style) -> Strip:
        pad = " " * CELL_PADDING
        text = "".join(f"{pad}{fit(label, width)}{pad}"
                       for (_, label, _), width in zip(COLUMNS, self.widths, strict=True))
        strip = Strip([Segment(text, style)], line_width(self.widths))
        self._header = strip
        return strip

    def _row_strip(self, place: int, row: RequestRow, *, cursor: bool = False) -> Strip:
        parts = ["request-log--odd-row" if place % 2 else "request-log--even-row"]
        if row.from_history:
            parts.append("request-log--history")
        if cursor:
            parts.append("request-log--cursor")
        base = self._style(*parts)
        colour = ("green" if row.status is not None and row.status < 400 and not row.broke
                  else "yellow" if row.status == 429 else "red")
        status_style = base + Style.parse(f"bold {self.palette.get(f'claudex-{colour}', '')}")
        trail_colour = self.palette.get("claudex-yellow", "") if row.failed_over else ""
        trail_style = base + Style.parse(trail_colour) if trail_colour else base
        cells = (
            (row.time, base), (row.request, base), (row.provider, base),
            (row.trail_text, trail_style), (row.status_text, status_style),
            (row.latency_text, base),
        )
        pad = Segment(" " * CELL_PADDING, base)
        segments: list[Segment] = []
        for (text, style), width in zip(cells, self.widths, strict=True):
            segments += (pad, Segment(fit(text, width), style), pad)
        strip = Strip(segments, line_width(self.widths)).simplify()
        if not cursor:
            self._strips[place] = strip
        return strip
