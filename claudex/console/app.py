"""The claudex operations console (Textual): one app, one main screen, reached through an
`EngineLink` so it does not care whether the engine runs in this process or elsewhere."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.command import Provider
from textual.screen import Screen

from claudex.config.permissions import file_permission_warning
from claudex.console.colors import tcss_colours
from claudex.console.commands import ConsoleCommands
from claudex.console.format import TimeText, local_time_text, safe
from claudex.console.link import DemoHooks, EngineLink
from claudex.console.messages import ConfigRejected, ConfigReloaded
from claudex.console.screens.main import MainScreen


class ConsoleApp(App[None]):
    CSS_PATH = "console.tcss"
    TITLE = "claudex"
    COMMANDS: ClassVar[set[type[Provider] | Callable[[], type[Provider]]]] = (
        App.COMMANDS | {ConsoleCommands}
    )
    # With several engines (`claudex console --url A --url B`), like k9s contexts.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "next_context", "next engine", show=False, id="claudex.next_context"),
    ]

    def __init__(
        self,
        link: EngineLink,
        *,
        read_only: bool = False,
        demo: DemoHooks | None = None,
        time_text: TimeText = local_time_text,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        config_check: Callable[[], Awaitable[None]] | None = None,
        more_links: Sequence[EngineLink] = (),
    ) -> None:
        """`config_check` re-reads the config file now (the config watcher's `check_now`);
        without it the console loads the file itself after an edit or a delete. `more_links`:
        further engines, each with its own screen and state; `n` moves between them."""
        super().__init__()
        self.link = link
        self.read_only = read_only
        self.main_screen = MainScreen(link, read_only=read_only, demo=demo,
                                      time_text=time_text, wall=wall, monotonic=monotonic,
                                      config_check=config_check)
        self.contexts = [self.main_screen] + [
            MainScreen(other, read_only=read_only, time_text=time_text, wall=wall,
                       monotonic=monotonic, screen_id=f"main-{index + 2}")
            for index, other in enumerate(more_links)]
        if len(self.contexts) > 1:
            for index, screen in enumerate(self.contexts):
                screen.context_label = f"engine {index + 1}/{len(self.contexts)} (n: next)"

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return tcss_colours()

    def get_default_screen(self) -> Screen[None]:
        return self.main_screen

    def on_mount(self) -> None:
        for index, screen in enumerate(self.contexts[1:], start=1):
            self.install_screen(screen, self._context_name(index))
        # Said once, at start: a config holding an inline api_key that others can read.
        warning = file_permission_warning(self.link.snapshot().get("config_path"))
        if warning:
            self.notify(warning, title="config file permissions", severity="warning",
                        timeout=30, markup=False)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "next_context":
            return len(self.contexts) > 1
        return True

    def action_next_context(self) -> None:
        """The next engine's screen, as it was left (a dialog open on this one stays put)."""
        if self.screen not in self.contexts or len(self.contexts) < 2:
            return
        # The first engine's screen is the app's default (at the bottom of the stack); the
        # others are installed, so leaving one keeps it (and its state) alive.
        index = (self.contexts.index(self.screen) + 1) % len(self.contexts)
        if index == 0:
            self.pop_screen()
        elif index == 1:
            self.push_screen(self._context_name(index))
        else:
            self.switch_screen(self._context_name(index))

    @staticmethod
    def _context_name(index: int) -> str:
        return f"engine-{index + 1}"

    async def action_quit(self) -> None:
        """ctrl+q asks like `q` does while requests are in flight."""
        if self.screen in self.contexts:
            self.contexts[self.contexts.index(self.screen)].action_quit()
        else:
            self.exit()

    # The config watcher posts these to the app; the main screen shows them.
    def on_config_rejected(self, message: ConfigRejected) -> None:
        problems = "; ".join(message.problems[:3])
        self.main_screen.show_banner(
            f"{message.path} has problems; the previous config stays live: {safe(problems, 300)}")

    def on_config_reloaded(self, message: ConfigReloaded) -> None:
        self.main_screen.show_banner(None)
        self.main_screen.request_refresh()
