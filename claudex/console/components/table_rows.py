"""The provider table's rows as data: one `TableRow` per profile from the engine's status, the
sort orders, the filter and the cell texts. No Textual here (provider_table.py draws them).

Every number comes from the profile's status (`stats.requests_per_min`, `stats.latency.*`,
`stats.minutes.*`, `breaker.until`, ...); a key the engine does not report (an older engine, or
no traffic yet) reads as "—", never as zero. The error % is that of the last `ERROR_MINUTES`
one-minute slots of `stats.minutes`, not the engine's `error_rate` over all 30: sorted by
error rate, a provider failing now ranks above one that failed ten minutes ago and has been
fine since (the sparkline still shows the 30 minutes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from claudex.console.format import safe, state_label
from claudex.text.cost import cost_cell
from claudex.text.usage import compact_count
from claudex.text.windows import window_cell

MISSING: Final = "—"
ERROR_MINUTES: Final = 5  # the error % column: this many newest minutes (the current one too)
SORTS: Final = ("state", "errors", "p95", "name")
SORT_TEXT: Final[dict[str, str]] = {
    "state": "state", "errors": f"{ERROR_MINUTES}-minute error %", "p95": "p95 latency",
    "name": "name",
}
BARS: Final = "▁▂▃▄▅▆▇█"
COLOUR_RANK: Final[dict[str, int]] = {"red": 0, "yellow": 1, "green": 2}
STATE_RANK: Final[dict[str, int]] = {
    "forced_open": 0, "open": 1, "half_open": 2, "closed": 3,
}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def ms_text(ms: float | None) -> str:
    """420ms, 1.2s, 12s, 3.5m: five cells at most."""
    if ms is None:
        return MISSING
    if ms < 1000:
        return f"{ms:.0f}ms"
    if ms < 10_000:
        return f"{ms / 1000:.1f}s"
    if ms < 100_000:
        return f"{ms / 1000:.0f}s"
    return f"{ms / 60_000:.1f}m"


def rate_text(value: float | None) -> str:
    """A per-minute count: 0, 12, 1.2k."""
    if value is None:
        return MISSING
    if value < 10 and value != int(value):
        return f"{value:.1f}"
    return compact_count(round(value))


def percent_text(ratio: float | None) -> str:
    if ratio is None:
        return MISSING
    pct = ratio * 100
    if pct == 0:
        return "0%"
    if pct < 10:
        return f"{pct:.1f}%"
    return f"{pct:.0f}%"


def left_text(seconds: float | None, forced: bool) -> str:
    """Time left of an open breaker or a timed trip; ∞ for a trip until reset."""
    if seconds is None:
        return "∞" if forced else ""
    seconds = max(0.0, seconds)
    if seconds < 100:
        return f"{seconds:.0f}s"
    if seconds < 6000:
        return f"{seconds / 60:.0f}m"
    if seconds < 360_000:
        return f"{seconds / 3600:.0f}h"
    return f"{seconds / 86400:.0f}d"


def sparkline(requests: Sequence[int] | None, errors: Sequence[int] | None, width: int
              ) -> tuple[str, tuple[bool, ...]]:
    """Requests per minute as bars in `width` cells (the newest at the right; several minutes a
    cell when narrower than the series), and for each cell whether it holds an error."""
    if not requests:
        return MISSING.ljust(width), (False,) * width
    series = list(requests)
    errs = list(errors or [])
    errs = [0] * (len(series) - len(errs)) + errs[-len(series):]
    per = max(1, -(-len(series) // width))  # minutes a cell, rounded up
    cells: list[int] = []
    flags: list[bool] = []
    # Group from the newest end, so the current minute always has a cell of its own group.
    for end in range(len(series), 0, -per):
        start = max(0, end - per)
        cells.append(sum(series[start:end]))
        flags.append(sum(errs[start:end]) > 0)
    cells.reverse()
    flags.reverse()
    top = max(cells)
    text = "".join(" " if n == 0 else BARS[min(len(BARS) - 1, (n * len(BARS) - 1) // top)]
                   for n in cells) if top else "·" * len(cells)
    pad = width - len(text)
    return " " * pad + text, (False,) * pad + tuple(flags)


@dataclass(frozen=True)
class TableRow:
    name: str
    colour: str          # green | yellow | red
    state: str           # closed, open, half-open, tripped, disabled, misconfig
    state_rank: int
    left: str
    requests_per_min: float | None
    error_rate: float | None
    p50_ms: float | None
    p95_ms: float | None
    ttfc_ms: float | None
    ttfc_p95_ms: float | None
    tokens_per_min: float | None
    cost: str            # what its tokens cost at API prices (text/cost.py `cost_cell`)
    window: str          # its plan's fullest quota window, `5h 42%` ("": no plan windows)
    window_warned: bool  # that window is past its warning threshold, or spent: yellow
    minutes_requests: tuple[int, ...] | None
    minutes_errors: tuple[int, ...] | None
    last_error: str
    reason: str
    kind: str
    label: str = ""      # the name as shown, when it differs (a pool's member: `└ acct-a`)
    pool: bool = False   # a pool's own row (DESIGN.md "Pools"): its members follow it

    @property
    def latency_p95(self) -> float | None:
        """What the p95 sort reads: total duration, else time to first content (a provider
        that only streams has no non-streamed duration)."""
        return self.p95_ms if self.p95_ms is not None else self.ttfc_p95_ms

    def cells(self) -> dict[str, str]:
        return {
            "state": self.state, "left": self.left,
            "rpm": rate_text(self.requests_per_min), "err": percent_text(self.error_rate),
            "p50": ms_text(self.p50_ms), "p95": ms_text(self.p95_ms),
            "ttfc": ms_text(self.ttfc_ms), "tpm": rate_text(self.tokens_per_min),
            "cost": self.cost, "window": self.window,
        }

    def matches(self, needle: str) -> bool:
        """The `/` filter: name, type, state, colour, reason or last error."""
        if not needle:
            return True
        hay = " ".join((self.name, self.kind, self.state, self.colour, self.reason,
                        self.last_error)).lower()
        return all(word in hay for word in needle.lower().split())


def _series(value: Any) -> tuple[int, ...] | None:
    """A per-minute series of counts; None unless it is one (100 rows, 3 series each, ten
    times a second: `sum` checks every item at C speed)."""
    if not isinstance(value, list | tuple):
        return None
    series = tuple(value)
    try:
        sum(series)
    except TypeError:
        return None
    if not all(type(v) is int for v in series):
        series = tuple(int(v) for v in series)
    return series


def recent_error_rate(requests: Sequence[int] | None, errors: Sequence[int] | None,
                      minutes: int = ERROR_MINUTES) -> float | None:
    """Errors per request sent in the newest `minutes` slots; None without the series or
    without a request in them (nothing to judge by)."""
    if requests is None or errors is None:
        return None
    sent = sum(requests[-minutes:])
    return min(1.0, sum(errors[-minutes:]) / sent) if sent > 0 else None


def _state(profile: Mapping[str, Any], breaker: Mapping[str, Any]) -> tuple[str, int]:
    if profile.get("problem"):
        return "misconfig", -1
    if profile.get("enabled") is False:
        return "disabled", 4
    state = str(breaker.get("state") or "closed")
    return state_label(state), STATE_RANK.get(state, 3)


def _left(breaker: Mapping[str, Any], now_wall: float) -> str:
    state = breaker.get("state")
    if state == "forced_open":
        until = _number(breaker.get("until"))
        return left_text(None if until is None else until - now_wall, forced=True)
    if state == "open":
        return left_text(_number(breaker.get("retry_in_s")), forced=False)
    return ""


def _error_words(stats: Mapping[str, Any], now_wall: float) -> str:
    error = stats.get("last_error")
    if not error:
        return ""
    at = _number(stats.get("last_error_at"))
    age = ""
    if at is not None:
        age = left_text(now_wall - at, forced=False) + " "
    return age + safe(str(error), 160)


def _trip_words(breaker: Mapping[str, Any]) -> str:
    """A trip's reason, in the last column while it is in force (the operator's words say
    more than the error that came before it)."""
    reason = breaker.get("reason")
    if breaker.get("state") == "forced_open" and reason:
        return f"trip: {safe(str(reason), 160)}"
    return ""


def table_row(profile: Mapping[str, Any], now_wall: float) -> TableRow:
    breaker = profile.get("breaker") or {}
    health = profile.get("health") or {}
    stats = profile.get("stats") or {}
    latency = stats.get("latency") or {}
    minutes = stats.get("minutes") or {}
    state, rank = _state(profile, breaker)
    minutes_requests = _series(minutes.get("requests"))
    minutes_errors = _series(minutes.get("errors"))
    provider_type = str(profile.get("provider_type") or "")
    kind = {"DirectAnthropic": "anthropic", "OpenAIResponses": "responses",
            "Bedrock": "bedrock", "Vertex": "vertex"}.get(provider_type, "openai")
    window, warned = window_cell(profile, now_wall)
    return TableRow(
        name=str(profile.get("name") or ""),
        colour=str(health.get("color") or "green"),
        state=state, state_rank=rank, left=_left(breaker, now_wall),
        requests_per_min=_number(stats.get("requests_per_min")),
        error_rate=recent_error_rate(minutes_requests, minutes_errors),
        p50_ms=_number(latency.get("duration_p50_ms")),
        p95_ms=_number(latency.get("duration_p95_ms")),
        ttfc_ms=_number(latency.get("first_content_p50_ms")),
        ttfc_p95_ms=_number(latency.get("first_content_p95_ms")),
        tokens_per_min=_number(stats.get("tokens_per_min")),
        cost=cost_cell(profile),
        window=window, window_warned=warned,
        minutes_requests=minutes_requests,
        minutes_errors=minutes_errors,
        last_error=_trip_words(breaker) or _error_words(stats, now_wall),
        reason=safe(str(health.get("reason") or ""), 120),
        kind=kind,
    )


def _missing_last(value: float | None) -> tuple[int, float]:
    """Worst (largest) first, unknown values after every known one."""
    return (1, 0.0) if value is None else (0, -value)


def pool_row(pool: Mapping[str, Any], members: Mapping[str, TableRow]) -> TableRow:
    """A pool's line: its balance as the state, the conversations bound and each member's
    bindings and share of requests where a provider has its last error; the dot in its best
    member's colour (green while any member is)."""
    names = [str(m.get("name")) for m in pool.get("members") or []]
    colours = [members[n].colour for n in names if n in members]
    colour = min(colours, key=lambda c: COLOUR_RANK.get(c, 3)) if colours else "red"
    spread = " · ".join(f"{m.get('name')} {m.get('bindings', 0)}"
                        for m in pool.get("members") or [])
    backups = ", ".join(str(b) for b in pool.get("backup_providers") or [])
    words = f"{pool.get('bindings', 0)} bound: {spread}" + (f" · then {backups}" if backups
                                                             else "")
    return TableRow(
        name=str(pool.get("name") or ""), colour=colour, state=str(pool.get("balance") or ""),
        state_rank=0, left="", requests_per_min=None, error_rate=None, p50_ms=None,
        p95_ms=None, ttfc_ms=None, ttfc_p95_ms=None, tokens_per_min=None, cost="",
        window="", window_warned=False, minutes_requests=None, minutes_errors=None,
        last_error=words, reason="", kind="pool", label=f"{pool.get('name')} (pool)",
        pool=True)


