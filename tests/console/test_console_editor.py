"""The profile editor screen, driven with Pilot on a temp copy of profiles.example.toml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Button, Input, Select, Static, Switch, TextArea

from claudex.config.editing import delete_profile, update_profile
from claudex.config.loader import _PROFILE_KEYS, load_config
from claudex.console.editor import FORM_KEYS, ConflictScreen, ProfileEditorScreen
from claudex.console.editor_fields import UNEDITED_KEYS
from tests.config.test_config_editing import assert_same_outside
from tests.paths import EXAMPLE

SIZE = (140, 44)


class Host(App[None]):
    """A bare app that opens the editor and records how it was dismissed."""

    def __init__(self, path: Path, name: str | None) -> None:
        super().__init__()
        self.path = path
        self.profile = name
        self.results: list[bool | None] = []

    def compose(self) -> ComposeResult:
        yield Static("host")

    def on_mount(self) -> None:
        self.push_screen(ProfileEditorScreen(self.path, self.profile), self.results.append)

    @property
    def editor(self) -> ProfileEditorScreen:
        screen = self.screen
        assert isinstance(screen, ProfileEditorScreen), screen
        return screen


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "profiles.toml"
    path.write_bytes(EXAMPLE.read_bytes())
    path.chmod(0o644)
    return path


async def settle(pilot: Pilot[Any]) -> None:
    """Let workers (file reads, checks, saves) finish and their results reach the screen."""
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def type_into(pilot: Pilot[Any], selector: str, text: str) -> None:
    """Replace an input's text; it posts the same `Changed` message typing does."""
    pilot.app.screen.query_one(selector, Input).value = text
    await settle(pilot)


async def type_keys(pilot: Pilot[Any], selector: str, text: str) -> None:
    """Type over an input key by key, as a user would (slower: one pause per key)."""
    field = pilot.app.screen.query_one(selector, Input)
    field.focus()
    await pilot.press("home", "shift+end")
    await pilot.press(*text)
    await settle(pilot)


# Small sync readers: the file is tiny, and the tests check it between UI steps.
def raw(path: Path) -> bytes:
    return path.read_bytes()


def text(path: Path) -> str:
    return path.read_text()


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def save_button(app: Host) -> Button:
    return app.editor.query_one("#editor-save", Button)


def test_the_form_covers_every_profile_key() -> None:
    assert set(FORM_KEYS) | set(UNEDITED_KEYS) == set(_PROFILE_KEYS)
    assert not set(FORM_KEYS) & set(UNEDITED_KEYS)


async def test_edit_and_save_changes_the_field_and_keeps_the_rest(config_file: Path) -> None:
    before = text(config_file)
    app = Host(config_file, "grok")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.editor.query_one("#field-default_model", Input).value == "grok-3-beta"
        await type_keys(pilot, "#field-default_model", "grok-4")
        await type_into(pilot, "#field-max_tokens", "2048")
        await type_into(pilot, "#field-read_timeout", "")  # back to inheriting [proxy]
        assert not save_button(app).disabled
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert app.results == [True]
    after = text(config_file)
    assert_same_outside(before, after, "grok")
    for comment in (line for line in before.splitlines() if line.startswith("#")):
        assert comment in after.splitlines()
    grok = load_config(config_file).profile("grok")
    assert grok is not None
    assert (grok.default_model, grok.max_tokens, grok.read_timeout) == ("grok-4", 2048, 600.0)
    assert grok.api_key_env == "XAI_API_KEY"
    assert grok.backup_providers == ("deepseek",)


async def test_saving_an_untouched_form_changes_nothing(config_file: Path) -> None:
    before = raw(config_file)
    # The most commented profile, and the one with OAuth keys and `enabled = false`.
    for name in ("claude", "claude-oauth"):
        app = Host(config_file, name)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("ctrl+s")
            await settle(pilot)
            assert app.results == [True], name
    assert raw(config_file) == before


