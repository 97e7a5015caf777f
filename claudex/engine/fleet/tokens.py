"""OAuth tokens across the machines of a fleet, only ever encrypted.

An OAuth refresh is single-flight across the fleet (`Fleet.single_flight`, a Redis
lock named by a digest of the refresh token). On one machine the others then re-read the
credentials file the winner wrote. Instances on other machines have their own file, which the
winner cannot write; for them the winner also leaves the new tokens in Redis, under
`{prefix}:token:refresh:{digest}`, as Fernet ciphertext (cryptography's AES-128-CBC + HMAC-SHA256)
with the key held in the environment variable `[fleet] secret_env` names. The waiter reads and
decrypts it, writes it to its own file, and spends no refresh token of its own.

- No `secret_env`, or its variable unset: tokens never enter Redis; each machine keeps its own
  credentials (and an instance on another machine refreshes on its own, as a lone one would).
- A key that is not a Fernet key: said once at start (`claudex check` says so with file:line
  first), and treated as no key.
- A record that does not decrypt (another key, a damaged or foreign value): logged once, and the
  instance refreshes locally under the lock.

The key and the tokens are never logged: the key is added to the scrubber, and every message
here names a reason, never a value.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any

from redis.exceptions import RedisError

from claudex.config.model import FleetSettings
from claudex.engine.credentials.oauth import GrantResult
from claudex.engine.fleet.store import FleetStore
from claudex.engine.masking.secrets import SCRUBBER

log = logging.getLogger("claudex.fleet")

# How long a shared token record lives: a machine whose instances were idle for longer than
# this finds the refresh token it holds spent and needs its own login.
TOKEN_TTL_S = 24 * 3600.0
_FAULTS = (RedisError, OSError, TimeoutError, asyncio.TimeoutError)
_FIELDS = ("access_token", "refresh_token", "expires_at", "id_token")


class BadSeal(ValueError):
    """A record that cannot be decrypted with this key, or is not a token record."""


class Sealer:
    """Fernet with the fleet's key: token records in, ciphertext out, and back."""

    def __init__(self, key: str) -> None:
        # Imported here: cryptography costs ~10 MB of memory, and only a fleet sharing tokens
        # across machines (`[fleet] secret_env` set) needs it.
        from cryptography.fernet import Fernet, InvalidToken

        self._fernet = Fernet(key.strip().encode("ascii"))  # ValueError unless a Fernet key
        self._invalid = InvalidToken

    def seal(self, record: Mapping[str, Any]) -> str:
        data = {k: record.get(k) for k in _FIELDS}
        return self._fernet.encrypt(json.dumps(data).encode()).decode("ascii")

    def unseal(self, sealed: str) -> dict[str, Any]:
        try:
            plain = self._fernet.decrypt(sealed.encode("ascii"), ttl=int(TOKEN_TTL_S))
        except (self._invalid, UnicodeEncodeError):
            raise BadSeal("it does not decrypt with this key") from None
        try:
            record = json.loads(plain)
        except ValueError:
            raise BadSeal("it is not a token record") from None
        if not isinstance(record, dict) or not isinstance(record.get("access_token"), str):
            raise BadSeal("it is not a token record")
        return record


def load_sealer(settings: FleetSettings,
                env: Mapping[str, str]) -> tuple[Sealer | None, str | None]:
    """The fleet's sealer, or None and why tokens are not shared (None when not asked for)."""
    if not settings.secret_env:
        return None, None
    key = env.get(settings.secret_env, "").strip()
    if not key:
        return None, f"not shared ({settings.secret_env} is not set)"
    SCRUBBER.add([key])
    try:
        sealer = Sealer(key)
    except ValueError:
        problem = f"not shared ({settings.secret_env} does not hold a Fernet key)"
        log.warning("fleet: tokens %s; `claudex check` says more", problem)
        return None, problem
    return sealer, None


class TokenFlight:
    """What a refresh inside the fleet's lock on `what` may use: the tokens another instance
    left for it (`shared`), and a way to leave its own (`share`). Both do nothing without Redis
    or a key; neither ever raises."""

    def __init__(self, what: str, store: FleetStore | None, sealer: Sealer | None,
                 unreadable: Callable[[str], None]) -> None:
        self.what = what
        self._store = store
        self._sealer = sealer
        self._unreadable = unreadable

    @property
    def enabled(self) -> bool:
        return self._store is not None and self._sealer is not None

    async def shared(self) -> dict[str, Any] | None:
        if self._store is None or self._sealer is None:
            return None
        try:
            sealed = await self._store.read_token(self.what)
        except _FAULTS:
            return None
        if sealed is None:
            return None
        try:
            return self._sealer.unseal(sealed)
        except BadSeal as exc:
            self._unreadable(str(exc))
            return None

    async def share(self, record: Mapping[str, Any]) -> None:
        if self._store is None or self._sealer is None:
            return
        try:
            await self._store.write_token(self.what, self._sealer.seal(record), TOKEN_TTL_S)
        except _FAULTS as exc:
            log.warning("fleet: could not leave the refreshed token in redis (%s); instances "
                        "on other machines will refresh on their own", type(exc).__name__)


@asynccontextmanager
async def refresh_lock(store: FleetStore | None, holder: str, what: str, sealer: Sealer | None,
                       unreadable: Callable[[str], None],
                       wait_s: float) -> AsyncIterator[TokenFlight]:
    """Hold the fleet's lock on `what` (an OAuth refresh) for the block: waits while another
    instance holds it, up to `wait_s` (also the lock's lease: a holder that died frees it so);
    with Redis away or the wait over, the block runs anyway: a refresh is never refused for want
    of a lock. The block gets the `TokenFlight` for `what`."""
    held = False
    if store is not None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        try:
            while not (held := await store.hold_lease(what, holder, wait_s)):
                if loop.time() > deadline:
                    log.warning("fleet: waited %.0fs for %s; going ahead", wait_s, what)
                    break
                await asyncio.sleep(0.05)
        except _FAULTS:
            held = False
    try:
        yield TokenFlight(what, store, sealer, unreadable)
    finally:
        if held and store is not None:
            with suppress(*_FAULTS):
                await store.drop_lease(what, holder)


def grant_of(record: Mapping[str, Any], now: float) -> GrantResult:
    """A token record another instance shared, as the grant it wrote."""
    refresh, expires_at, id_token = (record.get("refresh_token"), record.get("expires_at"),
                                     record.get("id_token"))
    lifetime = (float(expires_at) - now if isinstance(expires_at, int | float)
                and not isinstance(expires_at, bool) else None)
    return GrantResult(
        access_token=str(record["access_token"]),
        refresh_token=refresh if isinstance(refresh, str) and refresh else None,
        expires_in=lifetime if lifetime is not None and lifetime > 0 else None,
        id_token=id_token if isinstance(id_token, str) and id_token else None,
    )
