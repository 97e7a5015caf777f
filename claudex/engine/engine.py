"""The engine: one object that owns the providers' runtime state and serves requests.

The console and server reach it through a small interface — `snapshot`, `events.subscribe`,
`trip`, `reset`, `apply_config`, `forward`, `check_health_now` — so a console attached to a
remote engine can later use the same screens. What is done with a finished request (its tokens,
the providers' series, the "request" event) is in request_report.py.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from claudex.config.model import Config, Profile
from claudex.engine import clock as clock_mod
from claudex.engine.addons.cost import CostAddon, CostTotals, Spend, cost_basis
from claudex.engine.addons.counting import StatsAddon
from claudex.engine.addons.pools import PoolsAddon
from claudex.engine.addons.prices import PriceTable
from claudex.engine.addons.request_report import RequestEventsAddon
from claudex.engine.addons.series import SeriesAddon
from claudex.engine.addons.signatures import SignatureMemory
from claudex.engine.addons.stats import GlobalStats
from claudex.engine.addons.tokens import TokensAddon
from claudex.engine.addons.trace_settings import trace_settings
from claudex.engine.addons.windows import WindowsAddon
from claudex.engine.breaker.circuit import BreakerState, CircuitBreaker, Transition
from claudex.engine.breaker.trips import (
    SavedTrip,
    clean_reason,
    reset_words,
    trip_data,
    trips_in_journal,
)
from claudex.engine.clock import Clock, Sleep, WallClock
from claudex.engine.clouds.credentials import GoogleCredentials
from claudex.engine.clouds.make import (
    cloud_credentials,
    credentials_profile,
    is_cloud,
    make_wire,
)
from claudex.engine.control_http import control_client
from claudex.engine.core.bindings import Bindings
from claudex.engine.core.failover import Forwarder
from claudex.engine.core.hooks import Hooks
from claudex.engine.core.pools import PoolBalancer
from claudex.engine.core.request import ForwardResult, ProxyRequest
from claudex.engine.core.runtime import ProviderRuntime
from claudex.engine.core.transport import AiohttpTransport, Transport
from claudex.engine.core.usage import TokenTotals
from claudex.engine.credentials.cache import Credentials
from claudex.engine.credentials.upstream import UpstreamCredentials
from claudex.engine.events import Event, EventBus
from claudex.engine.health.probes import HealthChecker
from claudex.engine.health.slow_watch import SlowWatch
from claudex.engine.health.slowness import EVAL_S as SLOW_EVAL_S
from claudex.engine.health.spent_windows import CHECK_S as SPENT_CHECK_S
from claudex.engine.health.spent_windows import CredentialWatch, end_spent, operator_reset
from claudex.engine.history.journal import Journal
from claudex.engine.history.seed import apply_seed, local_midnight, read_seed
from claudex.engine.masking.secrets import SCRUBBER, config_secrets
from claudex.engine.network.httpx_client import RouteClients, sync_client_for
from claudex.engine.network.proxy_state import ProxyBoard, ProxySpecLike
from claudex.engine.network.resolve import resolve_network as default_resolve_network
from claudex.engine.network.routes import DIRECT, Route
from claudex.engine.network.tls import TlsSetupError
from claudex.engine.routing import Routing, build_routing
from claudex.engine.routing.intents import TIMEOUT_S as ROUTER_TIMEOUT_S

if TYPE_CHECKING:  # imported only when traces are on (engine/addons/traces.py)
    from claudex.engine.addons.traces import TracesAddon
    from claudex.engine.fleet.coordinator import Fleet  # only with `[fleet]`: redis (~5 MB)

log = logging.getLogger("claudex.engine")

_AUTH_FIELDS = ("auth_type", "api_key", "api_key_env", "oauth_provider", "credentials_file",
                "token_url", "client_id", "token_command", "provider_type", "region", "project",
                "aws_profile", "aws_service")


class Engine:
    def __init__(
        self,
        config: Config,
        *,
        transport: Transport | None = None,
        clock: Clock = clock_mod.monotonic,
        wall: WallClock = clock_mod.wall,
        sleep: Sleep = clock_mod.sleep,
        rand: Callable[[], float] = random.random,
        env: Mapping[str, str] | None = None,
        http: httpx.AsyncClient | None = None,
        journal: Journal | None = None,
        router_timeout: float = ROUTER_TIMEOUT_S,
        prices_apart: bool = False,
        judge_slowness_every: float | None = SLOW_EVAL_S,
        check_credentials_every: float | None = SPENT_CHECK_S,
        resolve_network: NetworkResolver | None = None,
    ) -> None:
        """`journal`: where request summaries and events are kept across restarts (serve and
        the hosting console pass one from `[history]`; tests and the demo none).
        `router_timeout`: how long `[router]`'s classifier may take (DESIGN.md: 2 s).
        `prices_apart`: the config's models priced at start by a child process, so that this
        one does not import genai-prices for them (`claudex serve`: addons/price_sheet.py).
        `judge_slowness_every`: seconds between the slow watch's rounds (engine/health/slowness.py),
        in real time; None: no rounds of its own (a test calls `slow.judge_all` itself).
        `check_credentials_every`: seconds between looks at spent plans' credentials
        (engine/health/spent_windows.py); None: none (a test calls `spent_credentials.check`).
        `resolve_network`: the config and environment to each profile's route and the proxies
        (default: engine/network/resolve.py `resolve_network`)."""
        self.config = config
        SCRUBBER.add(config_secrets(config, env))  # masked in logs, error answers, status, events
        self.transport: Transport = transport or AiohttpTransport()
        self.clock = clock
        self.wall = wall
        self.sleep = sleep
        self.rand = rand
        self.env = env
        # In a fleet every event names the instance that produced it. The fleet's modules
        # import redis (~5 MB of memory): only a config with `[fleet]` imports them.
        self.events: EventBus = EventBus()
        if config.fleet.enabled:
            from claudex.engine.fleet.coordinator import InstanceEventBus, instance_name

            self.events = InstanceEventBus(instance_name(config))
        self.journal = journal
        if journal is not None:
            self.events.sinks.append(journal.record)
        self.totals = GlobalStats()
        self.tokens = TokenTotals()
        self.earlier_tokens = TokenTotals()  # today's, before this start (journal_seed.py)
        # What the tokens cost at API prices (engine/addons/cost.py), and the price table.
        self.prices = PriceTable(wall)
        self._prices_apart = prices_apart
        self._price_reads: set[asyncio.Task[None]] = set()  # the sheet's reads after reloads
        self.costs = CostTotals()
        self.earlier_costs = CostTotals()  # today's, before this start, from the journal
        self.signatures = SignatureMemory()  # who signed which thinking block we relayed
        self.started_at = wall()
        self._own_http = http is None
        self.http = http or control_client()  # its TLS certificates read at first use
        # `[fleet]` (engine/fleet/): None unless a redis_url is set, and then only a listener
        # beside the breakers; applies from start, not on reload.
        self.fleet: Fleet | None = None
        if config.fleet.enabled:
            from claudex.engine.fleet.coordinator import Fleet, instance_name

            listen = f"{config.proxy.host}:{config.proxy.port}"
            self.fleet = Fleet(config.fleet, name=instance_name(config), listen=listen,
                               runtimes=lambda: self.runtimes, clock=clock, wall=wall,
                               publish=self.events.publish, env=env)
        self.runtimes: dict[str, ProviderRuntime] = {}
        for profile in config.profiles:
            self.runtimes[profile.name] = self._new_runtime(profile)
        self.traces: TracesAddon | None = None  # `[telemetry]` / OTEL_EXPORTER_OTLP_*: at start
        # The features on the request lifecycle (engine/core/hooks.py): `_addons` says which.
        self.hooks = Hooks(self._addons())
        # `[routes]` / `[router]` (engine/routing/): None when the config has neither.
        self._router_timeout = router_timeout
        self.routing: Routing | None = self._routing(config, None)
        # Pools (engine/core/pools.py): None until the config has one; the bindings outlive
        # reloads.
        self.bindings = Bindings(clock)
        self.pools: PoolBalancer | None = None
        self.pool_shares: PoolsAddon | None = None
        # Slow is yellow (engine/health/slowness.py): judged off the request path every few seconds;
        # with `[health] avoid_slow` the core and the pools read `slow.avoided`.
        self.slow = SlowWatch(lambda: self.runtimes, lambda: self.config.health, wall,
                              self.events.publish)
        self._set_pools(config)
        # Upstream proxies (issue 36): each profile's route, resolved now and at each reload
        # (never per request), and each proxy's own state (engine/network/proxy_state.py).
        self.proxies = ProxyBoard(clock, self.events.publish)
        # The control plane through each route (probes, token grants): httpx clients per hop.
        self.route_clients = RouteClients(self.http)
        self._resolve_network: NetworkResolver = resolve_network or default_resolve_network
        self.routes: dict[str, Route] = {}
        self._apply_network(config)
        self.forwarder = Forwarder(self)
        self.health = HealthChecker(self, self.http, self.control_http)
        self._health_task: asyncio.Task[None] | None = None
        self._slow_task: asyncio.Task[None] | None = None
        self._slow_every = judge_slowness_every
        # A spent plan's credential changed outside (a fresh login): its window is over here.
        self.spent_credentials = CredentialWatch(lambda: self.runtimes, wall, self.events.publish)
        self._credentials_every = check_credentials_every
        self._credentials_task: asyncio.Task[None] | None = None
        # Reading the journal into the panels' counters at start (engine/history/seed.py).
        self.seeding: asyncio.Task[None] | None = None
        self._last_escalation: tuple[str, float] = ("", 0.0)

    # -- wiring --------------------------------------------------------------------------------

    def _addons(self) -> list[object]:
        """The addons every request passes, in order; each only when its config needs it, so
        a feature that is off costs nothing (engine/core/hooks.py)."""
        # Read at each request (reloads swap the dict); a C callable, no frame of its own.
        runtimes: Callable[[], dict[str, ProviderRuntime]] = functools.partial(
            getattr, self, "runtimes")
        addons: list[object] = [
            StatsAddon(self.totals, runtimes, self.wall, self.clock),
            SeriesAddon(runtimes, self.wall),
            TokensAddon(self.tokens),
            CostAddon(self.prices, self.costs, runtimes),  # before the event that carries it
            RequestEventsAddon(self.events),
            WindowsAddon(self.wall),
        ]
        # Traces: only with an endpoint, and only then is OpenTelemetry imported at all.
        settings = trace_settings(self.config.telemetry,
                                  os.environ if self.env is None else self.env)
        if settings is not None:
            from claudex.engine.addons.traces import TracesAddon

            self.traces = TracesAddon(settings, runtimes)
            addons.append(self.traces)
        return addons

    def _set_pools(self, config: Config) -> None:
        if not config.pools or self.pools is not None:
            return
        shared = self.fleet.bindings if self.fleet is not None else None
        self.pools = PoolBalancer(lambda: self.runtimes, self.clock, self.wall, self.bindings,
                                  shared, slow=self.slow)
        if shared is not None:  # another instance's binding, into ours
            shared.apply = self.pools.apply_shared
        self.pool_shares = PoolsAddon()
        self.hooks.set([*self.hooks.addons, self.pool_shares])

    def _new_runtime(self, profile: Profile) -> ProviderRuntime:
        gate: Callable[[], bool] | None = None
        if self.config.fleet.enabled:  # half-open trials: only where the fleet's slot is held
            def holds_slot(name: str = profile.name) -> bool:
                return self.fleet is None or self.fleet.may_probe(name)
            gate = holds_slot
        breaker = CircuitBreaker(profile.name, profile.breaker, self.clock, self._on_transition,
                                 probe_gate=gate)
        rt = ProviderRuntime(profile, breaker, self._credentials(profile))
        if is_cloud(profile):
            rt.wire = make_wire(profile, self._environ)
        rt.stats.minutes.since = self.wall()  # requests per minute count from here
        return rt

    def _apply_network(self, config: Config) -> None:
        """Each profile's route and the proxies' settings, from the config and the environment
        (at start and each reload). A plain direct route is None on the runtime: the usual
        request pays one `is None` for routes."""
        try:
            network = self._resolve_network(config, self._environ)
        except TlsSetupError as exc:  # a ca_bundle or client certificate unreadable now
            if not self.routes:
                raise  # at start: said by the caller, never a silent direct route
            # A reload: the routes in force stay (never a silent bypass), and it is said.
            words = f"network settings not applied, the previous routes stay: {exc}"
            log.error("%s", words)
            self.events.publish(Event("reload", words))
            return
        routes: dict[str, Route] = {}
        for name, rt in self.runtimes.items():
            route = network.route(name)
            routes[name] = route
            rt.route = None if route.plain else route
            rt.health.untrusted = None  # a reload may bring the CA (ca_bundle) it lacked
            if isinstance(rt.credentials, Credentials):  # its token grants take the route
                rt.credentials.http_for = (None if route.plain else
                                           functools.partial(self.control_http, rt))
            elif isinstance(rt.credentials, GoogleCredentials) and not route.plain:
                rt.credentials.source.use_http(functools.partial(self._sync_http, route))
        self.routes = routes
        # A proxy's password is masked wherever a log line, event or error could quote it.
        SCRUBBER.add(hop.password for route in routes.values() for hop in route.hops)
        self.proxies.configure(network.proxies, routes.values(), config.breaker, config.retry)

    def control_http(self, rt: ProviderRuntime) -> httpx.AsyncClient | None:
        """The httpx client for `rt`'s control plane (probes, token grants), through its route:
        the first of its proxies that is not out; None when all are (never direct)."""
        route = rt.route
        if route is None:
            return self.http
        if not route.hops:
            return self.route_clients.get(route)
        hops = self.proxies.eligible(route.hops, self.clock())
        return self.route_clients.get(route, hops[0]) if hops else None

    def _sync_http(self, route: Route) -> httpx.Client:
        """Vertex's token minting (google-auth, synchronous) through the route's first proxy
        that is not out (else its first: it fails as the proxy does, never direct)."""
        hops = self.proxies.eligible(route.hops, self.clock()) or list(route.hops)
        return sync_client_for(route, hops[0] if hops else None, 30.0)

    def _route_json(self, name: str, now: float) -> dict[str, Any]:
        """A profile's route for status: `{"label": "via corp", "proxies": ["corp"],
        "trouble": "proxy corp open (connection refused)" | None}`."""
        route = self.routes.get(name, DIRECT)
        return {"label": route.label, "proxies": [hop.name for hop in route.hops],
                "trouble": self.proxies.trouble(route, now) if route.hops else None}

    def _routing(self, config: Config, old: Routing | None) -> Routing | None:
        # The classifier's profile is looked up in the config of the moment (a reload keeps a
        # router whose settings did not change).
        return build_routing(config, old, self.forward, lambda name: self.config.profile(name),
                             timeout_s=self._router_timeout)

    @property
    def _environ(self) -> Mapping[str, str]:
        return os.environ if self.env is None else self.env

    def _credentials(self, profile: Profile) -> UpstreamCredentials:
        if is_cloud(profile):  # Bedrock, Vertex, aws-sigv4 (engine/clouds/)
            own = cloud_credentials(profile, self._environ, on_event=self.events.publish)
            if own is not None:
                return own
            profile = credentials_profile(profile, self._environ)
        return Credentials(profile, env=self.env, http=self.http, wall=self.wall,
                           on_event=self.events.publish,
                           single_flight=self.fleet.single_flight if self.fleet else None)

    def _on_transition(self, t: Transition) -> None:
        # `at`: the engine's monotonic clock as the breaker read it, so a checker can verify
        # recovery times exactly. A trip adds its terms (`until`, `trip_reason`, `since`);
        # `listen` says which engine, so a restart restores only its own trips.
        data: dict[str, Any] = {"old": t.old.value, "new": t.new.value, "reason": t.reason,
                                "at": t.at, "listen": self._listen()}
        if t.trip is not None:
            data.update(trip_data(t.trip.until, t.trip.since, t.trip.reason, t.at,
                                  self.wall() - (self.clock() - t.at)))
        self.events.publish(Event(
            "breaker", f"{t.provider}: breaker {t.old.value} -> {t.new.value} ({t.reason})",
            t.provider, data))
        if t.trip is not None and t.trip.until is not None:
            self._wake_when_trip_ends(t.provider, t.trip.until)
        if self.fleet is not None:
            self.fleet.on_transition(t)

    def _wake_when_trip_ends(self, provider: str, until: float) -> None:
        """A breaker decides a timed trip's end when it is read: read it then, so the end is
        told (event, log line, journal, fleet) on time when no request or status read comes."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # not on a loop (a test driving the engine by hand): the next read decides

        def read() -> None:
            rt = self.runtimes.get(provider)
            if rt is not None:
                rt.breaker.poll()

        loop.call_later(max(0.0, until - self.clock()) + 0.01, read)

    def escalate(self, sentence: str) -> None:
        # One log line per distinct escalation, not one per failing request during an outage.
        now = self.clock()
        last, at = self._last_escalation
        sentence = SCRUBBER.text(sentence)
        if sentence != last or now - at >= 30.0:
            log.warning("%s", sentence)
            self._last_escalation = (sentence, now)
        self.events.publish(Event("escalation", sentence))

    def _price_new_models(self, config: Config) -> None:
        """After a reload, the models the new config names that the price table has not seen,
        priced by the child process too (off the loop). An answer that comes first is priced
        in this process, as any model not on the sheet is: the same figure either way."""
        from claudex.engine.addons.price_sheet import config_pairs, read_sheet

        pairs = [p for p in config_pairs(config) if not self.prices.knows(*p)]
        if not pairs:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # reloaded outside the engine's loop: the first answers price them

        async def read() -> None:
            sheet = await asyncio.to_thread(read_sheet, pairs, self.wall())
            if sheet:
                self.prices.seed(sheet)

        self._price_reads.add(task := loop.create_task(read(), name="claudex-prices"))
        task.add_done_callback(self._price_reads.discard)

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self, *, health: bool | None = None) -> None:
        # genai-prices takes a quarter of a second to import: off the loop, before traffic.
        # Apart, in a child process, it stays out of this one (~13 MB resident).
        sheet = None
        if self._prices_apart:
            from claudex.engine.addons.price_sheet import config_pairs, read_sheet

            sheet = await asyncio.to_thread(read_sheet, config_pairs(self.config), self.wall())
        if sheet is None:
            await asyncio.to_thread(self.prices.load)
        else:
            self.prices.seed(sheet)
        if self.journal is not None:
            self._restore_trips(await asyncio.to_thread(trips_in_journal, self.journal.path,
                                                        self.wall(), self._listen()))
            self.journal.start()
            if self.seeding is None:
                self.seeding = asyncio.create_task(self._seed_from_journal(),
                                                   name="claudex-seed")
        run_health = self.config.health.enabled if health is None else health
        if run_health and self._health_task is None:
            self._health_task = asyncio.create_task(self.health.run_forever(),
                                                    name="claudex-health")
        if self._slow_task is None and self._slow_every is not None:
            self._slow_task = asyncio.create_task(  # real time: it judges real traffic
                self.slow.run_forever(asyncio.sleep, self._slow_every), name="claudex-slow")
        if self._credentials_task is None and self._credentials_every is not None:
            self._credentials_task = asyncio.create_task(
                self.spent_credentials.run_forever(asyncio.sleep, self._credentials_every),
                name="claudex-spent-credentials")
        if self.fleet is not None:
            self.fleet.start()

    async def _seed_from_journal(self) -> None:
        """Off the loop: the journal's numbers from before this start, then added here."""
        assert self.journal is not None
        now = self.wall()
        seed = await asyncio.to_thread(read_seed, self.journal.path, now=now,
                                       until=self.started_at, day_start=local_midnight(now))
        if seed is not None:
            apply_seed(seed, self.runtimes, self.earlier_tokens, self.earlier_costs)

    async def close(self) -> None:
        if self.seeding is not None and not self.seeding.done():
            self.seeding.cancel()
        if self.fleet is not None:
            await self.fleet.close()
        for task in (self._health_task, self._slow_task, self._credentials_task):
            if task is not None:
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
        self._health_task = self._slow_task = self._credentials_task = None
        await self.transport.close()
        await self.route_clients.aclose()
        if self._own_http:
            await self.http.aclose()
        if self.journal is not None:
            await asyncio.to_thread(self.journal.close)  # writes what is pending
        if self.traces is not None:
            await self._close_traces(self.traces)

    @staticmethod
    async def _close_traces(traces: TracesAddon) -> None:
        """The queued spans go out, waited for a bounded time: a dead collector must not hold
        up a shutdown (its thread is a daemon, dropped at exit)."""
        loop = asyncio.get_running_loop()
        done = asyncio.Event()

        def closed() -> None:
            try:
                loop.call_soon_threadsafe(done.set)
            except RuntimeError:  # the loop is gone: nobody waits any more
                pass

        traces.close(closed)
        try:
            await asyncio.wait_for(done.wait(), 2 * traces.settings.timeout_s)
        except TimeoutError:
            log.warning("traces: the collector did not take the last spans in %.0f s; "
                        "they are dropped", 2 * traces.settings.timeout_s)

    # -- the interface -------------------------------------------------------------------------

    async def forward(self, req: ProxyRequest) -> ForwardResult:
        return await self.forwarder.forward(req)

    async def check_health_now(self) -> None:
        await self.health.check_all()

    def _listen(self) -> str:
        return f"{self.config.proxy.host}:{self.config.proxy.port}"

    def _restore_trips(self, trips: list[SavedTrip]) -> None:
        """Trips in force when the last engine on this journal stopped hold again (history on),
        and in a fleet are offered to it dated when they were made (engine/fleet/coordinator.py
        `restored`). Runs before the journal's writer starts: the restored trips are journaled
        anew."""
        now, now_wall = self.clock(), self.wall()
        for saved in trips:
            rt = self.runtimes.get(saved.provider)
            if rt is None or rt.breaker.state is BreakerState.FORCED_OPEN:
                continue
            until = None if saved.until is None else now + (saved.until - now_wall)
            rt.breaker.trip(until=until, reason=saved.reason,
                            since=now + (saved.since - now_wall))
            log.info("restored %s's trip from the history journal: %s", saved.provider,
                     rt.trip_text())
            if self.fleet is not None:  # the fleet's news too, unless it knows newer
                self.fleet.restored(saved.provider, since=saved.since, until=saved.until,
                                    reason=saved.reason)

    def trip(self, name: str, seconds: float | None = None, reason: str | None = None) -> bool:
        """Force `name`'s breaker open until reset, or for `seconds` (then half-open), with the
        operator's `reason`. Tripping a tripped provider replaces the deadline and reason."""
        rt = self.runtimes.get(name)
        if rt is None:
            if name not in self.proxies:
                return False
            # An upstream proxy (names are unique across profiles and proxies): its breaker.
            reason = clean_reason(SCRUBBER.text(reason) if reason else None)
            return self.proxies.trip(name, None if seconds is None
                                     else self.clock() + seconds, reason)
        reason = clean_reason(SCRUBBER.text(reason) if reason else None)
        now = self.clock()
        again = rt.breaker.state is BreakerState.FORCED_OPEN
        rt.breaker.trip(until=None if seconds is None else now + seconds, reason=reason)
        if again:  # no transition: say the new terms, so the log and the journal know them
            self.events.publish(Event(
                "trip", f"{name}: {rt.trip_text()}", name,
                trip_data(None if seconds is None else now + seconds, now, reason, now,
                          self.wall()) | {"listen": self._listen()}))
            if seconds is not None:
                self._wake_when_trip_ends(name, now + seconds)
        if self.fleet is not None:  # everywhere, and kept across restarts
            self.fleet.operator(name, "forced_open", reason=reason,
                                until=None if seconds is None else self.wall() + seconds)
        return True

    def reset(self, name: str) -> bool:
        return self.reset_provider(name) is not None

    def reset_provider(self, name: str) -> list[str] | None:
        """The operator's last word on `name`: its breaker closed and cleared, its cooldown and
        a spent plan window ended (engine/health/spent_windows.py), everywhere in a fleet; one event
        says what it ended. What it ended, in words; None when there is no such profile."""
        rt = self.runtimes.get(name)
        if rt is None:
            ended = self.proxies.reset(name)  # an upstream proxy's, or None: no such name
            if ended is not None:
                words = f"proxy {name}: reset" + (f" (ended {', '.join(ended)})" if ended
                                                   else "")
                self.events.publish(Event("reset", words, name,
                                          {"ended": ended, "proxy": name}))
                log.info("%s", words)
            return ended
        ended = operator_reset(rt, self.clock(), self.wall())
        words = reset_words(name, ended)
        self.events.publish(Event("reset", words, name, {"ended": ended}))
        log.info("%s", words)
        if self.fleet is not None:
            self.fleet.operator(name, "reset")
        return ended

    def apply_config(self, config: Config) -> None:
        """Swap in a new config, keeping breaker state and statistics of kept profiles."""
        old = self.runtimes
        fresh: dict[str, ProviderRuntime] = {}
        for profile in config.profiles:
            rt = old.get(profile.name)
            if rt is None:
                fresh[profile.name] = self._new_runtime(profile)
                continue
            if rt.profile != profile:
                if any(getattr(rt.profile, f) != getattr(profile, f) for f in _AUTH_FIELDS):
                    rt.credentials = self._credentials(profile)
                    rt.wire = make_wire(profile, self._environ) if is_cloud(profile) else None
                    rt.health.credentials_problem = None  # about the old source
                    self._new_credentials_end_spent(rt)
                rt.breaker.update_settings(profile.breaker)
                rt.update_limits(profile)
                rt.profile = profile
                if rt.wire is not None:
                    rt.wire.profile = profile
            fresh[profile.name] = rt
        removed = [n for n in old if n not in fresh]
        SCRUBBER.add(config_secrets(config, self.env))
        self.config = config
        self.runtimes = fresh
        self.routing = self._routing(config, self.routing)
        self._set_pools(config)
        self._apply_network(config)
        if self._prices_apart:
            self._price_new_models(config)
        # A removed provider's connection pool is not closed here: requests already in flight
        # to it (a long stream) would hang, as closing an aiohttp session does not wake a body
        # being read. Its idle connections expire by keep-alive; the pool goes at `close()`,
        # and a profile added back under the same name uses it again.
        self.events.publish(Event("reload", f"config reloaded: {len(fresh)} profiles"
                                  + (f", removed {', '.join(removed)}" if removed else "")))
        log.info("config reloaded: %d profiles", len(fresh))

    def _new_credentials_end_spent(self, rt: ProviderRuntime) -> None:
        """A profile's credentials changed in its config: perhaps another account, so a spent
        window is no longer known to hold (engine/health/spent_windows.py)."""
        words = end_spent(rt, self.wall())
        if words is not None:
            message = f"{rt.name}: new credentials in the config ({words})"
            log.info("%s", message)
            self.events.publish(Event("window", message, rt.name, {"ended": "credentials"}))

    def _tokens_of(self, name: str) -> dict[str, int]:
        """This process's token sums at `name`, plus the journal's from earlier today."""
        live, earlier = self.tokens.of_provider(name), self.earlier_tokens.of_provider(name)
        return {kind: count + earlier.get(kind, 0) for kind, count in live.items()}

    def _cost_of(self, rt: ProviderRuntime) -> dict[str, Any]:
        """What `rt`'s answers cost at API prices, this process's and earlier today's:
        `cost_usd` None when nothing was priced (no answer yet, or only unpriced ones)."""
        spend = (self.costs.of_provider(rt.name) or Spend()).plus(
            self.earlier_costs.of_provider(rt.name))
        return {"cost_usd": spend.cost_usd,
                "cost": {"priced": spend.priced, "unpriced": spend.unpriced,
                         "basis": cost_basis(rt.profile)}}

    def snapshot(self) -> dict[str, Any]:
        now, now_wall = self.clock(), self.wall()
        degraded = self.config.health.degraded_latency_ms
        status: dict[str, Any] = {
            "listen": f"{self.config.proxy.host}:{self.config.proxy.port}",
            "config_path": str(self.config.path) if self.config.path else None,
            "uptime_s": round(self.wall() - self.started_at, 1),
            "requests": self.totals.requests,
            "in_flight": self.totals.in_flight,
            "failovers": self.totals.failovers,
            "all_failed": self.totals.all_failed,
            "requests_per_s": round(self.totals.meter.rate(now), 2),
            "default_profile": self.config.default_name,
            "profiles": [_with_window(_scrubbed_status(rt.status_json(now, degraded,
                                                                      now_wall)), rt,
                                      now_wall) | {"tokens": self._tokens_of(name)}
                         | self._cost_of(rt) | {"route": self._route_json(name, now)}
                         for name, rt in self.runtimes.items()],
            "upstream_proxies": self.proxies.snapshot(now),
            "tokens_by_profile": {name: u.to_json()
                                  for name, u in self.tokens.by_profile.items()},
            "cost_by_profile": {name: spend.to_json()
                                for name, spend in self.costs.by_profile.items()},
            "history": (self.journal.status() if self.journal is not None
                        else {"enabled": False, "path": None, "problem": "not kept"}),
        }
        if self.pools is not None and self.config.pools:
            shares = self.pool_shares
            status["pools"] = [self.pools.status_json(pool, shares.of(pool.name) if shares
                                                      else {}) for pool in self.config.pools]
        if self.fleet is not None:
            status["fleet"] = self.fleet.status_json()
        return status


class NetworkLike(Protocol):
    """What the engine reads of a resolved network (engine/network/resolve.py `Network`)."""

    @property
    def proxies(self) -> Mapping[str, ProxySpecLike]: ...

    def route(self, profile: str) -> Route: ...


NetworkResolver = Callable[[Config, Mapping[str, str]], NetworkLike]


def _with_window(status: dict[str, Any], rt: ProviderRuntime, now_wall: float) -> dict[str, Any]:
    """`stats.latency`, `stats.minutes` and the rates over them (engine/addons/latency.py)."""
    status["stats"].update(rt.stats.window_json(now_wall))
    return status


def _scrubbed_status(status: dict[str, Any]) -> dict[str, Any]:
    """Texts in a provider's status that may hold an upstream's words, masked."""
    stats, health = status["stats"], status["health"]
    if stats.get("last_error"):
        stats["last_error"] = SCRUBBER.text(stats["last_error"])
    for key in ("error", "reason"):
        if health.get(key):
            health[key] = SCRUBBER.text(health[key])
    return status
