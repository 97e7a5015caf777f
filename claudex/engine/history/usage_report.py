"""`claudex usage`: what the journal's requests used and cost, summed per day, profile or model.

One grouped query over the `requests` table (read-only, as query.py's readers: WAL never blocks
the writer), so the answer is small whatever the traffic was. Per group: requests, how many
failed over and how many failed everywhere, the four token counts (core/usage.py: input not
cached, output, cache reads, cache writes) and the cost at API prices split by what paid for it:
`cost_usd` for API-key profiles (what the provider bills), `api_equivalent_usd` for subscription
logins (what the same tokens would have cost through the API: the question "what would this week
have cost without the subscription"), and `unpriced`, answers with tokens whose model the price
table did not know (their cost is not in either sum; never counted as $0).

A profile is the one that served (the journal's `provider`); a model the one the client asked
for. A journal written before costs were kept lacks their columns: its rows read as unpriced.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from claudex.engine.history.query import HistoryQueryError, parse_when

By = Literal["day", "profile", "model"]
BY: Final = ("day", "profile", "model")

_KEYS: Final[dict[str, str]] = {
    "day": "date(time, 'unixepoch', 'localtime')",
    "profile": "COALESCE(provider, '(none)')",
    "model": "COALESCE(model, '(none)')",
}
_NEWER: Final = ("cache_write_tokens", "cost_usd", "cost_basis")


@dataclass
class UsageRow:
    key: str
    requests: int = 0
    failovers: int = 0
    failed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0            # API-key profiles: at the provider's API prices
    api_equivalent_usd: float = 0.0  # subscription logins: what the API would have charged
    unpriced: int = 0

    def add(self, other: UsageRow) -> None:
        for name in ("requests", "failovers", "failed", "input_tokens", "output_tokens",
                     "cache_read_tokens", "cache_write_tokens", "cost_usd", "api_equivalent_usd",
                     "unpriced"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def total_usd(self) -> float:
        """What it all would have cost through the API."""
        return self.cost_usd + self.api_equivalent_usd

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "requests": self.requests, "failovers": self.failovers,
                "failed": self.failed, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "cache_read_tokens": self.cache_read_tokens,
                "cache_write_tokens": self.cache_write_tokens,
                "cost_usd": round(self.cost_usd, 6),
                "api_equivalent_usd": round(self.api_equivalent_usd, 6),
                "total_usd": round(self.total_usd, 6), "unpriced": self.unpriced}


@dataclass
class UsageReport:
    since: float
    until: float
    by: str
    rows: list[UsageRow]
    total: UsageRow

    def to_json(self) -> dict[str, Any]:
        return {"since": self.since, "until": self.until, "by": self.by,
                "rows": [r.to_json() for r in self.rows], "total": self.total.to_json()}


def parse_since(text: str, now: float) -> float:
    """`--since`: a duration ago (7d, 12h) or epoch seconds (query.py's forms)."""
    return parse_when(text, now, "--since")


def read_usage(path: Path, *, since: float, by: str = "day",
               until: float | None = None) -> UsageReport:
    """The report over the journal at `path` for `since`..`until` (now). A journal not written
    yet reads as empty; one that cannot be read raises sqlite3.Error."""
    if by not in _KEYS:
        raise HistoryQueryError(f"--by is one of {', '.join(BY)}, not {by[:40]!r}")
    until = time.time() if until is None else until
    rows: list[UsageRow] = []
    if path.exists():
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
        try:
            rows = _grouped(conn, by, since, until)
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):  # created just now, its tables to come
                raise
        finally:
            conn.close()
    total = UsageRow("total")
    for row in rows:
        total.add(row)
    return UsageReport(since, until, by, rows, total)


def _grouped(conn: sqlite3.Connection, by: str, since: float, until: float) -> list[UsageRow]:
    have = {str(r[1]) for r in conn.execute("PRAGMA table_info(requests)")}
    col = {name: (name if name in have else "NULL") for name in _NEWER}
    key = _KEYS[by]
    sql = (
        f"SELECT {key}, COUNT(*), SUM(outcome = 'failover'), SUM(outcome = 'failed'), "
        "SUM(input_tokens), SUM(output_tokens), SUM(cache_read_tokens), "
        f"SUM({col['cache_write_tokens']}), "
        f"SUM(CASE WHEN {col['cost_basis']} = 'api_equivalent' THEN NULL "
        f"ELSE {col['cost_usd']} END), "
        f"SUM(CASE WHEN {col['cost_basis']} = 'api_equivalent' THEN {col['cost_usd']} END), "
        f"SUM({col['cost_usd']} IS NULL AND "
        "(input_tokens IS NOT NULL OR output_tokens IS NOT NULL)) "
        "FROM requests WHERE time >= ? AND time < ? GROUP BY 1 ORDER BY 1")
    out = []
    for k, n, fo, failed, tin, tout, tread, twrite, api, sub, unpriced in conn.execute(
            sql, (since, until)):
        out.append(UsageRow(str(k), int(n or 0), int(fo or 0), int(failed or 0), int(tin or 0),
                            int(tout or 0), int(tread or 0), int(twrite or 0), float(api or 0),
                            float(sub or 0), int(unpriced or 0)))
    if by != "day":  # the biggest first: what cost most is what is looked for
        out.sort(key=lambda r: (-r.total_usd, -r.requests, r.key))
    return out
