"""Pools in the console (DESIGN.md "Pools"): the pool is a group with its members beneath, in the
panels (its own panel, then its members', each naming its bindings and share) and in the table
(its row, then `└ member` rows); selection moves over members, never onto a pool."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from claudex.config.loader import parse_config
from claudex.console.app import ConsoleApp
from claudex.console.components.provider_panel import PoolPanel, ProviderPanel
from claudex.console.components.provider_table import ProviderTable
from claudex.console.link import LocalLink
from claudex.demo.fake_provider import FakeProvider
from claudex.engine.core.request import ProxyRequest
from claudex.engine.engine import Engine
from tests.conftest import GLOBALS, TEST_ENV, profile_toml

SIZE = (140, 44)
MEMBERS = ("acct-a", "acct-b", "acct-c")


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    fakes = [FakeProvider(name, "anthropic") for name in (*MEMBERS, "spare")]
    for fake in fakes:
        await fake.start()
    text = (GLOBALS.replace("[proxy]", '[proxy]\ndefault_profile = "claude"')
            + "".join(profile_toml(f.name, f) for f in fakes) + """
[[profiles]]
name = "claude"
members = ["acct-a", "acct-b", "acct-c"]
weights = { acct-a = 2 }
backup_providers = ["spare"]
""")
    made = Engine(parse_config(text, "test.toml", env=TEST_ENV), env=TEST_ENV)
    try:
        for conv in range(5):
            body = {"model": "claude-sonnet-4-5", "max_tokens": 8,
                    "messages": [{"role": "user", "content": f"task {conv}"}]}
            await made.forward(ProxyRequest("anthropic", "messages", body, b"",
                                            {"x-claude-code-session-id": "s"}))
        yield made
    finally:
        await made.close()
        for fake in fakes:
            await fake.stop()


async def settle(app: ConsoleApp, pilot: Any) -> None:
    await pilot.pause()
    await app.screen.refresh_now()  # type: ignore[attr-defined]
    await pilot.pause()


def save(app: ConsoleApp, name: str) -> None:
    """SCREENSHOTS=DIR keeps the pictures (for looking at them; rsvg-convert makes PNGs)."""
    where = os.environ.get("SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        app.save_screenshot(f"{name}.svg", path=where)


async def test_the_pool_is_a_group_with_its_members_beneath(engine: Engine) -> None:
    app = ConsoleApp(LocalLink(engine))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        panels = list(app.screen.query("#panels > .panel"))
        order = [p.pool_name if isinstance(p, PoolPanel) else getattr(p, "profile_name", "")
                 for p in panels]
        assert order == ["claude", "acct-a", "acct-b", "acct-c", "spare"]
        pool = panels[0]
        assert isinstance(pool, PoolPanel)
        assert pool.border_subtitle == "sticky · default"
        assert "[b]5[/] conversations bound" in pool.summary_line.text
        assert "then spare" in pool.summary_line.text
        lines = pool.member_lines.text
        assert "acct-a[/] 3 bound · 60% · weight 2" in lines
        member = panels[1]
        assert isinstance(member, ProviderPanel)
        assert str(member.border_subtitle).startswith("claude: 3 bound · 60% · anthropic")
        save(app, "pools-grid")

        await pilot.press("v")
        await settle(app, pilot)
        table = app.screen.query_one(ProviderTable)
        shown = [(row.label or row.name) for row in table.rows]
        assert shown[:4] == ["claude (pool)", "└ acct-a", "└ acct-b", "└ acct-c"]
        assert table.rows[0].state == "sticky" and "5 bound" in table.rows[0].last_error
        assert "claude" not in table.names
        save(app, "pools-table")


async def test_the_pool_editor_edits_members_balance_weights_and_backups(
        tmp_path: Path) -> None:
    from textual.widgets import Input, Select

    from claudex.config.loader import load_config
    from claudex.console.commands import palette_commands
    from claudex.console.pool_editor import PoolEditorScreen

    fakes = [FakeProvider(name, "anthropic") for name in (*MEMBERS, "spare")]
    for fake in fakes:
        await fake.start()
    path = tmp_path / "profiles.toml"
    path.write_text(GLOBALS + "".join(profile_toml(f.name, f) for f in fakes) + """
# the team's accounts
[[profiles]]
name = "claude"
members = ["acct-a", "acct-b"]  # more to come
""")
    path.chmod(0o600)
    engine = Engine(load_config(path, env=TEST_ENV), env=TEST_ENV)
    try:
        app = ConsoleApp(LocalLink(engine))
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            titles = [title for title, _, _ in palette_commands(app.main_screen)]
            assert "Edit pool claude" in titles
            app.main_screen.edit_pool("claude")
            await pilot.pause()
            await pilot.pause()
            editor = app.screen
            assert isinstance(editor, PoolEditorScreen)
            for _ in range(20):  # the file is read in a worker
                if editor.query_one("#pool-members", Input).value:
                    break
                await pilot.pause()
            assert editor.query_one("#pool-members", Input).value == "acct-a, acct-b"
            save(app, "pools-editor")
            # A mistake is named and nothing is written.
            editor.query_one("#pool-members", Input).value = "acct-a, acct-z"
            await pilot.press("ctrl+s")
            for _ in range(40):
                if editor.problems:
                    break
                await pilot.pause()
            assert any('unknown profile "acct-z"' in p for p in editor.problems)
            assert "acct-z" not in path.read_text()
            editor.query_one("#pool-members", Input).value = "acct-c, acct-a, acct-b"
            editor.query_one("#pool-balance", Select).value = "round_robin"
            editor.query_one("#pool-weights", Input).value = "acct-c=3"
            editor.query_one("#pool-backups", Input).value = "spare"
            await pilot.press("ctrl+s")
            for _ in range(40):
                if app.screen is not editor:
                    break
                await pilot.pause()
            assert app.screen is not editor
        text = path.read_text()
        assert "# the team's accounts" in text
        (pool,) = load_config(path, env=TEST_ENV).pools
        assert pool.members == ("acct-c", "acct-a", "acct-b")
        assert pool.balance == "round_robin" and pool.weight("acct-c") == 3
        assert pool.backup_providers == ("spare",)
    finally:
        await engine.close()
        for fake in fakes:
            await fake.stop()
