"""`claudex status`: the running engine's providers as a rich table.

Upstream proxies (issue 36): a profile reached through one gets a "route" column (`via corp`,
with the route's trouble), shown only when some profile has such a route; the proxies follow in a
table of their own (state, requests, failures, the profiles behind each, last error), shown only
when the status lists any.

Texts that may carry an upstream's words (health reasons, last errors) are masked once more
here: the engine masks them itself, but the table may be showing an engine of another version.
"""

from __future__ import annotations

import re
import time
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from claudex.engine.addons.latency import latency_cell
from claudex.engine.breaker.trips import duration_words
from claudex.engine.masking.secrets import SCRUBBER
from claudex.text.cost import cost_cell
from claudex.text.windows import window_parts

_COLOR_STYLE = {"green": "bold green", "yellow": "bold yellow", "red": "bold red"}
_STATE_STYLE = {"closed": "green", "half_open": "yellow", "open": "red", "forced_open": "red"}
_SHORT_TYPE = {"DirectAnthropic": "anthropic", "OpenAICompatible": "openai",
               "OpenAIResponses": "responses", "Bedrock": "bedrock", "Vertex": "vertex"}


# Piped to a file or another program there is no terminal width to fit: rich would assume 80
# columns and cut every row. Lay the table out at its natural width instead.
_UNBOUNDED_WIDTH = 1000


def console_for_output() -> Console:
    out = Console()
    return out if out.is_terminal else Console(width=_UNBOUNDED_WIDTH)


def render_status(data: dict[str, Any], console: Console | None = None) -> None:
    out = console or console_for_output()
    title = (f"claudex at {data.get('listen', '?')} · {data.get('requests', 0)} requests · "
             f"{data.get('failovers', 0)} failed over · {data.get('requests_per_s', 0)} req/s")
    table = Table(title=title, title_justify="left", title_style="bold")
    table.add_column("provider", no_wrap=True)
    table.add_column("type", no_wrap=True)
    table.add_column("health", min_width=18)
    table.add_column("breaker", no_wrap=True)
    table.add_column("fails", justify="right")
    # What requests felt (p50/p95 of time to first content, or of whole answers), else the
    # probe's latency; it may wrap after its label.
    table.add_column("latency p50/p95", justify="right")
    table.add_column("req/err", justify="right")
    # What the tokens cost at API prices (≈: a subscription's API-equivalent; +: some unpriced).
    table.add_column("$ today", justify="right", no_wrap=True)
    # The quota windows (a plan's `5h 42% · 7d 13%`, an API key's `req 3% · tok 20%`), only
    # when some provider reports them.
    now_wall = time.time()
    windowed = any(window_parts(p, now_wall) for p in data.get("profiles", []))
    if windowed:
        table.add_column("windows", no_wrap=True)
    routed = any(_route_label(p) for p in data.get("profiles", []))
    if routed:
        table.add_column("route")
    errors: list[Text] = []
    limits: list[Text] = []
    marks: set[str] = set()
    for p in data.get("profiles", []):
        health = p.get("health", {})
        breaker = p.get("breaker", {})
        stats = p.get("stats", {})
        color = health.get("color", "red")
        state = str(breaker.get("state", "?"))
        retry = breaker.get("retry_in_s")
        state_text = state.replace("_", "-") + (f" {duration_words(retry)}"
                                                 if isinstance(retry, int | float) and retry
                                                 else "")
        latency = health.get("latency_ms")
        name = str(p.get("name", "?"))
        cells = [] if not windowed else [_windows_text(p, now_wall)]
        if routed:
            cells.append(_route_text(p))
        table.add_row(
            name,
            _SHORT_TYPE.get(p.get("provider_type", ""), p.get("provider_type", "?")),
            Text(f"● {SCRUBBER.text(str(health.get('reason', color)))}",
                 style=_COLOR_STYLE.get(color, "")),
            Text(state_text, style=_STATE_STYLE.get(state, "")),
            str(breaker.get("consecutive_failures", 0)),
            _latency_text(stats, latency),
            f"{stats.get('requests', 0)}/{stats.get('failures', 0)}",
            cost_cell(p),
            *cells,
        )
        marks |= {mark for mark in ("≈", "+", "unpriced") if mark in cost_cell(p)}
        for model, cap in (p.get("learned_max_tokens") or {}).items():
            limits.append(Text.assemble((f"{name}: ", "bold"),
                                        f"max_tokens capped at {cap} for {model or 'its model'}"
                                        " (the provider's stated limit)"))
        for model, window in (p.get("learned_context_window") or {}).items():
            limits.append(Text.assemble(
                (f"{name}: ", "bold"), f"context window {window:,} tokens for "
                f"{model or 'its model'} (learned from its 400): longer conversations pass "
                "it over as a backup"))
        if stats.get("last_error"):
            last_error = SCRUBBER.text(str(stats["last_error"]))
            errors.append(Text.assemble((f"{name}: ", "bold"), (last_error, "dim")))
    out.print(table)
    proxies = data.get("upstream_proxies") or []
    if proxies:
        out.print(proxy_table(proxies))
    for line in pool_lines(data.get("pools") or []):
        out.print(line)
    if marks:
        out.print(Text(_cost_legend(marks), style="dim"))
    if limits:
        out.print("learned limits:")
        for line in limits:
            out.print(Text("  ") + line)
    if errors:
        out.print("last errors:")
        for line in errors:
            out.print(Text("  ") + line)
    history = data.get("history") or {}
    if history.get("path") and not history.get("enabled"):  # the journal gave up
        out.print(Text(f"history off: {SCRUBBER.text(str(history.get('problem') or '?'))}",
                       style="bold yellow"))
    if isinstance(data.get("fleet"), dict):
        _render_fleet(data["fleet"], out)


