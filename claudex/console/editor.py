"""The profile editor: a form over one `[[profiles]]` table, saved in place in the TOML file.

`ProfileEditorScreen(config_path, profile_name)` edits a profile (None: adds one) and dismisses
True once the file was written, False on cancel. It never holds the file open: it reads the text
and its `Fingerprint` once (in a worker), and every keystroke re-runs the validator of
`claudex check` on the text the file *would* have (`claudex.config.editing`), also in a worker,
so Save is enabled only when the result loads. Saving goes through `update_profile` /
`add_profile`, which keep comments, order and untouched keys. If the file changed on disk since it
was read, `ConflictScreen` asks: reload (discard the form) or overwrite (apply the form on top of
the new content) — either way no edit is silently lost.

Secrets: the form takes the *name* of an environment variable; an inline `api_key` can be typed
into a masked field but the stored one is never shown or put back into the form.

The form itself (its field table, layout, widget <-> value conversions) is
`claudex.console.editor_fields`, the file snapshot and the check `claudex.console.editor_snapshot`,
and `ConflictScreen` `claudex.console.editor_conflict`; this module keeps the editor's behaviour.
"""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.markup import escape
from textual.message import Message
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import (
    Button,
    Checkbox,
    Footer,
    Input,
    OptionList,
    Select,
    Static,
    Switch,
    TextArea,
)
from textual.widgets.option_list import Option

from claudex.config.editing import (
    ConflictError,
    EditError,
    Fingerprint,
    ProfileNotFoundError,
    add_profile,
    update_profile,
)
from claudex.config.model import Config, ConfigError, ConfigIssue
from claudex.console.editor_conflict import ConflictScreen
from claudex.console.editor_fields import (
    AUTH_FIELDS,
    BREAKER_FIELDS,
    FIELDS,
    FORM_CSS,
    FORM_KEYS,
    MAP_FIELDS,
    PROVIDER_FIELDS,
    RETRY_FIELDS,
    TIMEOUT_FIELDS,
    Field,
    Kind,
    fill_field,
    form_columns,
    read_form,
    show_switch_state,
)
from claudex.console.editor_snapshot import FileSnapshot, check_edit, read_snapshot, short_key

# The form's table lives in `editor_fields` and `ConflictScreen` in `editor_conflict`; their names
# stay importable from here.
__all__ = [
    "AUTH_FIELDS",
    "BREAKER_FIELDS",
    "FIELDS",
    "FORM_KEYS",
    "MAP_FIELDS",
    "PROVIDER_FIELDS",
    "RETRY_FIELDS",
    "TIMEOUT_FIELDS",
    "ConflictScreen",
    "Field",
    "Kind",
    "ProfileEditorScreen",
]

_W = TypeVar("_W", bound=Widget)


