"""How the profile editor looks, filled from profiles.example.toml (pytest-textual-snapshot).

Everything on screen is fixed: the file is a copy of the example, opened by the relative path
`profiles.toml` from a temp working directory (the dialog's subtitle shows the path, so an
absolute temp path would differ on every run), the terminal is 140x44, the form's workers (file
read, live check) have finished, and cursors do not blink. Update after a deliberate change with
`pytest tests/console/test_console_editor_snapshot.py --snapshot-update` and look at the report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Input, Static, TextArea

from claudex.console.editor import ProfileEditorScreen
from tests.paths import EXAMPLE

SIZE = (140, 44)


class Host(App[None]):
    """A bare app under the editor, like the console's main screen but with nothing moving."""

    def __init__(self, path: Path, profile: str) -> None:
        super().__init__()
        self.path = path
        self.profile = profile

    def compose(self) -> ComposeResult:
        yield Static("host")

    def on_mount(self) -> None:
        self.push_screen(ProfileEditorScreen(self.path, self.profile))


async def filled(pilot: Pilot[Any]) -> None:
    """Stop the cursors blinking, then let the file read and the first check finish."""
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, ProfileEditorScreen), screen
    for widget in screen.query(Input):
        widget.cursor_blink = False
    for area in screen.query(TextArea):
        area.cursor_blink = False
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
    # The screenshot must show the filled, checked form, not "Loading…".
    assert screen.query_one("#field-name", Input).value == screen.profile_name
    assert screen.issues == [] and screen.form_errors == []


@pytest.mark.parametrize("profile", ["claude", "deepseek"])
def test_editor_filled_from_the_example(
    snap_compare: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, profile: str
) -> None:
    """claude: selects, switches and a backup chain; deepseek: a models map and overrides."""
    (tmp_path / "profiles.toml").write_bytes(EXAMPLE.read_bytes())
    monkeypatch.chdir(tmp_path)
    app = Host(Path("profiles.toml"), profile)
    assert snap_compare(app, terminal_size=SIZE, run_before=filled)
