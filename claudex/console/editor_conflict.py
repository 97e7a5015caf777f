"""The profile editor's conflict dialog: the config file changed on disk while the form was open.

`ProfileEditorScreen` (`claudex.console.editor`, which re-exports `ConflictScreen`) pushes it when
a save finds a newer file; the answer decides whether the form is discarded or applied on top.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Static

__all__ = ["ConflictScreen"]


class ConflictScreen(ModalScreen[str]):
    """The file changed on disk: dismisses "reload", "overwrite" or "back"."""

    DEFAULT_CSS = """
    ConflictScreen { align: center middle; background: $background 60%; }
    #conflict-dialog {
        width: 84; max-width: 100%; height: auto; padding: 1 2;
        border: thick $warning; background: $panel;
    }
    #conflict-message { margin-bottom: 1; }
    #conflict-buttons { height: auto; align-horizontal: right; }
    #conflict-buttons Button { margin-left: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "choose('reload')", "reload", id="editor.conflict.reload"),
        Binding("o", "choose('overwrite')", "overwrite", id="editor.conflict.overwrite"),
        Binding("escape", "choose('back')", "back", id="editor.conflict.back"),
    ]

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def compose(self) -> ComposeResult:
        with Vertical(id="conflict-dialog"):
            yield Static(
                f"[b]{escape(self.path.name)} changed on disk[/]\n\n"
                f"It was saved elsewhere after the editor opened it ({escape(str(self.path))}).\n\n"
                "Reload (r): discard this form and show the file as it is now.\n"
                "Overwrite (o): apply this form on top of the new file; the other changes stay.\n"
                "Back (esc): return to the form without saving.",
                id="conflict-message",
            )
            with Horizontal(id="conflict-buttons"):
                yield Button("Reload (r)", id="reload")
                yield Button("Overwrite (o)", variant="warning", id="overwrite")
                yield Button("Back (esc)", id="back")

    def on_mount(self) -> None:
        self.query_one("#back", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id or "back")

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)
