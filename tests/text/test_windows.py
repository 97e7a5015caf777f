"""Quota windows as the console and `claudex status` show them (DESIGN.md "Windows"):
`5h 42% · 7d 13%`, a warned window yellow with its reset, a spent one until its reset."""

from __future__ import annotations

import time

from rich.console import Console

from claudex.console.components.provider_panel import window_markup
from claudex.console.components.table_rows import table_row
from claudex.providers.windows import clock_text
from claudex.text.status import render_status
from claudex.text.windows import window_cell, window_parts, window_words

NOW = time.time()
RESET = NOW + 3600


def windows(used_5h: float, status: str = "allowed", warning: bool = False) -> dict[str, object]:
    return {"name": "sub", "windows": [
        {"name": "5h", "used": used_5h, "resets_at": RESET, "status": status, "warning": warning},
        {"name": "7d", "used": 0.13, "resets_at": NOW + 86400 * 3, "status": "allowed",
         "warning": False}]}


def test_windows_in_words() -> None:
    assert window_words(windows(0.42), NOW) == "5h 42% · 7d 13%"
    warned = window_parts(windows(0.92, "allowed_warning", True), NOW)
    assert [(p.text, p.warned) for p in warned] == [
        (f"5h 92%, resets {clock_text(RESET, NOW)}", True), ("7d 13%", False)]
    # A surpassed threshold warns although the status is still "allowed".
    assert window_parts(windows(0.8, "allowed", True), NOW)[0].warned
    assert window_words({"name": "key", "windows": []}, NOW) == ""


def test_a_spent_window_is_shown_until_its_reset() -> None:
    spent = {**windows(1.0, "rejected"), "window_spent_until": RESET, "window_spent": "5h"}
    assert window_words(spent, NOW) == f"5h spent until {clock_text(RESET, NOW)} · 7d 13%"
    assert window_cell(spent, NOW) == ("spent", True)
    bare = {"name": "gpt", "windows": [], "window_spent_until": RESET, "window_spent": None}
    assert window_words(bare, NOW) == f"spent until {clock_text(RESET, NOW)}"


def test_the_table_cell_is_the_fullest_window() -> None:
    assert window_cell(windows(0.42), NOW) == ("5h 42%", False)
    assert window_cell(windows(0.92, "allowed_warning", True), NOW) == ("5h 92%", True)
    assert window_cell({"name": "key"}, NOW) == ("", False)
    row = table_row(windows(0.42), NOW)
    assert (row.window, row.window_warned, row.cells()["window"]) == ("5h 42%", False, "5h 42%")


def test_the_panel_line_marks_a_warned_window_yellow() -> None:
    assert window_markup(windows(0.42), NOW) == "[dim]plan[/] 5h 42% · 7d 13%"
    marked = window_markup(windows(0.92, "allowed_warning", True), NOW)
    assert marked.startswith("[dim]plan[/] [$claudex-yellow]5h 92%, resets ") and marked.endswith(
        "[/] · 7d 13%")
    assert window_markup({"name": "key"}, NOW) == ""


def _limits(requests: float) -> dict[str, object]:
    return {"name": "key", "windows": [
        {"name": "requests", "used": requests, "resets_at": RESET,
         "status": "rejected" if requests >= 1 else "allowed", "warning": False},
        {"name": "tokens", "used": 0.031, "resets_at": RESET, "status": "allowed"},
        {"name": "input-tokens", "used": 0.01, "resets_at": RESET, "status": "allowed"},
        {"name": "output-tokens", "used": 0.031, "resets_at": RESET, "status": "allowed"}]}


def test_an_api_keys_limits_are_short_in_the_panel_and_whole_elsewhere() -> None:
    # The panel's line fits three panels a row (~40 columns): `tokens` stands for the
    # input and output limits there (Anthropic's is the most restrictive of them).
    assert window_markup(_limits(0.03), NOW) == "[dim]limits[/] req 3% · tok 3%"
    full = window_markup(_limits(1.0), NOW)
    assert full == (f"[dim]limits[/] [$claudex-yellow]req 100%, resets "
                    f"{clock_text(RESET, NOW)}[/] · tok 3%")
    assert len("limits req 100%, resets 14:05 · tok 3%") <= 40
    # In words, they are all named; `claudex status` has the short form, as the panel.
    assert window_words(_limits(0.03), NOW) == (
        "requests 3% · tokens 3% · input-tokens 1% · output-tokens 3%")
    text = _status_text([{"name": "key", "provider_type": "DirectAnthropic",
                          "health": {"color": "green"}, "breaker": {"state": "closed"},
                          "stats": {}, **_limits(0.03)}])
    assert "req 3% · tok 3%" in text and "input-tokens" not in text
    assert window_cell(_limits(0.03), NOW) == ("tok 3%", False)  # the table's cell is short
    assert window_cell(_limits(1.0), NOW) == ("req 100%", True)


def _status_text(profiles: list[dict[str, object]]) -> str:
    out = Console(width=200, record=True, color_system=None)
    render_status({"listen": "127.0.0.1:8082", "profiles": profiles}, out)
    return out.export_text()


def test_claudex_status_has_a_windows_column_only_when_some_provider_has_windows() -> None:
    plain = {"name": "key", "provider_type": "OpenAICompatible", "health": {"color": "green"},
             "breaker": {"state": "closed"}, "stats": {}}
    assert "windows" not in _status_text([plain])
    shown = _status_text([{**plain, **windows(0.42), "name": "sub"}, plain])
    assert "windows" in shown and "5h 42% · 7d 13%" in shown
