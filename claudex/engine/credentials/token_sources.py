"""Where one profile's upstream token is read from, and where a refreshed one is written back.

Sources, first match (DESIGN.md "OAuth refresh-then-retry"):
  token_command                      run through the shell, stdout is the token; re-run on 401
  auth_type "oauth" + oauth_provider a credentials file (formats in `oauth.py`); its refresh token
                                     is granted a new one, written back to the file atomically
  otherwise                          an API key: `api_key`, or the `api_key_env` variable

Kept apart from `credentials.py`, which decides when to read (the cache, the lock, refresh on a
401 or in a fleet) and tells about it (status, events): a `TokenSource` only reads and writes, one
call at a time, and remembers no token. A source that cannot be read at all raises
`CredentialError`; `CommandFailed`, `TokenFileError` and `RefreshFailed` (oauth.py,
token_command.py) are left for `credentials.py` to judge. No token ever appears in a message.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import httpx

from claudex.config.atomic_files import write_json_atomic
from claudex.config.model import Profile
from claudex.engine.clock import WallClock
from claudex.engine.credentials.oauth import (
    FORMATS,
    GrantResult,
    OAuthFormat,
    OAuthToken,
    TokenFileError,
    TokenFileMissing,
    read_token_file,
    request_refresh,
)
from claudex.engine.credentials.token_command import CommandFailed, token_from_output

# The same logger as credentials.py: to whoever reads the log, this is one subsystem.
log = logging.getLogger("claudex.credentials")

SourceKind = Literal["passthrough", "command", "file", "key"]


class CredentialError(Exception):
    """A credential source is unreadable or malformed; the message names the file, not the token."""

    def __init__(self, reason: str, *, profile: str | None = None) -> None:
        super().__init__(f"{profile}: {reason}" if profile else reason)
        self.reason = reason
        self.profile = profile


def credentials_path(profile: Profile) -> Path | None:
    """The credentials file an oauth profile reads (None when it reads none), `~` expanded."""
    fmt = FORMATS.get(profile.oauth_provider or "")
    if profile.auth_type != "oauth" or profile.token_command or fmt is None:
        return None
    return Path(profile.credentials_file or fmt.default_path).expanduser()


def source_kind(profile: Profile) -> SourceKind:
    if profile.auth_type == "passthrough":
        return "passthrough"
    if profile.token_command:
        return "command"
    if profile.auth_type == "oauth":
        return "file"
    return "key"


class TokenSource:
    """One profile's token source: its key, its token command, or its credentials file."""

    def __init__(
        self,
        profile: Profile,
        *,
        env: Mapping[str, str],
        wall: WallClock,
        run_command: Callable[[str], Awaitable[str]],
    ) -> None:
        self.profile = profile
        self.kind = source_kind(profile)
        self.format: OAuthFormat | None = FORMATS.get(profile.oauth_provider or "")
        self.path = credentials_path(profile)
        self._env = env
        self._wall = wall
        self._run_command = run_command

    @property
    def login_command(self) -> str:
        return self.format.login_command if self.format else "claude login"

    def error(self, reason: str) -> CredentialError:
        return CredentialError(reason, profile=self.profile.name)

    def read_key(self) -> OAuthToken:
        if self.profile.api_key:
            return OAuthToken(self.profile.api_key)
        variable = self.profile.api_key_env
        if not variable:
            if self.profile.api_key == "":
                return OAuthToken("")  # no key on purpose: no credential header is sent
            raise self.error("no api_key or api_key_env is set")
        value = self._env.get(variable, "").strip()
        if not value:
            raise self.error(f"environment variable {variable} is not set")
        return OAuthToken(value)

    async def command_token(self) -> OAuthToken:
        """Run the token_command; raises `CommandFailed` (its reason never holds the output)."""
        try:
            output = await self._run_command(self.profile.token_command or "")
        except CommandFailed as exc:
            raise CommandFailed(f"token_command {exc.reason}") from None
        except Exception as exc:  # an injected runner's own error; its text may hold output
            raise CommandFailed(f"token_command failed ({type(exc).__name__})") from None
        token = token_from_output(output)
        if token is None:
            raise CommandFailed("token_command printed nothing")
        return OAuthToken(token)

    def read_file(self) -> tuple[OAuthToken, dict[str, Any]]:
        """The file's token and document; raises `CredentialError` saying how to log in."""
        try:
            return self.read_file_or_fail()
        except TokenFileMissing as exc:
            raise self.error(f"{exc}; run `{self.login_command}`") from None
        except TokenFileError as exc:
            raise self.error(str(exc)) from None

    def read_file_or_fail(self) -> tuple[OAuthToken, dict[str, Any]]:
        if self.format is None or self.path is None:
            raise TokenFileError(
                'auth_type = "oauth" needs oauth_provider = "claude" or "codex", or a token_command'
            )
        return read_token_file(self.format, self.path)

    async def request_grant(self, http: httpx.AsyncClient | None,
                            refresh_token: str) -> GrantResult:
        """Ask the profile's token endpoint for a new token; raises `RefreshFailed`."""
        fmt = self.format
        assert fmt is not None  # only file sources get here
        return await request_refresh(
            http,
            self.profile.token_url or fmt.token_url,
            self.profile.client_id or fmt.client_id,
            refresh_token,
        )

    def save(self, grant: GrantResult, doc: dict[str, Any]) -> OAuthToken:
        """Write `grant` into the credentials file (other keys kept); the token it now holds."""
        fmt, path = self.format, self.path
        assert fmt is not None and path is not None  # only file sources get here
        new_doc = fmt.updated(doc, grant, self._wall())
        new_token = fmt.read(new_doc)
        if grant.expires_in is None:
            # The file's old expiry no longer applies; unknown is better than "already expired".
            new_token = replace(new_token, expires_at=None)
        try:
            write_json_atomic(path, new_doc)
        except (OSError, ValueError) as exc:
            # ValueError: text UTF-8 cannot encode, such as a lone surrogate that the file held
            # as a `\ud800` escape (UnicodeEncodeError); the old file is left as it was.
            log.warning(
                "%s: could not write %s (%s); the new token is kept in memory only",
                self.profile.name,
                path,
                getattr(exc, "strerror", None) or type(exc).__name__,
            )
        return new_token
