"""A fleet: claudex instances sharing breaker facts, trips, cooldowns, spent plan windows and
learned context windows through Redis.

Each instance keeps its own breakers (engine/breaker/circuit.py, pure) and its own decisions: the
request path reads only local state and never awaits Redis. This module sits beside it:

- what happens locally (a breaker opening, a probe closing it, a trip, a reset, a 429's
  cooldown) becomes a fact (engine/fleet/facts.py) in the local registers, marked to be written;
- a background task writes marked facts to Redis (write-if-newer, announced on pub/sub), reads
  announcements, and once a `ROUND_S` reads every record back, heartbeats, and re-offers every
  local fact (so a Redis restarted empty is filled again, and an instance that was cut off
  catches up);
- a fact from another instance that is newer than the local register's drives the local
  breaker toward it (`peer_opened`, `peer_closed`, `trip`, `reset`), the local cooldown, the
  spent window, and the context window learned for a model (`learn_context_window`);
- health: one instance probes each provider per interval and announces the result; the others
  apply it as if they had probed, except an auth failure, which is about the prober's own
  credentials (engine/fleet/health.py, with the half-open slot);
- an OAuth refresh runs under the fleet's lock (`single_flight`), whose `TokenFlight`
  (engine/fleet/tokens.py) lets the winner leave the new tokens in Redis, Fernet-encrypted with
  the `[fleet] secret_env` key, for instances on other machines (no key: tokens never go there).

When Redis is down, slow or cut, the task times out, says "fleet: redis unreachable" once (log,
status), and retries every `RETRY_S`; the instance goes on with its own state meanwhile (and
probes every provider itself). Shutting down sets `closing`, which every loop reads, besides
cancelling them: a loop never depends on a cancellation arriving to end. Clocks:
facts carry wall time (they cross machines), so the fleet's clocks should agree to well under a
breaker's recovery time (NTP does).
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, contextmanager, suppress
from dataclasses import replace
from typing import Any

from redis.exceptions import RedisError

from claudex.config.model import Config, FleetSettings
from claudex.engine.breaker.circuit import BreakerState, Transition
from claudex.engine.breaker.trips import reset_words
from claudex.engine.clock import Clock, WallClock
from claudex.engine.core.runtime import ProviderRuntime
from claudex.engine.events import Deferred, Event, EventBus
from claudex.engine.fleet.bindings import TTL_S as BINDING_TTL_S
from claudex.engine.fleet.bindings import FleetBindings
from claudex.engine.fleet.facts import Fact, Register, Registers, view
from claudex.engine.fleet.health import FleetHealth
from claudex.engine.fleet.store import FleetStore
from claudex.engine.fleet.tokens import TokenFlight, load_sealer, refresh_lock
from claudex.engine.health.spent_windows import operator_reset

log = logging.getLogger("claudex.fleet")

ROUND_S = 1.0  # read-back, heartbeat and re-offer period
RETRY_S = 1.0  # wait between reconnection attempts while Redis is unreachable
HEARTBEAT_TTL_S = 5.0  # an instance not heard from for this long drops out of the list
COOLDOWN_POLL_S = 0.2  # how often local cooldowns are looked at (they are set by failover.py)
# An OAuth refresh's lock: held at most this long (a holder that died frees it so), and waited
# for at most this long before refreshing alone.
REFRESH_LOCK_S = 15.0
CLOSE_S = 2.0  # the longest `close()` waits for the background task
_FAULTS = (RedisError, OSError, TimeoutError, asyncio.TimeoutError)


class InstanceEventBus(EventBus):
    """The event bus of an instance in a fleet: every event says which instance produced it
    (`data["instance"]`), so consoles and journals fed by several instances can tell."""

    def __init__(self, instance: str) -> None:
        super().__init__()
        self.instance = instance

    def publish(self, event: Event) -> None:
        if "instance" not in event.data:
            event = replace(event, data={**event.data, "instance": self.instance})
        super().publish(event)

    _stamps = True

    def _stamp(self, item: Deferred) -> None:
        item.instance = self.instance


def instance_name(config: Config) -> str:
    """`[fleet] name`, else the address the instance listens on (unique on one machine)."""
    return config.fleet.name or f"{config.proxy.host}:{config.proxy.port}"


class Fleet(FleetHealth):
    def __init__(
        self,
        settings: FleetSettings,
        *,
        name: str,
        listen: str,
        runtimes: Callable[[], Mapping[str, ProviderRuntime]],
        clock: Clock,
        wall: WallClock,
        publish: Callable[[Event], None],
        env: Mapping[str, str] | None = None,
    ) -> None:
        assert settings.redis_url is not None
        self.settings = settings
        self.name = name
        self.listen = listen
        self._runtimes = runtimes
        self._clock = clock
        self._wall = wall
        self._publish = publish
        environ = os.environ if env is None else env
        self._password = environ.get(settings.password_env) if settings.password_env else None
        # Fernet, from `[fleet] secret_env`: None when unset or unusable (said once, at start).
        self.sealer, self.tokens_problem = load_sealer(settings, environ)
        self._token_reported = False  # a record that did not decrypt: logged once
        self.registers: dict[str, Registers] = {}
        self._dirty: set[tuple[str, Register, str]] = set()  # (provider, register, model)
        self._wake = asyncio.Event()
        self._cooldown_seen: dict[str, float] = {}
        self._spent_seen: dict[str, float] = {}  # spent windows told or heard (wall time)
        # Context windows told or heard, per (provider, model): a learned one that differs is news.
        self._context_seen: dict[tuple[str, str], int] = {}
        self._driving = False
        self.redis = "connecting"  # "connected" | "unreachable"
        self.error: str | None = None
        self.instances: list[dict[str, Any]] = []
        self.started_at = wall()
        self.applied = 0  # facts from other instances applied here
        self._task: asyncio.Task[None] | None = None
        self._store: FleetStore | None = None  # while connected
        self.closing = False  # set by close(): every loop ends on it, cancelled or not
        self._init_health()  # engine/fleet/health.py
        # Pools' bindings (engine/fleet/bindings.py): read by the balancer, written from here.
        self.bindings = FleetBindings(name, lambda: self._store, self._wake.set)

    # -- hooks the engine calls (synchronous: never on Redis' time) ---------------------------

    def on_transition(self, t: Transition) -> None:
        """A local breaker moved: failures opening it and probes closing it are fleet news;
        trips and resets arrive through `operator`, and what a peer caused is not re-sent."""
        if self._driving:
            return
        now = self._wall()
        if t.new is BreakerState.OPEN:
            rt = self._runtimes().get(t.provider)
            recovery = rt.breaker.snapshot().recovery_seconds if rt else 0.0
            self._record(Fact(t.provider, "traffic", "open", now, self.name, now + recovery))
        elif t.new is BreakerState.CLOSED and t.old is BreakerState.HALF_OPEN:
            self._record(Fact(t.provider, "traffic", "closed", now, self.name))

    def operator(self, provider: str, action: str, *, until: float | None = None,
                 reason: str | None = None) -> None:
        """Trip ("forced_open") or reset ("reset") from this instance's API, CLI or console; a
        trip's `until` (wall time; None: until reset) and `reason` go with it."""
        self._record(Fact(provider, "operator", action, self._wall(), self.name, until, reason))
        if action == "reset":  # what the reset ended is news again when it comes back
            self._cooldown_seen[provider] = 0.0
            self._spent_seen[provider] = 0.0

    def restored(self, provider: str, *, since: float, until: float | None,
                 reason: str | None) -> None:
        """A trip restored from the journal at start (engine.py): offered to the fleet like a
        fresh one, but dated `since`, when it was made. Write-if-newer then decides: a newer
        fact the fleet holds for `provider` (a reset while this instance was down) wins in
        Redis and, read back at the first round, here too; an older one loses to it."""
        self._record(Fact(provider, "operator", "forced_open", since, self.name, until, reason))

    def single_flight(self, what: str) -> AbstractAsyncContextManager[TokenFlight]:
        """The fleet's lock on `what` (an OAuth refresh) for a block, which gets a
        `TokenFlight` (engine/fleet/tokens.py's `refresh_lock`)."""
        return refresh_lock(self._live_store(), f"{self.name}/{uuid.uuid4().hex[:8]}", what,
                            self.sealer, self._token_unreadable, REFRESH_LOCK_S)

    def _token_unreadable(self, why: str) -> None:
        if not self._token_reported:
            self._token_reported = True
            log.warning("fleet: a token another instance shared could not be read (%s; is "
                        "[fleet] secret_env's key the same on every instance?); refreshing "
                        "here instead", why)

    def _record(self, fact: Fact) -> None:
        if self.registers.setdefault(fact.provider, Registers()).offer(fact):
            self._dirty.add((fact.provider, fact.register, fact.model or ""))
            self._wake.set()

    # -- facts from elsewhere ----------------------------------------------------------------

    def receive(self, fact: Fact) -> bool:
        """Apply a fact read from Redis if it is newer than what is known here; True if so."""
        regs = self.registers.setdefault(fact.provider, Registers())
        if fact.register == "context" and fact.by != self.name:
            # A window learned here that the watcher has not told yet is newer than this one:
            # recorded first, so a peer's older word does not overwrite it.
            self._watch_contexts(fact.provider)
        if not regs.offer(fact):
            return False
        if fact.by != self.name:
            self.applied += 1
            self._drive(fact, regs)
        return True

    @contextmanager
    def _quietly(self) -> Iterator[None]:
        self._driving = True
        try:
            yield
        finally:
            self._driving = False

    def _drive(self, fact: Fact, regs: Registers) -> None:
        rt = self._runtimes().get(fact.provider)
        if rt is None:
            return  # a provider this instance does not have (yet): kept, applied if it comes
        now_wall = self._wall()
        wanted = view(regs, now_wall)
        breaker = rt.breaker
        with self._quietly():
            if fact.register == "operator" and fact.state == "forced_open":
                if fact.live(now_wall):  # a timed trip already over is not started again
                    now = self._clock()
                    breaker.trip(until=None if fact.until is None
                                 else now + (fact.until - now_wall),
                                 reason=fact.reason, since=now + (fact.at - now_wall))
            elif fact.register == "operator":
                ended = operator_reset(rt, self._clock(), now_wall)
                self._cooldown_seen[fact.provider] = 0.0
                self._spent_seen[fact.provider] = 0.0
                self._publish(Event("reset", reset_words(fact.provider, ended, fact.by),
                                    fact.provider, {"ended": ended, "by": fact.by}))
            if wanted.breaker == "open" and fact.register in ("operator", "traffic"):
                breaker.peer_opened()
            elif (wanted.breaker == "closed" and fact.register == "traffic"
                  and fact.state == "closed"):
                breaker.peer_closed()
        if fact.register == "context" and fact.tokens is not None:
            # The window another instance learned for this model: passed over here too.
            model = fact.model or ""
            self._context_seen[(fact.provider, model)] = fact.tokens
            rt.learn_context_window(model, fact.tokens)
        if wanted.spent_until is not None and fact.register == "window":
            # A plan's window another instance found spent: skipped here too until its reset.
            if wanted.spent_until > rt.window_spent_until:
                rt.window_spent_until, rt.window_spent_name = wanted.spent_until, fact.reason
                self._spent_seen[fact.provider] = wanted.spent_until
        if wanted.cooling_until is not None and fact.register in ("operator", "cooldown"):
            until = self._clock() + (wanted.cooling_until - now_wall)
            if until > rt.cooldown_until:
                rt.cooldown_until = until
                self._cooldown_seen[fact.provider] = until
        if fact.register == "context":
            log.info("fleet: %s's context window for %s is %s tokens, from %s", fact.provider,
                     fact.model or "its model", f"{fact.tokens:,}", fact.by)
        else:
            log.info("fleet: %s's %s %s, from %s", fact.provider, fact.register, fact.state,
                     fact.by)

    def watch_cooldowns(self) -> None:
        # failover.py sets `cooldown_until` on a 429; noticing it here keeps the request path
        # free of fleet code. Only a cooldown that grew is news.
        now, now_wall = self._clock(), self._wall()
        for name, rt in self._runtimes().items():
            until = rt.cooldown_until
            if until > now and until > self._cooldown_seen.get(name, 0.0) + 0.5:
                self._cooldown_seen[name] = until
                self._record(Fact(name, "cooldown", "cooling", now_wall, self.name,
                                  now_wall + (until - now)))
            # A spent plan window (retries.py sets it, in wall time): news when it grew.
            spent = rt.window_spent_until
            if spent > now_wall and spent > self._spent_seen.get(name, 0.0):
                self._spent_seen[name] = spent
                self._record(Fact(name, "window", "spent", now_wall, self.name, spent,
                                  rt.window_spent_name))
            if rt.context_limits:
                self._watch_contexts(name, rt, now_wall)

    def _watch_contexts(self, name: str, rt: ProviderRuntime | None = None,
                        now_wall: float | None = None) -> None:
        """A context window one_provider.py learned (`rt.context_limits`, per model) that differs
        from the one last told or heard is news for the fleet."""
        rt = rt or self._runtimes().get(name)
        if rt is None or not rt.context_limits:
            return
        for model, tokens in list(rt.context_limits.items()):
            if self._context_seen.get((name, model)) != tokens:
                self._context_seen[(name, model)] = tokens
                self._record(Fact(name, "context", "window",
                                  self._wall() if now_wall is None else now_wall, self.name,
                                  model=model, tokens=tokens))

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="claudex-fleet")

    async def close(self) -> None:
        self.closing = True
        self._wake.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            # Bounded: shutting down must not wait on a Redis client that is slow to let go.
            done, _ = await asyncio.wait({task}, timeout=CLOSE_S)
            if not done:
                log.warning("fleet: the background task did not stop within %.0fs", CLOSE_S)
            elif not task.cancelled():
                with suppress(Exception):
                    task.result()

    async def _run(self) -> None:
        assert self.settings.redis_url is not None
        watcher = asyncio.create_task(self._cooldown_loop())
        try:
            while not self.closing:
                store = FleetStore(self.settings.redis_url, self.settings.key_prefix,
                                   password=self._password)
                try:
                    await store.ping()
                    await self._connected(store)
                except _FAULTS as exc:
                    self._unreachable(exc)
                except Exception as exc:
                    # Not Redis' fault: a bug here or in the client library. It ends this
                    # connection, never the task, which would leave status saying "connected"
                    # for good while nothing reads or writes Redis.
                    log.debug("fleet: unexpected error in the background task", exc_info=True)
                    self._unreachable(exc)
                except asyncio.CancelledError:
                    task = asyncio.current_task()
                    if self.closing or task is None or task.cancelling():
                        raise  # this task is being stopped
                    # A cancellation nobody asked of this task (a client library's timeout
                    # that leaked one): the connection's end, as above.
                    self._unreachable(ConnectionError("a Redis call was cancelled"))
                finally:
                    await store.close()
                if not self.closing:
                    await asyncio.sleep(RETRY_S)
        finally:
            watcher.cancel()

    async def _cooldown_loop(self) -> None:
        while not self.closing:
            self.watch_cooldowns()
            await asyncio.sleep(COOLDOWN_POLL_S)

    async def _connected(self, store: FleetStore) -> None:
        """Runs until a Redis call fails; then raises it."""
        await self._round(store)
        # "connected" in status from here, when the store is also what requests read (a pool's
        # binding looked up on a miss): said at the ping, a request in between decided alone
        # while status already promised the fleet's answer.
        self._store = store
        self._reachable()
        tasks = [asyncio.create_task(self._listen(store), name="listen"),
                 asyncio.create_task(self._write_loop(store), name="write"),
                 asyncio.create_task(self._round_loop(store), name="round"),
                 asyncio.create_task(self._slot_loop(store), name="slot")]
        try:
            # Each loop runs until `closing`; one that ends before it, by a fault or by a
            # cancellation nobody here asked for (a client library's timeout that leaked one),
            # ends the connection, which is then made anew: a loop that stopped alone would
            # leave the instance "connected" without the round that notices Redis is gone.
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if self.closing:
                return
            for task in done:
                if task.cancelled():
                    raise ConnectionError(f"the fleet's {task.get_name()} loop was cancelled")
                task.result()  # re-raises the fault that ended the connection
            raise ConnectionError("a fleet loop ended while connected")
        finally:
            self._store = None
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _listen(self, store: FleetStore) -> None:
        async for news in store.announcements():
            if self.closing:
                return
            if isinstance(news, Fact):
                self.receive(news)
            elif news is not None and "binding" in news:
                self.bindings.news(news["binding"])
            elif news is not None:
                self._health_news(news)

    async def _write_loop(self, store: FleetStore) -> None:
        while not self.closing:
            await self._wake.wait()
            self._wake.clear()
            await self._flush(store)
            for record in self._take_health_out():  # lost if this fails: probed anew soon
                await store.announce_health(record)
            for binding in self.bindings.take():  # lost if this fails: bound here all the same
                await store.write_binding(binding, BINDING_TTL_S)

    async def _flush(self, store: FleetStore) -> None:
        dirty, self._dirty = self._dirty, set()
        try:
            for provider, register, model in sorted(dirty):
                fact = self.registers[provider].get(register, model)
                if fact is not None and fact.live(self._wall()):
                    await store.write(fact, self._wall())
        except BaseException:
            self._dirty |= dirty  # not known to be written: offered again next time
            raise

    async def _round_loop(self, store: FleetStore) -> None:
        while not self.closing:
            await asyncio.sleep(ROUND_S)
            await self._round(store)

    async def _round(self, store: FleetStore) -> None:
        for fact in await store.read_facts():
            self.receive(fact)
        # Re-offer everything known here; Redis keeps only what is newer than its record, so
        # this costs nothing once the fleet agrees, and refills a Redis that came back empty.
        for provider, regs in self.registers.items():
            for fact in regs.facts():
                self._dirty.add((provider, fact.register, fact.model or ""))
        await self._flush(store)
        await store.beat(self.name, self._heartbeat(), HEARTBEAT_TTL_S)
        self.instances = await store.instances()

    def _heartbeat(self) -> dict[str, Any]:
        return {"name": self.name, "listen": self.listen, "pid": os.getpid(),
                "started_at": self.started_at, "heartbeat": self._wall()}

    def _reachable(self) -> None:
        if self.redis == "unreachable":
            log.warning("fleet: redis reachable again; re-publishing this instance's facts")
            self._publish(Event("escalation", "fleet: redis reachable again"))
        elif self.redis == "connecting":
            log.info("fleet: %s joined through redis (prefix %s)", self.name,
                     self.settings.key_prefix)
        self.redis, self.error = "connected", None

    def _unreachable(self, exc: BaseException) -> None:
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if self.redis != "unreachable":
            # Once per outage, not per retry or request; the instance carries on alone.
            log.warning("fleet: redis unreachable (%s); using this instance's own state", reason)
            self._publish(Event("escalation", "fleet: redis unreachable"))
        self.redis, self.error = "unreachable", reason
        self.probe_slots.clear()  # the leases lapse by themselves
        self.instances = [i for i in self.instances if i.get("name") == self.name]

    # -- reading -----------------------------------------------------------------------------

    def status_json(self) -> dict[str, Any]:
        now_wall = self._wall()
        instances = [{**i, "age_s": round(max(0.0, now_wall - float(i.get("heartbeat", 0))), 2)}
                     for i in self.instances]
        return {
            "name": self.name,
            "redis": self.redis,
            "status": "fleet: redis unreachable" if self.redis == "unreachable"
            else f"fleet: {self.redis}",
            "error": self.error,
            "key_prefix": self.settings.key_prefix,
            "instances": instances,
            "facts_applied": self.applied,
            "health_applied": self.health_applied,
            "health_kept_out": self.health_kept_out,
            # Pools' bindings from the other instances: announced and applied, read on a miss.
            "bindings_applied": self.bindings.applied,
            "bindings_read": self.bindings.read,
            "tokens": ("shared encrypted" if self.sealer is not None
                       else self.tokens_problem or "not shared (no [fleet] secret_env)"),
            "probe_slots": sorted(self.probe_slots),
        }