async def test_backup_chain_is_an_ordered_pick_list(config_file: Path) -> None:
    app = Host(config_file, "claude-oauth")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        editor = app.editor
        choice: Select[str] = editor.query_one("#backup-choice", Select)
        # Only profiles not yet in the chain, and never the profile itself.
        offered = [str(prompt) for prompt, _ in choice._options if _ != Select.NULL]
        assert offered == ["claude", "codex"]
        chain = editor.query_one("#backup-list")
        chain.focus()
        await pilot.press("down")  # highlight "deepseek"
        await pilot.click("#backup-up")
        choice.value = "claude"
        await pilot.click("#backup-add")
        await settle(pilot)
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert app.results == [True]
    oauth = load_config(config_file).profile("claude-oauth")
    assert oauth is not None
    assert oauth.backup_providers == ("deepseek", "grok", "claude")


async def test_an_invalid_value_disables_save_shows_the_issue_and_writes_nothing(
    config_file: Path,
) -> None:
    before = raw(config_file)
    app = Host(config_file, "grok")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await type_into(pilot, "#field-base_url", "ftp://api.x.ai")
        editor = app.editor
        assert save_button(app).disabled
        assert [(i.key, i.message) for i in editor.issues] == [
            ("profiles.grok.base_url", 'must use http or https, not "ftp"')
        ]
        assert editor.query_one("#label-base_url").has_class("-error")
        shown = str(editor.query_one("#editor-issues", Static).render())
        assert "base_url" in shown and "must use http or https" in shown

        await pilot.press("ctrl+s")  # refused
        await settle(pilot)
        assert app.results == []
        assert isinstance(app.screen, ProfileEditorScreen)

        # A form-level mistake (not TOML yet) is caught as well; fixing both re-enables Save.
        await type_into(pilot, "#field-base_url", "https://api.x.ai/v1")
        editor.query_one("#field-models", TextArea).text = "haiku grok-3-mini"
        await settle(pilot)
        assert save_button(app).disabled
        assert editor.form_errors == ["models: line 1 must look like name=value"]
        editor.query_one("#field-models", TextArea).text = "haiku=grok-3-mini"
        await settle(pilot)
        assert not save_button(app).disabled
        await pilot.press("escape")
        await settle(pilot)
        assert app.results == [False]
    assert raw(config_file) == before


async def test_a_backup_that_backs_this_one_up_is_fine(config_file: Path) -> None:
    # Chains are not transitive: claude -> deepseek and deepseek -> claude is no loop.
    app = Host(config_file, "deepseek")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.editor.query_one("#backup-choice", Select).value = "claude"
        await pilot.click("#backup-add")
        await settle(pilot)
        assert not save_button(app).disabled
        assert app.editor.issues == []


async def test_cancel_leaves_the_file_unchanged(config_file: Path) -> None:
    before = raw(config_file)
    app = Host(config_file, "claude")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await type_into(pilot, "#field-base_url", "https://example.com")
        app.editor.query_one("#field-enabled", Switch).value = False
        await settle(pilot)
        await pilot.press("escape")
        await settle(pilot)
        assert app.results == [False]
    assert raw(config_file) == before


async def test_a_conflicting_external_edit_asks_and_overwrite_keeps_both(
    config_file: Path,
) -> None:
    app = Host(config_file, "grok")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await type_into(pilot, "#field-default_model", "grok-mine")
        # Someone else saves the file meanwhile.
        update_profile(config_file, "deepseek", {"default_model": "deepseek-theirs"})
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, ConflictScreen)
        await pilot.press("o")
        await settle(pilot)
        assert app.results == [True]
    config = load_config(config_file)
    grok, deepseek = config.profile("grok"), config.profile("deepseek")
    assert grok is not None and deepseek is not None
    assert grok.default_model == "grok-mine"
    assert deepseek.default_model == "deepseek-theirs"


