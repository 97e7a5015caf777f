"""One panel per profile: colour and reason, breaker with its countdown (and claudex's queue
there, when requests wait), the quota windows on a line of their own when the answers describe
any (a plan's `plan 5h 42% · 7d 13%`, an API key's `limits req 3% · tok 1%`), the latency requests
felt (p50/p95 of time to first content, or of
whole answers; the probe's latency until traffic has been served or when the probe fails) with a
sparkline of recent latencies, request and error counts, and the last error (masked).
A profile reached through upstream proxies names its route in the subtitle (`via corp`; a direct
one says nothing), and while that route is out or degraded a line names the proxy's trouble
(`proxy corp open (connection refused)`): the provider's own colour stays its own (issue 36)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.widgets import Sparkline

from claudex.console.colors import variable
from claudex.console.components.proxy_strip import route_label, route_trouble
from claudex.console.components.text_line import TextLine
from claudex.console.format import (
    breaker_words,
    cloud_label,
    counts_words,
    last_error_words,
    limit_words,
    probe_words,
    protocol_label,
    safe,
    token_words,
)
from claudex.console.messages import ProfileSelected
from claudex.engine.addons.latency import latency_words
from claudex.engine.health.slowness import short_words
from claudex.text.cost import cost_words
from claudex.text.windows import is_rate_limits, window_parts

STATE_CLASSES = frozenset({"-green", "-yellow", "-red", "-selected"})


class ProviderPanel(Vertical):
    """Every line is a `TextLine` of fixed size except the probe (its width is `auto`), so a
    refresh that changes a count or a countdown repaints that line alone, with no layout."""

    def __init__(self, name: str) -> None:
        super().__init__(classes="panel")
        self.profile_name = name
        self.border_title = escape(name)
        self._subtitle = ""
        self.status_line = TextLine(fixed_size=True, classes="panel-status")
        self.breaker_line = TextLine(fixed_size=True, classes="panel-breaker")
        self.windows_line = TextLine(fixed_size=True, classes="panel-windows")
        self.route_line = TextLine(fixed_size=True, classes="panel-route")
        self.probe_line = TextLine(classes="panel-probe")
        self.spark = Sparkline([], classes="panel-spark")
        self.counts_line = TextLine(fixed_size=True, classes="panel-counts")
        self.error_line = TextLine(fixed_size=True, classes="panel-error")

    def compose(self) -> ComposeResult:
        yield self.status_line
        yield self.breaker_line
        yield self.windows_line
        yield self.route_line
        with Horizontal(classes="panel-probe-row"):
            yield self.probe_line
            yield self.spark
        yield self.counts_line
        yield self.error_line

    def on_click(self, event: events.Click) -> None:
        self.post_message(ProfileSelected(self.profile_name))

    def show(self, profile: Mapping[str, Any], history: Sequence[float], now_wall: float,
             *, selected: bool, is_default: bool = False, fault: str | None = None,
             pool: tuple[str, Mapping[str, Any]] | None = None) -> None:
        """`pool`: the pool this profile is a member of, and its member entry in status."""
        health = profile.get("health") or {}
        breaker = profile.get("breaker") or {}
        stats = profile.get("stats") or {}
        colour = str(health.get("color") or "green")
        wanted = {f"-{colour}", "-selected"} if selected else {f"-{colour}"}
        if wanted != self.classes & STATE_CLASSES:
            # One restyle for the whole change (each set_class would restyle the panel).
            for cls in STATE_CLASSES:
                self.set_class(cls in wanted, cls, update=False)
            self.update_node_styles()
        kind = protocol_label(str(profile.get("provider_type") or ""))
        if place := cloud_label(profile):
            kind = f"{kind} {place}"
        default = " · default" if is_default else ""
        via = route_label(profile)
        subtitle = (f"{kind}{default}" + (f" · {via}" if via else "")
                    + (f" · fake: {fault}" if fault else ""))
        if pool is not None:  # short: the pool's panel has the long words
            share = float(pool[1].get("share") or 0) * 100
            subtitle = f"{pool[0]}: {pool[1].get('bindings', 0)} bound · {share:.0f}% · {subtitle}"
        if subtitle != self._subtitle:  # (setting it repaints, even to the same text)
            self._subtitle = subtitle
            self.border_subtitle = subtitle
        words = str(health.get("reason") or colour)
        verdict = health.get("slow")
        if words.startswith("slow: ") and isinstance(verdict, dict):  # live traffic slow
            words = short_words(verdict) or words
        reason = escape(safe(words, 80))
        self.status_line.set_text(f"[{variable(colour)}]● [b]{colour}[/][/] {reason}")
        queue = queue_words(profile)
        queue = f" · [b]{queue}[/]" if queue else ""
        self.breaker_line.set_text(f"[dim]breaker[/] {escape(breaker_words(breaker))}{queue}")
        windows = window_markup(profile, now_wall)
        if bool(windows) != self.has_class("-windows"):  # (a layout only when it changes)
            self.set_class(bool(windows), "-windows")
        self.windows_line.set_text(windows)
        trouble = route_trouble(profile)
        if bool(trouble) != self.has_class("-route-trouble"):
            self.set_class(bool(trouble), "-route-trouble")
        self.route_line.set_text(f"[{variable('red')}]⚠ {escape(trouble)}[/]" if trouble else "")
        self.probe_line.set_text(escape(feel_words(health, stats)))
        # Textual draws one sample as a full bar; two equal ones read as "flat", which is right.
        data = list(history)
        if len(data) == 1:
            data = data * 2
        if list(self.spark.data or []) != data:
            self.spark.data = data
        self.counts_line.set_text(escape(counts_words(stats) + token_words(profile)
                                         + cost_words(profile) + limit_words(profile)))
        self.error_line.set_text(f"[dim]{escape(last_error_words(stats, now_wall))}[/]")


def feel_words(health: Mapping[str, Any], stats: Mapping[str, Any]) -> str:
    """What requests felt over the last minutes, when any were served; else the probe. A
    failing probe is news either way and keeps the line."""
    words = latency_words(stats.get("latency"))
    failing = bool(health.get("error")) and health.get("latency_ms") is None
    return words if words and not failing else probe_words(health)


def window_markup(profile: Mapping[str, Any], now_wall: float) -> str:
    """The windows line: `plan 5h 42% · 7d 13%` for a plan's quota windows, `limits req 3% ·
    tok 1%` for an API key's rate limits (the short form, so it fits three panels a row), a
    warned one yellow with its reset; "" for a provider without windows."""
    parts = window_parts(profile, now_wall, short=True)
    if not parts:
        return ""
    yellow = variable("yellow")
    label = "limits" if is_rate_limits(profile) else "plan"
    return f"[dim]{label}[/] " + " · ".join(
        f"[{yellow}]{escape(p.text)}[/]" if p.warned else escape(p.text) for p in parts)


def queue_words(profile: Mapping[str, Any]) -> str:
    """`queue 3` while requests wait for a slot at the provider (claudex's own limit), else ""."""
    queued = (profile.get("concurrency") or {}).get("queued")
    return f"queue {queued}" if isinstance(queued, int) and queued > 0 else ""


class PoolPanel(Vertical):
    """A pool's own panel (DESIGN.md "Pools"), placed before its members' panels: its balance,
    the conversations bound and, per member, its colour, bindings and share of requests."""

    def __init__(self, name: str) -> None:
        super().__init__(classes="panel -pool")
        self.pool_name = name
        self.border_title = f"{escape(name)} · pool"
        self._subtitle = ""
        self.summary_line = TextLine(fixed_size=True, classes="panel-status")
        self.member_lines = TextLine(classes="panel-members")

    def compose(self) -> ComposeResult:
        yield self.summary_line
        yield self.member_lines

    def show(self, pool: Mapping[str, Any], profiles: Mapping[str, Mapping[str, Any]],
             *, is_default: bool = False) -> None:
        subtitle = str(pool.get("balance") or "") + (" · default" if is_default else "")
        if subtitle != self._subtitle:
            self._subtitle = subtitle
            self.border_subtitle = subtitle
        backups = ", ".join(str(b) for b in pool.get("backup_providers") or [])
        then = f" [dim]· then {escape(backups)}[/]" if backups else ""
        self.summary_line.set_text(f"[b]{pool.get('bindings', 0)}[/] conversations bound{then}")
        lines = []
        for member in pool.get("members") or []:
            name = str(member.get("name"))
            colour = str(((profiles.get(name) or {}).get("health") or {}).get("color") or "red")
            lines.append(f"[{variable(colour)}]●[/] [b]{escape(name)}[/] "
                         f"{member_words(member)}")
        self.member_lines.set_text("\n".join(lines))


def member_words(member: Mapping[str, Any]) -> str:
    """`2 bound · 33% of requests`, or with a weight other than 1 `2 bound · 33% · weight 3`."""
    weight = member.get("weight", 1)
    share = f"{float(member.get('share') or 0) * 100:.0f}%"
    tail = f" · weight {weight}" if weight != 1 else " of requests"
    return f"{member.get('bindings', 0)} bound · {share}{tail}"
