"""A provider's quota windows in words, as the console's panels and table and `claudex status`
show them (DESIGN.md "Windows"): `5h 42% · 7d 13%`; a window past its warning threshold
(`allowed_warning`, or a surpassed threshold) with its reset, `5h 92%, resets 14:05`; a spent
one `5h spent until 14:05`. Read from a profile's status JSON (`windows`,
`window_spent_until`), so an attached console shows what the engine it reads keeps."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from claudex.providers.windows import clock_text


@dataclass(frozen=True)
class WindowPart:
    text: str     # "5h 42%", "5h 92%, resets 14:05"
    warned: bool  # shown yellow


def _percent(used: float) -> str:
    return f"{min(100, math.floor(used * 100 + 0.5))}%"


# An API key's limits in the panel's short form: `tokens` is already the most restrictive of
# the token limits (Anthropic's), so the input and output ones are left out there.
_SHORT = {"requests": "req", "tokens": "tok"}
_LEFT_OUT_SHORT = frozenset({"input-tokens", "output-tokens"})
_CELL = {**_SHORT, "input-tokens": "in", "output-tokens": "out"}


def window_parts(profile: Mapping[str, Any], now_wall: float,
                 short: bool = False) -> list[WindowPart]:
    """One part per window the provider's last answer described (a plan's, or an API key's
    rate limits); none for a provider whose answers describe none. `short`: the panel's form
    (`req 3% · tok 1%`: an API key's `tokens` stands for its input and output limits)."""
    windows = profile.get("windows")
    spent = profile.get("window_spent_until")
    spent_name = profile.get("window_spent")
    parts = []
    names = {w.get("name") for w in windows if isinstance(w, dict)} \
        if short and isinstance(windows, list) else set()
    for w in windows if isinstance(windows, list) else ():
        if not isinstance(w, dict):
            continue
        name, used = w.get("name"), w.get("used")
        if not isinstance(name, str) or not isinstance(used, int | float):
            continue
        if short and name in _LEFT_OUT_SHORT and "tokens" in names:
            continue
        label = _SHORT.get(name, name) if short else name
        resets = w.get("resets_at")
        if isinstance(spent, int | float) and (spent_name == name or (
                spent_name is None and used >= 1.0)):
            parts.append(WindowPart(f"{label} spent until {clock_text(spent, now_wall)}", True))
            spent = None
            continue
        warned = bool(w.get("warning")) or w.get("status") in ("allowed_warning", "rejected") \
            or used >= 1.0
        text = f"{label} {_percent(float(used))}"
        if warned and isinstance(resets, int | float):
            text += f", resets {clock_text(resets, now_wall)}"
        parts.append(WindowPart(text, warned))
    if isinstance(spent, int | float):  # spent, and no window described (a bare refusal)
        parts.insert(0, WindowPart(f"spent until {clock_text(spent, now_wall)}", True))
    return parts


def is_rate_limits(profile: Mapping[str, Any]) -> bool:
    """Whether the windows are an API key's rate limits (named `requests`, `tokens`, ...)
    rather than a plan's (`5h`, `7d`)."""
    windows = profile.get("windows")
    return isinstance(windows, list) and any(
        isinstance(w, dict) and w.get("name") in ("requests", "tokens") for w in windows)


def window_words(profile: Mapping[str, Any], now_wall: float) -> str:
    """`5h 42% · 7d 13%`, or "" for a provider without windows."""
    return " · ".join(p.text for p in window_parts(profile, now_wall))


def window_cell(profile: Mapping[str, Any], now_wall: float) -> tuple[str, bool]:
    """The table's short cell: the fullest window (`5h 92%`), warned or not; ("", False)
    without windows."""
    windows = [w for w in profile.get("windows") or () if isinstance(w, dict)
               and isinstance(w.get("used"), int | float) and isinstance(w.get("name"), str)]
    if isinstance(profile.get("window_spent_until"), int | float):
        return "spent", True
    if not windows:
        return "", False
    top = max(windows, key=lambda w: float(w["used"]))
    warned = any(p.warned for p in window_parts({"windows": [top]}, now_wall))
    name = _CELL.get(top["name"], top["name"])  # an API key's limits short, as in the panel
    return f"{name} {_percent(float(top['used']))}", warned
