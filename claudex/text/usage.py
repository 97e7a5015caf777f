"""`claudex usage`: the journal's usage report (engine/history/usage_report.py) as a table and
one sentence that answers "what did this cost, and what would it have cost without the
subscription"."""

from __future__ import annotations

import time

from rich.console import Console
from rich.table import Table

from claudex.engine.history.usage_report import UsageReport, UsageRow
from claudex.text.cost import usd_text
from claudex.text.status import console_for_output

_KEY_HEADING = {"day": "day", "profile": "profile (served)", "model": "model (asked)"}


def compact_count(n: int) -> str:
    """1234 -> 1.2k, 3400000 -> 3.4M: a panel has room for a few characters."""
    for size, unit in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def _day(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch))


def _cost_cells(row: UsageRow) -> tuple[str, str]:
    api = usd_text(row.cost_usd) if row.cost_usd or not row.api_equivalent_usd else "—"
    sub = usd_text(row.api_equivalent_usd) if row.api_equivalent_usd else "—"
    return api, sub


def summary(report: UsageReport) -> str:
    t = report.total
    if not t.requests:
        return f"No requests in the journal since {_day(report.since)}."
    words = [f"{t.requests:,} requests since {_day(report.since)}"]
    if t.failovers or t.failed:
        words.append(f"{t.failovers:,} failed over, {t.failed:,} failed")
    words.append(f"{usd_text(t.cost_usd)} at API prices on API keys")
    if t.api_equivalent_usd:
        words.append(f"{usd_text(t.api_equivalent_usd)} API-equivalent on subscriptions "
                     f"(without them: {usd_text(t.total_usd)} in all)")
    if t.unpriced:
        words.append(f"{t.unpriced:,} answers unpriced (a model the price table does not "
                     "know; not in the sums)")
    return "; ".join(words) + "."


def render_usage(report: UsageReport, console: Console | None = None) -> None:
    out = console or console_for_output()
    table = Table(title=f"usage by {report.by}", title_justify="left", title_style="bold")
    table.add_column(_KEY_HEADING.get(report.by, report.by), no_wrap=True)
    for heading in ("requests", "failovers", "in", "out", "cache read", "cache write",
                    "$ API", "$ API-equivalent", "unpriced"):
        table.add_column(heading, justify="right")
    for row in [*report.rows, report.total] if report.rows else []:
        api, sub = _cost_cells(row)
        table.add_row(row.key if row is not report.total else "[b]total[/]",
                      f"{row.requests:,}", f"{row.failovers:,}",
                      compact_count(row.input_tokens), compact_count(row.output_tokens),
                      compact_count(row.cache_read_tokens), compact_count(row.cache_write_tokens),
                      api, sub, str(row.unpriced) if row.unpriced else "")
    if report.rows:
        out.print(table)
    out.print(summary(report))
