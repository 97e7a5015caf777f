"""One soak run: start the world, warm up, apply chaos under load, heal, cool down, and judge.

Phases (the warm-up and cool-down carry the same fault-free load, so the process's memory and open
files can be compared between them):
    warm-up    fault-free traffic; then idle: baseline RSS and open files
    chaos      the seeded fault schedule under full load (a request count or a duration)
    cool-down  faults healed, tripped breakers reset, fault-free traffic; then idle: final RSS and
               open files; then SIGTERM, which must exit 0

The child's RSS is sampled all along (every 0.25 s, with the requests finished by then): the
memory judge (soak/memory_check.py) draws its slope from the chaos phase's second half.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from soak.breaker_model import FORCED_OPEN, BreakerModel, Transition
from soak.chaos import (
    PROXY_ACTIONS,
    ChaosAction,
    fault_of,
    proxy_mode_of,
    schedule,
    shrink_context,
    spend_window,
)
from soak.checks import (
    BAD_OUTCOMES,
    Verdict,
    attempt_tokens,
    context_relearned,
    failed_over,
    judge,
    proxy_problems,
    spent_window_resent,
    upstream_calls,
    upstream_problem,
)
from soak.memory_check import SAMPLE_EVERY_S, MemoryVerdict, RssSample, judge_memory
from soak.traffic import Exchange, drive
from soak.world import (
    OAUTH_PROVIDER,
    PROVIDERS,
    PROXIED,
    PROXY_NAME,
    Limits,
    ServeProcess,
    World,
)

# The engine keeps bounded backlogs that fill with traffic (2,000 events for SSE resumption,
# the masking caches): the baseline is taken once they are full, so the RSS judge measures
# leaks, not a backlog reaching its size during the chaos.
WARMUP_MIN_REQUESTS = 2_200
# The warm-up's last step reaches the peak of `PROXIED`'s TLS tunnels before the baseline: each
# TLS connection's reader takes a 256 KiB buffer (uvloop's SSLProtocol), and glibc serves those
# from its heap once the first is freed, so the heap's high water follows the most tunnels open
# at once (the chaos' reconnect bursts after the proxy drops them: up to one a client, where the
# mixed warm-up reached about half). Measured: bench/NOTES.md, "The soak's proxied memory".
PROXIED_BURST_REQUESTS_PER_CLIENT = 4
FD_GROWTH_LIMIT = 4

PhaseHook = Callable[[str, ServeProcess], Awaitable[None]]
"""Called with "warm" and "end" when the soak measures the idle child (soak/memory.py dumps
its memory there)."""


@dataclass(frozen=True)
class SoakPlan:
    requests: int | None = 20_000
    """Requests in the chaos phase; None: run for `seconds`."""
    seconds: float | None = None
    clients: int = 64
    seed: int = 1
    warmup_s: float = 2.0
    think_ms: float = 60.0
    """Mean pause of each client between its requests."""
    limits: Limits = field(default_factory=Limits)


@dataclass
class SoakReport:
    plan: SoakPlan
    outcomes: Counter[str] = field(default_factory=Counter)
    by_phase: dict[str, int] = field(default_factory=dict)
    failovers: int = 0
    error_statuses: Counter[int] = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)
    transitions: Counter[str] = field(default_factory=Counter)
    actions: Counter[str] = field(default_factory=Counter)
    refreshes: int = 0
    # Attempts at a spent plan window: `plan_limit` (its 429, once per spell) and
    # `window_spent` (passed over unsent until the reset).
    windows: Counter[str] = field(default_factory=Counter)
    # The slow watch's verdicts (events of kind "slow": slow, recovered, lapsed) and the
    # attempts `avoid_slow` passed over for a healthy provider (`slow`).
    slowness: Counter[str] = field(default_factory=Counter)
    # The upstream proxy (issue 36): its attempts in the trails (`proxy_refused`,
    # `proxy_rate_limited`, `no_route`...), its breaker's transitions (events of kind "proxy")
    # and its other events (cooling down...), and its status at the end.
    proxy_attempts: Counter[str] = field(default_factory=Counter)
    proxy_transitions: Counter[str] = field(default_factory=Counter)
    proxy_events: Counter[str] = field(default_factory=Counter)
    proxy_status: dict[str, Any] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    rss_mb: tuple[float, float] = (0.0, 0.0)
    rss_samples: list[RssSample] = field(default_factory=list)
    memory: MemoryVerdict | None = None
    fds: tuple[int, int] = (0, 0)
    exit_status: int | None = None
    chaos_s: float = 0.0
    deadline_s: float = 0.0

    @property
    def requests(self) -> int:
        return sum(self.outcomes.values())

    @property
    def ok(self) -> bool:
        return not self.violations

    def percentile_ms(self, q: float) -> float:
        if not self.latencies_ms:
            return 0.0
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.plan.seed, "clients": self.plan.clients, "requests": self.requests,
            "phases": self.by_phase, "outcomes": dict(self.outcomes),
            "failovers": self.failovers,
            "error_statuses": {str(k): v for k, v in sorted(self.error_statuses.items())},
            "transitions": dict(self.transitions),
            "chaos_actions": dict(self.actions), "oauth_refreshes": self.refreshes,
            "spent_windows": dict(self.windows), "slowness": dict(self.slowness),
            "proxy": {"attempts": dict(self.proxy_attempts),
                      "transitions": dict(self.proxy_transitions),
                      "events": dict(self.proxy_events),
                      "status": {k: self.proxy_status.get(k) for k in
                                 ("requests", "failures", "rate_limited", "health")}},
            "p50_ms": round(self.percentile_ms(0.5), 2),
            "p99_ms": round(self.percentile_ms(0.99), 2),
            "max_ms": round(max(self.latencies_ms, default=0.0), 2),
            "deadline_s": self.deadline_s, "chaos_s": round(self.chaos_s, 2),
            "rss_mb": [round(v, 2) for v in self.rss_mb], "open_fds": list(self.fds),
            "memory": self.memory.to_json() if self.memory is not None else None,
            "rss_samples": [[s.at, s.phase, s.requests, round(s.rss_mb, 2)]
                            for s in self.rss_samples],
            "exit_status": self.exit_status, "violations": self.violations,
        }


class _Soak:
    def __init__(self, plan: SoakPlan, workdir: Path, say: Callable[[str], None],
                 instruments: Mapping[str, str], on_measure: PhaseHook | None) -> None:
        self.plan = plan
        self.world = World(workdir, plan.limits, instruments)
        self.say = say
        self.on_measure = on_measure
        self.phase = "start"
        self.began = time.monotonic()
        self.report = SoakReport(plan)
        self.exchanges: list[Exchange] = []
        self.trips_done = 0
        self.spent: list[tuple[str, float]] = []  # (provider, reset) of window_spent faults
        self.resets: list[tuple[str, float]] = []  # (provider, asked at) of operator resets
        self.connected = asyncio.Event()
        limits = plan.limits
        self.model = BreakerModel(limits.failure_threshold, limits.recovery_seconds,
                                  limits.max_recovery_seconds)
        # The proxy's own breaker, judged by the same contract (its settings are the globals);
        # never fed to `model`: a proxy's failure is not its provider's.
        self.proxy_model = BreakerModel(limits.failure_threshold, limits.recovery_seconds,
                                        limits.max_recovery_seconds)
        self.proxy_out: list[tuple[float, float]] = []  # (from, until) monotonic: not "ok"
        self.proxy_cuts: list[float] = []  # when it went down (dropping every connection)
        self.disturbed: list[tuple[float, float]] = []  # PROXIED's own faults, the same
        self.breaker_opens: list[tuple[str, float]] = []  # (provider, at) of "-> open"
        self.report.deadline_s = limits.deadline_s(len(PROVIDERS))
        self.admin: httpx.AsyncClient | None = None
        self.next_id = 0

    # -- phases ------------------------------------------------------------------------------

    async def run(self) -> SoakReport:
        await self.world.start()
        assert self.world.serve is not None
        self.admin = httpx.AsyncClient(base_url=self.world.serve.url, timeout=10)
        listener = asyncio.create_task(self._collect_events())
        sampler = asyncio.create_task(self._sample_rss(self.world.serve))
        try:
            await self._until_listening()
            await self._traffic("warm-up", count=None, seconds=self.plan.warmup_s)
            short = WARMUP_MIN_REQUESTS - self.report.by_phase["warm-up"]
            if short > 0:
                await self._traffic("warm-up", count=short, seconds=None)
            await self._proxied_bursts()
            base = await self._quiet_measure("warm")
            chaos = asyncio.create_task(self._chaos())
            started = time.monotonic()
            await self._traffic("chaos", count=self.plan.requests, seconds=self.plan.seconds)
            self.report.chaos_s = time.monotonic() - started
            chaos.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await chaos
            await self._heal()
            await self._traffic("cool-down", count=None, seconds=self.plan.warmup_s)
            end = await self._quiet_measure("end")
            self.report.rss_mb = (base[0], end[0])
            self.report.fds = (base[1], end[1])
            await self._check_final_states()
        finally:
            for task in (listener, sampler):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await self.admin.aclose()
            self.report.exit_status = await self.world.stop()
        self._judge_all()
        return self.report

    async def _traffic(self, phase: str, *, count: int | None, seconds: float | None,
                       profile: str | None = None, think_ms: float | None = None) -> None:
        assert self.world.serve is not None
        until = None if seconds is None else time.monotonic() + seconds
        first = self.next_id
        self.phase = phase
        self.say(f"{phase}: {count or seconds} {'requests' if count else 's'}"
                 f"{f' to {profile}' if profile else ''} ...")
        self.next_id = await drive(self.world.serve.url, seed=self.plan.seed,
                                   clients=self.plan.clients, first_id=first, count=count,
                                   until=until, time_limit=self.report.deadline_s + 5.0,
                                   think_ms=self.plan.think_ms if think_ms is None else think_ms,
                                   on_done=self.exchanges.append, profile=profile)
        self.report.by_phase[phase] = self.report.by_phase.get(phase, 0) + self.next_id - first

    async def _proxied_bursts(self) -> None:
        """Every client at `PROXIED` at once, without pausing, twice, with the proxy dropping
        every tunnel between (`FakeProxy.drop_connections`, as it does going down, while no
        request is in flight: none fails): claudex opens as many TLS tunnels at once as the
        chaos' reconnect bursts do, and the allocators' high water they leave is in the baseline,
        not judged as growth (see `PROXIED_BURST_REQUESTS_PER_CLIENT`)."""
        assert self.world.serve is not None
        count = self.plan.clients * PROXIED_BURST_REQUESTS_PER_CLIENT
        await self._traffic("warm-up", count=count, seconds=None, profile=PROXIED, think_ms=0)
        self.world.proxy.drop_connections()
        await self._fds_settle(self.world.serve)
        await self._traffic("warm-up", count=count, seconds=None, profile=PROXIED, think_ms=0)

    async def _fds_settle(self, serve: ServeProcess) -> None:
        """Until the child's count of open files has not moved for 0.5 s (10 s at most): the
        connections being closed are closed."""
        previous, stable_since = -1, time.monotonic()
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            fds = serve.open_fds()
            if fds != previous:
                previous, stable_since = fds, time.monotonic()
            elif time.monotonic() - stable_since >= 0.5:
                break
            await asyncio.sleep(0.05)

    async def _sample_rss(self, serve: ServeProcess) -> None:
        """The child's RSS every `SAMPLE_EVERY_S`, with the requests finished by then: what the
        memory judge's slope is drawn from."""
        samples = self.report.rss_samples
        while serve.proc.returncode is None:
            with contextlib.suppress(OSError, RuntimeError):  # the child may be exiting
                samples.append(RssSample(round(time.monotonic() - self.began, 3), self.phase,
                                         len(self.exchanges), serve.rss_mb()))
            await asyncio.sleep(SAMPLE_EVERY_S)

    async def _quiet_measure(self, name: str) -> tuple[float, int]:
        """RSS and open files once the proxy is idle: client connections are closed by now;
        the fakes close their kept-alive connections, and we wait for the count to settle."""
        serve = self.world.serve
        assert serve is not None
        self.phase = f"{name} (idle)"
        for fake in self.world.fakes.values():
            fake.close_connections()
        await self._fds_settle(serve)
        measured = serve.rss_mb(), serve.open_fds()
        if self.on_measure is not None:
            await self.on_measure(name, serve)
        return measured

    # -- chaos -------------------------------------------------------------------------------

    async def _chaos(self) -> None:
        names = tuple(name for name, _ in PROVIDERS)
        start = time.monotonic()
        for action in schedule(self.plan.seed, names, OAUTH_PROVIDER, PROXY_NAME):
            delay = start + action.at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            await self._apply(action)

    async def _apply(self, action: ChaosAction) -> None:
        self.report.actions[action.kind] += 1
        if action.kind in PROXY_ACTIONS:
            self._apply_to_proxy(action)
            return
        fake = self.world.fakes[action.target]
        if action.target == PROXIED and action.kind not in ("reset", "recovers", "ok"):
            # Until when its own faults may fail its requests: a fault's duration (a spell of
            # turns_slow: until it recovers; a trip: its reset), then the longest a request
            # already sent may take to fail (connect + read, a stream's idle timeout).
            limits = self.plan.limits
            lasts = float(action.settings.get("duration_s", 10.0 if action.kind in (
                "turns_slow", "trip") else 0.0))
            now = time.monotonic()
            self.disturbed.append((now, now + lasts + limits.connect_timeout
                                   + limits.read_timeout + limits.stream_idle_timeout))
        if action.kind == "rotate":
            n = self.report.actions["rotate"]
            self.world.tokens.set_next(f"soak-access-{n}", f"soak-refresh-{n}")
            fake.faults.valid_tokens = {f"soak-access-{n}"}
        elif action.kind in ("trip", "reset"):
            assert self.admin is not None
            if action.kind == "reset":  # it ends a spent window's mark too
                self.resets.append((action.target, time.monotonic()))
            resp = await self.admin.post(f"/_claudex/breakers/{action.target}/{action.kind}")
            if resp.status_code != 200:
                self.report.violations.append(f"{action.kind} {action.target}: {resp.status_code}")
            elif action.kind == "trip":
                self.trips_done += 1
        elif action.kind == "context_small":
            shrink_context(fake, action.settings)
        elif action.kind == "window_spent":
            self.spent.append((action.target, spend_window(fake, action.settings)))
        else:
            mode, settings = fault_of(action)
            fake.set_fault(mode, **settings)  # type: ignore[arg-type]

    def _apply_to_proxy(self, action: ChaosAction) -> None:
        mode, settings = proxy_mode_of(action)
        now = time.monotonic()
        if mode != "ok":
            self.proxy_out.append((now, now + float(action.settings["duration_s"])))
            if mode == "down":
                self.proxy_cuts.append(now)
        elif self.proxy_out:  # it ends now (the heal may end it early)
            began, until = self.proxy_out[-1]
            self.proxy_out[-1] = (began, min(until, now))
        self.world.proxy.set_mode(mode, **settings)  # type: ignore[arg-type]

    async def _heal(self) -> None:
        if self.world.proxy.mode != "ok":
            self._apply_to_proxy(ChaosAction(0.0, PROXY_NAME, "proxy_back"))
        for fake in self.world.fakes.values():
            fake.set_fault("ok")
            fake.context_window = None
            fake.plan = None
        assert self.admin is not None
        status = (await self.admin.get("/_claudex/status")).json()
        for profile in status["profiles"]:
            if profile["breaker"]["state"] == FORCED_OPEN:
                await self._apply(ChaosAction(0.0, profile["name"], "reset"))

    # -- events ------------------------------------------------------------------------------

    async def _collect_events(self) -> None:
        assert self.admin is not None
        async with self.admin.stream("GET", "/_claudex/events?kinds=breaker,refresh,slow,proxy",
                                     timeout=None) as resp:
            async for line in resp.aiter_lines():
                if line.startswith(": connected"):
                    self.connected.set()
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[6:])
                if event["kind"] == "refresh":
                    self.report.refreshes += 1
                elif event["kind"] == "slow":
                    data = event.get("data") or {}
                    self.report.slowness["slow" if data.get("slow") else
                                         str(data.get("change", "recovered"))] += 1
                elif event["kind"] == "breaker":
                    transition = Transition.from_event(event)
                    self.model.feed(transition)
                    self.report.transitions[f"{transition.old}->{transition.new}"] += 1
                    if transition.new == "open":
                        self.breaker_opens.append((transition.provider, transition.at))
                elif event["kind"] == "proxy":
                    data = event.get("data") or {}
                    if "old" in data:  # a transition of the proxy's breaker
                        transition = Transition.from_event(event)
                        self.proxy_model.feed(transition)
                        self.report.proxy_transitions[
                            f"{transition.old}->{transition.new}"] += 1
                    else:  # cooling down, auth failed, works again
                        self.report.proxy_events[str(data.get("state", "?"))] += 1

    async def _until_listening(self) -> None:
        async with asyncio.timeout(5):
            await self.connected.wait()

    async def _check_final_states(self) -> None:
        """The model, fed every reported transition, must end where the engine says it is.
        (Events travel over a stream, so the last ones may still be on their way: wait for
        agreement, up to a bound.)"""
        assert self.admin is not None
        disagreements: list[str] = []
        in_flight = 0
        for _ in range(40):  # bounded: 2 s
            status = (await self.admin.get("/_claudex/status")).json()
            in_flight = status.get("in_flight", 0)
            disagreements = [
                f"{p['name']}: the engine says {p['breaker']['state']}, the events say "
                f"{self.model.state(p['name'])}"
                for p in status["profiles"]
                if p["breaker"]["state"] != self.model.state(p["name"])
            ]
            if not disagreements and not in_flight:
                break
            await asyncio.sleep(0.05)
        self.report.violations.extend(disagreements)
        self._check_proxy_status(status)
        if in_flight:
            self.report.violations.append(f"{in_flight} requests still in flight after the run")
        self.report.violations.extend(self.model.violations)
        self.report.violations.extend(f"proxy {v}" for v in self.proxy_model.violations)
        trips_seen = sum(n for pair, n in self.report.transitions.items()
                         if pair.endswith("->forced_open"))
        if trips_seen != self.trips_done:
            self.report.violations.append(
                f"{self.trips_done} operator trips but {trips_seen} forced_open transitions")

    def _check_proxy_status(self, status: dict[str, Any]) -> None:
        """The proxy is in status `upstream_proxies`, routes `PROXIED` only, and its breaker is
        where its events (fed to the proxy's model) left it."""
        proxies = {p["name"]: p for p in status.get("upstream_proxies", [])}
        corp = proxies.get(PROXY_NAME)
        if corp is None:
            self.report.violations.append(f"status upstream_proxies has no {PROXY_NAME!r}: "
                                          f"{sorted(proxies)}")
            return
        self.report.proxy_status = corp
        if corp.get("profiles") != [PROXIED]:
            self.report.violations.append(f"proxy {PROXY_NAME} routes {corp.get('profiles')}, "
                                          f"not [{PROXIED!r}]")
        state = corp["breaker"]["state"]
        if state != self.proxy_model.state(PROXY_NAME):
            self.report.violations.append(
                f"proxy {PROXY_NAME}: the engine says {state}, the events say "
                f"{self.proxy_model.state(PROXY_NAME)}")
        routes = {p["name"]: (p.get("route") or {}).get("label") for p in status["profiles"]}
        wanted = {name: f"via {PROXY_NAME}" if name == PROXIED else "direct"
                  for name, _ in PROVIDERS}
        if routes != wanted:
            self.report.violations.append(f"routes {routes}, expected {wanted}")

    # -- judging -----------------------------------------------------------------------------

    def _judge_all(self) -> None:
        report = self.report
        calls = upstream_calls(self.world.fakes.values())
        for ex in self.exchanges:
            verdict: Verdict = judge(ex, report.deadline_s)
            report.outcomes[verdict.outcome] += 1
            report.latencies_ms.append(ex.latency_s * 1000)
            report.failovers += failed_over(ex)
            for _, token in attempt_tokens(ex):
                if token in ("plan_limit", "window_spent"):
                    report.windows[token] += 1
                elif token == "slow":
                    report.slowness["passed over"] += 1
            if verdict.outcome == "error" and ex.status is not None:
                report.error_statuses[ex.status] += 1
            if verdict.outcome in BAD_OUTCOMES:
                report.violations.append(f"request {ex.spec.id} ({ex.spec.protocol}, "
                                         f"{ex.spec.profile}, stream={ex.spec.stream}): "
                                         f"{verdict.outcome}: {verdict.detail}")
            problem = upstream_problem(ex, calls.get(ex.spec.id, []), frozenset({PROXIED}))
            if problem:
                report.violations.append(f"request {ex.spec.id}: {problem}")
        front = self.world.front
        report.violations.extend(proxy_problems(
            self.exchanges, PROXIED, report.proxy_attempts,
            tunnels=self.world.proxy.connects["ok"],
            # (a handshake that failed is a connection too: one not trusting the front's CA)
            tls_connections=front.connections + front.handshakes_failed if front else 0,
            cuts=self.proxy_cuts,
            opens=self.breaker_opens, proxy_out=self.proxy_out, disturbed=self.disturbed))
        report.violations.extend(context_relearned(self.exchanges))
        report.violations.extend(spent_window_resent(self.exchanges, self.spent,
                                                     self.resets))
        report.memory = judge_memory(report.rss_samples, *report.rss_mb)
        report.violations.extend(report.memory.violations)
        if report.fds[1] - report.fds[0] > FD_GROWTH_LIMIT:
            report.violations.append(f"open files grew from {report.fds[0]} to {report.fds[1]}")
        if report.exit_status != 0:
            report.violations.append(f"claudex serve exited {report.exit_status} on SIGTERM")
        log_text = self.world.serve.log_path.read_text() if self.world.serve else ""
        if "Traceback" in log_text:
            report.violations.append("a traceback in claudex's log")


async def run_soak(plan: SoakPlan, workdir: Path,
                   say: Callable[[str], None] = lambda _: None, *,
                   instruments: Mapping[str, str] | None = None,
                   on_measure: PhaseHook | None = None) -> SoakReport:
    """One soak in `workdir` (its config, logs and the child's state dir). `instruments`: the
    environment of soak/child.py's opt-in instruments; `on_measure`: see `PhaseHook`."""
    return await _Soak(plan, workdir, say, instruments or {}, on_measure).run()
