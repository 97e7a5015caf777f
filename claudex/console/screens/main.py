"""The main screen: header, one panel per profile, the selected profile's chain, the request log
and the event log — fed by a coalesced refresh.

How updates flow: a worker (`engine-events` group) drains the engine's event queue into an inbox
and posts `EngineActivity`, which coalesces while pending. Each activity schedules one refresh no
sooner than `MIN_REFRESH_S` after the previous one, and a one-second tick keeps countdowns and
uptime moving. A refresh fetches one snapshot (`link.fresh_snapshot()`) and updates the widgets
from it, so the screen redraws at most ~10 times a second whatever the request rate.

What a refresh costs is what the proxy pays when it shares the process (and the GIL): a panel
whose input (its part of the snapshot, its sparkline, selection, fault) has not changed is not
touched, a line whose text has not changed is not redrawn (`TextLine`), and no redraw asks for a
layout unless a size may change; the request log draws each row once (request_log.py).

Upstream proxies (issue 36) have a strip of their own under the providers (components/
proxy_strip.py); the arrows walk past the last profile onto its rows, and a selected proxy is what
`t`/`r` trip and reset (`selected_proxy`; the profile stays selected for the chain and the rest).

The actions (trip, reset, edit, ...) live in `ActionsMixin` (actions.py), the grid / table switch
and the table's sort in `ViewsMixin` (views.py), the request log's focus, detail and filter in
`RequestsMixin` (requests_box.py); this module is the rest of the view.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, Final

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.events import Resize
from textual.widgets import Input, Static

from claudex.console.components import ChainView, EventLog, HeaderBar, ProviderPanel, RequestLog
from claudex.console.components.key_bar import KeyBar
from claudex.console.components.provider_panel import PoolPanel
from claudex.console.components.provider_table import ProviderTable
from claudex.console.components.proxy_strip import ProxyStrip
from claudex.console.components.request_log import MAX_ROWS
from claudex.console.format import TimeText, local_time_text, request_row, safe
from claudex.console.link import DemoHooks, EngineLink
from claudex.console.messages import EngineActivity, ProfileSelected, ProxySelected
from claudex.console.screens.requests_box import RequestsMixin
from claudex.engine.events import Event

log = logging.getLogger("claudex.console")

MIN_REFRESH_S: Final = 0.1   # at most ~10 refreshes a second
TICK_S: Final = 1.0          # countdowns, uptime and req/s move even when nothing happens
HISTORY: Final = 40          # latencies kept per provider for its sparkline
SPARK_SEED_ROWS: Final = 400  # journal rows read at start to fill the sparklines
INBOX_MAX: Final = 2000      # events waiting for the next refresh (a stalled UI drops the oldest)
SHORT_BELOW: Final = 36      # terminal rows under which the event log shrinks

FAULTS = Binding.Group("fault", compact=False)


def _error_age(profile: Mapping[str, Any], now_wall: float) -> int | None:
    """Whole seconds since the profile's last error: its panel says "3s ago", which moves."""
    at = (profile.get("stats") or {}).get("last_error_at")
    return int(now_wall - at) if isinstance(at, int | float) else None


