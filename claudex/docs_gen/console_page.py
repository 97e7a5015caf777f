"""docs/reference/console-keys.md: every key of the console, from the screens' `BINDINGS`, with
the words the help screen (`?`) and the command palette use (screens/actions.py), the key bar's
order of leaving keys out on a narrow terminal (components/key_bar.py) and the colour legend
(screens/help.py)."""

from __future__ import annotations

from collections.abc import Sequence

from textual.actions import parse as parse_action
from textual.app import App
from textual.binding import Binding
from textual.dom import DOMNode

from claudex.console.app import ConsoleApp
from claudex.console.components.key_bar import DROP_ORDER, PALETTE
from claudex.console.components.request_log import RequestLog
from claudex.console.editor import ProfileEditorScreen
from claudex.console.editor_conflict import ConflictScreen
from claudex.console.pool_editor import PoolEditorScreen
from claudex.console.screens.actions import (
    ACTION_TEXT,
    DEMO_ONLY,
    FAULT_TEXT,
    MODIFYING,
    PROXY_FAULT_TEXT,
)
from claudex.console.screens.confirm import ConfirmScreen
from claudex.console.screens.help import COLOUR_LEGEND, HelpScreen
from claudex.console.screens.main import MainScreen
from claudex.console.screens.request_detail import RequestDetailScreen
from claudex.console.screens.trip_dialog import TripScreen
from claudex.docs_gen.markdown import code, section, table, words_list

SOURCES = ("claudex/console/screens/", "claudex/console/screens/actions.py",
           "claudex/console/components/key_bar.py")

# The other places with keys of their own, after the main screen: (heading, class, when).
# Every console class with `BINDINGS` is here or is MainScreen (tests/docs checks).
OTHER_SCREENS: tuple[tuple[str, type[DOMNode], str], ...] = (
    ("Request log", RequestLog, "After `tab` on the main screen."),
    ("Request detail", RequestDetailScreen, "`enter` on a request in the log."),
    ("Help", HelpScreen, "`?` on the main screen."),
    ("Confirmation", ConfirmScreen, "Before a delete, a disable or a quit with requests in "
                                    "flight."),
    ("Trip dialog", TripScreen, "`t`: for how long (`20m`, `1h30m`, blank for until reset) and "
                                "why; `enter` in either field trips."),
    ("Profile editor", ProfileEditorScreen, "`e` (edit) and `a` (add)."),
    ("Pool editor", PoolEditorScreen, "`ctrl+p`, then `Edit pool NAME`: a pool's members, "
                                      "balance, weights and backups."),
    ("The file changed while you edited", ConflictScreen, "The editor's save found the file "
                                                         "changed on disk meanwhile."),
    ("Several engines", ConsoleApp, "`claudex console --url A --url B`: one screen per "
                                    "engine."),
)

# Words that read differently on a page than inside the console.
_PAGE_WORDS = {"help": "the keys and what the colours mean (this page's main screen part)"}
_KEY_NAMES = {"question_mark": "?", "slash": "/", "colon": ":", "left": "←", "right": "→",
              "up": "↑", "down": "↓", "pageup": "page up", "pagedown": "page down"}


def documented_classes() -> tuple[type[DOMNode], ...]:
    return (MainScreen, *(cls for _, cls, _ in OTHER_SCREENS))


def bindings_of(cls: type[DOMNode]) -> list[Binding]:
    """The bindings claudex gives `cls` itself and its claudex base classes (Textual's own are
    Textual's), the nearest class first, as Textual merges them."""
    found: list[Binding] = []
    for klass in cls.__mro__:
        if not klass.__module__.startswith("claudex."):
            break
        found += [b for b in klass.__dict__.get("BINDINGS", []) if isinstance(b, Binding)]
        if klass.__dict__.get("inherit_bindings", True) is False:
            break
    return found


def _keys(binding: Binding) -> str:
    if binding.key_display:
        return code(binding.key_display)
    return " ".join(code(_KEY_NAMES.get(k.strip(), k.strip())) for k in binding.key.split(","))


def _main_rows(bindings: Sequence[Binding]) -> tuple[list[list[str]], list[list[str]]]:
    rows, demo = [], []
    for binding in bindings:
        _, name, params = parse_action(binding.action)
        if name == "fault" and params:
            demo.append([_keys(binding), FAULT_TEXT.get(str(params[0]), binding.description)])
            continue
        if name == "proxy_fault" and params:
            demo.append([_keys(binding),
                         PROXY_FAULT_TEXT.get(str(params[0]), binding.description)])
            continue
        words = _PAGE_WORDS.get(name) or ACTION_TEXT.get(name, binding.description)
        if name == "command_palette":
            words = "the command palette: every action, and select a profile"
        if name in DEMO_ONLY:
            demo.append([_keys(binding), words])
            continue
        notes = []
        if name in MODIFYING:
            notes.append("off with `--read-only`")
        if binding.show:
            notes.append("in the key bar")
        rows.append([_keys(binding), words, ", ".join(notes)])
    return rows, demo


def _dropped_key(name: str) -> str:
    """A name of the key bar's DROP_ORDER as the key it stands for."""
    if name == PALETTE:
        return code(App.COMMAND_PALETTE_BINDING)
    if name == "fault":
        return "the demo's fault keys (as one group)"
    if name == "proxy_fault":
        return "the demo's proxy keys (as one group)"
    for binding in bindings_of(MainScreen):
        if parse_action(binding.action)[1] == name:
            return _keys(binding)
    return code(name)


def render() -> str:
    rows, demo = _main_rows(bindings_of(MainScreen))
    rows.append([code(App.COMMAND_PALETTE_BINDING), "the command palette (as `:`)", ""])
    dropped = [_dropped_key(name) for name in DROP_ORDER]
    lines = [
        "# Console keys", "",
        "Every key of `claudex` (the console). `?` shows the main screen's keys in the console "
        "itself, with the same words.", "",
        "## Main screen", "",
        section("main", table(("key", "does", "notes"), rows)), "",
        "On a terminal too narrow for every key, the key bar leaves keys out in this order, one "
        f"at a time, until the rest fit: {words_list(dropped)}. They still work, and `?` lists "
        "them.", "",
        "### Demo keys", "",
        "In `claudex demo` (`make run`) only; `1`–`6` and `0` act on the selected provider's "
        "fake, `7` and `8` on the demo's upstream proxy `corp`, which claude is reached "
        "through (its panel says `via corp`).", "",
        table(("key", "does"), demo), "",
    ]
    for heading, cls, when in OTHER_SCREENS:
        lines += [f"## {heading}", "", when, "",
                  table(("key", "does"), ([_keys(b), b.description]
                                          for b in bindings_of(cls))), ""]
    lines += ["## Colours", "",
              table(("colour", "means"), ([colour, words] for colour, words in COLOUR_LEGEND)),
              ""]
    return "\n".join(lines)
