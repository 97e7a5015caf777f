"""The trip dialog: for how long (blank = until reset) and why, then trip.

A `ConfirmScreen` with two fields: enter in either field (or the Trip button) trips, escape (or
Cancel) changes nothing. A duration that does not parse (engine/breaker/trips.py, the
parser the admin API and `claudex trip --for` use) is said under the fields, and the dialog
stays. The answer is read from `asked` once the dialog is dismissed with True.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.widgets import Button, Input, Static

from claudex.console.screens.confirm import ConfirmScreen
from claudex.engine.breaker.trips import REASON_MAX, DurationError, clean_reason, parse_duration


@dataclass(frozen=True)
class TripAsk:
    seconds: float | None  # None: until reset
    reason: str | None


class TripScreen(ConfirmScreen):
    """Dismisses True with `asked` set when the operator trips, False when cancelled. Not
    `y`/`n`: those are letters a reason may hold. Textual runs a base class's handlers after a
    subclass's unless told not to: `prevent_default` keeps the confirm dialog's button handler
    out."""

    inherit_bindings: ClassVar[bool] = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "answer(False)", "cancel", id="trip.cancel"),
    ]

    def __init__(self, name: str, tripped: str | None = None) -> None:
        """`tripped`: the trip in force, in words, when there is one (the new terms replace
        it)."""
        again = (f"{name} is {tripped}; what you enter here replaces it. " if tripped
                 else f"Requests skip {name} and fail over along their chains. ")
        super().__init__(f"Trip {name} again?" if tripped else f"Trip {name}?",
                         again + "With a duration it goes half-open by itself when the time is "
                         "up (one trial request decides); blank holds until you reset it (r).",
                         "Trip", danger=True)
        self.provider = name
        self.asked: TripAsk | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(f"[b]{escape(self.title_text)}[/]", id="dialog-title")
            yield Static(escape(self.message), id="dialog-message")
            yield Input(placeholder="for how long: 20m, 1h30m, 90s (blank: until reset)",
                        id="trip-for")
            yield Input(placeholder="reason (optional)", max_length=REASON_MAX,
                        id="trip-reason")
            yield Static("", id="trip-error")
            with Horizontal(id="dialog-buttons"):
                yield Button("Trip (enter)", variant="error", id="yes")
                yield Button("Cancel (esc)", id="no")

    def on_mount(self) -> None:
        # After the confirm dialog's own on_mount (which focuses its Cancel button).
        self.call_after_refresh(self.query_one("#trip-for", Input).focus)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        event.prevent_default()
        if event.button.id == "yes":
            self._submit()
        else:
            self.dismiss(False)

    def _submit(self) -> None:
        text = self.query_one("#trip-for", Input).value.strip()
        try:
            seconds = parse_duration(text) if text else None
        except DurationError as exc:
            error = self.query_one("#trip-error", Static)
            error.update(f"[b $error]{escape(str(exc))}[/]")
            self.query_one("#trip-for", Input).focus()
            return
        self.asked = TripAsk(seconds, clean_reason(self.query_one("#trip-reason", Input).value))
        self.dismiss(True)
