"""Upstream credentials for one profile, and OAuth refresh-then-retry.

`Credentials.auth_headers()` gives the headers to send upstream (built by auth_headers.py; None
for `auth_type = "passthrough"`, where the client's own headers go through). Tokens are cached;
one whose expiry is within 60 s is refreshed before use. When the upstream answers 401 the caller
asks `refresh_after_401(failed)`: True means a different token is ready and the request may be
retried once; False means none can be had, and `status` then says "needs login" until
`mark_ok()`.

Sources (DESIGN.md "OAuth refresh-then-retry"; read and written by token_sources.py): a
token_command, re-run on 401; an oauth credentials file, on 401 re-read, then refreshed with its
refresh token and written back; otherwise an API key (`api_key`, or the `api_key_env` variable).
This module is the cache and the coordination around them: when to read, one refresh at a time,
what a failure means for the status, and the events that tell it.

In a fleet (engine/fleet/) a refresh runs under the fleet's lock on the refresh token (by
digest); inside it the credentials file is read again (an instance on this machine may have
refreshed already), then the token another instance left in Redis is looked for (only there,
encrypted, when `[fleet] secret_env` holds a key: engine/fleet/tokens.py), and only then is a
grant asked for; its result is written to the file and left for the others the same way.

Errors: `CredentialError` when a source cannot be read at all (raised by `auth_headers`);
`NeedsLogin` describes why a rejected token could not be replaced (`Credentials.needs_login`).
No token ever appears in a log line, event or exception message.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import httpx

from claudex.config.atomic_files import write_json_atomic, write_text_atomic
from claudex.config.model import Profile
from claudex.engine import clock
from claudex.engine.clock import WallClock
from claudex.engine.credentials.auth_headers import OAUTH_BETA, AuthHeaders, headers_for, oauth_beta
from claudex.engine.credentials.oauth import OAuthToken, RefreshFailed, TokenFileError
from claudex.engine.credentials.token_command import CommandFailed, run_shell_command
from claudex.engine.credentials.token_sources import CredentialError, TokenSource, credentials_path
from claudex.engine.events import Event
from claudex.engine.masking.secrets import mask_secret

__all__ = [
    "OAUTH_BETA",
    "AuthHeaders",
    "CredentialError",
    "Credentials",
    "NeedsLogin",
    "credentials_path",
    "mask_secret",
    "write_json_atomic",
    "write_text_atomic",
]

log = logging.getLogger("claudex.credentials")

NEEDS_LOGIN = "needs login"
# A token this close to its expiry is refreshed before use.
EXPIRY_MARGIN_SECONDS = 60.0
# After a refresh failed for a token, don't ask the token endpoint about it again for this long:
# every request would otherwise POST once more while the breaker is still counting.
RETRY_REFRESH_AFTER_SECONDS = 60.0
# `changed_outside` re-runs a token_command at most this often (a file is only stat'ed).
COMMAND_RECHECK_SECONDS = 60.0


class SharedTokens(Protocol):
    """Inside a fleet's refresh lock (engine/fleet/tokens.py's `TokenFlight`): the tokens another
    instance left for this refresh token, and a way to leave the ones refreshed here."""

    async def shared(self) -> dict[str, Any] | None: ...

    async def share(self, record: dict[str, Any]) -> None: ...


SingleFlight = Callable[[str], AbstractAsyncContextManager[SharedTokens | None]]


class NeedsLogin(Exception):
    """A rejected OAuth token could not be replaced; only the user can fix it (`claude login`)."""

    def __init__(self, profile: str, reason: str, remedy: str) -> None:
        super().__init__(
            f"{profile}: the OAuth token was rejected and could not be refreshed ({reason}); "
            + remedy
        )
        self.profile = profile
        self.reason = reason


@dataclass(frozen=True)
class _GaveUp:
    token: str
    at: float
    reason: str


class Credentials:
    def __init__(
        self,
        profile: Profile,
        *,
        env: Mapping[str, str] | None = None,
        http: httpx.AsyncClient | None = None,
        wall: WallClock = clock.wall,
        on_event: Callable[[Event], None] | None = None,
        run_command: Callable[[str], Awaitable[str]] | None = None,
        single_flight: SingleFlight | None = None,
    ) -> None:
        self._profile = profile
        # In a fleet (engine/fleet/): held around a refresh grant, so one instance spends a
        # refresh token (often single-use) while the others wait and then read what it wrote.
        self._single_flight = single_flight
        self._http = http
        # Through the profile's route (issue 36; set by the engine for a routed profile): the
        # client a token grant goes through at that moment (None: its route is out).
        self.http_for: Callable[[], httpx.AsyncClient | None] | None = None
        self._wall = wall
        self._on_event = on_event
        self._source = TokenSource(profile, env=env if env is not None else os.environ,
                                   wall=wall, run_command=run_command or run_shell_command)
        self._kind = self._source.kind
        self._beta = oauth_beta(profile)
        # One load or refresh at a time; concurrent 401s wait here and then see its result.
        self._lock = asyncio.Lock()
        self._token: OAuthToken | None = None
        # The headers made for the current token (`headers_now`): the same on every request.
        self._made: tuple[OAuthToken, AuthHeaders] | None = None
        self._generation = 0  # counts finished refresh_after_401 runs
        self._gave_up: _GaveUp | None = None
        self._status: str | None = None
        self._needs_login: NeedsLogin | None = None
        # `changed_outside`: the file's (inode, mtime, size) last looked at, the token it held
        # when nothing was loaded yet, and when a token_command was last re-run for it.
        self._file_stamp: tuple[int, int, int] | None = None
        self._outside_seen: str | None = None
        self._command_checked_at: float | None = None

    @property
    def profile(self) -> Profile:
        return self._profile

    @property
    def status(self) -> str | None:
        """None when fine; "needs login" after a rejected token could not be replaced."""
        return self._status

    @property
    def needs_login(self) -> NeedsLogin | None:
        """Why the status is "needs login", ready to show or raise; None otherwise."""
        return self._needs_login

    def mark_ok(self) -> None:
        """The caller saw the current token work."""
        self._status = None
        self._needs_login = None

    def headers_now(self) -> AuthHeaders | Literal[False] | None:
        """`auth_headers` without waiting, when no token is to be loaded or refreshed first
        (nearly every request: no coroutine, and the headers made once per token); False when
        one is (then await `auth_headers`)."""
        if self._kind == "passthrough":
            return None
        token = self._token
        if token is None or self._wants_early_refresh(token):
            return False
        made = self._made
        if made is None or made[0] is not token:
            made = self._made = (token, headers_for(self._profile, self._kind, token,
                                                    self._beta))
        return made[1]

    async def auth_headers(self) -> AuthHeaders | None:
        """Headers for the upstream request; raises `CredentialError` if the source is unusable."""
        if self._kind == "passthrough":
            return None
        token = self._token
        if token is None or self._wants_early_refresh(token):
            async with self._lock:
                token = self._token
                if token is None or self._wants_early_refresh(token):
                    token = await self._load()
                    self._token = token
        return headers_for(self._profile, self._kind, token, self._beta)

    async def refresh_after_401(self, failed: AuthHeaders) -> bool:
        """After a 401 with `failed`: True when a different token is now ready (retry once)."""
        if self._kind == "passthrough":
            return False
        entry_generation = self._generation
        async with self._lock:
            current = self._token
            if current is not None and current.access_token != failed.token:
                return True  # another caller already replaced it
            if self._generation != entry_generation:
                return False  # the refresh we waited for was for this token, and it failed
            self._token = None
            try:
                return await self._replace_rejected(failed.token)
            finally:
                self._generation += 1

    async def changed_outside(self) -> str | None:
        """Whether the source now holds a credential this engine did not put there nor hold:
        a fresh login rewrote the credentials file, or the token_command prints another token.
        The new one is taken into use, and the words say where it came from; None when nothing
        changed, the source cannot tell (a key, passthrough) or cannot be read now. The
        engine's own refresh writes the token it then holds, so it is never news here.
        Cheap when nothing changed: a `stat`, or a token_command re-run at most once a minute."""
        if self._kind == "file":
            return await self._file_changed()
        if self._kind == "command":
            return await self._command_changed()
        return None

    async def _file_changed(self) -> str | None:
        path = self._source.path
        if path is None:
            return None
        try:
            st = path.stat()
        except OSError:
            return None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp == self._file_stamp:
            return None
        self._file_stamp = stamp
        try:
            token, _doc = self._source.read_file_or_fail()
        except TokenFileError:
            return None  # half-written or removed: looked at again when it changes
        return self._take_if_new(token, f"new credentials in {path}")

    async def _command_changed(self) -> str | None:
        now = self._wall()
        if (self._command_checked_at is not None
                and now - self._command_checked_at < COMMAND_RECHECK_SECONDS):
            return None
        self._command_checked_at = now
        async with self._lock:
            try:
                token = await self._source.command_token()
            except CommandFailed:
                return None  # it fails again at the next request, which says why
            return self._take_if_new(token, "token_command gave another token")

    def _take_if_new(self, token: OAuthToken, words: str) -> str | None:
        held = self._token.access_token if self._token is not None else self._outside_seen
        self._outside_seen = token.access_token
        if held is None or token.access_token == held:
            return None
        self._token = token
        self._gave_up = None
        self.mark_ok()  # a fresh login also ends "needs login"
        return words

    # -- loading -------------------------------------------------------------------------------

    def _wants_early_refresh(self, token: OAuthToken) -> bool:
        return token.expires_within(
            self._wall(), EXPIRY_MARGIN_SECONDS
        ) and not self._recently_gave_up_on(token.access_token)

    def _recently_gave_up_on(self, token: str) -> bool:
        gave_up = self._gave_up
        return (
            gave_up is not None
            and gave_up.token == token
            and self._wall() - gave_up.at < RETRY_REFRESH_AFTER_SECONDS
        )

    async def _load(self) -> OAuthToken:
        if self._kind == "key":
            return self._source.read_key()
        if self._kind == "command":
            try:
                return await self._source.command_token()
            except CommandFailed as exc:
                raise self._source.error(exc.reason) from None
        token, doc = self._source.read_file()
        if not self._wants_early_refresh(token):
            return token
        try:
            if self._single_flight is not None and token.refresh_token:
                return await self._fleet_refresh(token)
            return await self._grant_and_save(token, doc)
        except TokenFileError as exc:
            raise self._source.error(str(exc)) from None
        except RefreshFailed as exc:
            self._gave_up = _GaveUp(token.access_token, self._wall(), exc.reason)
            log.warning(
                "%s: the token expires soon and could not be refreshed (%s); "
                "using it until it is rejected",
                self._profile.name,
                exc.reason,
            )
            return token

    # -- replacing a rejected token ------------------------------------------------------------

    async def _replace_rejected(self, failed: str) -> bool:
        if self._kind == "key":
            try:
                token = self._source.read_key()
            except CredentialError:
                return False
            self._token = token
            return token.access_token != failed
        if self._kind == "command":
            try:
                token = await self._source.command_token()
            except CommandFailed as exc:
                return self._fail(failed, exc.reason)
            self._token = token
            if token.access_token == failed:
                return self._fail(failed, "token_command printed the same token again")
            self._succeeded(f"{self._profile.name}: token_command gave a new token")
            return True
        try:
            token, doc = self._source.read_file_or_fail()
        except TokenFileError as exc:
            return self._fail(failed, str(exc))
        if token.access_token != failed:
            self._token = token
            self._succeeded(f"{self._profile.name}: picked up a new token from {self._source.path}")
            return True
        if self._recently_gave_up_on(failed) and self._gave_up is not None:
            # Asked the token endpoint about this very token a moment ago; don't hammer it.
            self._set_needs_login(self._gave_up.reason, announce=self._status is None)
            return False
        if not token.refresh_token:
            return self._fail(failed, "no refresh token")
        try:
            if self._single_flight is not None:
                self._token = await self._fleet_refresh(token)
            else:
                self._token = await self._grant_and_save(token, doc)
        except TokenFileError as exc:
            return self._fail(failed, str(exc))
        except RefreshFailed as exc:
            return self._fail(failed, exc.reason)
        return True

    async def _fleet_refresh(self, seen: OAuthToken) -> OAuthToken:
        """Replace `seen` under the fleet's lock: another instance may have refreshed while this
        one waited, and either written the new token to the file (this machine) or left it in
        Redis (another machine, with a fleet key); only if neither is a grant asked for.
        Raises `RefreshFailed` or `TokenFileError`."""
        assert self._single_flight is not None and seen.refresh_token
        # Named by a digest of the refresh token: the same login everywhere, never the token.
        digest = hashlib.sha256(seen.refresh_token.encode()).hexdigest()[:24]
        async with self._single_flight(f"refresh:{digest}") as flight:
            token, doc = self._source.read_file_or_fail()
            if token.access_token != seen.access_token:
                self._succeeded(f"{self._profile.name}: picked up the token another instance "
                                "refreshed")
                return token
            record = await flight.shared() if flight is not None else None
            if record is not None and record.get("access_token") != seen.access_token:
                # Only in a fleet: its module imports redis, which a lone instance never loads.
                from claudex.engine.fleet.tokens import grant_of

                new_token = self._source.save(grant_of(record, self._wall()), doc)
                self._succeeded(f"{self._profile.name}: took the token another instance "
                                "refreshed (shared through the fleet, encrypted)")
                return new_token
            return await self._grant_and_save(token, doc, flight)

    async def _grant_and_save(self, token: OAuthToken, doc: dict[str, Any],
                              flight: SharedTokens | None = None) -> OAuthToken:
        if not token.refresh_token:
            raise RefreshFailed("no refresh token")
        http = self._http
        if self.http_for is not None:  # the profile's route: never direct around its proxy
            http = self.http_for()
            if http is None:
                raise RefreshFailed("no route to the token endpoint: its proxy is out")
        grant = await self._source.request_grant(http, token.refresh_token)
        new_token = self._source.save(grant, doc)
        if flight is not None:
            await flight.share({
                "access_token": new_token.access_token,
                "refresh_token": new_token.refresh_token,
                "expires_at": new_token.expires_at,
                "id_token": grant.id_token,
            })
        self._succeeded(f"{self._profile.name}: token refreshed")
        return new_token

    def _succeeded(self, message: str) -> None:
        self._gave_up = None
        self.mark_ok()
        log.info("%s", message)
        self._publish(message, ok=True)

    def _fail(self, failed: str, reason: str) -> bool:
        self._gave_up = _GaveUp(failed, self._wall(), reason)
        self._set_needs_login(reason, announce=True)
        return False

    def _set_needs_login(self, reason: str, *, announce: bool) -> None:
        if self._kind == "command":
            remedy = "check the profile's token_command"
        else:
            remedy = f"run `{self._source.login_command}`"
        self._needs_login = NeedsLogin(self._profile.name, reason, remedy)
        self._status = NEEDS_LOGIN
        if announce:
            message = str(self._needs_login)
            log.warning("%s", message)
            self._publish(message, ok=False, reason=reason)

    def _publish(self, message: str, *, ok: bool, reason: str | None = None) -> None:
        if self._on_event is None:
            return
        data: dict[str, Any] = {"ok": ok}
        if reason is not None:
            data["reason"] = reason
        self._on_event(
            Event(kind="refresh", message=message, profile=self._profile.name, data=data)
        )

