"""The Redis side of a fleet: where facts are recorded, announced and read back.

Layout, under the `[fleet] key_prefix` (default "claudex"):

- `{prefix}:fact:{register}:{provider}`: the newest fact of that register (engine/fleet/facts.py),
  with a TTL that ends when the fact stops holding (a trip has none: it holds until a reset);
  a context window's is `{prefix}:fact:context:{provider}:{model}`, one per model.
- `{prefix}:facts`: the pub/sub channel every written fact is announced on, for immediacy.
- `{prefix}:health`: the channel health probe results are announced on (never stored: each is
  applied once, by the instances listening then).
- `{prefix}:binding:{pool}:{conversation}`: which member of a pool a conversation is bound to
  (engine/fleet/bindings.py), expiring after the bindings' idle hour; announced on
  `{prefix}:bindings`.
- `{prefix}:instance:{name}`: each instance's heartbeat, expiring when it stops beating.
- `{prefix}:lease:{what}`: leases (a half-open slot, a provider's health probes, a refresh lock).
- `{prefix}:token:{what}`: a refreshed OAuth token, Fernet ciphertext only (engine/fleet/tokens.py),
  written only when `[fleet] secret_env` holds a key.

A fact is written by one Lua script that compares it with the stored one and writes and announces
it only if it is newer (the same rule as `Fact.newer_than`), so two instances republishing after an
outage cannot put an older fact over a newer one, whatever the order their writes arrive in.

Every command is bounded by `timeout_s` (the client's socket timeouts, and `asyncio.timeout`
over each call, since a reconnect inside the client could otherwise take longer): a slow or cut
Redis costs the background task a timeout, never a request, which never awaits any of this.
(Not `asyncio.wait_for`: on Python 3.11 it swallows a cancellation that arrives as the call
completes, and a loop around it then outlives the shutdown that cancelled it.)

Closing never waits on the server: `close()` drops the sockets (`disconnect(nowait=True)`, no
goodbye, no lock taken), so a Redis that is down, restarting or silent cannot hold a shutdown.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable
from contextlib import suppress
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from claudex.engine.fleet.facts import BadFact, Fact, decode

T = TypeVar("T")

# KEYS: the fact's key, the channel. ARGV: the encoded fact, its at, its by, TTL in ms (0: none).
_WRITE_IF_NEWER = """
local current = redis.call('GET', KEYS[1])
if current then
  local ok, stored = pcall(cjson.decode, current)
  if ok and type(stored) == 'table' and type(stored.at) == 'number' then
    local at = tonumber(ARGV[2])
    if stored.at > at or (stored.at == at and tostring(stored.by) >= ARGV[3]) then
      return 0
    end
  end
end
if tonumber(ARGV[4]) > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[4])
else
  redis.call('SET', KEYS[1], ARGV[1])
