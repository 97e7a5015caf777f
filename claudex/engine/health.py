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
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from pathlib import Path
from typing import Protocol

import httpx

from claudex.config.model import Config
from claudex.engine.breaker import BreakerState
from claudex.engine.classify import Outcome, classify_status, map_transport_error
from claudex.engine.clock import Clock, Sleep, WallClock
from claudex.engine.credentials import CredentialError
from claudex.engine.events import Event, EventBus
from claudex.engine.exchange import upstream_headers
from claudex.engine.runtime import ProviderRuntime
from claudex.providers import anthropic, openai

log = logging.getLogger("claudex.health")

# What a probe request may fail with on the wire; anything else is unexpected (a bug).
_TRANSPORT_ERRORS = (httpx.RequestError, OSError, TimeoutError)
# The whole probe (credentials, the request, a refresh and its retry) gets this many timeouts.
_PROBE_DEADLINE_TIMEOUTS = 3


class HealthCore(Protocol):
    config: Config
    runtimes: dict[str, ProviderRuntime]
    clock: Clock
    wall: WallClock
    sleep: Sleep
    events: EventBus


def should_probe(rt: ProviderRuntime) -> bool:
    p = rt.profile
    return p.enabled and p.problem is None and p.health_probe


class HealthChecker:
    def __init__(self, core: HealthCore, http: httpx.AsyncClient) -> None:
        self.core = core
        self.http = http
        self.rounds = 0
        # profile name -> the unexpected exception type last logged for it (log each once).
        self._reported: dict[str, str] = {}

    async def check_all(self) -> None:
        runtimes = [rt for rt in self.core.runtimes.values() if should_probe(rt)]
        if runtimes:
            # `probe` never raises, so one profile's failure cannot cut another's result.
            await asyncio.gather(*(self.probe(rt) for rt in runtimes))
        self.rounds += 1
        self.core.events.publish(Event("health", f"health round {self.rounds} done", None,
                                       {"probed": len(runtimes)}))

    async def run_forever(self) -> None:
        while True:
            try:
                await self.check_all()
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
            self._record_failure(rt, f"probe did not finish within {deadline:g} s", count=False)
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
        profile = rt.profile
        url = (anthropic.models_url(profile.base_url) if profile.protocol == "anthropic"
               else openai.models_url(profile.base_url))
        timeout = self.core.config.health.timeout_seconds
        health = rt.health
        for refreshed in (False, True):
            try:
                auth = await rt.credentials.auth_headers()
            except CredentialError as exc:
                self._record_failure(rt, exc.reason, count=False)
                health.credentials_problem = exc.reason
                return
            health.credentials_problem = None
            headers = upstream_headers(profile, auth)
            started = self.core.clock()
            try:
                # httpx's timeout bounds each phase; this bounds the whole request, so a
                # provider that trickles its answer (or a wedged transport) cannot hang the round.
                async with asyncio.timeout(timeout):
                    resp = await self.http.get(url, headers=headers, timeout=timeout)
            except _TRANSPORT_ERRORS as exc:
                _, words = map_transport_error(exc)
                self._record_failure(rt, words, count=True)
                return
            latency = (self.core.clock() - started) * 1000.0
            status = resp.status_code
            outcome = classify_status(status, oauth=profile.auth_type == "oauth"
                                      or profile.token_command is not None)
            if outcome is Outcome.TOKEN_EXPIRED and not refreshed and auth is not None:
                if await rt.credentials.refresh_after_401(auth):
                    continue
            health.last_checked = self.core.wall()
            if status in (404, 405):
                health.unsupported = True
                health.last_ok = True
                health.latency_ms = None
                health.error = "probe unsupported"
                health.probe_failures = 0
                return
            if status in (401, 403) and profile.auth_type != "passthrough":
                health.auth_failing = True
                health.last_ok = False
                health.latency_ms = round(latency, 1)
                health.error = f"auth failing ({status})"
                return
            if outcome in (Outcome.SERVER_ERROR,):
                self._record_failure(rt, f"server error ({status})", count=True)
                return
            # 2xx, or a 4xx that proves the provider is up and answering.
            health.unsupported = False
            health.last_ok = True
            health.latency_ms = round(latency, 1)
            health.error = None
            health.probe_failures = 0
            health.live_failure_since_probe = False
            if status < 400:
                health.auth_failing = False
                rt.credentials.mark_ok()
            if rt.breaker.state is BreakerState.OPEN:
                rt.breaker.probe_passed()
            return

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
