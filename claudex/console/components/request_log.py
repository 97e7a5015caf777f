"""The live request log: time, client protocol and model, the provider that served it, the
attempt trail (`grok 503 -> deepseek 200`), status and latency. Filterable.

Rows arrive in batches from the main screen's coalesced refresh; the log keeps the last
`MAX_ROWS` requests and shows those that match the filter, newest at the bottom, under a fixed
header line.

Why not a `DataTable`: every `add_row` invalidated the table's line cache, so each refresh under
load re-rendered every visible cell through Rich, and a trimmed table had to be rebuilt. Here each
row is rendered once, into a `Strip`, when it first scrolls into view; a refresh that adds rows
only repaints this widget, and once the log is full its virtual size stays put, so adding rows
costs no layout either.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import ClassVar, Final

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from claudex.console.format import RequestRow

MAX_ROWS: Final = 500
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


def fit(text: str, width: int) -> str:
    """`text` in exactly `width` cells: padded, or cut with an ellipsis."""
    if cell_len(text) > width:
        return set_cell_size(text, width - 1) + "…"
    return set_cell_size(text, width)


class RequestLog(ScrollView, can_focus=False):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "request-log--header", "request-log--even-row", "request-log--odd-row",
    }
    DEFAULT_CSS = """
    RequestLog {
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
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows_kept: deque[RequestRow] = deque(maxlen=MAX_ROWS)
        # The kept rows the filter lets through: (place, seq, row). `place` numbers the rows
        # shown since the last rebuild (it keys the strip cache and picks the zebra stripe, so
        # stripes stay put while rows come and go); `seq` numbers every row ever added.
        self._shown: deque[tuple[int, int, RequestRow]] = deque()
        self._next_seq = 0      # the number of rows ever added
        self._next_place = 0    # numbers every row ever shown (since the last rebuild)
        self.filter_text = ""
        self.palette: Mapping[str, str] = {}
        self._strips: LRUCache[int, Strip] = LRUCache(1024)  # place (-1: header) -> line
        self._styles: dict[str, Style] = {}
        self._following = False  # a scroll to the end is on its way

    # -- feeding -------------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        """Rows the log shows (those the filter lets through)."""
        return len(self._shown)

    def add_rows_from(self, rows: Iterable[RequestRow]) -> None:
        at_end = self._following or self.is_vertical_scroll_end
        before = len(self._shown)
        for row in rows:
            self.rows_kept.append(row)
            self._next_seq += 1
            if row.matches(self.filter_text):
                self._shown.append((self._next_place, self._next_seq - 1, row))
                self._next_place += 1
        # Rows that left the buffer leave the view too.
        oldest = self._next_seq - len(self.rows_kept)
        dropped = 0
        while self._shown and self._shown[0][1] < oldest:
            self._shown.popleft()
            dropped += 1
        if len(self._shown) == before and not dropped:
            return
        self._resized()
        if at_end:
            self._follow_end()
        elif dropped:
            # Keep the rows the operator is reading where they are.
            self.scroll_to(y=max(0, self.scroll_y - dropped), animate=False, immediate=True)
        self.refresh()

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip()
        self._rebuild()

    def _rebuild(self) -> None:
        self._shown.clear()
        self._strips.clear()
        self._next_place = 0
        for seq, row in enumerate(self.rows_kept, self._next_seq - len(self.rows_kept)):
            if row.matches(self.filter_text):
                self._shown.append((self._next_place, seq, row))
                self._next_place += 1
        self._resized()
        self._follow_end()
        self.refresh()

    def _follow_end(self) -> None:
        """Scroll to the newest row after the next layout (until then, a log that has just
        outgrown its box has no scrollbar and cannot scroll); rows added meanwhile follow too."""
        if self._following:
            return
        self._following = True

        def scroll() -> None:
            self._following = False
            self.scroll_end(animate=False, immediate=True, x_axis=False)

        self.call_after_refresh(scroll)

    def _resized(self) -> None:
        size = Size(LINE_WIDTH, len(self._shown) + 1)  # +1: the header line
        if size != self.virtual_size:  # (a new virtual size means a layout)
            self.virtual_size = size

    def visible_rows(self) -> list[RequestRow]:
        """The kept rows the filter lets through, oldest first (what the log shows)."""
        return [row for _, _, row in self._shown]

    # -- drawing -------------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()
        self._styles.clear()

    def _style(self, component: str | None = None) -> Style:
        """The log's own style, plus a component class's (cached: `rich_style` walks up every
        ancestor, and a frame draws a few dozen lines)."""
        key = component or ""
        style = self._styles.get(key)
        if style is None:
            style = self.rich_style
            if component:
                style += self.get_component_rich_style(component)
            self._styles[key] = style
        return style

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        scroll_x, scroll_y = self.scroll_offset
        if y == 0:  # the header stays put and spans the whole width
            header_style = self._style("request-log--header")
            strip = self._strips.get(-1) or self._header_strip(header_style)
            return strip.crop_extend(scroll_x, scroll_x + width, header_style)
        base = self._style()
        index = scroll_y + y - 1
        if not 0 <= index < len(self._shown):
            return Strip.blank(width, base)
        place, _, row = self._shown[index]
        strip = self._strips.get(place) or self._row_strip(place, row)
        return strip.crop_extend(scroll_x, scroll_x + width, base)

    def _header_strip(self, style: Style) -> Strip:
        pad = " " * CELL_PADDING
        text = "".join(f"{pad}{fit(label, width)}{pad}" for _, label, width in COLUMNS)
        strip = Strip([Segment(text, style)], LINE_WIDTH)
        self._strips[-1] = strip
        return strip

    def _row_strip(self, place: int, row: RequestRow) -> Strip:
        base = self._style("request-log--odd-row" if place % 2 else "request-log--even-row")
        colour = ("green" if row.status is not None and row.status < 400
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
        for (text, style), (_, _, width) in zip(cells, COLUMNS, strict=True):
            segments += (pad, Segment(fit(text, width), style), pad)
        strip = Strip(segments, LINE_WIDTH).simplify()
        self._strips[place] = strip
        return strip