end
redis.call('PUBLISH', KEYS[2], ARGV[1])
return 1
"""


# A lease: KEYS[1]; ARGV: the holder, the lease in ms. Taken when free, renewed by its holder.
_HOLD_LEASE = """
local holder = redis.call('GET', KEYS[1])
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""
_DROP_LEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class FleetStore:
    """One connection's worth of Redis for one instance; `close()` and make a new one after a
    failure (redis-py's own retries are off: the fleet's supervisor decides when to retry)."""

    def __init__(self, url: str, prefix: str, *, password: str | None = None,
                 timeout_s: float = 0.5) -> None:
        self.prefix = prefix
        self.timeout_s = timeout_s
        self.channel = f"{prefix}:facts"
        self.health_channel = f"{prefix}:health"
        self.bindings_channel = f"{prefix}:bindings"
        self._pubsub: Any = None
        self._client: Redis = Redis.from_url(
            url, password=password, decode_responses=True,
            socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
            retry=Retry(NoBackoff(), 0), health_check_interval=0,
        )
        self._write = self._client.register_script(_WRITE_IF_NEWER)
        self._hold = self._client.register_script(_HOLD_LEASE)
        self._drop = self._client.register_script(_DROP_LEASE)

    async def _bounded(self, call: Awaitable[T]) -> T:
        async with asyncio.timeout(self.timeout_s * 2):
            return await call

    async def ping(self) -> None:
        await self._bounded(self._client.ping())

    def fact_key(self, fact: Fact) -> str:
        return f"{self.prefix}:fact:{fact.key()}"

    async def write(self, fact: Fact, now_wall: float) -> bool:
        """Record and announce `fact` unless Redis holds a newer one; True when written."""
        ttl = fact.ttl_s(now_wall)
        ttl_ms = 0 if ttl is None else max(1, int(ttl * 1000))
        written = await self._bounded(self._write(
            keys=[self.fact_key(fact), self.channel],
            args=[fact.encode(), repr(fact.at), fact.by, ttl_ms]))
        return bool(written)

    async def read_facts(self) -> list[Fact]:
        """Every fact recorded (records that do not parse are skipped)."""
        keys = await self._bounded(self._keys(f"{self.prefix}:fact:*"))
        if not keys:
            return []
        raw: list[str | None] = await self._bounded(self._client.mget(keys))
        facts = []
        for value in raw:
            if value is None:
                continue  # expired between the scan and the read
            try:
                facts.append(decode(value))
            except BadFact:
                continue
        return facts

    async def hold_lease(self, what: str, holder: str, lease_s: float) -> bool:
        """Take the lease on `what` if nobody holds it, or renew it if `holder` does; it lapses
        by itself `lease_s` after the last renewal (a holder that died frees it so)."""
        held = await self._bounded(self._hold(keys=[f"{self.prefix}:lease:{what}"],
                                              args=[holder, max(1, int(lease_s * 1000))]))
        return bool(held)

    async def drop_lease(self, what: str, holder: str) -> None:
        await self._bounded(self._drop(keys=[f"{self.prefix}:lease:{what}"], args=[holder]))

    async def beat(self, name: str, record: dict[str, Any], ttl_s: float) -> None:
        await self._bounded(self._client.set(f"{self.prefix}:instance:{name}",
                                             json.dumps(record), px=int(ttl_s * 1000)))

    async def instances(self) -> list[dict[str, Any]]:
        keys = await self._bounded(self._keys(f"{self.prefix}:instance:*"))
        if not keys:
            return []
        raw: list[str | None] = await self._bounded(self._client.mget(keys))
        found = []
        for value in raw:
            try:
                record = json.loads(value) if value is not None else None
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("name"), str):
                found.append(record)
        return sorted(found, key=lambda r: str(r["name"]))

    async def announce_health(self, record: dict[str, Any]) -> None:
        await self._bounded(self._client.publish(self.health_channel,
                                                 json.dumps(record, separators=(",", ":"))))

    async def write_binding(self, record: dict[str, Any], ttl_s: float) -> None:
        """A pool's binding (engine/fleet/bindings.py): kept for `ttl_s`, and announced."""
        text = json.dumps(record, separators=(",", ":"))
        key = f"{self.prefix}:binding:{record['pool']}:{record['conversation']}"
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.set(key, text, px=max(1, int(ttl_s * 1000)))
            pipe.publish(self.bindings_channel, text)
            await self._bounded(pipe.execute())

    async def read_binding(self, pool: str, conversation: str) -> str | None:
        value: str | None = await self._bounded(
            self._client.get(f"{self.prefix}:binding:{pool}:{conversation}"))
        return value

    async def read_token(self, what: str) -> str | None:
        value: str | None = await self._bounded(self._client.get(f"{self.prefix}:token:{what}"))
        return value

    async def write_token(self, what: str, sealed: str, ttl_s: float) -> None:
        await self._bounded(self._client.set(f"{self.prefix}:token:{what}", sealed,
                                             px=max(1, int(ttl_s * 1000))))

    async def _keys(self, pattern: str) -> list[str]:
        return [key async for key in self._client.scan_iter(match=pattern, count=500)]

    async def announcements(self) -> AsyncIterator[Fact | dict[str, Any] | None]:
        """Facts, and health results (JSON objects naming `provider` and `by`), as they are
        announced, until the connection fails (then it raises); None after each quiet second,
        so the reader can look up."""
        pubsub = self._pubsub = self._client.pubsub()
        try:
            await self._bounded(pubsub.subscribe(self.channel, self.health_channel,
                                                 self.bindings_channel))
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                if message is None:
                    yield None
                    continue
                if message.get("type") != "message":
                    continue
                if message.get("channel") == self.bindings_channel:
                    try:
                        binding = json.loads(message["data"])
                    except ValueError:
                        continue
                    if isinstance(binding, dict):
                        yield {"binding": binding}
                    continue
                if message.get("channel") == self.health_channel:
                    record = _health_record(message["data"])
                    if record is not None:
                        yield record
                    continue
                try:
                    yield decode(message["data"])
                except BadFact:
                    continue
        finally:
            self._pubsub = None
            _drop(getattr(pubsub, "connection", None))

    async def close(self) -> None:
        """Drop every connection at once: nothing is waited for, so nothing can hang."""
        if self._pubsub is not None:
            _drop(getattr(self._pubsub, "connection", None))
        pool = self._client.connection_pool
        for conn in [*getattr(pool, "_available_connections", ()),
                     *getattr(pool, "_in_use_connections", ())]:
            _drop(conn)
        await _let_go(self._client.aclose(), self.timeout_s)


def _drop(conn: Any) -> None:
    """Close a redis-py connection's socket now, without a goodbye or a wait (what its own
    `disconnect(nowait=True)` does, minus the awaits)."""
    writer = getattr(conn, "_writer", None)
    if writer is None:
        return
    with suppress(Exception):
        conn._parser.on_disconnect()
    with suppress(Exception):
        writer.transport.abort()
    conn._reader = None
    conn._writer = None


def _health_record(raw: object) -> dict[str, Any] | None:
    try:
        record = json.loads(raw) if isinstance(raw, str | bytes) else None
    except ValueError:
        return None
    if (isinstance(record, dict) and isinstance(record.get("provider"), str)
            and isinstance(record.get("by"), str)):
        return record
    return None


async def _let_go(closing: Awaitable[Any], seconds: float) -> None:
    """Close a connection, giving it `seconds`: closing a broken one has nothing to save, and
    unlike `wait_for` this does not wait for a close that ignores its cancellation."""
    task = asyncio.ensure_future(closing)
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if not done:
        task.cancel()
    elif not task.cancelled():
        task.exception()  # retrieved, so never reported as unhandled
