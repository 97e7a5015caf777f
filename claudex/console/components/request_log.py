"""The live request log: time, client protocol and model, the provider that served it, the
attempt trail (`grok 503 -> deepseek 200`), status and latency. Filterable.

Rows arrive in batches from the main screen's coalesced refresh; the log keeps the last
`MAX_ROWS` requests and shows those that match the filter, newest at the bottom (between rebuilds
the table may hold up to twice as many).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping

from rich.text import Text
from textual.widgets import DataTable

from claudex.console.format import RequestRow

MAX_ROWS = 500
ROWS_PER_REFRESH = 100

COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("time", "time", 8),
    ("request", "request", 34),
    ("provider", "served by", 14),
    ("trail", "attempts", 44),
    ("status", "status", 6),
    ("latency", "latency", 9),
)


class RequestLog(DataTable[Text | str]):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="none", zebra_stripes=True, show_cursor=False)
        self.can_focus = False
        self.rows_kept: deque[RequestRow] = deque(maxlen=MAX_ROWS)
        self.filter_text = ""
        self.palette: Mapping[str, str] = {}
        self._shown = 0  # rows currently in the table

    def on_mount(self) -> None:
        for key, label, width in COLUMNS:
            self.add_column(label, key=key, width=width)

    def _styled(self, row: RequestRow) -> list[Text | str]:
        colour = ("green" if row.status is not None and row.status < 400
                  else "yellow" if row.status == 429 else "red")
        status_style = self.palette.get(f"claudex-{colour}", "")
        trail_style = self.palette.get("claudex-yellow", "") if row.failed_over else ""
        return [row.time, row.request, row.provider, Text(row.trail, style=trail_style),
                Text(row.status_text, style=f"bold {status_style}"), row.latency_text]

    def add_rows_from(self, rows: Iterable[RequestRow]) -> None:
        at_end = self.scroll_y >= self.max_scroll_y
        batch = list(rows)
        self.rows_kept.extend(batch)
        matching = [row for row in batch if row.matches(self.filter_text)]
        # Above ~1,000 requests a second nobody reads every row as it passes; the table shows
        # the newest of each batch (all of them stay in the buffer for the next filter).
        for row in matching[-ROWS_PER_REFRESH:]:
            self.add_row(*self._styled(row))
            self._shown += 1
        added = bool(matching)
        # DataTable.remove_row costs milliseconds a row, so the table is not trimmed row by
        # row: it may grow to twice the buffer, then it is rebuilt from the buffer at once.
        if self._shown > 2 * MAX_ROWS:
            self._rebuild()
        elif added and at_end:
            self.scroll_end(animate=False)

    def _rebuild(self) -> None:
        self.clear()
        self._shown = 0
        for row in self.rows_kept:
            if row.matches(self.filter_text):
                self.add_row(*self._styled(row))
                self._shown += 1
        self.scroll_end(animate=False)

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip()
        self._rebuild()

    def visible_rows(self) -> list[RequestRow]:
        """The kept rows the filter lets through, oldest first (what the table shows)."""
        return [r for r in self.rows_kept if r.matches(self.filter_text)]
