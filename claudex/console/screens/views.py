"""The main screen's two views of the providers: the panel grid and the provider table.

The table is the first view above `TABLE_ABOVE` profiles, until the operator chooses with `v`;
`s` cycles the table's sort. The attributes below are set by `MainScreen` (main.py).
"""

from __future__ import annotations

from collections import deque
from typing import Final

from textual.widgets import Input

from claudex.console.components.provider_table import ProviderTable
from claudex.console.components.request_log import RequestLog
from claudex.console.components.table_rows import SORTS
from claudex.console.screens.actions import ActionsMixin

TABLE_ABOVE: Final = 12  # more profiles than this: the table is the first view


def first_view(profiles: int) -> str:
    return "table" if profiles > TABLE_ABOVE else "grid"


class ViewsMixin(ActionsMixin):
    _table: ProviderTable
    _requests: RequestLog
    _view_chosen: bool
    _names: list[str]
    _history: dict[str, deque[float]]

    def _sync_names(self, names: list[str]) -> None:
        """The profiles changed (or arrived): forget the departed, and let their count pick
        the view until the operator has."""
        if names == self._names:
            return
        self._names = names
        for gone in set(self._history) - set(names):
            del self._history[gone]
        if not self._view_chosen:
            self.set_view(first_view(len(names)))

    def set_view(self, view: str, *, chosen: bool = False) -> None:
        """Show the panel grid or the provider table (the next refresh fills it); `chosen`:
        the operator's choice, which the profile count no longer overrides."""
        self._view_chosen = self._view_chosen or chosen
        if view == self.view:
            return
        self.view = view
        self.set_class(view == "table", "-table")
        self.refresh_bindings()
        self.query_one("#filter", Input).placeholder = (
            "filter providers and requests: name, state, error, model, status…"
            if view == "table" else "filter requests: provider, model, status, trail…")
        if not self._requests.has_focus:
            # The request log's box changes height with the view: unless the operator is
            # reading it, the newest requests stay in sight.
            self.call_after_refresh(self._requests.scroll_end, animate=False, immediate=True,
                                    x_axis=False)

    def action_toggle_view(self) -> None:
        self.set_view("grid" if self.view == "table" else "table", chosen=True)
        self.request_refresh()

    def action_cycle_sort(self) -> None:
        if self.view != "table":
            return
        table = self._table
        table.set_sort(SORTS[(SORTS.index(table.sort_by) + 1) % len(SORTS)]
                       if table.sort_by in SORTS else SORTS[0])
        table.scroll_to_name(self.selected)
        self._table_titled()

    def _table_titled(self) -> None:
        title = self._table.title
        if self._table.border_title != title:
            self._table.border_title = title
