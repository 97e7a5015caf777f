"""The main screen's key bar: Textual's footer, leaving out its least important keys when they
do not all fit the width, so that at 100 columns the keys an operator needs in an incident
(trip, reset, on/off, sort, filter, help, quit) stay in view instead of being cut at the right
edge. What it leaves out is still in `?` help and the command palette.

Keys are left out in `DROP_ORDER`, a key at a time (the demo's fault keys as one group), until
the rest fit beside the command palette's key; keys not named there are never left out. The
widths are the keys' own rendered cells (key, description, padding, margins), read after each
recompose (the bindings changed: a view, a focus, read-only) and applied again on a resize.
Textual exports only `Footer`; its parts come from its private module (pyproject pins
textual below 9).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from textual import events
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey, FooterLabel, KeyGroup  # (pinned: textual<9)

PALETTE: Final = "command palette"
ROOMY: Final = Size(1000, 1)  # a key's own width, whatever the room
# First left out first: the config verbs (rare during an incident), the palette's own key, the
# demo's traffic switch, then view, request log and filter; the demo's faults last of all.
DROP_ORDER: Final = ("add", "delete", "edit", "health", PALETTE, "traffic", "proxy_fault",
                     "toggle_view", "focus_requests", "filter", "fault")


def _name(key: FooterKey) -> str:
    """A key's name in `DROP_ORDER`: its action without arguments ("fault('down')": fault)."""
    if key.has_class("-command-palette"):
        return PALETTE
    return key.action.split("(", 1)[0]


def _cells(widget: Widget) -> int:
    """The cells `widget` takes in the bar: its content (its own keys, for a group), padding,
    border and margins (a shared margin counted twice: on the safe side)."""
    if isinstance(widget, KeyGroup):
        inner = sum(_cells(child) for child in widget.children)
    else:
        inner = widget.get_content_width(ROOMY, ROOMY)
    return inner + widget.styles.gutter.width + widget.styles.margin.width


class KeyBar(Footer):
    def __init__(self, *, drop_order: Sequence[str] = DROP_ORDER) -> None:
        super().__init__()
        self.drop_order = tuple(drop_order)
        self.left_out: list[str] = []  # the keys not shown at this width, by name
        self._units: list[tuple[str, list[Widget], int]] = []

    async def recompose(self) -> None:
        await super().recompose()
        self._measure()
        self._fit()

    def on_resize(self, event: events.Resize) -> None:
        self._fit()

    def _measure(self) -> None:
        """The bar's keys as (name, widgets, cells), in order; a group with its label."""
        units: list[tuple[str, list[Widget], int]] = []
        for child in self.children:
            if isinstance(child, KeyGroup):
                keys = [k for k in child.children if isinstance(k, FooterKey)]
                units.append((_name(keys[0]) if keys else "", [child], _cells(child)))
            elif isinstance(child, FooterLabel) and units:
                name, widgets, cells = units[-1]  # the description of the group before it
                units[-1] = (name, [*widgets, child], cells + _cells(child))
            elif isinstance(child, FooterKey):
                units.append((_name(child), [child], _cells(child)))
        self._units = units

    def _fit(self) -> None:
        width = self.size.width or self.app.size.width
        total = sum(cells for _, _, cells in self._units)
        left_out: list[str] = []
        for name in self.drop_order:
            if total <= width:
                break
            for unit_name, _, cells in self._units:
                if unit_name == name:
                    total -= cells
                    left_out.append(name)
        for unit_name, widgets, _ in self._units:
            shown = unit_name not in left_out
            for widget in widgets:
                # A group's keys too, so each key's `display` says whether it is in view.
                inner = list(widget.children) if isinstance(widget, KeyGroup) else []
                for part in (widget, *inner):
                    if part.display != shown:
                        part.display = shown
        self.left_out = left_out
