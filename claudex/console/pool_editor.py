"""The pool editor (DESIGN.md "Pools"): a small form over one pool's `[[profiles]]` table — its
members in order, its balance, weights and backups — saved in place through
`claudex.config.editing.update_profile`, which keeps comments and untouched keys and refuses a
result `claudex check` would refuse (the problems are shown, file and line, and nothing is
written). Opened from the command palette ("Edit pool NAME")."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Select, Static

from claudex.config.editing import read_profile, update_profile
from claudex.config.model import BALANCES, ConfigError


def names_of(text: str) -> list[str]:
    """`a, b` -> ["a", "b"] (spaces and empty items dropped)."""
    return [part.strip() for part in text.split(",") if part.strip()]


def weights_of(text: str) -> dict[str, int]:
    """`a=2, b=1` -> {"a": 2, "b": 1}; raises ValueError naming what is not `name=integer`."""
    weights: dict[str, int] = {}
    for part in names_of(text):
        name, sep, value = part.partition("=")
        if not sep or not name.strip() or not value.strip().isdigit():
            raise ValueError(f"weights: {part!r} is not member=integer")
        weights[name.strip()] = int(value.strip())
    return weights


class PoolEditorScreen(ModalScreen[bool]):
    DEFAULT_CSS = """
    PoolEditorScreen { align: center middle; background: $background 60%; }
    #pool-dialog {
        width: 90; max-width: 100%; height: auto; max-height: 100%;
        border: thick $primary; background: $panel; padding: 0 1;
        border-title-style: bold;
    }
    #pool-dialog .pool-label { color: $text-muted; margin-top: 1; }
    #pool-issues { height: auto; min-height: 1; margin-top: 1; color: $text-error; }
    #pool-footer { height: 3; margin-top: 1; align-horizontal: right; }
    #pool-footer Button { margin-left: 2; min-width: 12; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "save", id="pool-editor.save", priority=True),
        Binding("escape", "cancel", "cancel", id="pool-editor.cancel"),
    ]
    AUTO_FOCUS = "#pool-members"

    def __init__(self, config_path: Path, pool_name: str) -> None:
        super().__init__()
        self.config_path = Path(config_path)
        self.pool_name = pool_name
        self.problems: list[str] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="pool-dialog") as dialog:
            dialog.border_title = f"pool {escape(self.pool_name)}"
            yield Static("members (profiles, in order, comma-separated)", classes="pool-label")
            yield Input(id="pool-members")
            yield Static("balance", classes="pool-label")
            yield Select([(b, b) for b in BALANCES], id="pool-balance", allow_blank=False,
                         value="sticky")
            yield Static("weights (member=integer, comma-separated; empty: 1 each)",
                         classes="pool-label")
            yield Input(id="pool-weights")
            yield Static("backup_providers (after every member)", classes="pool-label")
            yield Input(id="pool-backups")
            yield Static("", id="pool-issues")
            with Horizontal(id="pool-footer"):
                yield Button("Save", id="pool-save", variant="primary")
                yield Button("Cancel", id="pool-cancel")

    def on_mount(self) -> None:
        self._load()

    @work(group="pool-editor", exclusive=True)
    async def _load(self) -> None:
        try:
            table = await asyncio.to_thread(read_profile, self.config_path, self.pool_name)
        except Exception as exc:  # gone from the file meanwhile, unreadable: say so
            self._show([f"cannot read pool {self.pool_name!r}: {exc}"])
            return
        self.fill(table)

    def fill(self, table: dict[str, Any]) -> None:
        self.query_one("#pool-members", Input).value = ", ".join(table.get("members") or [])
        balance = table.get("balance") or "sticky"
        if balance in BALANCES:
            self.query_one("#pool-balance", Select).value = balance
        weights = table.get("weights") or {}
        self.query_one("#pool-weights", Input).value = ", ".join(
            f"{name}={value}" for name, value in weights.items())
        self.query_one("#pool-backups", Input).value = ", ".join(
            table.get("backup_providers") or [])

    def values(self) -> dict[str, Any]:
        """The form as the table's keys (None removes a key); raises ValueError."""
        weights = weights_of(self.query_one("#pool-weights", Input).value)
        backups = names_of(self.query_one("#pool-backups", Input).value)
        return {"members": names_of(self.query_one("#pool-members", Input).value),
                "balance": str(self.query_one("#pool-balance", Select).value),
                "weights": weights or None, "backup_providers": backups or None}

    def _show(self, problems: list[str]) -> None:
        self.problems = problems
        self.query_one("#pool-issues", Static).update(escape("\n".join(problems)))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "pool-save":
            self.action_save()
        elif event.button.id == "pool-cancel":
            self.action_cancel()

    def action_cancel(self) -> None:
        self.dismiss(False)

    def action_save(self) -> None:
        try:
            values = self.values()
        except ValueError as exc:
            self._show([str(exc)])
            return
        self._save(values)

    @work(group="pool-editor", exclusive=True)
    async def _save(self, values: dict[str, Any]) -> None:
        try:
            await asyncio.to_thread(update_profile, self.config_path, self.pool_name, values)
        except ConfigError as exc:
            self._show([str(issue) for issue in exc.issues])
            return
        except Exception as exc:  # the file changed under us, a disk error: nothing written
            self._show([f"not saved: {exc}"])
            return
        self.dismiss(True)
