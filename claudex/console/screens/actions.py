"""What the operator can do from the main screen: trip, reset, health-check, edit, add, delete,
quit, and in the demo inject faults and switch the traffic on and off.

Modifying actions (trip, reset, edit, add, delete) are off in read-only mode: `check_action`
shows them disabled in the footer, and each action checks again (the command palette and
`run_action` reach them too). Anything that waits — a health round, file I/O — runs in a worker
with a `group` and `exit_on_error=False`, and reports failure as a notification, never a traceback.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any, Final

from textual.actions import parse as parse_action
from textual.binding import Binding
from textual.screen import Screen

from claudex.config.loader import load_config
from claudex.config.model import ConfigError
from claudex.console.format import safe, tripped_words
from claudex.console.http_link import is_local_url
from claudex.console.link import DemoHooks, EngineLink, LinkError
from claudex.console.screens.confirm import ConfirmScreen
from claudex.console.screens.enabling import ask_to_toggle
from claudex.console.screens.help import HelpLine, HelpScreen
from claudex.console.screens.trip_dialog import TripScreen
from claudex.engine.breaker.trips import duration_words

BREAKER_VERBS: Final = frozenset({"trip", "reset"})  # also on an upstream proxy's row
MODIFYING: Final = frozenset({"trip", "reset", "edit", "add", "delete", "toggle_enabled"})
TABLE_ONLY: Final = frozenset({"cycle_sort"})
DEMO_ONLY: Final = frozenset({"traffic", "fault"})

ACTION_TEXT: Final[dict[str, str]] = {
    "trip": "trip the selected provider: open for a while (20m) or until reset, and why",
    "reset": "reset the selected provider: its breaker, cooldown and spent window",
    "health": "health-check every provider now",
    "edit": "edit the selected profile",
    "add": "add a profile",
    "delete": "delete the selected profile from the config file",
    "toggle_enabled": "disable or enable the selected profile (writes enabled = false / true)",
    "toggle_view": "switch between the panel grid and the provider table",
    "cycle_sort": "table: sort by state, error rate (last 5 min), p95 latency, name (in turn)",
    "filter": "filter the request log and the table (enter keeps it, escape clears it)",
    "help": "show this help",
    "focus_requests": "into the request log and back: ↑ ↓ j k pick a request, enter shows its "
                      "attempts, timings and headers; past the oldest row, older ones come "
                      "from the history journal",
    "quit": "quit (asks first while requests are in flight)",
    "select": "select the previous / next profile (or click its panel or table row)",
    "clear_filter": "clear the request filter",
    "traffic": "start or stop the demo traffic (a few requests a second)",
}
FAULT_TEXT: Final[dict[str, str]] = {
    "down": "down: connections refused",
    "500": "answer 500 server errors",
    "429": "rate-limit (429, retry after 5 s)",
    "slow": "answer 1.2 s slower: yellow within a minute",
    "401": "reject the API key (401)",
    "spend": "spend a subscription's plan window (resets in 30 s)",
    "ok": "back to normal",
}

EditorFactory = Callable[[Path, "str | None"], Screen[bool]]


class ActionsMixin(Screen[None]):
    """The actions half of `MainScreen`; the attributes below are set by `MainScreen`."""

    link: EngineLink
    read_only: bool
    demo: DemoHooks | None
    selected: str | None
    selected_proxy: str | None
    view: str | None
    snapshot_data: dict[str, Any]
    config_check: Callable[[], Awaitable[None]] | None

    def request_refresh(self) -> None:
        raise NotImplementedError

    def note(self, message: str) -> None:
        raise NotImplementedError

    def show_banner(self, text: str | None) -> None:
        raise NotImplementedError

    # -- guards --------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in DEMO_ONLY and self.demo is None:
            return False  # hidden: not a demo
        if action in TABLE_ONLY and self.view != "table":
            return False  # hidden: the grid has no sort
        if action in MODIFYING and self.read_only:
            return None  # shown disabled
        return True

    def _refused(self, verb: str) -> bool:
        if self.read_only and verb in MODIFYING:
            self.notify(f"Read-only console: {verb} is off.", severity="warning")
            return True
        return False

    def _target(self, verb: str) -> str | None:
        if self._refused(verb):
            return None
        if self.selected_proxy is not None:
            # A proxy's row is selected: trip and reset work on it by name (issue 36); the
            # rest work on profiles, which a proxy is not.
            if verb in BREAKER_VERBS:
                return self.selected_proxy
            self.notify(f"{self.selected_proxy} is an upstream proxy: select a profile to "
                        f"{verb.replace('_', ' ')} it.", severity="warning")
            return None
        if self.selected is None:
            self.notify("No profile is selected.", severity="warning")
        return self.selected

    def _profiles(self) -> list[dict[str, Any]]:
        return list(self.snapshot_data.get("profiles") or [])

    def _proxies(self) -> list[dict[str, Any]]:
        return list(self.snapshot_data.get("upstream_proxies") or [])

    def _is_proxy(self, name: str) -> bool:
        return any(p.get("name") == name for p in self._proxies())

    def _breaker_of(self, name: str) -> dict[str, Any]:
        """A profile's or an upstream proxy's breaker in the last snapshot ({} when unknown)."""
        for p in self._profiles() + self._proxies():
            if p.get("name") == name:
                return dict(p.get("breaker") or {})
        return {}

    def _breaker_state(self, name: str) -> str:
        return str(self._breaker_of(name).get("state") or "closed")

    def _config_path(self) -> Path | None:
        path = self.snapshot_data.get("config_path")
        if not path:
            self.notify("This engine was not started from a config file.", severity="warning")
            return None
        state = self.link.state()
        if state.mode == "attached" and not (state.connected and is_local_url(state.target)
                                             and Path(path).is_file()):
            why = ("it is not answering" if not state.connected
                   else f"its config file {path} is not on this machine")
            self.notify(f"The profile editor is unavailable for the engine at {state.target}: "
                        f"{why}.", severity="warning")
            return None
        return Path(path)

    # -- breaker -------------------------------------------------------------------------------

    def action_trip(self) -> None:
        name = self._target("trip")
        if name is None:
            return
        # For how long, and why (screens/trip_dialog.py); on a tripped provider, new terms.
        breaker = self._breaker_of(name)
        tripped = tripped_words(breaker) if breaker.get("state") == "forced_open" else None
        dialog = TripScreen(name, tripped)
        self.app.push_screen(dialog, callback=partial(self._trip_confirmed, name, dialog))

    async def _trip_confirmed(self, name: str, dialog: TripScreen,
                              confirmed: bool | None) -> None:
        asked = dialog.asked
        if not confirmed or asked is None:
            return
        try:
            tripped = await self.link.trip(name, asked.seconds, asked.reason)
        except LinkError as exc:
            self.notify(str(exc), severity="error")
            return
        if tripped:
            terms = ("until reset" if asked.seconds is None
                     else f"for {duration_words(asked.seconds)}")
            self.note(f"operator tripped {name} {terms}"
                      + (f": {asked.reason}" if asked.reason else ""))
            self.notify(f"{name}: tripped {terms}")
        else:
            self.notify(f"No profile or proxy named {name} any more.", severity="warning")
        self.request_refresh()

    def action_reset(self) -> None:
        name = self._target("reset")
        if name is None:
            return
        words = (f"Close upstream proxy {name}'s breaker and clear its failure count, recovery "
                 "time, rate-limit cooldown and failing authentication: the profiles routed "
                 "through it use it again at once." if self._is_proxy(name) else
                 f"Close {name}'s breaker and clear its failure count, recovery time "
                 "and rate-limit cooldown, and stop treating its plan's window as "
                 "spent: requests go to it again at once.")
        self.app.push_screen(ConfirmScreen(f"Reset {name}?", words, "Reset"),
                             callback=partial(self._reset_confirmed, name))

    async def _reset_confirmed(self, name: str, confirmed: bool | None) -> None:
        if not confirmed:
            return
        try:
            done = await self.link.reset(name)
        except LinkError as exc:
            self.notify(str(exc), severity="error")
            return
        if done:
            self.note(f"operator reset {name}")
            self.notify(f"{name}: reset (breaker closed, cooldown ended)" if self._is_proxy(name)
                        else f"{name}: reset (breaker closed, cooldown and spent window ended)")
        else:
            self.notify(f"No profile or proxy named {name} any more.", severity="warning")
        self.request_refresh()

    def action_health(self) -> None:
        self.run_worker(self._health_now(), group="health", exclusive=True,
                        exit_on_error=False, name="health check")

    async def _health_now(self) -> None:
        self.notify("Probing every enabled provider…", timeout=2)
        try:
            await self.link.check_health_now()
        except Exception as exc:  # a failed round is news, not a crash
            self.notify(f"Health check failed: {safe(str(exc))}", severity="error")
        self.request_refresh()

    # -- profiles ------------------------------------------------------------------------------

    def action_edit(self) -> None:
        name = self._target("edit")
        if name is not None:
            self._open_editor(name)

    def action_add(self) -> None:
        if not self._refused("add"):
            self._open_editor(None)

    def _open_editor(self, name: str | None) -> None:
        path = self._config_path()
        if path is None:
            return
        try:
            # Imported lazily: the editor is optional and heavier than the dashboard.
            module = importlib.import_module("claudex.console.editor")
            factory: EditorFactory = module.ProfileEditorScreen
        except (ImportError, AttributeError):
            self.notify("The profile editor is not available in this build.", severity="warning")
            return
        self.app.push_screen(factory(path, name), callback=self._edited)

    def edit_pool(self, name: str) -> None:
        """The pool editor (console/pool_editor.py) over pool `name`'s table."""
        if self._refused("edit"):
            return
        path = self._config_path()
        if path is None:
            return
        from claudex.console.pool_editor import PoolEditorScreen

        self.app.push_screen(PoolEditorScreen(path, name), callback=self._edited)

    def _edited(self, saved: bool | None) -> None:
        if saved:
            self.run_worker(self.reload_config(), group="config-io", exit_on_error=False,
                            name="reload config")

    async def reload_config(self) -> bool:
        """Re-read the config file and apply it; a bad file leaves the live config in place.

        With a config watcher, it does the reading (and knows not to apply the same file
        twice); without one, the file is loaded here."""
        if self.config_check is not None:
            await self.config_check()
            self.request_refresh()
            return True
        path = self._config_path()
        if path is None:
            return False
        try:
            config = await asyncio.to_thread(load_config, path)
        except ConfigError as exc:
            problems = "; ".join(str(i) for i in exc.issues[:3])
            self.show_banner(f"{path} has problems; the previous config stays live: "
                             f"{safe(problems, 300)}")
            return False
        except OSError as exc:
            self.notify(f"Could not read {path}: {exc.strerror}", severity="error")
            return False
        try:
            # Hosting: registers its secrets for redaction and swaps it in; attached: asks the
            # engine to re-read the file it was started from.
            await self.link.apply_config(config)
        except LinkError as exc:
            self.notify(str(exc), severity="error")
            return False
        self.show_banner(None)
        self.request_refresh()
        return True

    def action_delete(self) -> None:
        name = self._target("delete")
        if name is None:
            return
        path = self._config_path()
        if path is None:
            return
        users = [str(p.get("name")) for p in self._profiles()
                 if name in (p.get("backup_providers") or [])]
        also = (f" It is also taken out of the backup chain of {', '.join(users)}."
                if users else "")
        self.app.push_screen(
            ConfirmScreen(f"Delete profile {name}?",
                          f"Remove the profile {name} from {path}.{also} Comments and the "
                          "other profiles stay as they are.", "Delete", danger=True),
            callback=partial(self._delete_confirmed, name, path))

    def _delete_confirmed(self, name: str, path: Path, confirmed: bool | None) -> None:
        if confirmed:
            self.run_worker(self._delete(name, path), group="config-io", exit_on_error=False,
                            name="delete profile")

    async def _delete(self, name: str, path: Path) -> None:
        try:
            module = importlib.import_module("claudex.config.editing")
            delete_profile: Callable[[Path, str], object] = module.delete_profile
        except (ImportError, AttributeError):
            self.notify("Deleting profiles is not available in this build.", severity="warning")
            return
        await self.edit_and_reload(lambda: delete_profile(path, name),
                                   failed=f"Could not delete {name}",
                                   noted=f"operator deleted profile {name}",
                                   done=f"Deleted {name}.")

    async def edit_and_reload(self, write: Callable[[], object], *, failed: str, noted: str,
                              done: str) -> None:
        """Write the config file on a thread (editing keeps every comment), note it in the event
        log and reload; a write that fails says why and leaves the live config alone."""
        try:
            await asyncio.to_thread(write)
        except Exception as exc:  # its message is the operator's to read
            self.notify(f"{failed}: {safe(str(exc))}", severity="error")
            return
        self.note(noted)
        if await self.reload_config():
            self.notify(done)

    def action_toggle_enabled(self) -> None:
        name = self._target("toggle_enabled")
        if name is None:
            return
        path = self._config_path()
        if path is not None:
            ask_to_toggle(self, name, path, self._profiles(), self.edit_and_reload)

    # -- quit, help ----------------------------------------------------------------------------

    def action_quit(self) -> None:
        in_flight = self.link.in_flight
        if not in_flight or self.link.state().mode == "attached":  # the proxy keeps running
            self.app.exit()
            return
        self.app.push_screen(
            ConfirmScreen("Quit claudex?",
                          f"{in_flight} request{'s are' if in_flight != 1 else ' is'} in flight. "
                          "Quitting stops the proxy; they get a few seconds to finish.",
                          "Quit", danger=True),
            callback=self._quit_confirmed)

    def _quit_confirmed(self, confirmed: bool | None) -> None:
        if confirmed:
            self.app.exit()

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(self.help_lines(), self.demo_help_lines(),
                                        self.read_only))

    def help_lines(self) -> list[HelpLine]:
        lines: list[HelpLine] = []
        for binding in self._own_bindings():
            _, name, _ = parse_action(binding.action)
            if name in DEMO_ONLY or name in ("select", "command_palette"):
                continue
            keys = binding.key_display or binding.key.replace(",", " ")
            note = "off: read-only" if self.read_only and name in MODIFYING else ""
            lines.append(HelpLine(keys, ACTION_TEXT.get(name, binding.description), note))
        lines.append(HelpLine("← → j k", ACTION_TEXT["select"]))
        lines.append(HelpLine(": ctrl+p", "command palette: every action, and select a profile"))
        return lines

    def demo_help_lines(self) -> list[HelpLine]:
        if self.demo is None:
            return []
        lines = [HelpLine("g", ACTION_TEXT["traffic"])]
        for binding in self._own_bindings():
            _, name, params = parse_action(binding.action)
            if name == "fault" and params:
                lines.append(HelpLine(binding.key, FAULT_TEXT.get(str(params[0]), "")))
        return lines

    def _own_bindings(self) -> list[Binding]:
        return [b for b in self.BINDINGS if isinstance(b, Binding)]

    # -- demo ----------------------------------------------------------------------------------

    def action_traffic(self) -> None:
        if self.demo is None:
            return
        running = self.demo.toggle_traffic()
        self.notify("Demo traffic on." if running else "Demo traffic off.")
        self.request_refresh()

    def action_fault(self, mode: str) -> None:
        if self.demo is None or self.selected is None:
            return
        if not self.demo.has_fake(self.selected):
            self.notify(f"{self.selected} is not one of the demo's fake providers.",
                        severity="warning")
            return
        sentence = self.demo.inject(self.selected, mode)
        self.note(sentence)
        self.notify(sentence)
        self.request_refresh()
