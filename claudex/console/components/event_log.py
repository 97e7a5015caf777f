"""The event log: breaker transitions, refreshes, escalation sentences, config reloads."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rich.text import Text
from textual.widgets import RichLog

from claudex.console.format import TimeText, event_colour, local_time_text, safe
from claudex.engine.events import Event

# Health rounds happen every few seconds and say nothing new; the panels show their results.
QUIET_KINDS = frozenset({"request", "health"})


class EventLog(RichLog):
    def __init__(self, *, id: str | None = None, time_text: TimeText = local_time_text) -> None:
        super().__init__(id=id, max_lines=300, wrap=True, markup=False, auto_scroll=True)
        self.can_focus = False
        self.time_text = time_text
        self.palette: Mapping[str, str] = {}
        self.lines_written = 0

    def add(self, event: Event, repeats: int = 1) -> None:
        """One line for `event`; `repeats` > 1 says it came that many times in a row."""
        if event.kind in QUIET_KINDS:
            return
        colour = event_colour(event)
        style = self.palette.get(f"claudex-{colour}", "") if colour else ""
        line = Text.assemble(
            (self.time_text(event.time), "dim"), " ",
            (f"{event.kind:<10}", f"bold {style}".strip()), " ",
            (safe(event.message, 400), style),
        )
        if repeats > 1:
            line.append(f" (×{repeats})", "dim")
        self._write(line)

    def add_all(self, events: Iterable[Event]) -> None:
        """Events in order, a run of the same sentence as one line: in an outage every failed
        request says "all providers failed ...", and one line a refresh is enough."""
        run: Event | None = None
        count = 0
        for event in events:
            if event.kind in QUIET_KINDS:
                continue
            if run is not None and (event.kind, event.message) == (run.kind, run.message):
                count += 1
                continue
            if run is not None:
                self.add(run, count)
            run, count = event, 1
        if run is not None:
            self.add(run, count)

    def _write(self, line: Text) -> None:
        # Wrap at the log's own width (RichLog would measure against the app console's).
        width = self.scrollable_content_region.width
        self.write(line, width=width if width > 0 else None)
        self.lines_written += 1

    def note(self, message: str, epoch: float) -> None:
        """A line from the console itself (an operator's action, a rejected config)."""
        self._write(Text.assemble((self.time_text(epoch), "dim"), " ",
                                  (f"{'console':<10}", "bold"), " ", safe(message, 400)))
