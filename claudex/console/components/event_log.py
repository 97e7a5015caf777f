"""The event log: breaker transitions, refreshes, escalation sentences, config reloads.

It keeps the last `MAX_LINES` lines (the live tail). Scrolling up past the oldest line (the
mouse wheel at the top) asks `source` (the engine link's `history("events", ...)`) for older
events in a worker; they are written above the tail, dimmed, at most `MAX_OLDER` of them, each
event once (by id), and the log is rewritten around the line the operator was reading. A first
line says "history off: <why>" when the journal has none to give, or "start of history".
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final

from rich.text import Text
from textual import events
from textual.widgets import RichLog

from claudex.console.format import TimeText, event_colour, local_time_text, safe
from claudex.console.link import HISTORY_PAGE, HistoryPage
from claudex.engine.events import Event

log = logging.getLogger("claudex.console")

# Health rounds happen every few seconds and say nothing new; the panels show their results.
QUIET_KINDS = frozenset({"request", "health"})
MAX_LINES: Final = 300
MAX_OLDER: Final = 2000
IDS_MAX: Final = 20_000  # event ids remembered, so the journal's copy is not shown again

EventSource = Callable[[float | None], Awaitable[HistoryPage]]


def journal_event(row: Mapping[str, Any]) -> Event | None:
    """An event row of `GET /_claudex/history` as the event it was."""
    try:
        return Event.from_json({**row, "id": row.get("event_id") or 0})
    except (TypeError, ValueError):
        return None


class EventLog(RichLog):
    def __init__(self, *, id: str | None = None, time_text: TimeText = local_time_text) -> None:
        super().__init__(id=id, max_lines=MAX_LINES, wrap=True, markup=False, auto_scroll=True)
        self.can_focus = False
        self.time_text = time_text
        self.palette: Mapping[str, str] = {}
        self.lines_written = 0
        self.source: EventSource | None = None
        self.top_note: str | None = None
        self.history_done = False
        # What the log shows, (time, line) oldest first: the journal's lines, then the tail's.
        self._older: list[tuple[float, Text]] = []
        self._tail: deque[tuple[float, Text]] = deque(maxlen=MAX_LINES)
        self._ids: deque[int] = deque(maxlen=IDS_MAX)
        self._id_set: set[int] = set()
        self._head_lines = 0  # lines above the tail's first (the note's and the journal's)

    def _line(self, event: Event, repeats: int = 1, *, dim: bool = False) -> Text:
        colour = event_colour(event)
        style = self.palette.get(f"claudex-{colour}", "") if colour else ""
        line = Text.assemble(
            (self.time_text(event.time), "dim"), " ",
            (f"{event.kind:<10}", f"bold {style}".strip()), " ",
            (safe(event.message, 400), style),
        )
        if repeats > 1:
            line.append(f" (×{repeats})", "dim")
        if dim:
            line.stylize("dim")
        return line

    def _seen(self, event: Event) -> None:
        if event.id:
            if len(self._ids) == self._ids.maxlen:
                self._id_set.discard(self._ids[0])
            self._ids.append(event.id)
            self._id_set.add(event.id)

    def add(self, event: Event, repeats: int = 1) -> None:
        """One line for `event`; `repeats` > 1 says it came that many times in a row."""
        if event.kind in QUIET_KINDS:
            return
        self._seen(event)
        self._write(event.time, self._line(event, repeats))

    def add_all(self, events: Iterable[Event]) -> None:
        """Events in order, a run of the same sentence as one line: in an outage every failed
        request says "all providers failed ...", and one line a refresh is enough."""
        run: Event | None = None
        count = 0
        for event in events:
            if event.kind in QUIET_KINDS:
                continue
            self._seen(event)
            if run is not None and (event.kind, event.message) == (run.kind, run.message):
                count += 1
                continue
            if run is not None:
                self._write(run.time, self._line(run, count))
            run, count = event, 1
        if run is not None:
            self._write(run.time, self._line(run, count))

    def _write(self, at: float, line: Text) -> None:
        if self._older and len(self._tail) == MAX_LINES:
            # While the journal's lines are shown, the tail's oldest joins them (the log stays
            # contiguous), within the bound.
            self._older.append(self._tail[0])
            if len(self._older) > MAX_OLDER:
                del self._older[0]
            self.max_lines = MAX_LINES + len(self._older) + 1
        self._tail.append((at, line))
        self._put(line)
        self.lines_written += 1

    def _put(self, line: Text) -> None:
        # Wrap at the log's own width (RichLog would measure against the app console's).
        width = self.scrollable_content_region.width
        self.write(line, width=width if width > 0 else None)

    def note(self, message: str, epoch: float) -> None:
        """A line from the console itself (an operator's action, a rejected config)."""
        self._write(epoch, Text.assemble((self.time_text(epoch), "dim"), " ",
                                         (f"{'console':<10}", "bold"), " ", safe(message, 400)))

    # -- the journal ---------------------------------------------------------------------------

    def _on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        super()._on_mouse_scroll_up(event)
        if self.scroll_y <= 0 and not (event.ctrl or event.shift):
            self.load_older()

    def load_older(self) -> None:
        """Ask the journal for the events before the oldest line (once at a time)."""
        if self.source is None or self.history_done or len(self._older) >= MAX_OLDER:
            return
        if any(w.node is self and not w.is_finished for w in self.workers):
            return
        self.run_worker(self._load_older(), group="event-history", exclusive=True,
                        exit_on_error=False, name="event history")

    async def _load_older(self) -> None:
        if self.source is None:
            return
        oldest = self._older[0][0] if self._older else (self._tail[0][0] if self._tail
                                                         else None)
        try:
            page = await self.source(oldest)
        except Exception as exc:  # a link that broke its promise: said, never raised
            log.exception("reading the history journal failed")
            page = HistoryPage(problem=f"it could not be read ({type(exc).__name__})")
        if page.problem is not None:
            self.top_note = f"history off: {safe(page.problem, 160)}"
            self.history_done = True
            self._rewrite()
            return
        older = []
        for row in page.rows:
            event = journal_event(row)
            if event is None or event.kind in QUIET_KINDS or event.id in self._id_set:
                continue
            self._seen(event)
            older.append((event.time, self._line(event, dim=True)))
        older = older[-(MAX_OLDER - len(self._older)):] if older else []
        if len(page.rows) < HISTORY_PAGE or not older:
            self.history_done = True
            self.top_note = "start of history"
        self._older[:0] = older
        self._rewrite()

    def _rewrite(self) -> None:
        """Write every kept line again, the journal's first, keeping the view where it was."""
        before_y = self.scroll_y
        self.max_lines = MAX_LINES + len(self._older) + 1
        self.auto_scroll = False
        self.clear()
        if self.top_note:
            self._put(Text(self.top_note, style="dim italic"))
        for _, line in self._older:
            self._put(line)
        head = len(self.lines)
        for _, line in self._tail:
            self._put(line)
        self.auto_scroll = True
        # The line that was at the top of the view is still there.
        self.scroll_to(y=before_y + head - self._head_lines, animate=False, immediate=True)
        self._head_lines = head
