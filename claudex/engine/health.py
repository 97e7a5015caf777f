"""Background health probes: a request that costs no tokens (`GET .../models`) to every enabled
provider, concurrently, every `interval_seconds`. Probe results feed the breaker as DESIGN.md says:
transport errors, timeouts and 5xx count as failures; 401/403 mark auth failing; 404/405 mean the
provider has no such endpoint and are not counted; a passing probe moves an OPEN breaker to
HALF_OPEN at once.
"""

from __future__ import annotations

import asyncio
import logging
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

    async def check_all(self) -> None:
        runtimes = [rt for rt in self.core.runtimes.values() if should_probe(rt)]
        if runtimes:
            await asyncio.gather(*(self.check(rt) for rt in runtimes), return_exceptions=True)
        self.rounds += 1
        self.core.events.publish(Event("health", f"health round {self.rounds} done", None,
                                       {"probed": len(runtimes)}))

    async def run_forever(self) -> None:
        while True:
            try:
                await self.check_all()
            except Exception:  # a probe bug must never stop the loop
                log.exception("health round failed")
            await self.core.sleep(self.core.config.health.interval_seconds)

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
                self._record_failure(rt, str(exc), count=False)
                return
            headers = upstream_headers(profile, auth)
            started = self.core.clock()
            try:
                resp = await self.http.get(url, headers=headers, timeout=timeout)
            except Exception as exc:
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
