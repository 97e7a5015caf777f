"""The `[history]` table's schema: the journal's file, how long and how much it keeps, and the
switch (see claudex/engine/history/journal.py)."""

from __future__ import annotations

from collections.abc import Mapping

from claudex.config._checks import Checker, _boolean, _number, _text

HISTORY_KEYS: Mapping[str, Checker] = {
    "enabled": _boolean,
    "path": _text,
    "max_age_days": _number(above=0),
    "max_mb": _number(above=0),
}
