"""The live request log: time, client protocol and model, the provider that served it, the
attempt trail (`grok 503 -> deepseek 200`), status and latency. Filterable, selectable, and it
scrolls back into the history journal.

Rows arrive in batches from the main screen's coalesced refresh; the log keeps the last
`MAX_ROWS` requests (the live tail) and shows those that match the filter, newest at the bottom,
under a fixed header line.

Focused (tab, or a click on a row), up/down/j/k move a highlighted row and Enter posts
`Opened` for it (the main screen opens the detail). Moving or scrolling past the oldest row
asks `source` (the engine link's `history("requests", ...)`) for older rows in a worker; they
go above the tail (at most `MAX_OLDER`), dimmed, without duplicates (rows are keyed by event
id), and a note line at the top says what happened: loading, the start of history, or "history
off: <why>". A filter narrows the tail at once and then asks the journal for older matches the
same way. While older rows are shown, rows leaving the tail join them, so the log stays
contiguous.

Drawing (request_lines.py) renders each row once, into a cached `Strip`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import ClassVar, Final

from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message

from claudex.console.components.request_lines import COLUMNS as COLUMNS
from claudex.console.components.request_lines import RequestLines, line_width
from claudex.console.components.request_lines import fit as fit
from claudex.console.format import RequestRow, TimeText, local_time_text, record_row, safe
from claudex.console.link import HISTORY_PAGE, HistoryPage

log = logging.getLogger("claudex.console")

MAX_ROWS: Final = 500
MAX_OLDER: Final = 5000    # journal rows kept above the tail
SEARCH_DELAY_S: Final = 0.25  # typing pauses this long before the journal is searched

# (until, text) -> a page of journal rows before `until` matching `text`, oldest first.
HistorySource = Callable[[float | None, str | None], Awaitable[HistoryPage]]


class RequestLog(RequestLines, can_focus=False):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor(-1)", "up", show=False),
        Binding("down,j", "cursor(1)", "down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home", "cursor_to(0)", "oldest", show=False),
        Binding("end", "cursor_to(-1)", "newest", show=False),
        Binding("enter", "open", "detail", id="claudex.request_detail"),
    ]

    class Opened(Message):
        """Enter (or a double click) on a row: show its detail."""

        def __init__(self, row: RequestRow) -> None:
            super().__init__()
            self.row = row

    def __init__(self, *, id: str | None = None, time_text: TimeText = local_time_text) -> None:
        super().__init__(id=id)
        self.time_text = time_text
        self.rows_kept: deque[RequestRow] = deque(maxlen=MAX_ROWS)  # the live tail
        # Journal rows above the tail (and tail rows that left it while these are shown):
        # (seq, row), oldest first. Their seqs are below the tail's.
        self._older: deque[tuple[int, RequestRow]] = deque()
        # The kept rows the filter lets through: (place, seq, row). `place` numbers the rows
        # shown since the last rebuild (it keys the strip cache and picks the zebra stripe, so
        # stripes stay put while rows come and go; rows put above count down); `seq` numbers
        # every row ever kept, in order.
        self._shown.clear()
        self._next_seq = 0      # the number of rows ever added to the tail
        self._first_seq = 0     # the seq of the oldest kept row once older ones came
        self._next_place = 0    # numbers every row ever shown (since the last rebuild)
        self._first_place = 0
        self._keys: set[int | str] = set()  # of every kept row: nothing is shown twice
        self.filter_text = ""
        self.source: HistorySource | None = None
        self.cursor: int | None = None  # index into the shown rows
        self.top_note: str | None = None  # the line above the oldest row
        self.history_done = False  # the journal has nothing older (for this filter)
        self._following = False  # a scroll to the end is on its way
        # Whether the newest row was in view at the last scroll or added rows: a log at its end
        # stays there when its box changes height (`on_resize`).
        self._at_end = True

    # -- feeding -------------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        """Rows the log shows (those the filter lets through)."""
        return len(self._shown)

    def add_rows_from(self, rows: Iterable[RequestRow]) -> None:
        on_last = self.cursor is not None and self.cursor == len(self._shown) - 1
        # The operator reading a row keeps it in view: no following from under the cursor.
        reading = self.has_focus and self.cursor is not None and not on_last
        at_end = (self._following or self.is_vertical_scroll_end) and not reading
        before = len(self._shown)
        for row in rows:
            if len(self.rows_kept) == MAX_ROWS:
                self._leave_tail(self._next_seq - MAX_ROWS, self.rows_kept[0])
            self.rows_kept.append(row)
            if row.key is not None:
                self._keys.add(row.key)
            self._next_seq += 1
            if row.matches(self.filter_text):
                self._shown.append((self._next_place, self._next_seq - 1, row))
                self._next_place += 1
        dropped = self._drop_gone()
        if len(self._shown) == before and not dropped:
            return
        self._resized()
        if on_last and at_end:
            self.cursor = len(self._shown) - 1
        self._at_end = at_end
        if at_end:
            self._follow_end()
        elif dropped:
            # Keep the rows the operator is reading where they are.
            self.scroll_to(y=max(0, self.scroll_y - dropped), animate=False, immediate=True)
        self.refresh()

    def _leave_tail(self, seq: int, row: RequestRow) -> None:
        """`row` leaves the live tail: it joins the older rows while there are any (so the
        log stays contiguous), else it goes."""
        if not self._older:
            self._forget(row)
            return
        self._older.append((seq, row))
        if len(self._older) > MAX_OLDER:
            self._forget(self._older.popleft()[1])
            self.history_done = False  # (what went can be asked for again)

    def _forget(self, row: RequestRow) -> None:
        if row.key is not None:
            self._keys.discard(row.key)

    def _kept_from(self) -> int:
        """The seq of the oldest kept row."""
        if self._older:
            return self._older[0][0]
        return self._next_seq - len(self.rows_kept)

    def _drop_gone(self) -> int:
        """Shown rows no longer kept leave the view; how many did."""
        oldest = self._kept_from()
        dropped = 0
        while self._shown and self._shown[0][1] < oldest:
            self._shown.popleft()
            dropped += 1
        if dropped and self.cursor is not None:
            self.cursor = max(0, self.cursor - dropped) if self._shown else None
        return dropped

    def add_older(self, rows: Iterable[RequestRow]) -> int:
        """Journal rows (oldest first, all older than every kept row) above the oldest one;
        rows already kept are skipped. Returns how many were new."""
        fresh = [r for r in rows if r.key is None or r.key not in self._keys]
        room = MAX_OLDER - len(self._older)
        fresh = fresh[-room:] if room > 0 else []
        shown = 0
        for row in reversed(fresh):
            self._first_seq = min(self._first_seq, self._kept_from()) - 1
            self._older.appendleft((self._first_seq, row))
            if row.key is not None:
                self._keys.add(row.key)
            if self._shows(row):
                self._first_place -= 1
                self._shown.appendleft((self._first_place, self._first_seq, row))
                shown += 1
        if shown:
            if self.cursor is not None:
                self.cursor += shown
            self._resized()
            # The rows on screen stay where they are; the new ones are above them.
            self.scroll_to(y=self.scroll_y + shown, animate=False, immediate=True)
            self.refresh()
        return len(fresh)

    def _shows(self, row: RequestRow) -> bool:
        # Journal rows came from a search for this filter (older ones go when it changes);
        # the journal matched them on more than the row's text (an attempt's message).
        return row.from_history or row.matches(self.filter_text)

    def set_filter(self, text: str) -> None:
        text = text.strip()
        changed = text != self.filter_text
        self.filter_text = text
        if changed:
            for _, row in self._older:
                self._forget(row)
            self._older.clear()
            self.history_done = False
            self.top_note = None
        self._rebuild()
        if changed and text and self.source is not None:
            self.run_worker(self._load_older(delay=SEARCH_DELAY_S), group="request-history",
                            exclusive=True, exit_on_error=False, name="request history search")
        elif changed:
            self.workers.cancel_group(self, "request-history")

    def _rebuild(self) -> None:
        self._shown.clear()
        self._strips.clear()
        self._next_place = self._first_place = 0
        tail = enumerate(self.rows_kept, self._next_seq - len(self.rows_kept))
        for seq, row in [*self._older, *tail]:
            if self._shows(row):
                self._shown.append((self._next_place, seq, row))
                self._next_place += 1
        self.cursor = len(self._shown) - 1 if self._shown and self.cursor is not None else None
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

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._at_end = new_value >= self.max_scroll_y

    def on_resize(self, event: events.Resize) -> None:
        # A panel growing a line (a route's trouble) shrinks the log and back: the clamped
        # scroll would leave the log one row short of its end, and every new row below view.
        if self._at_end and not self.is_vertical_scroll_end:
            self._follow_end()

    def _resized(self) -> None:
        size = Size(line_width(self.widths), len(self._shown) + 1 + self._top)  # +1: header
        if size != self.virtual_size:  # (a new virtual size means a layout)
            self.virtual_size = size

    def visible_rows(self) -> list[RequestRow]:
        """The kept rows the filter lets through, oldest first (what the log shows)."""
        return [row for _, _, row in self._shown]

    def _note(self, text: str | None) -> None:
        had = self._top
        self.top_note = text
        if self._top != had:
            self._resized()
            if not self.is_vertical_scroll_end:
                self.scroll_to(y=self.scroll_y + self._top - had, animate=False, immediate=True)
        self.refresh()

    # -- the journal ---------------------------------------------------------------------------

    def load_older(self) -> None:
        """Ask the journal for the rows before the oldest kept one (once at a time)."""
        if self.source is None or self.history_done or len(self._older) >= MAX_OLDER:
            return
        if any(w.node is self and w.group == "request-history" and not w.is_finished
               for w in self.workers):
            return
        self.run_worker(self._load_older(), group="request-history", exclusive=True,
                        exit_on_error=False, name="request history")

    async def _load_older(self, delay: float = 0.0) -> None:
        if delay:
            await asyncio.sleep(delay)
        if self.source is None:
            return
        text = self.filter_text or None
        self._note(f"searching history for “{safe(text, 40)}”…" if text
                   else "loading older requests from history…")
        oldest = self._older[0][1] if self._older else (
            self.rows_kept[0] if self.rows_kept else None)
        until = oldest.at if oldest is not None and oldest.at else None
        try:
            page = await self.source(until, text)
        except Exception as exc:  # a link that broke its promise: said, never raised
            log.exception("reading the history journal failed")
            page = HistoryPage(problem=f"it could not be read ({type(exc).__name__})")
        if text != (self.filter_text or None):
            return  # the filter changed meanwhile: its own search follows
        if page.problem is not None:
            self._note(f"history off: {safe(page.problem, 160)}")
            return
        rows = [record_row(r, self.time_text, from_history=True) for r in page.rows]
        added = self.add_older(rows)
        if len(page.rows) < HISTORY_PAGE or not added:
            self.history_done = True
        found = f" · {added} older match{'es' if added != 1 else ''} from history" if text else ""
        if self.history_done:
            self._note(("start of history" if not text else "no more matches in history")
                       + (found if added else ""))
        else:
            self._note(f"↑ older requests from history{found}")

    # -- the cursor ----------------------------------------------------------------------------

    def selected_row(self) -> RequestRow | None:
        if self.cursor is None or not 0 <= self.cursor < len(self._shown):
            return None
        return self._shown[self.cursor][2]

    def take_focus(self) -> None:
        """Focus the log (tab, a click): it is focusable only while the operator is in it, so
        a screen that comes back does not hand it the focus by itself."""
        self.can_focus = True
        self.focus()

    def on_focus(self) -> None:
        if self.cursor is None and self._shown:
            # The newest row in view.
            bottom = int(self.scroll_y) + self.scrollable_content_region.height - 2 - self._top
            self.cursor = max(0, min(len(self._shown) - 1, bottom))
        self.refresh()

    def on_blur(self) -> None:
        if self.screen.is_current:  # left for the panels, not for a screen above this one
            self.can_focus = False
        self.refresh()

    def action_cursor(self, step: int) -> None:
        if not self._shown:
            if step < 0:
                self.load_older()
            return
        current = len(self._shown) - 1 if self.cursor is None else self.cursor
        wanted = current + step
        if wanted < 0:
            self.load_older()  # past the oldest row: into the journal
        self._move_to(max(0, min(len(self._shown) - 1, wanted)))

    def action_page(self, step: int) -> None:
        self.action_cursor(step * max(1, self.scrollable_content_region.height - 2))

    def action_cursor_to(self, where: int) -> None:
        if self._shown:
            self._move_to(where % len(self._shown))
            if where == 0:
                self.load_older()

    def _move_to(self, index: int) -> None:
        self.cursor = index
        line = index + self._top
        height = max(1, self.scrollable_content_region.height - 1)  # less the header
        if line < self.scroll_y:
            self.scroll_to(y=line, animate=False, immediate=True)
        elif line >= self.scroll_y + height:
            self.scroll_to(y=line - height + 1, animate=False, immediate=True)
        self.refresh()

    def action_open(self) -> None:
        row = self.selected_row()
        if row is not None:
            self.post_message(self.Opened(row))

    def _on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        super()._on_mouse_scroll_up(event)
        if self.scroll_y <= 0 and not (event.ctrl or event.shift):
            self.load_older()

    async def _on_click(self, event: events.Click) -> None:
        await super()._on_click(event)
        index = int(self.scroll_y) + event.y - 1 - self._top
        if event.y >= 1 and 0 <= index < len(self._shown):
            self.take_focus()
            self._move_to(index)
            if event.chain == 2:
                self.action_open()