class ProfileEditorScreen(ModalScreen[bool]):
    """Edit (or, with `profile_name=None`, add) one profile of the config file."""

    DEFAULT_CSS = FORM_CSS + """
    ProfileEditorScreen { align: center middle; background: $background 60%; }
    #editor-dialog {
        width: 136; max-width: 100%; height: 36; max-height: 100%;
        border: thick $primary; background: $panel; padding: 0 1;
        border-title-style: bold; border-title-color: $text;
        border-subtitle-color: $text-muted;
    }
    #editor-issues-box {
        height: 8; margin-top: 1; padding: 0 1;
        border: round $primary 40%; border-title-color: $text-muted;
    }
    #editor-issues-box.-invalid { border: round $error; border-title-color: $text-error; }
    #editor-issues-box.-valid { border: round $success 60%; border-title-color: $text-success; }
    #editor-footer { height: 1; margin-bottom: 1; }
    #editor-status { width: 1fr; color: $text-muted; }
    #editor-footer Button { margin-left: 2; min-width: 12; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "save", id="editor.save", priority=True),
        Binding("escape", "cancel", "cancel", id="editor.cancel"),
    ]
    AUTO_FOCUS = "#field-name"

    def __init__(self, config_path: Path, profile_name: str | None) -> None:
        super().__init__()
        self.config_path = Path(config_path)
        self.profile_name = profile_name
        # Set after a successful save: what was written, e.g. for the config watcher.
        self.saved: Fingerprint | None = None
        self.issues: list[ConfigIssue] = []
        self.form_errors: list[str] = []
        self._base_text = ""
        self._fingerprint: Fingerprint | None = None
        self._raw: dict[str, Any] = {}
        self._others: list[str] = []
        self._backups: list[str] = []
        self._loaded = False
        self._widgets: dict[str, Widget] = {}
        # The form as last checked: the Changed events that filling the form posts (and any
        # edit that ends where it started) then cost nothing.
        self._last_checked: tuple[dict[str, Any], list[str]] | None = None
        self._generation = 0

    # -- layout --------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Vertical(id="editor-dialog"):
            yield from form_columns()
            with VerticalScroll(id="editor-issues-box"):
                yield Static("Loading…", id="editor-issues")
            with Horizontal(id="editor-footer"):
                yield Static("", id="editor-status")
                yield Button("Cancel", id="editor-cancel", compact=True)
                yield Button(
                    "Save", id="editor-save", variant="primary", compact=True, disabled=True
                )
        # Over the main screen's footer, whose keys do not apply while the editor is open.
        yield Footer()

    def _get(self, selector: str, expect: type[_W]) -> _W:
        """`query_one`, remembered: the form is read on every keystroke."""
        widget = self._widgets.get(selector)
        if widget is None:
            widget = self._widgets[selector] = self.query_one(selector)
        if not isinstance(widget, expect):
            raise TypeError(f"{selector} is a {type(widget).__name__}, not {expect.__name__}")
        return widget

    def on_mount(self) -> None:
        dialog = self.query_one("#editor-dialog")
        dialog.border_title = (
            f"Edit profile · {self.profile_name}" if self.profile_name else "New profile"
        )
        dialog.border_subtitle = f"{self.config_path}  ·  ctrl+s save · esc cancel"
        self.query_one("#remove-stored-key").display = False
        self._load()

    # -- loading -------------------------------------------------------------------------------

    @work(group="editor", exclusive=True, exit_on_error=False)
    async def _load(self) -> None:
        """Read the file and fill the form from it (on open, and on "reload")."""
        try:
            snapshot = await asyncio.to_thread(read_snapshot, self.config_path, self.profile_name)
        except ProfileNotFoundError:
            self._set_status(f"{self.profile_name} is not in the file; Save adds it", error=True)
            self.profile_name = None
            await self._rebase()
            return
        except (ConfigError, EditError) as error:
            self._show_fatal(error)
            return
        self._take(snapshot)
        self._fill(snapshot.profile, snapshot.config)

    async def _rebase(self) -> None:
        """Re-read the file but keep the form: it now applies on top of the current content."""
        try:
            snapshot = await asyncio.to_thread(read_snapshot, self.config_path, self.profile_name)
        except ProfileNotFoundError:
            self.profile_name = None  # deleted or renamed meanwhile: the form adds it back
            await self._rebase()
            return
        except (ConfigError, EditError) as error:
            self._show_fatal(error)
            return
        self._take(snapshot)
        if self.profile_name is None:
            self.query_one("#editor-dialog").border_title = "New profile"
        self._refresh_backups()
        self._loaded = True
        self._last_checked = None
        self._revalidate()

    def _take(self, snapshot: FileSnapshot) -> None:
        self._base_text, self._fingerprint = snapshot.text, snapshot.fingerprint
        self._raw = snapshot.profile
        self._others = [name for name in snapshot.names if name != self.profile_name]

    def _show_fatal(self, error: Exception) -> None:
        lines = [str(i) for i in error.issues] if isinstance(error, ConfigError) else [str(error)]
        self._show_issue_text(
            "✗ the file cannot be edited", "\n".join(escape(line) for line in lines), valid=False
        )
        self._set_status("fix the file by hand, then reopen the editor", error=True)

    def _fill(self, raw: dict[str, Any], config: Config | None) -> None:
        for field in FIELDS:
            fill_field(self._get, field, raw, config)
        backups = raw.get("backup_providers")
        self._backups = [str(b) for b in backups] if isinstance(backups, list) else []
        self._refresh_backups()
        self._loaded = True
        self._last_checked = None
        self._revalidate()

    # -- the backup chain ----------------------------------------------------------------------

    def _refresh_backups(self, highlight: int | None = None) -> None:
        chain = self.query_one("#backup-list", OptionList)
        chain.clear_options()
        chain.add_options(
            [Option(f"{i + 1}. {escape(name)}", id=name) for i, name in enumerate(self._backups)]
            or [Option("[dim]none: errors go to the client[/]", disabled=True)]
        )
        if self._backups:
            chain.highlighted = min(highlight or 0, len(self._backups) - 1)
        choice: Select[str] = self.query_one("#backup-choice", Select)
        candidates = [n for n in self._others if n not in self._backups]
        choice.set_options([(name, name) for name in candidates])
        choice.disabled = not candidates

    @on(Button.Pressed, "#backup-add")
    def _add_backup(self) -> None:
        choice: Select[str] = self.query_one("#backup-choice", Select)
        if isinstance(choice.value, str) and choice.value not in self._backups:
            self._backups.append(choice.value)
            self._refresh_backups(len(self._backups) - 1)
            self._revalidate()

    @on(Button.Pressed, "#backup-up")
    def _move_backup_up(self) -> None:
        self._move_backup(-1)

    @on(Button.Pressed, "#backup-down")
    def _move_backup_down(self) -> None:
        self._move_backup(+1)

    def _move_backup(self, step: int) -> None:
        index = self.query_one("#backup-list", OptionList).highlighted
        if index is None or not 0 <= index + step < len(self._backups):
            return
        chain = self._backups
        chain[index], chain[index + step] = chain[index + step], chain[index]
        self._refresh_backups(index + step)
        self._revalidate()

    @on(Button.Pressed, "#backup-remove")
    def _remove_backup(self) -> None:
        index = self.query_one("#backup-list", OptionList).highlighted
        if index is None or index >= len(self._backups):
            return
        del self._backups[index]
        self._refresh_backups(index)
        self._revalidate()

    # -- reading the form ----------------------------------------------------------------------

    def form_values(self) -> tuple[dict[str, Any], list[str]]:
        """The values to write (None removes a key) and problems in the form's own text."""
        return read_form(self._get, self._raw, self._backups)

    # -- live validation -----------------------------------------------------------------------

    @on(Input.Changed)
    @on(Select.Changed)
    @on(Switch.Changed)
    @on(Checkbox.Changed)
    @on(TextArea.Changed)
    def _form_changed(self, event: Message) -> None:
        if not self._loaded:
            return
        if isinstance(event, Select.Changed) and event.select.id == "backup-choice":
            return
        if isinstance(event, Switch.Changed):
            show_switch_state(self._get, event.switch)
        self._revalidate()

    def _revalidate(self) -> None:
        if not self._loaded:
            return
        values, errors = self.form_values()
        if (values, errors) == self._last_checked:
            return
        self._last_checked = (values, errors)
        self._generation += 1
        # Save keeps the state of the last check meanwhile: a save re-validates anyway.
        self._validate(self._generation, values, errors)

    @work(group="editor-check", exclusive=True, exit_on_error=False)
    async def _validate(self, generation: int, values: dict[str, Any], errors: list[str]) -> None:
        issues = await asyncio.to_thread(self._check, values)
        if generation == self._generation:
            self._show_issues(issues, errors)

    def _check(self, values: dict[str, Any]) -> list[ConfigIssue]:
        """Runs in a thread: the issues `claudex check` would report for the edited file."""
        return check_edit(self._base_text, self.profile_name, values, str(self.config_path))

    def _show_issues(self, issues: list[ConfigIssue], errors: list[str]) -> None:
        self.issues, self.form_errors = issues, errors
        bad_keys = {self._short_key(issue.key) for issue in issues}
        bad_keys |= {error.partition(": ")[0] for error in errors}
        for key in FORM_KEYS:
            self.query_one(f"#label-{key}").set_class(key in bad_keys, "-error")
        valid = not issues and not errors
        if valid:
            self._show_issue_text(
                "✓ valid",
                "The file loads with these values (the same check as `claudex check`). "
                "ctrl+s saves.",
                valid=True,
            )
        else:
            problems = [error.partition(": ")[::2] for error in errors]
            problems += [(self._short_key(issue.key), issue.message) for issue in issues]
            lines = [f"[b]{escape(key)}[/]: {escape(message)}" for key, message in problems]
            count = len(lines)
            title = f"✗ {count} problem{'s' if count != 1 else ''}, not saved until fixed"
            self._show_issue_text(title, "\n".join(lines), valid=False)
        self.query_one("#editor-save", Button).disabled = not valid

    def _short_key(self, key: str) -> str:
        return short_key(key, self._get("#field-name", Input).value.strip())

    def _show_issue_text(self, title: str, markup: str, *, valid: bool) -> None:
        self.query_one("#editor-issues", Static).update(markup)
        box = self.query_one("#editor-issues-box")
        box.border_title = title
        box.set_class(valid, "-valid")
        box.set_class(not valid, "-invalid")

    def _set_status(self, text: str, *, error: bool = False) -> None:
        shown = f"[$text-error]{escape(text)}[/]" if error else escape(text)
        self.query_one("#editor-status", Static).update(shown)

    # -- saving --------------------------------------------------------------------------------

    @on(Button.Pressed, "#editor-save")
    def _save_pressed(self) -> None:
        self.action_save()

    @on(Button.Pressed, "#editor-cancel")
    def _cancel_pressed(self) -> None:
        self.action_cancel()

    def action_save(self) -> None:
        if self.query_one("#editor-save", Button).disabled:
            self.app.bell()
            return
        values, errors = self.form_values()
        if errors:
            return
        self._save(values, self._fingerprint)

    def action_cancel(self) -> None:
        self.dismiss(False)

    @work(group="editor", exclusive=True, exit_on_error=False)
    async def _save(self, values: dict[str, Any], expected: Fingerprint | None) -> None:
        self._set_status("saving…")
        digest = expected.digest if expected is not None else None
        try:
            if self.profile_name is None:
                written = await asyncio.to_thread(
                    add_profile, self.config_path, values, expected_digest=digest
                )
            else:
                written = await asyncio.to_thread(
                    update_profile,
                    self.config_path,
                    self.profile_name,
                    values,
                    expected_digest=digest,
                )
        except ConflictError as conflict:
            self._set_status("the file changed on disk", error=True)
            self.app.push_screen(
                ConflictScreen(self.config_path),
                callback=partial(self._resolve, values=values, current=conflict.current),
            )
            return
        except ProfileNotFoundError:
            self._set_status(f"{self.profile_name} was removed from the file; Save adds it back")
            await self._rebase()
            return
        except ConfigError:
            # The file changed underneath (an overwrite onto new content): check against it.
            self._set_status("not saved: with the file as it is now, it would not load", error=True)
            await self._rebase()
            return
        except (EditError, OSError) as error:
            self._set_status(f"not saved: {error}", error=True)
            return
        self.saved = written
        self.dismiss(True)

    def _resolve(self, choice: str | None, *, values: dict[str, Any], current: Fingerprint) -> None:
        if choice == "overwrite":
            self._save(values, current)
        elif choice == "reload":
            self._loaded = False
            self._set_status("reloaded from disk; your changes were discarded")
            self._load()
        else:
            self._set_status("not saved: the file changed on disk", error=True)
