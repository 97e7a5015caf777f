"""A yes/no dialog for actions that change what the proxy does (trip, reset, delete, quit)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    """Dismisses True when confirmed (`y`, or its button), False otherwise (`n`, escape)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "no", id="confirm.no"),
    ]

    def __init__(self, title: str, message: str, confirm_label: str = "Yes", *,
                 danger: bool = False) -> None:
        super().__init__(classes="confirm")
        self.title_text = title
        self.message = message
        self.confirm_label = confirm_label
        self.danger = danger

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(f"[b]{escape(self.title_text)}[/]", id="dialog-title")
            yield Static(escape(self.message), id="dialog-message")
            with Horizontal(id="dialog-buttons"):
                yield Button(f"{self.confirm_label} (y)",
                             variant="error" if self.danger else "primary", id="yes")
                yield Button("Cancel (n)", id="no")

    def on_mount(self) -> None:
        # Enter on a destructive dialog should not destroy anything by accident.
        self.query_one("#no" if self.danger else "#yes", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
