"""`x` on the main screen: disable the selected profile, or enable a disabled one.

After a confirmation, `enabled = false` / `true` is written into the profile's table of the
config file through the editor's tomlkit path (`claudex.config.editing.set_profile_enabled`:
comments and everything else kept, the result validated before it replaces the file), then
the engine reloads it, as after an edit (attached: the engine's own file). `ActionsMixin`
decides whether the action may run at all (read-only, a config file on this machine), and hands
this module the screen, its profiles and its `edit_and_reload`: this module knows nothing else of
it, so the two do not import each other.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from textual.screen import Screen

from claudex.config.editing import set_profile_enabled
from claudex.console.screens.confirm import ConfirmScreen


class EditAndReload(Protocol):
    """`ActionsMixin.edit_and_reload`: write the config file on a thread, note it, reload."""

    def __call__(self, write: Callable[[], object], *, failed: str, noted: str,
                 done: str) -> Awaitable[None]: ...


def confirm_text(name: str, path: Path, profiles: Sequence[Mapping[str, Any]]
                 ) -> tuple[str, str, str, bool]:
    """(title, message, verb, enable) for the dialog about `name`."""
    profile = next((p for p in profiles if p.get("name") == name), {})
    if profile.get("enabled") is False:
        return (f"Enable {name}?", f"Write enabled = true for {name} in {path}: requests and "
                "health checks reach it again.", "Enable", True)
    users = [str(p.get("name")) for p in profiles if name in (p.get("backup_providers") or [])]
    chains = (f" The chains of {', '.join(users[:6])}{' …' if len(users) > 6 else ''} skip it."
              if users else "")
    return (f"Disable {name}?", f"Write enabled = false for {name} in {path}: requests skip it "
            f"and fail over, and it is not health-checked.{chains} x enables it again.",
            "Disable", False)


def ask_to_toggle(screen: Screen[Any], name: str, path: Path,
                  profiles: Sequence[Mapping[str, Any]], edit_and_reload: EditAndReload) -> None:
    title, text, verb, enable = confirm_text(name, path, profiles)

    def answered(confirmed: bool | None) -> None:
        if confirmed:
            screen.run_worker(set_enabled(edit_and_reload, name, path, enable),
                              group="config-io", exit_on_error=False, name="enable profile")

    screen.app.push_screen(
        ConfirmScreen(title, text + " Comments and other profiles stay as they are.", verb,
                      danger=not enable),
        callback=answered)


async def set_enabled(edit_and_reload: EditAndReload, name: str, path: Path,
                      enable: bool) -> None:
    word = "enabled" if enable else "disabled"
    await edit_and_reload(lambda: set_profile_enabled(path, name, enable),
                          failed=f"Could not write {name} {word}",
                          noted=f"operator {word} profile {name}", done=f"{name} {word}.")
