"""`python -m soak --fleet N`: N `claudex serve` processes sharing one real redis-server, under
the soak's chaos schedule plus Redis restarts and instance restarts.

Phases:
    warm-up   fault-free traffic to every instance
    outage    one client per instance, one provider answering 500: how many upstream calls the
              fleet pays to learn it, against the `failure_threshold` each independent instance
              would pay at least
    chaos     the seeded fault schedule (faults, token rotations, trips and resets sent to a
              random instance) under load, Redis killed and started again empty every
              `redis_every_s`, one instance restarted (SIGTERM, same port) every
              `instance_every_s`
    quiet     faults healed, every breaker reset from one instance, no traffic; then every
              instance must show the same state for every breaker, and Redis connected
    probes    still no traffic, Redis up: the health probes every provider gets in
              `probe_window_s` are counted, against what independent instances would send
              (one instance probes each provider per interval, holding the fleet's lease)

Judges: every answer is judged as the single-instance soak judges it (malformed, lost or late is a
violation), except a connection refused by an instance that is restarting — a load balancer's
business, not claudex's — which is counted apart; and the fleet-level judges above.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from claudex.demo.fake_oauth import FakeTokenServer
from claudex.demo.fake_provider import FakeProvider, start_fakes, stop_fakes
from claudex.demo.world import free_port
from soak.chaos import ChaosAction, fault_of, schedule, shrink_context, spend_window
from soak.checks import BAD_OUTCOMES, judge
from soak.traffic import Exchange, drive
from soak.world import (
    OAUTH_PROVIDER,
    PROVIDERS,
    Limits,
    config_text,
    serve_env,
    write_credentials,
)
from tests.redis_server import RedisServer

OUTAGE_PROVIDER = "gamma"  # the end of every chain: a request to it has no backup to hide it


@dataclass(frozen=True)
class FleetPlan:
    instances: int = 3
    seconds: float = 60.0
    clients: int = 48
    seed: int = 1
    think_ms: float = 60.0
    redis_every_s: float = 9.0
    instance_every_s: float = 13.0
    outage_s: float = 4.0
    probe_window_s: float = 5.0
    limits: Limits = field(default_factory=Limits)


@dataclass
class FleetReport:
    plan: FleetPlan
    outcomes: Counter[str] = field(default_factory=Counter)
    refused_restarting: int = 0
    violations: list[str] = field(default_factory=list)
    actions: Counter[str] = field(default_factory=Counter)
    redis_restarts: int = 0
    instance_restarts: int = 0
    outage_calls: int = 0
    outage_independent_min: int = 0
    disagreements: list[str] = field(default_factory=list)
    refresh_grants: int = 0
    rotations: int = 0
    probes: int = 0  # health probes counted in the probe window, every provider
    stop_s: list[float] = field(default_factory=list)  # SIGTERM to exit, per instance restart
    probes_independent: float = 0.0  # what the instances would send probing on their own

    @property
    def requests(self) -> int:
        return sum(self.outcomes.values()) + self.refused_restarting

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_json(self) -> dict[str, Any]:
        return {"instances": self.plan.instances, "seconds": self.plan.seconds,
                "requests": self.requests, "outcomes": dict(self.outcomes),
                "refused_while_restarting": self.refused_restarting,
                "redis_restarts": self.redis_restarts,
                "instance_restarts": self.instance_restarts,
                "outage_upstream_calls": self.outage_calls,
                "outage_independent_minimum": self.outage_independent_min,
                "refresh_grants": self.refresh_grants, "token_rotations": self.rotations,
                "health_probes": self.probes,
                "sigterm_to_exit_max_s": round(max(self.stop_s, default=0.0), 2),
                "health_probes_independent": round(self.probes_independent, 1),
                "actions": dict(self.actions), "violations": self.violations}


@dataclass
class _Instance:
    name: str
    port: int
    config: Path
    log: Path
    proc: asyncio.subprocess.Process | None = None
    down_since: float | None = None  # restarting: connections refused are expected

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class FleetSoak:
    def __init__(self, plan: FleetPlan, workdir: Path, say: Callable[[str], None]) -> None:
        self.plan = plan
        self.workdir = workdir
        self.say = say
        self.report = FleetReport(plan)
        self.redis = RedisServer()
        self.tokens = FakeTokenServer()
        self.fakes: dict[str, FakeProvider] = {}
        self.instances: list[_Instance] = []
        self.http = httpx.AsyncClient(timeout=5.0)
        self.deadline_s = plan.limits.deadline_s(chain_length=3)
        self.restart_windows: dict[str, list[tuple[float, float]]] = {}
        self._restart_task: asyncio.Future[None] | None = None
        self._redis_task: asyncio.Future[None] | None = None
        self.state_dir = workdir / "state"  # XDG_STATE_HOME of every instance, never the user's

    # -- the world -------------------------------------------------------------------------

    async def start(self) -> None:
        await self.redis.start()
        started = await start_fakes(PROVIDERS)
        for fake in started:
            fake.stream_delay_ms = 1.0
            fake.strict_models = False
        self.fakes = {fake.name: fake for fake in started}
        await self.tokens.start()
        creds = self.workdir / "claude-credentials.json"
        write_credentials(creds, "soak-access-0", "soak-refresh-0")
        self.fakes[OAUTH_PROVIDER].faults.valid_tokens = {"soak-access-0"}
        for i in range(self.plan.instances):
            name, port = f"i{i}", free_port()
            config = self.workdir / f"{name}.toml"
            # Each instance a journal of its own, in the soak's folder, as on machines of
            # their own (docs/history.md says what instances sharing one journal do).
            config.write_text(config_text(self.fakes, port, self.plan.limits, creds,
                                          self.tokens.token_url,
                                          self.state_dir / name / "history.sqlite3")
                              + f'\n[fleet]\nredis_url = "{self.redis.url}"\nname = "{name}"\n')
            config.chmod(0o600)
            self.instances.append(_Instance(name, port, config, self.workdir / f"{name}.log"))
        await asyncio.gather(*(self._spawn(inst) for inst in self.instances))

    async def _spawn(self, inst: _Instance) -> None:
        with inst.log.open("ab") as log_file:
            inst.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "claudex.cli", "--config", str(inst.config), "serve",
                stdin=asyncio.subprocess.DEVNULL, stdout=log_file, stderr=log_file,
                env=serve_env(self.state_dir))
        for _ in range(1000):  # bounded: ~20 s to start
            if inst.proc.returncode is not None:
                raise RuntimeError(f"{inst.name} exited: {inst.log.read_text()[-1500:]}")
            try:
                await self.http.get(inst.url + "/healthz")
                return
            except httpx.TransportError:
                await asyncio.sleep(0.02)
        raise RuntimeError(f"{inst.name} did not start")

    async def _stop(self, inst: _Instance) -> None:
        proc = inst.proc
        if proc is not None and proc.returncode is None:
            proc.terminate()
            began = time.monotonic()
            try:
                await asyncio.wait_for(proc.wait(), 20)
                self.report.stop_s.append(time.monotonic() - began)
            except TimeoutError:
                proc.kill()
                await proc.wait()
                self.report.violations.append(f"{inst.name} did not stop within 20 s")

    async def close(self) -> None:
        for inst in self.instances:
            await self._stop(inst)
        await stop_fakes(self.fakes.values())
        await self.tokens.stop()
        await self.redis.kill()
        await self.http.aclose()

    # -- traffic and judging ---------------------------------------------------------------

    def _record(self, inst: _Instance) -> Callable[[Exchange], None]:
        def done(ex: Exchange) -> None:
            # Refused, or dropped before any answer began, by an instance that was restarting:
            # where a load balancer would have sent it elsewhere.
            if (ex.transport_error and ex.headers_at is None
                    and self._restarting(inst.name, ex.started)):
                self.report.refused_restarting += 1
                return
            verdict = judge(ex, self.deadline_s)
            self.report.outcomes[verdict.outcome] += 1
            if verdict.outcome in BAD_OUTCOMES and len(self.report.violations) < 50:
                self.report.violations.append(
                    f"{inst.name} request {ex.spec.id} {verdict.outcome}: {verdict.detail}")
        return done

    def _restarting(self, name: str, at: float) -> bool:
        return any(start - 0.5 <= at <= end + 0.5
                   for start, end in self.restart_windows.get(name, []))

    async def _traffic(self, until: float, clients: int, first_id: int,
                       think_ms: float) -> None:
        per = max(1, clients // len(self.instances))
        await asyncio.gather(*(
            drive(inst.url, seed=self.plan.seed, clients=per,
                  first_id=first_id + i * 10_000_000, count=None, until=until,
                  time_limit=self.deadline_s + 5, think_ms=think_ms,
                  on_done=self._record(inst))
            for i, inst in enumerate(self.instances)))

    # -- phases ----------------------------------------------------------------------------

    async def run(self) -> FleetReport:
        plan = self.plan
        self.say(f"fleet soak: {plan.instances} instances, redis on {self.redis.port}")
        await self._traffic(time.monotonic() + 2.0, plan.clients, 1, plan.think_ms)
        await self._outage()
        self.say(f"chaos for {plan.seconds:.0f} s")
        chaos_end = time.monotonic() + plan.seconds
        chaos = [asyncio.create_task(self._chaos()), asyncio.create_task(self._redis_restarts()),
                 asyncio.create_task(self._instance_restarts())]
        try:
            await self._traffic(chaos_end, plan.clients, 100_000_000, plan.think_ms)
        finally:
            for task in chaos:
                task.cancel()
            await asyncio.gather(*chaos, return_exceptions=True)
        if self._restart_task is not None:  # a restart under way when chaos ended finishes
            await self._restart_task
        if self._redis_task is not None:  # and Redis's: cut short, it stayed down
            await self._redis_task
        for inst in self.instances:  # a restart the end of chaos cut short is finished
            if inst.proc is None or inst.proc.returncode is not None:
                await self._spawn(inst)
                inst.down_since = None
        await self._quiet_and_agree()
        await self._count_probes()
        self.report.refresh_grants = self.tokens.call_count
        return self.report

    async def _count_probes(self) -> None:
        def probes() -> dict[str, int]:
            return {name: sum(1 for r in fake.requests if r.path.endswith("/models"))
                    for name, fake in self.fakes.items()}

        before, started = probes(), time.monotonic()
        await asyncio.sleep(self.plan.probe_window_s)
        elapsed, after = time.monotonic() - started, probes()
        probed = [n for n in after if after[n] > before[n]]
        self.report.probes = sum(after[n] - before[n] for n in probed)
        self.report.probes_independent = (len(self.instances) * len(probed) * elapsed
                                          / self.plan.limits.health_interval)
        if self.report.probes > 0.6 * self.report.probes_independent:
            self.report.violations.append(
                f"{self.report.probes} health probes in {elapsed:.1f} s: about as many as "
                f"{len(self.instances)} independent instances would send "
                f"({self.report.probes_independent:.0f})")

    async def _outage(self) -> None:
        fake = self.fakes[OUTAGE_PROVIDER]
        before = len(self._calls(fake))
        fake.set_fault("500")
        try:
            # One client per instance, one request at a time: an instance alone would pay
            # failure_threshold calls before its breaker opened.
            await self._traffic_to(OUTAGE_PROVIDER, time.monotonic() + self.plan.outage_s)
        finally:
            fake.set_fault("ok")
        self.report.outage_calls = len(self._calls(fake)) - before
        self.report.outage_independent_min = (self.plan.instances
                                              * self.plan.limits.failure_threshold)
        if self.report.outage_calls >= self.report.outage_independent_min:
            self.report.violations.append(
                f"the fleet made {self.report.outage_calls} calls to a dead provider; "
                f"{self.plan.instances} independent instances need at least "
                f"{self.report.outage_independent_min}")
        await self.http.post(self.instances[0].url + f"/_claudex/breakers/{OUTAGE_PROVIDER}/reset")
        await asyncio.sleep(1.5)

    def _calls(self, fake: FakeProvider) -> list[Any]:
        return [r for r in fake.requests if not r.path.endswith("/models")]

    async def _traffic_to(self, profile: str, until: float) -> None:
        body = {"model": "claude-sonnet-4-5", "max_tokens": 16,
                "messages": [{"role": "user", "content": "outage"}]}
        # Stay inside one recovery time, so that only opening the breaker costs calls, not the
        # half-open trials after it.
        until = min(until, time.monotonic() + self.plan.limits.recovery_seconds * 0.9)

        first_opened = asyncio.Event()

        async def client(inst: _Instance, first: bool) -> None:
            # The first instance meets the outage, as one does; the others come to the provider
            # after its breaker has opened (alone, each would now pay the same again).
            if not first:
                await first_opened.wait()
            async with aiohttp.ClientSession() as session:
                while time.monotonic() < until:
                    async with session.post(f"{inst.url}/proxy/{profile}/v1/messages",
                                            data=json.dumps(body),
                                            headers={"content-type": "application/json"}) as r:
                        await r.read()
                    if first and not first_opened.is_set() and await self._open_at(inst, profile):
                        first_opened.set()
                    await asyncio.sleep(0.05)
            first_opened.set()  # (the window ended without it opening: the judge will say so)

        await asyncio.gather(*(client(inst, i == 0) for i, inst in enumerate(self.instances)))

    async def _open_at(self, inst: _Instance, provider: str) -> bool:
        status = (await self.http.get(inst.url + "/_claudex/status")).json()
        return any(p["name"] == provider and p["breaker"]["state"] == "open"
                   for p in status["profiles"])

    async def _chaos(self) -> None:
        names = tuple(name for name, _ in PROVIDERS)
        rng = random.Random(self.plan.seed)
        start = time.monotonic()
        for action in schedule(self.plan.seed, names, OAUTH_PROVIDER):
            delay = start + action.at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            await self._apply(action, rng)

    async def _apply(self, action: ChaosAction, rng: random.Random) -> None:
        self.report.actions[action.kind] += 1
        fake = self.fakes[action.target]
        if action.kind == "rotate":
            self.report.rotations += 1
            n = self.report.rotations
            self.tokens.set_next(f"soak-access-{n}", f"soak-refresh-{n}")
            fake.faults.valid_tokens = {f"soak-access-{n}"}
        elif action.kind in ("trip", "reset"):
            live = [i for i in self.instances if i.down_since is None]
            inst = rng.choice(live)
            try:
                resp = await self.http.post(
                    f"{inst.url}/_claudex/breakers/{action.target}/{action.kind}")
                if resp.status_code != 200:
                    self.report.violations.append(
                        f"{action.kind} {action.target} at {inst.name}: {resp.status_code}")
            except httpx.TransportError:
                pass  # it began restarting meanwhile
        elif action.kind == "context_small":
            shrink_context(fake, action.settings)
        elif action.kind == "window_spent":
            spend_window(fake, action.settings)
        else:
            mode, settings = fault_of(action)
            fake.set_fault(mode, **settings)  # type: ignore[arg-type]

    async def _redis_restarts(self) -> None:
        while True:
            await asyncio.sleep(self.plan.redis_every_s)
            # Finished even when the end of chaos cancels this loop: cut short between the kill
            # and the start, Redis stayed down and every instance said "redis unreachable"
            # after the quiet period (at 30 s the third kill comes at ~29 s, its start a
            # second later, after the end of chaos).
            self._redis_task = asyncio.ensure_future(self._restart_redis())
            await asyncio.shield(self._redis_task)

    async def _restart_redis(self) -> None:
        await self.redis.kill()
        await asyncio.sleep(1.0)
        await self.redis.start()  # empty: the instances must fill it again
        self.report.redis_restarts += 1

    async def _instance_restarts(self) -> None:
        turn = 0
        while True:
            await asyncio.sleep(self.plan.instance_every_s)
            inst = self.instances[turn % len(self.instances)]
            turn += 1
            began = time.monotonic()
            inst.down_since = began
            self.restart_windows.setdefault(inst.name, []).append((began, began + 60.0))
            # A restart, once begun, is finished even when the end of chaos cancels this loop:
            # cut short between the stop and the start (or before the new process answers), it
            # left an instance that refused the quiet period's status reads.
            self._restart_task = asyncio.ensure_future(self._restart(inst, began))
            await asyncio.shield(self._restart_task)

    async def _restart(self, inst: _Instance, began: float) -> None:
        await self._stop(inst)
        await self._spawn(inst)
        self.restart_windows[inst.name][-1] = (began, time.monotonic())
        inst.down_since = None
        self.report.instance_restarts += 1

    async def _quiet_and_agree(self) -> None:
        for fake in self.fakes.values():
            fake.set_fault("ok")
            fake.context_window = None
            fake.plan = None
        for name, _ in PROVIDERS:
            await self.http.post(self.instances[0].url + f"/_claudex/breakers/{name}/reset")
        deadline = time.monotonic() + 10.0
        while True:
            views = [(await self.http.get(i.url + "/_claudex/status")).json()
                     for i in self.instances]
            problems = _disagreements(self.instances, views)
            if not problems or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        self.report.disagreements = problems
        self.report.violations += [f"after the quiet period: {p}" for p in problems]


def _disagreements(instances: list[_Instance], views: list[dict[str, Any]]) -> list[str]:
    problems = []
    for inst, view in zip(instances, views, strict=True):
        if view.get("fleet", {}).get("redis") != "connected":
            problems.append(f"{inst.name}: {view.get('fleet', {}).get('status')}")
    states: dict[str, set[str]] = {}
    for view in views:
        for profile in view["profiles"]:
            states.setdefault(profile["name"], set()).add(profile["breaker"]["state"])
    for name, seen in sorted(states.items()):
        if seen != {"closed"}:
            problems.append(f"{name}: breakers {sorted(seen)} after a reset and quiet")
    return problems


async def run_fleet_soak(plan: FleetPlan, workdir: Path,
                         say: Callable[[str], None]) -> FleetReport:
    soak = FleetSoak(plan, workdir, say)
    try:
        await soak.start()
        return await soak.run()
    finally:
        await soak.close()


def print_fleet_report(report: FleetReport, out: Callable[[str], None] = print) -> None:
    plan = report.plan
    out(f"fleet soak: {plan.instances} instances, one redis-server, {plan.seconds:.0f} s of "
        f"chaos, {report.requests} requests")
    rows = [
        ("answers ok", report.outcomes.get("ok", 0)),
        ("errors in the client's protocol", report.outcomes.get("error", 0)),
        ("streams ending in an error event", report.outcomes.get("stream_error", 0)),
        ("malformed", report.outcomes.get("malformed", 0)),
        ("lost", report.outcomes.get("lost", 0)),
        ("late", report.outcomes.get("late", 0)),
        ("refused while an instance restarted", report.refused_restarting),
        ("redis restarts (killed, started empty)", report.redis_restarts),
        ("instance restarts", report.instance_restarts),
        ("SIGTERM to exit, slowest restart", f"{max(report.stop_s, default=0.0):.2f} s"),
        ("token rotations / refresh grants", f"{report.rotations} / {report.refresh_grants}"),
        ("upstream calls to a dead provider: fleet",
         f"{report.outage_calls} (independent instances: at least "
         f"{report.outage_independent_min})"),
        ("breakers disagreeing after quiet", len(report.disagreements)),
        (f"health probes in {plan.probe_window_s:.0f} s: fleet",
         f"{report.probes} (independent instances: about {report.probes_independent:.0f})"),
    ]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        out(f"  {label:<{width}}  {value}")
    out("PASS" if report.ok else "FAIL")
    for violation in report.violations[:20]:
        out(f"  - {violation}")
