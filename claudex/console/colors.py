"""The status colours: declared once, as variables at the top of `console.tcss`.

The stylesheet uses them for panel borders and labels; text built in Python (markup such as
`[$claudex-red]●[/]`, or Rich styles for the request log) needs the same values, so the app also
publishes them as theme variables, read from the stylesheet by `tcss_colours()`. Editing the three
lines in `console.tcss` therefore re-colours everything.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

TCSS_PATH: Final = Path(__file__).with_name("console.tcss")
STATUS_VARIABLES: Final = ("claudex-green", "claudex-yellow", "claudex-red")
DEFAULTS: Final[dict[str, str]] = {
    "claudex-green": "#3fb950",
    "claudex-yellow": "#d29922",
    "claudex-red": "#f85149",
}

_DECLARATION = re.compile(r"^\s*\$(claudex-[a-z-]+)\s*:\s*([^;]+);", re.MULTILINE)


def tcss_colours(text: str | None = None) -> dict[str, str]:
    """The `$claudex-*` variables declared in `console.tcss` (defaults for any missing)."""
    if text is None:
        try:
            text = TCSS_PATH.read_text(encoding="utf-8")
        except OSError:
            text = ""
    found = {name: value.strip() for name, value in _DECLARATION.findall(text)}
    return {**DEFAULTS, **found}


def variable(colour: str) -> str:
    """`green` -> `$claudex-green`, for Content markup."""
    return f"$claudex-{colour}"
