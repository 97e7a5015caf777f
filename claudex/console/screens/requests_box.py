"""The main screen's request box: the request log (focus, a row's detail, older rows from the
journal) and the filter above it, which filters the provider table too.

Kept apart from main.py, which lays the screen out and refreshes it from snapshots: this is what
the operator does with the requests once they are shown, and it holds no state of its own (the
filter's text lives in the widgets). The attributes below are set by `MainScreen` (main.py).
"""

from __future__ import annotations

from collections.abc import Callable

from textual.widgets import Input

from claudex.console.components import RequestLog
from claudex.console.format import TimeText, safe
from claudex.console.link import HistoryPage
from claudex.console.screens.request_detail import RequestDetailScreen
from claudex.console.screens.views import ViewsMixin


class RequestsMixin(ViewsMixin):
    time_text: TimeText
    wall: Callable[[], float]

    def action_focus_requests(self) -> None:
        """tab: into the request log (up/down pick a row, enter opens it), and back out."""
        if self._requests.has_focus:
            self.set_focus(None)
        else:
            self._requests.take_focus()

    def on_request_log_opened(self, message: RequestLog.Opened) -> None:
        row = message.row
        self.app.push_screen(RequestDetailScreen(row.record, time_text=self.time_text,
                                                 wall=self.wall, from_history=row.from_history))

    async def _request_history(self, until: float | None, text: str | None) -> HistoryPage:
        return await self.link.history("requests", until=until, text=text)

    async def _event_history(self, until: float | None) -> HistoryPage:
        return await self.link.history("events", until=until)

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.display = False
        self.set_focus(None)
        self.query_one(RequestLog).set_filter("")
        self._table.set_filter("")
        self._table_titled()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.query_one(RequestLog).set_filter(event.value)
            self._table.set_filter(event.value)
            self._table_titled()
            self.query_one("#requests-box").border_title = (
                f"requests · filter: {safe(event.value, 40)}" if event.value.strip()
                else "requests")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            if not event.value.strip():
                event.input.display = False
            self.set_focus(None)