_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]+@")


def mask_url_password(text: str) -> str:
    """`http://alice:****@proxy.corp:3128` for a URL carrying a password: the engine masks a
    proxy's URL itself, but this may be showing an engine of another version."""
    return _URL_PASSWORD.sub(lambda m: f"{m.group(1)}****@", text)


def _route(profile: dict[str, Any]) -> dict[str, Any]:
    route = profile.get("route")
    return route if isinstance(route, dict) else {}


def _route_label(profile: dict[str, Any]) -> str:
    """`via corp`, or "" for a direct profile (or an engine that reports no routes)."""
    label = str(_route(profile).get("label") or "")
    return "" if label in ("", "direct") else label


def _route_text(profile: dict[str, Any]) -> Text:
    text = Text(_route_label(profile) or "direct", style="" if _route_label(profile) else "dim")
    trouble = _route(profile).get("trouble")
    if trouble:
        text.append(f" · {SCRUBBER.text(str(trouble))}", style="bold red")
    return text


def proxy_table(proxies: list[dict[str, Any]]) -> Table:
    """The upstream proxies: health, where (password masked by the engine, and again here),
    breaker, requests/failures, the profiles routed through each, and the last error."""
    table = Table(title="upstream proxies", title_justify="left", title_style="bold")
    table.add_column("proxy", no_wrap=True)
    table.add_column("url", no_wrap=True)
    table.add_column("breaker", no_wrap=True)
    table.add_column("req/fail", justify="right")
    table.add_column("profiles")
    table.add_column("last error")
    for proxy in proxies:
        health = proxy.get("health")
        color = str(health.get("color") if isinstance(health, dict) else health or "green")
        breaker = proxy.get("breaker") if isinstance(proxy.get("breaker"), dict) else {}
        state = str((breaker or {}).get("state", "?"))
        retry = (breaker or {}).get("retry_in_s")
        state_text = state.replace("_", "-") + (f" {duration_words(retry)}"
                                                 if isinstance(retry, int | float) and retry
                                                 else "")
        reason = proxy.get("health_reason")
        if reason and reason != "ok":  # "proxy auth failed", a cooldown, a certificate
            state_text += f" · {SCRUBBER.text(str(reason))}"
        if proxy.get("enabled") is False:
            state_text = "disabled · " + state_text
        error = proxy.get("last_error")
        table.add_row(
            Text(f"● {proxy.get('name', '?')}", style=_COLOR_STYLE.get(color, "")),
            mask_url_password(SCRUBBER.text(str(proxy.get("url") or ""))),
            Text(state_text, style=_STATE_STYLE.get(state, "")),
            f"{proxy.get('requests', 0)}/{proxy.get('failures', 0)}",
            ", ".join(str(p) for p in proxy.get("profiles") or []),
            Text(SCRUBBER.text(str(error)), style="dim") if error else Text("–", style="dim"),
        )
    return table


def pool_lines(pools: list[dict[str, Any]]) -> list[Text]:
    """Each pool with its members beneath: conversations bound and share of its requests."""
    lines: list[Text] = []
    for pool in pools:
        backups = pool.get("backup_providers") or []
        then = f" → {', '.join(map(str, backups))}" if backups else ""
        lines.append(Text.assemble((f"pool {pool.get('name', '?')}", "bold"),
                                   f" ({pool.get('balance', '?')}) · "
                                   f"{pool.get('bindings', 0)} conversations bound{then}"))
        for member in pool.get("members") or []:
            weight = member.get("weight", 1)
            weighted = f" · weight {weight}" if weight != 1 else ""
            lines.append(Text(f"  └ {member.get('name', '?')}: {member.get('bindings', 0)} "
                              f"bound · {member.get('requests', 0)} requests "
                              f"({float(member.get('share') or 0) * 100:.0f}%){weighted}"))
    return lines


def _windows_text(profile: dict[str, Any], now_wall: float) -> Text:
    text = Text()
    # The short form, as the panel's (an API key's four limits would crowd the other columns).
    for i, part in enumerate(window_parts(profile, now_wall, short=True)):
        if i:
            text.append(" · ")
        text.append(part.text, style="bold yellow" if part.warned else "")
    return text


def _cost_legend(marks: set[str]) -> str:
    said = []
    if "≈" in marks:
        said.append("≈ API-equivalent: a subscription login, whose cost is its plan")
    if "+" in marks or "unpriced" in marks:
        said.append("unpriced: answers whose model the price table does not know (not $0)")
    return "$ at API prices; " + "; ".join(said) if said else ""


def _latency_text(stats: dict[str, Any], probe_ms: Any) -> str:
    felt = latency_cell(stats.get("latency"))
    if felt != "–":
        return felt
    return f"probe {probe_ms:.0f} ms" if isinstance(probe_ms, int | float) else "–"


def _render_fleet(fleet: dict[str, Any], out: Console) -> None:
    """`[fleet]`: whether Redis answers, and every instance heard from (engine/fleet/)."""
    unreachable = fleet.get("redis") == "unreachable"
    head = Text(str(fleet.get("status", "fleet")), style="bold red" if unreachable else "bold")
    head.append(f" · this instance: {fleet.get('name', '?')}", style="")
    if unreachable and fleet.get("error"):
        head.append(f" ({SCRUBBER.text(str(fleet['error']))}; using its own state)", style="dim")
    out.print(head)
    for inst in fleet.get("instances") or []:
        age = inst.get("age_s")
        seen = f"heartbeat {age:.1f}s ago" if isinstance(age, int | float) else ""
        out.print(Text(f"  {inst.get('name', '?')}  {inst.get('listen', '')}  {seen}"))
