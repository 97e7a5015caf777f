"""The soak's summary table (rich), as printed by `make soak` and kept in the issue notes."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from soak.checks import BAD_OUTCOMES
from soak.memory_check import SLOPE_MIN_REQUESTS
from soak.run import SoakReport

_OUTCOME_ORDER = ("ok", "error", "stream_error", "malformed", "lost", "late")


def summary_table(report: SoakReport) -> Table:
    table = Table(title=f"claudex chaos soak — seed {report.plan.seed}, "
                        f"{report.plan.clients} clients", box=box.SIMPLE_HEAVY,
                  title_justify="left")
    table.add_column("measure")
    table.add_column("value", justify="right")
    phases = ", ".join(f"{name} {n:,}" for name, n in report.by_phase.items())
    table.add_row("requests", f"{report.requests:,}  ({phases})")
    table.add_row("chaos phase", f"{report.chaos_s:.1f} s, "
                  f"{report.by_phase.get('chaos', 0) / max(report.chaos_s, 1e-9):,.0f} req/s")
    for outcome in _OUTCOME_ORDER:
        count = report.outcomes.get(outcome, 0)
        style = "bold red" if outcome in BAD_OUTCOMES and count else ""
        label = f"  {outcome}"
        if outcome == "error" and report.error_statuses:
            label += " (" + ", ".join(f"{status}: {n:,}" for status, n in
                                      sorted(report.error_statuses.items())) + ")"
        table.add_row(label, f"[{style}]{count:,}[/]" if style else f"{count:,}")
    table.add_row("failovers (served by a backup)", f"{report.failovers:,}")
    for pair, count in sorted(report.transitions.items()):
        table.add_row(f"breaker {pair}", f"{count:,}")
    actions = ", ".join(f"{k} {v}" for k, v in sorted(report.actions.items()))
    table.add_row("chaos actions", actions or "-")
    table.add_row("OAuth refreshes", f"{report.refreshes:,}")
    table.add_row("spent plan windows", f"{report.windows['plan_limit']:,} refused, "
                  f"{report.windows['window_spent']:,} passed over unsent")
    slow = report.slowness
    table.add_row("slow (live traffic against its own usual)",
                  f"{slow['slow']:,} judged slow, {slow['recovered']:,} recovered, "
                  f"{slow['passed over']:,} attempts passed over (avoid_slow)")
    attempts = report.proxy_attempts
    table.add_row("upstream proxy: attempts it stopped",
                  ", ".join(f"{k} {v:,}" for k, v in sorted(attempts.items())) or "-")
    moves = {**report.proxy_transitions, **report.proxy_events}
    table.add_row("upstream proxy: breaker, events",
                  ", ".join(f"{k} {v:,}" for k, v in sorted(moves.items())) or "-")
    status = report.proxy_status
    if status:
        table.add_row("upstream proxy: status at the end",
                      f"{status.get('requests', 0):,} requests, {status.get('failures', 0):,} "
                      f"failures, {status.get('rate_limited', 0):,} rate limited, "
                      f"{status.get('health')}")
    table.add_row("latency p50 / p99 / max",
                  f"{report.percentile_ms(0.5):.1f} / {report.percentile_ms(0.99):.1f} / "
                  f"{max(report.latencies_ms, default=0.0):.1f} ms")
    table.add_row("deadline per request", f"{report.deadline_s:.1f} s")
    table.add_row("RSS warm → end (peak)", f"{report.rss_mb[0]:.1f} → {report.rss_mb[1]:.1f} MB"
                  + (f" ({report.memory.peak_mb:.1f})" if report.memory else ""))
    if report.memory is not None:
        judged = (f"{report.memory.slope:+.2f} MB per 10,000 requests "
                  f"(over {report.memory.judged_requests:,})"
                  if report.memory.judged_requests >= SLOPE_MIN_REQUESTS else "too short to judge")
        table.add_row("RSS slope, chaos' second half", judged)
    table.add_row("open files warm → end", f"{report.fds[0]} → {report.fds[1]}")
    table.add_row("exit status on SIGTERM", str(report.exit_status))
    verdict = "[bold green]0[/]" if report.ok else f"[bold red]{len(report.violations)}[/]"
    table.add_row("violations", verdict)
    return table


def print_report(report: SoakReport, console: Console | None = None) -> None:
    console = console or Console()
    console.print(summary_table(report))
    for violation in report.violations[:40]:
        console.print(f"[red]✗[/] {violation}", markup=True, highlight=False)
    if len(report.violations) > 40:
        console.print(f"… and {len(report.violations) - 40} more")
