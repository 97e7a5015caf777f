"""`claudex status`: the running engine's providers as a rich table."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

_COLOR_STYLE = {"green": "bold green", "yellow": "bold yellow", "red": "bold red"}
_STATE_STYLE = {"closed": "green", "half_open": "yellow", "open": "red", "forced_open": "red"}


def render_status(data: dict[str, Any], console: Console | None = None) -> None:
    out = console or Console()
    table = Table(title=f"claudex at {data.get('listen', '?')}  ·  {data.get('requests', 0)} "
                        f"requests, {data.get('failovers', 0)} failed over", title_justify="left")
    for column in ("provider", "type", "health", "breaker", "fails", "latency", "requests",
                   "errors", "last error"):
        table.add_column(column, no_wrap=column not in ("health", "last error"))
    for p in data.get("profiles", []):
        health = p.get("health", {})
        breaker = p.get("breaker", {})
        stats = p.get("stats", {})
        color = health.get("color", "red")
        state = breaker.get("state", "?")
        retry = breaker.get("retry_in_s")
        state_text = state.replace("_", "-") + (f" ({retry:.0f}s)" if retry else "")
        latency = health.get("latency_ms")
        table.add_row(
            p.get("name", "?"),
            p.get("provider_type", "?"),
            Text(f"● {health.get('reason', color)}", style=_COLOR_STYLE.get(color, "")),
            Text(state_text, style=_STATE_STYLE.get(state, "")),
            str(breaker.get("consecutive_failures", 0)),
            f"{latency:.0f} ms" if isinstance(latency, int | float) else "-",
            str(stats.get("requests", 0)),
            str(stats.get("failures", 0)),
            Text(str(stats.get("last_error") or ""), style="dim"),
        )
    out.print(table)
