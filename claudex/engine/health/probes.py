"""Background health probes: a request that costs no tokens (`GET .../models`) to every enabled
provider, concurrently, every `interval_seconds`. Probe results feed the breaker as DESIGN.md says:
transport errors, timeouts and 5xx count as failures; 401/403 mark auth failing; 404/405 mean the
provider has no such endpoint and are not counted; a passing probe moves an OPEN breaker to
HALF_OPEN at once.

A probe never stops the checker. Each one runs under a deadline (`timeout_seconds` for the
request itself, a few times that for the whole probe, credentials and a refresh included), so a
hung probe ends as a failure and the round completes. An exception that is no transport error
(a bug, in claudex or a library) is recorded as that profile's probe error in plain words and
logged once, by type and place only: an exception's message may hold a token.

In a fleet (engine/fleet/) the rounds are shared: before probing a provider an instance takes
the fleet's health lease on it (a Redis key with a TTL a bit over the interval, renewed by its
holder each round), so one instance probes each provider per interval; the result is published
and every other instance applies it as if it had probed (`ProbeResult`, `apply`) — except a
failure on auth (401/403), which is about the prober's own login: peers keep that one out and
probe that provider themselves (engine/fleet/health.py). Without Redis, every instance probes on
its own. A probe asked for by hand (`check_all()`) ignores the lease.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import httpx

from claudex.config.model import Config
from claudex.engine.breaker.circuit import BreakerState
from claudex.engine.clock import Clock, Sleep, WallClock
from claudex.engine.core.addressing import upstream_headers
from claudex.engine.core.classify import Outcome, classify_status, map_transport_error
from claudex.engine.core.runtime import ProviderRuntime
from claudex.engine.credentials.cache import CredentialError
from claudex.engine.events import Event, EventBus
from claudex.engine.network.httpx_client import PROXY_ERRORS
from claudex.providers import anthropic, openai

log = logging.getLogger("claudex.health")

# What a probe request may fail with on the wire; anything else is unexpected (a bug).
_TRANSPORT_ERRORS = (httpx.RequestError, OSError, TimeoutError)
# The whole probe (credentials, the request, a refresh and its retry) gets this many timeouts.
_PROBE_DEADLINE_TIMEOUTS = 3


# A fleet's health lease lasts the interval and this share of it more (at least a second):
# renewed by its holder at the end of each round, it lapses if the holder stops probing.
_LEASE_MARGIN = 0.25

ProbeKind = Literal["ok", "unsupported", "auth", "failure"]
_KINDS: frozenset[str] = frozenset({"ok", "unsupported", "auth", "failure"})


@dataclass(frozen=True)
class ProbeResult:
    """What a probe found, in a form another instance of a fleet can apply as if it had
    probed. Outcomes about this instance alone (its credentials unreadable, a bug) are not
    results: they are recorded here and never published."""

    kind: ProbeKind
    status: int | None = None
    latency_ms: float | None = None
    error: str | None = None
    counts: bool = False  # a failure the breaker counts

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> ProbeResult:
        """Raises ValueError for anything that is not a result this version wrote."""
        if not isinstance(data, dict) or data.get("kind") not in _KINDS:
            raise ValueError("not a probe result")
        status, latency, error = data.get("status"), data.get("latency_ms"), data.get("error")
        if status is not None and (isinstance(status, bool) or not isinstance(status, int)):
            raise ValueError("status must be an integer")
        if latency is not None and (isinstance(latency, bool)
                                    or not isinstance(latency, int | float)):
            raise ValueError("latency_ms must be a number")
        if error is not None and not isinstance(error, str):
            raise ValueError("error must be text")
        return cls(data["kind"], status, None if latency is None else float(latency),
                   None if error is None else error[:200], data.get("counts") is True)


class HealthFleet(Protocol):
    """What the checker needs of a fleet (engine/fleet/coordinator.py's `Fleet`)."""

    async def health_lease(self, provider: str, lease_s: float) -> bool: ...

    async def drop_health_lease(self, provider: str) -> None: ...

    def publish_health(self, provider: str, result: dict[str, Any]) -> None: ...

    def listen_health(self, sink: Callable[[str, dict[str, Any]], None]) -> None: ...


class HealthCore(Protocol):
    config: Config
    runtimes: dict[str, ProviderRuntime]
    clock: Clock
    wall: WallClock
    sleep: Sleep
    events: EventBus

    @property
    def fleet(self) -> HealthFleet | None: ...


def should_probe(rt: ProviderRuntime) -> bool:
    p = rt.profile
    return p.enabled and p.problem is None and p.health_probe


class HealthChecker:
    def __init__(self, core: HealthCore, http: httpx.AsyncClient,
                 route_http: Callable[[ProviderRuntime], httpx.AsyncClient | None] | None = None
                 ) -> None:
        """`route_http`: the client for a routed profile's probe (issue 36: through its
        proxy), None when every proxy of its route is out (no probe: no word on the
        provider); a plain profile's probe uses `http`."""
        self.core = core
        self.http = http
        self._route_http = route_http
        self.rounds = 0
        # profile name -> the unexpected exception type last logged for it (log each once).
        self._reported: dict[str, str] = {}
        self.peer_results = 0  # probe results from other instances of a fleet, applied here
        self._announced: set[str] = set()  # providers whose probe this round found a result
        self.fleet = core.fleet
        if self.fleet is not None:
            self.fleet.listen_health(self.from_peer)

    def lease_s(self) -> float:
        interval = self.core.config.health.interval_seconds
        return interval + max(1.0, interval * _LEASE_MARGIN)

    async def check_all(self, *, leased: bool = False) -> None:
        """Probe every enabled profile; `leased` (the background rounds): in a fleet, only
        those whose health lease this instance holds (takes or renews)."""
        runtimes = [rt for rt in self.core.runtimes.values() if should_probe(rt)]
        fleet = self.fleet if leased else None
        if fleet is not None and runtimes:
            lease = self.lease_s()
            held = await asyncio.gather(*(fleet.health_lease(rt.name, lease) for rt in runtimes))
            runtimes = [rt for rt, mine in zip(runtimes, held, strict=True) if mine]
        if runtimes:
            self._announced.clear()
            # `probe` never raises, so one profile's failure cannot cut another's result.
            await asyncio.gather(*(self.probe(rt) for rt in runtimes))
            if fleet is not None:
                # The lease counts from the end of the round. A probe that found nothing the
                # fleet could use (this instance's credentials unreadable, a bug) gives it up,
                # so that another instance probes that provider.
                lease = self.lease_s()
                await asyncio.gather(*(
                    fleet.health_lease(rt.name, lease) if rt.name in self._announced
                    else fleet.drop_health_lease(rt.name) for rt in runtimes))
        self.rounds += 1
        self.core.events.publish(Event("health", f"health round {self.rounds} done", None,
                                       {"probed": len(runtimes)}))

    def from_peer(self, provider: str, data: dict[str, Any]) -> None:
        """Another instance's probe of `provider`: applied as if this one had probed (the fleet
        has already kept out a peer's auth failure, engine/fleet/health.py)."""
        rt = self.core.runtimes.get(provider)
        if rt is None or not should_probe(rt):
            return
        try:
            result = ProbeResult.from_json(data)
        except ValueError:
            return
        self.peer_results += 1
        self.apply(rt, result, own=False)

    async def run_forever(self) -> None:
        while True:
            try:
                await self.check_all(leased=True)
            except Exception as exc:  # a bug must never stop the loop; the next round runs
                log.warning("health round failed unexpectedly (%s at %s)",
                            type(exc).__name__, _where(exc))
            await self.core.sleep(self.core.config.health.interval_seconds)

    async def probe(self, rt: ProviderRuntime) -> None:
        """`check` under the whole-probe deadline; records every failure, never raises (unless
        the round itself is being cancelled)."""
        deadline = self.core.config.health.timeout_seconds * _PROBE_DEADLINE_TIMEOUTS
        try:
            async with asyncio.timeout(deadline) as scope:
                await self.check(rt)
        except TimeoutError as exc:
            if not scope.expired():  # raised inside, not the deadline
                self._record_unexpected(rt, exc)
                return
            self._found(rt, ProbeResult("failure",
                                        error=f"probe did not finish within {deadline:g} s"))
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # the round is being cancelled (the engine is closing)
            self._record_unexpected(rt, exc)  # a stray one from a library: not ours to obey
            return
        except Exception as exc:
            self._record_unexpected(rt, exc)
            return
        self._reported.pop(rt.name, None)

    async def check(self, rt: ProviderRuntime) -> None:
        """Probe `rt` once; apply what it found here and announce it to the fleet."""
        result = await self.measure(rt)
        if result is not None:  # None: this instance's own credentials, not the fleet's news
            self._found(rt, result)

    def _found(self, rt: ProviderRuntime, result: ProbeResult) -> None:
        self._announced.add(rt.name)
        self.apply(rt, result, own=True)
        if self.fleet is not None:
            self.fleet.publish_health(rt.name, result.to_json())

    def apply(self, rt: ProviderRuntime, result: ProbeResult, *, own: bool) -> None:
        """A probe's result into the health view and the breaker (DESIGN.md "Health"); `own`:
        this instance probed (a peer's result says nothing about this instance's login)."""
        health = rt.health
        if result.kind == "failure":
            self._record_failure(rt, result.error or "probe failed", count=result.counts)
            return
        health.last_checked = self.core.wall()
        if result.kind == "unsupported":
            health.unsupported = True
            health.last_ok = True
            health.latency_ms = None
            health.error = f"probe unsupported: {result.error}" if result.error \
                else "probe unsupported"
            health.probe_failures = 0
            return
        if result.kind == "auth":
            health.auth_failing = True
            health.last_ok = False
            health.latency_ms = result.latency_ms
            health.error = f"auth failing ({result.status})"
            return
        # 2xx, or a 4xx that proves the provider is up and answering.
        health.unsupported = False
        health.last_ok = True
        health.latency_ms = result.latency_ms
        health.error = None
        health.probe_failures = 0
        health.live_failure_since_probe = False
        health.untrusted = None  # the probe's TLS handshake verified
        if result.status is not None and result.status < 400:
            health.auth_failing = False
            if own:
                rt.credentials.mark_ok()
        if rt.breaker.state is BreakerState.OPEN:
            rt.breaker.probe_passed()

    async def measure(self, rt: ProviderRuntime) -> ProbeResult | None:
        profile = rt.profile
        url = (anthropic.models_url(profile.base_url) if profile.protocol == "anthropic"
               else openai.models_url(profile.base_url))
        wire, body = rt.wire, None
        if wire is not None:  # a cloud: its own free request, or none (engine/clouds/)
            probe = wire.probe()
            if probe is None:
                return ProbeResult("unsupported", error=f"{wire.kind} has no request that "
                                   "costs nothing; health from traffic")
            url, body = probe
        timeout = self.core.config.health.timeout_seconds
        health = rt.health
        http, proxied = self.http, rt.route is not None and bool(rt.route.hops)
        if rt.route is not None and self._route_http is not None:
            routed = self._route_http(rt)
            if routed is None:  # every proxy of its route is out: the provider is not judged
                return None
            http = routed
        for refreshed in (False, True):
            try:
                auth = await rt.credentials.auth_headers()
            except CredentialError as exc:
                self._record_failure(rt, exc.reason, count=False)
                health.credentials_problem = exc.reason
                return None
            health.credentials_problem = None
            headers = upstream_headers(profile, auth)
            started = self.core.clock()
            try:
                # httpx's timeout bounds each phase; this bounds the whole request, so a
                # provider that trickles its answer (or a wedged transport) cannot hang the round.
                async with asyncio.timeout(timeout):
                    resp = await (http.get(url, headers=headers, timeout=timeout)
                                  if body is None else http.post(
                                      url, content=body, timeout=timeout,
                                      headers={**headers, "content-type": "application/json"}))
            except _TRANSPORT_ERRORS as exc:
                if proxied and isinstance(exc, PROXY_ERRORS):  # the proxy's, not the provider's
                    log.info("%s: health probe not made: its upstream proxy failed (%s)",
                             rt.name, type(exc).__name__)
                    return None
                _, words = map_transport_error(exc)
                return ProbeResult("failure", error=words, counts=True)
            latency = round((self.core.clock() - started) * 1000.0, 1)
            status = resp.status_code
            outcome = classify_status(status, oauth=profile.auth_type == "oauth"
                                      or profile.token_command is not None
                                      or (wire is not None and wire.refreshes_on_401))
            if outcome is Outcome.TOKEN_EXPIRED and not refreshed and auth is not None:
                if await rt.credentials.refresh_after_401(auth):
                    continue
            if status in (404, 405):
                return ProbeResult("unsupported", status)
            if status in (401, 403) and profile.auth_type != "passthrough":
                return ProbeResult("auth", status, latency)
            if outcome in (Outcome.SERVER_ERROR,):
                return ProbeResult("failure", status, error=f"server error ({status})",
                                   counts=True)
            return ProbeResult("ok", status, latency)
        return None  # not reached: the second pass always returns

    def _record_failure(self, rt: ProviderRuntime, error: str, *, count: bool) -> None:
        health = rt.health
        health.last_checked = self.core.wall()
        health.last_ok = False
        health.latency_ms = None
        health.error = error
        health.probe_failures += 1
        if count:
            rt.breaker.record_failure(None)

    def _record_unexpected(self, rt: ProviderRuntime, exc: BaseException) -> None:
        # Not the provider's fault as far as anyone knows: shown, but not held against its
        # breaker. Logged by type and place only, and once: again only after a probe of this
        # profile has ended some other way.
        kind = type(exc).__name__
        self._record_failure(rt, f"health probe failed unexpectedly ({kind})", count=False)
        if self._reported.get(rt.name) != kind:
            self._reported[rt.name] = kind
            log.warning("%s: health probe failed unexpectedly (%s at %s); other probes and "
                        "later rounds go on", rt.name, kind, _where(exc))


def _where(exc: BaseException) -> str:
    """Where `exc` was raised (file and line): enough to find a bug, and no value a secret
    could be in."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "unknown place"
    last = frames[-1]
    return f"{Path(last.filename).name}:{last.lineno}"