class MainScreen(RequestsMixin):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("t", "trip", "trip", id="claudex.trip"),
        Binding("r", "reset", "reset", id="claudex.reset"),
        Binding("h", "health", "health", id="claudex.health"),
        Binding("e", "edit", "edit", id="claudex.edit"),
        Binding("a", "add", "add", id="claudex.add"),
        Binding("d", "delete", "delete", id="claudex.delete"),
        # (on a narrow screen the key bar leaves out the least important: key_bar.DROP_ORDER)
        Binding("x", "toggle_enabled", "on/off", id="claudex.toggle_enabled"),
        Binding("v", "toggle_view", "view", id="claudex.toggle_view"),
        Binding("s", "cycle_sort", "sort", id="claudex.sort"),
        Binding("slash", "filter", "filter", key_display="/", id="claudex.filter"),
        Binding("tab", "focus_requests", "requests", id="claudex.focus_requests"),
        Binding("question_mark", "help", "help", key_display="?", id="claudex.help"),
        Binding("q", "quit", "quit", id="claudex.quit"),
        Binding("left,up,k", "select(-1)", "previous profile", show=False,
                id="claudex.previous"),
        Binding("right,down,j", "select(1)", "next profile", show=False, id="claudex.next"),
        Binding("escape", "clear_filter", "clear filter", show=False, id="claudex.clear_filter"),
        Binding("colon", "app.command_palette", "commands", show=False, key_display=":",
                id="claudex.commands"),
        Binding("g", "traffic", "traffic", id="claudex.demo.traffic"),
        Binding("1", "fault('down')", "down", id="claudex.demo.down", group=FAULTS),
        Binding("2", "fault('500')", "500", id="claudex.demo.500", group=FAULTS),
        Binding("3", "fault('429')", "429", id="claudex.demo.429", group=FAULTS),
        Binding("4", "fault('slow')", "slow", id="claudex.demo.slow", group=FAULTS),
        Binding("5", "fault('401')", "401", id="claudex.demo.401", group=FAULTS),
        Binding("6", "fault('spend')", "spend", id="claudex.demo.spend", group=FAULTS),
        Binding("0", "fault('ok')", "ok", id="claudex.demo.ok", group=FAULTS),
    ]

    def __init__(
        self,
        link: EngineLink,
        *,
        read_only: bool = False,
        demo: DemoHooks | None = None,
        time_text: TimeText = local_time_text,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        config_check: Callable[[], Awaitable[None]] | None = None,
        screen_id: str = "main",
    ) -> None:
        super().__init__(id=screen_id)
        self.link = link
        self.config_check = config_check
        self.read_only = read_only
        self.demo = demo
        self.time_text = time_text
        self.wall = wall
        self.monotonic = monotonic
        self.selected: str | None = None
        self.selected_proxy: str | None = None  # an upstream proxy's row, when one is selected
        self.context_label = ""  # which engine of several this screen shows (app.py)
        self.snapshot_data: dict[str, Any] = {}
        self.refresh_count = 0
        self._inbox: deque[Event] = deque(maxlen=INBOX_MAX)
        self._history: dict[str, deque[float]] = {}
        self._probe_seen: dict[str, float | None] = {}
        self._panel_names: list[str] = []
        self._names: list[str] = []  # every profile, in the snapshot's order
        self.view: str | None = None  # "grid" | "table"; None: chosen by the profile count
        self._view_chosen = False  # the operator pressed v: the count no longer decides
        self._panels: dict[str, ProviderPanel] = {}
        self._pool_panels: dict[str, PoolPanel] = {}
        self._pool_names: list[str] = []
        self._panel_inputs: dict[str, tuple[Any, ...]] = {}
        self._last_refresh = -1e9
        self._refresh_pending = False
        self._refreshing = False
        self._refresh_failed = False

    # -- layout --------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield HeaderBar(read_only=self.read_only, id="header")
        yield Static("", id="banner")
        yield VerticalScroll(id="panels")
        yield ProviderTable(id="table")
        yield ProxyStrip(id="proxies")
        yield ChainView("", id="chain")
        with Vertical(id="requests-box"):
            yield Input(placeholder="filter requests: provider, model, status, trail…",
                        id="filter")
            yield RequestLog(id="requests", time_text=self.time_text)
        yield EventLog(id="events", time_text=self.time_text)
        yield KeyBar()

    def on_mount(self) -> None:
        # Looked up once: a query walks every widget, and each profile's panel has eight.
        self._header = self.query_one(HeaderBar)
        self._chain = self.query_one(ChainView)
        self._requests = self.query_one(RequestLog)
        self._events = self.query_one(EventLog)
        self.query_one("#requests-box").border_title = "requests"
        self._events.border_title = "events"
        self._events.palette = self.app.theme_variables
        self._requests.palette = self.app.theme_variables
        self._requests.source = self._request_history
        self._events.source = self._event_history
        self._table = self.query_one(ProviderTable)
        self._proxy_strip = self.query_one(ProxyStrip)
        self._table.palette = self.app.theme_variables
        # After the first layout, so the event log wraps lines at its real width.
        self.call_after_refresh(self._first_events)
        self.run_worker(self._pump_events(), group="engine-events", exit_on_error=False,
                        name="engine event pump")
        self.run_worker(self._seed_sparklines(), group="sparkline-seed", exit_on_error=False,
                        name="sparklines from the journal")
        self.set_interval(TICK_S, self.request_refresh, name="console tick")
        self.request_refresh()

    def on_resize(self, event: Resize) -> None:
        # A short terminal gives the providers the event log's lines (see console.tcss).
        self.set_class(event.size.height < SHORT_BELOW, "-short")

    def _first_events(self) -> None:
        events = self.query_one(EventLog)
        for event in self.link.recent_events():
            events.add(event)
        snapshot = self.link.snapshot()
        mode = " (read-only)" if self.read_only else ""
        state = self.link.state()
        where = (f"attached to the engine at {state.target}" if state.mode == "attached"
                 else f"proxy on {snapshot.get('listen')}")
        events.note(f"console started{mode}: {where}, "
                    f"{len(snapshot.get('profiles') or [])} profiles", self.wall())

    # -- the coalesced refresh -----------------------------------------------------------------

    async def _pump_events(self) -> None:
        with self.link.subscribe() as queue:
            while True:
                self._inbox.append(await queue.get())
                while not queue.empty():
                    self._inbox.append(queue.get_nowait())
                self.post_message(EngineActivity())

    def on_engine_activity(self, message: EngineActivity) -> None:
        self.request_refresh()

    def request_refresh(self) -> None:
        """Refresh soon: at once if the last refresh was long enough ago, else when it is."""
        if self._refresh_pending:
            return
        self._refresh_pending = True
        wait = self._last_refresh + MIN_REFRESH_S - self.monotonic()
        if wait > 0:
            self.set_timer(wait, self._scheduled_refresh, name="console refresh")
        else:  # (a zero-interval Timer divides by its interval)
            self.call_later(self._scheduled_refresh)

    async def _scheduled_refresh(self) -> None:
        self._refresh_pending = False
        await self.refresh_now()

    async def refresh_now(self) -> None:
        """Pull one snapshot and update every widget from it (and the logs from the inbox)."""
        if self._refreshing:
            return
        self._refreshing = True
        try:
            await self._refresh()
            if self._refresh_failed:
                self._refresh_failed = False
                self.show_banner(None)
        except Exception as exc:  # a surprise in one refresh must not take the console down
            log.exception("console refresh failed")
            self._refresh_failed = True
            self.show_banner(f"The console could not refresh: {safe(str(exc), 200)} "
                             f"(details in the log file)")
        finally:
            self._refreshing = False
            self._last_refresh = self.monotonic()
            self.refresh_count += 1

    async def _refresh(self) -> None:
        snapshot = await self.link.fresh_snapshot()
        self.snapshot_data = snapshot
        profiles: dict[str, dict[str, Any]] = {p["name"]: p for p in snapshot.get("profiles", [])}
        self._sync_names(list(profiles))
        pools: list[dict[str, Any]] = snapshot.get("pools") or []
        member_of = {str(m.get("name")): (str(pool.get("name")), m)
                     for pool in pools for m in pool.get("members") or []}
        if self.view == "grid":
            await self._sync_panels(list(profiles), pools)
            for pool in pools:
                pool_panel = self._pool_panels.get(str(pool.get("name")))
                if pool_panel is not None:
                    pool_panel.show(pool, profiles, is_default=pool.get("name")
                                    == snapshot.get("default_profile"))
        if self.selected not in profiles:
            default = snapshot.get("default_profile")
            self.selected = default if default in profiles else next(iter(profiles), None)
        proxies: list[dict[str, Any]] = list(snapshot.get("upstream_proxies") or [])
        if self.selected_proxy not in {str(p.get("name")) for p in proxies}:
            self.selected_proxy = None
        await self._proxy_strip.show(proxies, self.selected_proxy)
        # While a proxy is selected, no profile is shown selected (t/r act on the proxy).
        shown = self.selected if self.selected_proxy is None else None
        self._drain_inbox()
        self._note_probes(profiles)
        now_wall = self.wall()
        default = snapshot.get("default_profile")
        if self.view == "table":
            if self._table.show(list(profiles.values()), now_wall, shown,
                                snapshot.get("pools") or ()):
                self._table_titled()
        for name, panel in (self._panels.items() if self.view == "grid" else ()):
            profile = profiles.get(name)
            if profile is None:
                continue
            fault = self.demo.fault_of(name) if self.demo else None
            fault = None if fault in (None, "ok") else fault
            history = tuple(self._history.get(name, ()))
            selected, is_default = name == shown, name == default
            # The panel's whole input; when it has not changed, neither has the panel.
            membership = member_of.get(name)
            key = (profile, history, selected, is_default, fault, _error_age(profile, now_wall),
                   membership)
            if self._panel_inputs.get(name) == key:
                continue
            panel.show(profile, history, now_wall, selected=selected, is_default=is_default,
                       fault=fault, pool=membership)
            self._panel_inputs[name] = key
        self._chain.show(self.selected, profiles, pools)
        self._header.extra = (self.demo.traffic_text() if self.demo else "") or self.context_label
        state = self.link.state()
        # An attached engine that stopped answering: the last picture stays, greyed.
        self.set_class(not state.connected, "-disconnected")
        self._header.show(snapshot, state, now_wall)

    async def _sync_panels(self, names: list[str],
                           pools: list[dict[str, Any]] | None = None) -> None:
        """A panel per profile in the file's order; a pool's panel goes where its first member
        was, its members' panels beneath it (DESIGN.md "Pools")."""
        groups = [(str(p.get("name")), [str(m.get("name")) for m in p.get("members") or []])
                  for p in pools or []]
        order: list[str] = []  # profile names, and "pool:NAME" for a pool's own panel
        grouped = {member for _, members in groups for member in members}
        for name in names:
            if name in order:
                continue
            if name in grouped:
                pool, members = next(g for g in groups if name in g[1])
                order.append(f"pool:{pool}")
                order += [m for m in members if m in names and m not in order]
            else:
                order.append(name)
        if order == self._panel_names:
            return
        container = self.query_one("#panels")
        await container.remove_children()
        widgets: list[ProviderPanel | PoolPanel] = []
        panels: dict[str, ProviderPanel] = {}
        pool_panels: dict[str, PoolPanel] = {}
        for name in order:
            if name.startswith("pool:"):
                widgets.append(pool_panels.setdefault(name[5:], PoolPanel(name[5:])))
            else:
                widgets.append(panels.setdefault(name, ProviderPanel(name)))
        await container.mount_all(widgets)
        self._panels = panels
        self._pool_panels = pool_panels
        self._panel_inputs.clear()
        self._panel_names = order

    def _history_of(self, name: str) -> deque[float]:
        return self._history.setdefault(name, deque(maxlen=HISTORY))

    async def _seed_sparklines(self) -> None:
        """A console started after the engine (attached, or hosting after a restart) starts the
        panels' sparklines from the journal's newest requests, by the same rule as live ones
        (served at once, not an error), older than anything seen live since."""
        page = await self.link.history("requests", limit=SPARK_SEED_ROWS)
        seeded: dict[str, list[float]] = {}
        for row in page.rows:
            provider, status = row.get("provider"), row.get("status")
            latency = row.get("latency_ms")
            if (isinstance(provider, str) and isinstance(status, int) and status < 400
                    and isinstance(latency, int | float) and len(row.get("attempts") or []) == 1):
                seeded.setdefault(provider, []).append(float(latency))
        for name, samples in seeded.items():
            live = list(self._history.get(name, ()))
            self._history[name] = deque(samples[-HISTORY:] + live, maxlen=HISTORY)
        if seeded:
            self.request_refresh()

    def _drain_inbox(self) -> None:
        events = list(self._inbox)
        self._inbox.clear()
        self._events.add_all(event for event in events if event.kind != "request")
        rows = []
        for event in events:
            if event.kind != "request":
                continue
            row = request_row(event, self.time_text)
            rows.append(row)
            # A request served at once says how fast its provider answers; one that failed
            # over spent part of its time elsewhere, so it is not a sample of anyone.
            if not row.failed_over and row.status is not None and row.status < 400:
                self._history_of(row.provider).append(row.latency_ms)
        if rows:
            # Only the newest rows can stay in the log; skip building table rows for the rest.
            self._requests.add_rows_from(rows[-MAX_ROWS:])

    def _note_probes(self, profiles: Mapping[str, Mapping[str, Any]]) -> None:
        for name, profile in profiles.items():
            health = profile.get("health") or {}
            checked = health.get("last_checked")
            if checked == self._probe_seen.get(name):
                continue
            self._probe_seen[name] = checked
            latency = health.get("latency_ms")
            if checked is not None and isinstance(latency, int | float):
                self._history_of(name).append(float(latency))

    # -- selection, filter, banner -------------------------------------------------------------

    @property
    def profile_names(self) -> list[str]:
        return list(self._names)

    @property
    def proxy_names(self) -> list[str]:
        return self._proxy_strip.names

    def select(self, name: str) -> None:
        if name in self._names and (name != self.selected or self.selected_proxy is not None):
            self.selected = name
            self.selected_proxy = None
            self.request_refresh()

    def select_proxy(self, name: str) -> None:
        if name in self._proxy_strip.names and name != self.selected_proxy:
            self.selected_proxy = name
            self.request_refresh()

    def action_select(self, step: int) -> None:
        # The table moves in the order it shows (sorted, filtered); the grid in the file's;
        # the proxies' rows come after the last profile.
        names = self._table.names if self.view == "table" else self._names
        proxies = [("proxy", n) for n in self._proxy_strip.names]
        order = [("profile", n) for n in names] + proxies
        if not order:
            return
        current = (("proxy", self.selected_proxy) if self.selected_proxy is not None
                   else ("profile", self.selected))
        index = order.index(current) if current in order else -1 if step > 0 else 0
        kind, name = order[(index + step) % len(order)]
        if kind == "proxy":
            self.select_proxy(name)
            return
        self.select(name)
        if self.view == "table":
            self._table.scroll_to_name(self.selected)
            return
        panel = self._panel(self.selected)
        if panel is not None:
            panel.scroll_visible(animate=False)

    def _panel(self, name: str | None) -> ProviderPanel | None:
        return self._panels.get(name) if name is not None else None

    def on_profile_selected(self, message: ProfileSelected) -> None:
        self.select(message.name)

    def on_proxy_selected(self, message: ProxySelected) -> None:
        self.select_proxy(message.name)

    def show_banner(self, text: str | None) -> None:
        """A config problem stays on screen until the config is good again (None clears it)."""
        banner = self.query_one("#banner", Static)
        banner.update(text or "")
        banner.set_class(bool(text), "-visible")

    def note(self, message: str) -> None:
        """An operator's action, in the event log."""
        try:
            self.query_one(EventLog).note(message, self.wall())
        except NoMatches:  # pragma: no cover - the screen is being torn down
            pass
