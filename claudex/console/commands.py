"""The command palette (ctrl+p): every action of the main screen that is allowed right now, and
"select PROFILE" for each profile (and "select upstream proxy NAME" for each proxy)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from textual.actions import parse as parse_action
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider

from claudex.console.screens.actions import ACTION_TEXT, FAULT_TEXT
from claudex.console.screens.main import MainScreen

Command = tuple[str, Callable[[], Any], str]


def palette_commands(main: MainScreen) -> list[Command]:
    """(title, callback, help) for each action the main screen would run now."""
    commands: list[Command] = []
    for binding in main.BINDINGS:
        if not isinstance(binding, Binding):
            continue
        _, name, params = parse_action(binding.action)
        if (name in ("select", "clear_filter", "command_palette")
                or main.check_action(name, params) is not True):
            continue
        key = binding.key_display or binding.key
        if name == "fault" and params:
            title = f"demo: make {main.selected} {FAULT_TEXT.get(str(params[0]), params[0])}"
        else:
            title = ACTION_TEXT.get(name, binding.description)
        commands.append((title[:1].upper() + title[1:], partial(main.run_action, binding.action),
                         f"key: {key}"))
    for name in main.profile_names:
        commands.append((f"Select {name}", partial(main.select, name),
                         "show its panel and chain"))
    for name in main.proxy_names:
        commands.append((f"Select upstream proxy {name}", partial(main.select_proxy, name),
                         "its row in the proxies' strip: t / r trip and reset it"))
    if not main.read_only:
        for pool in main.snapshot_data.get("pools") or []:
            name = str(pool.get("name"))
            commands.append((f"Edit pool {name}", partial(main.edit_pool, name),
                             "its members, balance, weights and backups"))
    return commands


class ConsoleCommands(Provider):
    def _commands(self) -> list[Command]:
        # The screen the palette was opened on: with several engines, that engine's.
        main = self.screen if isinstance(self.screen, MainScreen) else getattr(
            self.app, "main_screen", None)
        return palette_commands(main) if isinstance(main, MainScreen) else []

    async def discover(self) -> Hits:
        for title, callback, help_text in self._commands():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, callback, help_text in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