def grouped(rows: Sequence[TableRow], pools: Sequence[Mapping[str, Any]]) -> list[TableRow]:
    """`rows` (sorted) with each pool's members together beneath the pool's own row, placed
    where its first member came; members keep their order, shown as `└ name`."""
    if not pools:
        return list(rows)
    by_name = {row.name: row for row in rows}
    pool_of: dict[str, Mapping[str, Any]] = {}
    for pool in pools:
        for member in pool.get("members") or []:
            pool_of.setdefault(str(member.get("name")), pool)
    out: list[TableRow] = []
    placed: set[str] = set()
    for row in rows:
        found = pool_of.get(row.name)
        if found is None:
            out.append(row)
            continue
        pool = found
        name = str(pool.get("name"))
        if name in placed:
            continue
        placed.add(name)
        out.append(pool_row(pool, by_name))
        members = {str(m.get("name")) for m in pool.get("members") or []}
        out += [dataclasses.replace(member, label=f"└ {member.name}") for member in rows
                if member.name in members and pool_of.get(member.name) is pool]
    return out


def sort_rows(rows: Sequence[TableRow], by: str) -> list[TableRow]:
    """`state`: red first, then by breaker (tripped, open, half-open, closed); `errors`: the
    highest error rate of the last `ERROR_MINUTES` first; `p95`: the slowest first; `name`:
    alphabetical. Ties by name."""
    if by == "errors":
        return sorted(rows, key=lambda r: (_missing_last(r.error_rate),
                                           _missing_last(r.requests_per_min), r.name))
    if by == "p95":
        return sorted(rows, key=lambda r: (_missing_last(r.latency_p95), r.name))
    if by == "name":
        return sorted(rows, key=lambda r: r.name)
    return sorted(rows, key=lambda r: (COLOUR_RANK.get(r.colour, 3), r.state_rank, r.name))