async def test_a_conflict_can_be_backed_out_of_or_resolved_by_reloading(
    config_file: Path,
) -> None:
    app = Host(config_file, "grok")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await type_into(pilot, "#field-default_model", "grok-mine")
        update_profile(config_file, "grok", {"default_model": "grok-theirs"})
        theirs = raw(config_file)
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, ConflictScreen)

        await pilot.press("escape")  # "back": the form and the file stay as they are
        await settle(pilot)
        assert app.editor.query_one("#field-default_model", Input).value == "grok-mine"
        assert raw(config_file) == theirs

        await pilot.press("ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, ConflictScreen)
        await pilot.press("r")
        await settle(pilot)
        # Back in the editor, showing the file as it is now; nothing was written.
        assert app.results == []
        assert app.editor.query_one("#field-default_model", Input).value == "grok-theirs"
        assert raw(config_file) == theirs
        # The form is based on the new file now: saving works without another conflict.
        await type_into(pilot, "#field-max_tokens", "99")
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert app.results == [True]
    grok = load_config(config_file).profile("grok")
    assert grok is not None
    assert (grok.default_model, grok.max_tokens) == ("grok-theirs", 99)


async def test_the_stored_api_key_is_never_shown(config_file: Path) -> None:
    secret = "xai-do-not-show-0123456789"
    update_profile(config_file, "grok", {"api_key_env": None, "api_key": secret})
    app = Host(config_file, "grok")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        field = app.editor.query_one("#field-api_key", Input)
        assert field.value == "" and field.password
        assert field.placeholder == "(set — leave empty to keep)"
        assert secret not in app.export_screenshot()
        await type_into(pilot, "#field-default_model", "grok-4")
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert app.results == [True]
    grok = load_config(config_file).profile("grok")
    assert grok is not None
    assert (grok.api_key, grok.default_model) == (secret, "grok-4")
    assert mode(config_file) == 0o600


async def test_removing_the_stored_key_for_an_env_var(config_file: Path) -> None:
    update_profile(config_file, "grok", {"api_key_env": None, "api_key": "xai-0123456789abc"})
    app = Host(config_file, "grok")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await type_into(pilot, "#field-api_key_env", "XAI_API_KEY")
        assert save_button(app).disabled  # both set
        await pilot.click("#remove-stored-key")
        await settle(pilot)
        assert not save_button(app).disabled
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert app.results == [True]
    assert "xai-0123456789abc" not in text(config_file)


async def test_adding_a_profile_appends_it(config_file: Path) -> None:
    before = text(config_file)
    app = Host(config_file, None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert save_button(app).disabled  # name, provider_type and base_url are required
        await type_into(pilot, "#field-name", "local")
        app.editor.query_one("#field-provider_type", Select).value = "OpenAICompatible"
        await type_into(pilot, "#field-base_url", "http://127.0.0.1:8080/v1")
        await type_into(pilot, "#field-api_key_env", "LOCAL_KEY")
        app.editor.query_one("#backup-choice", Select).value = "deepseek"
        await pilot.click("#backup-add")
        await settle(pilot)
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert app.results == [True]
    after = text(config_file)
    assert after.startswith(before)
    assert after[len(before) :] == (
        '\n[[profiles]]\nname = "local"\nprovider_type = "OpenAICompatible"\n'
        'base_url = "http://127.0.0.1:8080/v1"\napi_key_env = "LOCAL_KEY"\n'
        'backup_providers = ["deepseek"]\n'
    )


async def test_renaming_in_the_form_renames_the_references(config_file: Path) -> None:
    app = Host(config_file, "grok")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await type_into(pilot, "#field-name", "xai")
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert app.results == [True]
    claude = load_config(config_file).profile("claude")
    assert claude is not None
    assert claude.backup_providers == ("xai", "deepseek")


async def test_overwrite_onto_an_incompatible_file_keeps_the_form_and_says_why(
    config_file: Path,
) -> None:
    app = Host(config_file, "claude")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await type_into(pilot, "#field-default_model", "claude-mine")
        # Meanwhile someone deletes grok, a backup in this form's chain.
        delete_profile(config_file, "grok")
        theirs = raw(config_file)
        await pilot.press("ctrl+s")
        await settle(pilot)
        await pilot.press("o")
        await settle(pilot)
        # Not saved: the form is now checked against the new file, and says what is wrong.
        assert app.results == []
        assert raw(config_file) == theirs
        assert save_button(app).disabled
        assert any('unknown profile "grok"' in issue.message for issue in app.editor.issues)
        assert app.editor.query_one("#field-default_model", Input).value == "claude-mine"

        chain = app.editor.query_one("#backup-list")
        chain.focus()
        await pilot.click("#backup-remove")  # grok is first in the chain
        await settle(pilot)
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert app.results == [True]
    claude = load_config(config_file).profile("claude")
    assert claude is not None
    assert (claude.default_model, claude.backup_providers) == ("claude-mine", ("deepseek",))
