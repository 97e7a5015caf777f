"""Words for what tokens cost (engine/addons/cost.py): `claudex status`, `claudex usage`, the
console's panels and table, and a request's detail.

A price is the API's; a subscription login's is marked as what the API would have charged
("API-equivalent", `≈` where a cell has room for one character), since what the plan costs does
not grow with the tokens. Nothing priced is "unpriced" (the price table does not know the model)
or "—" (no answer with tokens yet), never $0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

NONE: Final = "—"
UNPRICED: Final = "unpriced"


def usd_text(usd: object) -> str:
    """`$0.0123`, `$1.24`, `$1,234`: four significant places below a dollar."""
    if not isinstance(usd, int | float) or isinstance(usd, bool):
        return NONE
    if usd >= 1000:
        return f"${usd:,.0f}"
    if usd >= 1:
        return f"${usd:.2f}"
    return f"${usd:.4f}" if usd >= 0.0001 or usd == 0 else f"${usd:.6f}"


def _spend(profile: Mapping[str, Any]) -> tuple[float | None, int, bool]:
    raw = profile.get("cost")
    cost: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    usd = profile.get("cost_usd")
    usd = float(usd) if isinstance(usd, int | float) and not isinstance(usd, bool) else None
    unpriced = cost.get("unpriced")
    return (usd, unpriced if isinstance(unpriced, int) else 0,
            cost.get("basis") == "api_equivalent")


def cost_cell(profile: Mapping[str, Any]) -> str:
    """A table cell: `$1.23`, `≈$1.23` (API-equivalent), `$1.23+` (some answers unpriced),
    `unpriced`, or "—"."""
    usd, unpriced, equivalent = _spend(profile)
    if usd is None:
        return UNPRICED if unpriced else NONE
    return ("≈" if equivalent else "") + usd_text(usd) + ("+" if unpriced else "")


def cost_words(profile: Mapping[str, Any]) -> str:
    """A panel's words: ` · $1.23 API-equivalent`, ` · $1.23 (+3 unpriced)`, ` · unpriced`;
    "" before any answer with tokens."""
    usd, unpriced, equivalent = _spend(profile)
    if usd is None:
        return f" · {UNPRICED}" if unpriced else ""
    text = f" · {usd_text(usd)}" + (" API-equivalent" if equivalent else "")
    return text + (f" (+{unpriced} unpriced)" if unpriced else "")
