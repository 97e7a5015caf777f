"""Who probes in a fleet: the health lease (one instance probes each provider per interval and
the others take its word, except for what a probe says about the prober alone) and the
half-open slot (the fleet sends `half_open_probes` trial requests, not that many per instance).

The health lease: before probing a provider, an instance takes or renews the fleet's lease on it (a
Redis key with a TTL a bit over the interval, engine/health/probes.py asks); its holder probes and
announces the result (`publish_health`), and every other instance applies it as if it had probed
(`_health_news`). Without Redis, every instance probes alone.

The rule for auth failures: a 401/403 on a probe is about the prober's own credentials (another
token file or environment, on another machine), not the provider. So

- a peer's auth-failing result is never applied here (no auth_failing flag, no health failure),
  and while the newest result announced for a provider is one, the lease does not cover that
  provider for this instance: it probes it itself, lease or not, until a peer announces a
  result that is not an auth failure (or the announcement is a lease old);
- while this instance's own auth is failing for a provider (its probe or its traffic was
  refused), it probes that provider itself, gives up the lease so that a peer whose login works
  takes it, and applies no peer result for it: a peer's pass says nothing about this login, and
  only this instance's own probe (or a reset) can clear its flag.

Transport errors, timeouts and 5xx are about the provider and keep being shared. The price:
while some instance's login fails, that instance probes the provider too (two probes per
interval, not one); when every instance's does, each probes alone, as without a fleet.

The half-open slot: while a breaker is half-open, the instance takes or renews the fleet's
`probe:NAME` lease every `LEASE_POLL_S`; only its holder admits trials (`may_probe`, the
breaker's probe gate). A holder that dies frees it when the lease ends (`PROBE_LEASE_S`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any

from redis.exceptions import RedisError

from claudex.engine.breaker.circuit import BreakerState
from claudex.engine.clock import WallClock
from claudex.engine.core.runtime import ProviderRuntime
from claudex.engine.fleet.store import FleetStore

_FAULTS = (RedisError, OSError, TimeoutError, asyncio.TimeoutError)
PROBE_LEASE_S = 3.0  # a half-open slot's holder must renew it within this (it dies: freed)
LEASE_POLL_S = 0.2  # how often half-open breakers take or renew the slot


class FleetHealth:
    """The probing half of `Fleet` (engine/fleet/coordinator.py), which sets these attributes."""

    name: str
    redis: str
    closing: bool
    _store: FleetStore | None
    _wall: WallClock
    _wake: asyncio.Event
    _runtimes: Callable[[], Mapping[str, ProviderRuntime]]

    def _init_health(self) -> None:
        self._health_sink: Callable[[str, dict[str, Any]], None] | None = None
        self._health_out: dict[str, dict[str, Any]] = {}  # provider -> result to announce
        self.health_applied = 0  # probe results from other instances passed to the checker
        self.health_kept_out = 0  # ... and those not applied: about the prober's login only
        self._peer_auth: dict[str, float] = {}  # provider -> wall time a peer announced auth
        # Providers whose fleet-wide half-open slot this instance holds (a Redis lease).
        self.probe_slots: set[str] = set()

    # -- the health lease ----------------------------------------------------------------------

    def _live_store(self) -> FleetStore | None:
        return self._store if self.redis == "connected" else None

    def _auth_failing_here(self, provider: str) -> bool:
        rt = self._runtimes().get(provider)
        return rt is not None and rt.health.auth_failing

    def listen_health(self, sink: Callable[[str, dict[str, Any]], None]) -> None:
        """Where other instances' probe results go (engine/health/probes.py applies them)."""
        self._health_sink = sink

    async def health_lease(self, provider: str, lease_s: float) -> bool:
        """Whether this instance probes `provider` this round: it holds (takes or renews) the
        fleet's lease on its probes, or the lease does not cover it (the module's auth rule).
        Without Redis, always: every instance probes alone."""
        store = self._live_store()
        if store is None:
            return True
        try:
            if self._auth_failing_here(provider):
                await store.drop_lease(f"health:{provider}", self.name)
                return True
            if await store.hold_lease(f"health:{provider}", self.name, lease_s):
                return True
        except _FAULTS:
            return True
        told = self._peer_auth.get(provider)
        return told is not None and self._wall() - told < lease_s

    async def drop_health_lease(self, provider: str) -> None:
        store = self._live_store()
        if store is not None:
            with suppress(*_FAULTS):
                await store.drop_lease(f"health:{provider}", self.name)

    def publish_health(self, provider: str, result: dict[str, Any]) -> None:
        """Announce a probe result of this instance's (sent by the background task)."""
        if self.redis == "connected":
            self._health_out[provider] = {**result, "provider": provider, "by": self.name,
                                          "at": self._wall()}
            self._wake.set()

    def _take_health_out(self) -> list[dict[str, Any]]:
        out, self._health_out = self._health_out, {}
        return list(out.values())

    def _health_news(self, record: dict[str, Any]) -> None:
        if record.get("by") == self.name or self._health_sink is None:
            return
        provider = str(record["provider"])
        if record.get("kind") == "auth":
            self._peer_auth[provider] = self._wall()
            self.health_kept_out += 1
            return
        self._peer_auth.pop(provider, None)
        if self._auth_failing_here(provider):
            self.health_kept_out += 1
            return
        self.health_applied += 1
        self._health_sink(provider, record)

    # -- the half-open slot --------------------------------------------------------------------

    def may_probe(self, provider: str) -> bool:
        """Whether this instance's half-open breaker may admit trials: only the slot's holder
        does, so the fleet sends `half_open_probes` trials, not that many per instance. Without
        Redis, every instance decides alone (as a lone instance would)."""
        return self.redis != "connected" or provider in self.probe_slots

    async def _slot_loop(self, store: FleetStore) -> None:
        while not self.closing:
            await self._slots(store)
            await asyncio.sleep(LEASE_POLL_S)

    async def _slots(self, store: FleetStore) -> None:
        for provider, rt in list(self._runtimes().items()):
            if rt.breaker.state is BreakerState.HALF_OPEN:
                if await store.hold_lease(f"probe:{provider}", self.name, PROBE_LEASE_S):
                    self.probe_slots.add(provider)
                else:
                    self.probe_slots.discard(provider)
            elif provider in self.probe_slots:
                self.probe_slots.discard(provider)  # the trial is over: closed or re-opened
                await store.drop_lease(f"probe:{provider}", self.name)
