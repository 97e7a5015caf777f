"""Where OAuth tokens come from: credential files and the refresh-token grant.

`credentials.py` decides when to use these; nothing here caches, locks, logs or publishes events.
(Token commands, the other source that is not a plain key, are in `token_command.py`.) Failures
are reported as small exceptions carrying a reason in plain words that never contains a token, for
`credentials.py` to turn into its public errors:

    TokenFileError   a credentials file is missing, unreadable, not JSON, or lacks a token
    RefreshFailed    the refresh-token grant did not produce a new token

Two file formats are understood: Claude Code's `~/.claude/.credentials.json`
(`claudeAiOauth.accessToken/refreshToken/expiresAt`, the expiry in epoch milliseconds) and the
Codex CLI's `~/.codex/auth.json` (`tokens.access_token/refresh_token/account_id` and the top-level
`last_refresh`). Codex CLI (codex-rs/login/src/auth/manager.rs) refreshes its token ahead of
use when the access token's JWT `exp` has passed or, failing that, when `last_refresh` is more
than 8 days old, and writes every refresh back with the new refresh token (they are single-use)
and `last_refresh` set to now; claudex follows the same rules so both can share one file.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

TOKEN_TIMEOUT_SECONDS = 30.0
COMMAND_TIMEOUT_SECONDS = 30.0


class TokenFileError(ValueError):
    """A credentials file cannot be used; the message names the file or key, never a token."""


class TokenFileMissing(TokenFileError):
    """The credentials file does not exist: the user has not logged in with that tool here."""


class RefreshFailed(Exception):
    """The refresh grant failed; `reason` says why in plain words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class OAuthToken:
    # repr=False: a stray debug print must not show a secret.
    access_token: str = field(repr=False)
    refresh_token: str | None = field(default=None, repr=False)
    expires_at: float | None = None  # epoch seconds; None when the source does not say
    # The ChatGPT account a Codex login belongs to (sent as `chatgpt-account-id`).
    account_id: str | None = None

    def expires_within(self, now: float, margin: float) -> bool:
        return self.expires_at is not None and self.expires_at - now <= margin


@dataclass(frozen=True)
class GrantResult:
    """What a token endpoint answered to a refresh grant."""

    access_token: str = field(repr=False)
    refresh_token: str | None = field(repr=False)
    expires_in: float | None
    id_token: str | None = field(default=None, repr=False)


class OAuthFormat:
    """One provider's credentials file: where it lives, how to read it, how to write a new token."""

    provider: str
    default_path: str
    token_url: str
    client_id: str
    login_command: str

    def read(self, doc: object) -> OAuthToken:
        raise NotImplementedError

    def updated(self, doc: object, grant: GrantResult, now: float) -> dict[str, Any]:
        """A copy of `doc` holding the new token, every other key kept as it was."""
        raise NotImplementedError


class ClaudeFormat(OAuthFormat):
    provider = "claude"
    default_path = "~/.claude/.credentials.json"
    token_url = "https://console.anthropic.com/v1/oauth/token"
    client_id = "9d1c250a-e61b-44d9-88ed-5944d1962f5e"
    login_command = "claude login"
    _section = "claudeAiOauth"

    def read(self, doc: object) -> OAuthToken:
        section = _section(doc, self._section)
        access = _required_string(section, "accessToken", self._section)
        expires_ms = section.get("expiresAt")
        expires_at = _epoch_seconds(expires_ms)
        return OAuthToken(access, _optional_string(section, "refreshToken"), expires_at)

    def updated(self, doc: object, grant: GrantResult, now: float) -> dict[str, Any]:
        new_doc = _copy_object(doc)
        section = dict(_section(new_doc, self._section))
        section["accessToken"] = grant.access_token
        if grant.refresh_token is not None:
            section["refreshToken"] = grant.refresh_token
        if grant.expires_in is not None:
            section["expiresAt"] = int(now * 1000 + grant.expires_in * 1000)
        new_doc[self._section] = section
        return new_doc


class CodexFormat(OAuthFormat):
    provider = "codex"
    default_path = "~/.codex/auth.json"
    token_url = "https://auth.openai.com/oauth/token"
    client_id = "app_EMoamEEZ73f0CkXaXp7hrann"
    login_command = "codex login"
    _section = "tokens"
    _expiry_keys = ("expires_at", "expiresAt")

    def read(self, doc: object) -> OAuthToken:
        section = _section(doc, self._section)
        access = _required_string(section, "access_token", self._section)
        expires_at = None
        for key in self._expiry_keys:
            if key in section:
                expires_at = _epoch_seconds(section[key])
                break
        if expires_at is None:
            expires_at = jwt_expiry(access)
        if expires_at is None and isinstance(doc, dict):
            # Codex CLI's own rule when the token says nothing: refresh after 8 days.
            last = _epoch_seconds(doc.get("last_refresh"))
            expires_at = None if last is None else last + CODEX_REFRESH_AFTER_SECONDS
        return OAuthToken(access, _optional_string(section, "refresh_token"), expires_at,
                          _optional_string(section, "account_id"))

    def updated(self, doc: object, grant: GrantResult, now: float) -> dict[str, Any]:
        new_doc = _copy_object(doc)
        section = dict(_section(new_doc, self._section))
        section["access_token"] = grant.access_token
        if grant.refresh_token is not None:
            section["refresh_token"] = grant.refresh_token
        if grant.id_token is not None and "id_token" in section:
            section["id_token"] = grant.id_token
        # Codex files normally carry no expiry; one is only kept current, never added.
        if grant.expires_in is not None:
            for key in self._expiry_keys:
                if key in section:
                    section[key] = _same_unit(section[key], now + grant.expires_in)
        new_doc[self._section] = section
        # As Codex CLI writes it (RFC 3339, UTC): its refresh-ahead rule reads this.
        new_doc["last_refresh"] = datetime.fromtimestamp(now, UTC).isoformat().replace(
            "+00:00", "Z")
        return new_doc


FORMATS: dict[str, OAuthFormat] = {"claude": ClaudeFormat(), "codex": CodexFormat()}

# Codex CLI's TOKEN_REFRESH_INTERVAL (8 days, codex-rs/login/src/auth/manager.rs).
CODEX_REFRESH_AFTER_SECONDS = 8 * 24 * 3600.0


def jwt_expiry(token: str) -> float | None:
    """The `exp` claim of a JWT access token (read, not verified: only to refresh in time),
    or None when the token is no JWT or has none."""
    parts = token.split(".")
    if len(parts) != 3 or not parts[1] or len(parts[1]) > 8192:
        return None
    padded = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(padded))
    except (ValueError, RecursionError):  # binascii.Error and bad JSON are ValueErrors
        return None
    return _positive_number(claims.get("exp")) if isinstance(claims, dict) else None


def read_token_file(fmt: OAuthFormat, path: Path) -> tuple[OAuthToken, dict[str, Any]]:
    """The token in `path` and the whole document (to write back with other keys kept)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TokenFileMissing(f"credentials file {path} does not exist") from None
    except OSError as exc:
        raise TokenFileError(f"cannot read {path} ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise TokenFileError(f"cannot read {path} (not UTF-8 text)") from None
    try:
        doc: object = json.loads(text)
    except json.JSONDecodeError as exc:
        # exc.msg is the parser's complaint only; the document itself is not quoted.
        raise TokenFileError(f"{path} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
    except (ValueError, RecursionError):
        # json.loads lets these escape its own error type: an integer literal past Python's
        # 4300-digit limit (ValueError) and arrays or objects nested past the recursion limit.
        raise TokenFileError(f"{path} is not valid JSON (too long a number or too deep)") from None
    try:
        token = fmt.read(doc)
        # Copying recurses deeper per level than parsing did, so it can still overflow here.
        return token, _copy_object(doc)
    except RecursionError:
        raise TokenFileError(f"{path}: the JSON is nested too deeply") from None
    except TokenFileError as exc:
        raise TokenFileError(f"{path}: {exc}") from None


async def request_refresh(
    http: httpx.AsyncClient | None,
    token_url: str,
    client_id: str,
    refresh_token: str,
    time_limit: float = TOKEN_TIMEOUT_SECONDS,
) -> GrantResult:
    """POST the refresh-token grant as JSON; raise `RefreshFailed` unless a new token comes back."""
    payload = {
        "grant_type": "refresh_token",
        "refresh_token": refresh_token,
        "client_id": client_id,
    }
    try:
        if http is None:
            async with httpx.AsyncClient(timeout=time_limit) as client:
                response = await client.post(token_url, json=payload, timeout=time_limit)
        else:
            response = await http.post(token_url, json=payload, timeout=time_limit)
    except httpx.TimeoutException as exc:
        raise RefreshFailed(f"the token endpoint did not answer within {time_limit:g} s") from exc
    except httpx.HTTPError as exc:
        raise RefreshFailed(f"could not reach the token endpoint ({type(exc).__name__})") from exc
    try:
        body: object = response.json()
    except (ValueError, RecursionError):  # RecursionError: nesting past json's recursion limit
        body = None
    if response.status_code != 200:
        code = _error_code(body)
        detail = f" ({code})" if code else ""
        raise RefreshFailed(f"the token endpoint answered {response.status_code}{detail}")
    if not isinstance(body, dict):
        raise RefreshFailed("the token endpoint's answer was not a JSON object")
    access = body.get("access_token")
    if not isinstance(access, str) or not access:
        raise RefreshFailed("the token endpoint answered without an access token")
    refresh = body.get("refresh_token")
    expires_in: object = body.get("expires_in")
    id_token = body.get("id_token")
    return GrantResult(
        access_token=access,
        refresh_token=refresh if isinstance(refresh, str) and refresh else None,
        expires_in=_lifetime(expires_in),
        id_token=id_token if isinstance(id_token, str) and id_token else None,
    )


def _section(doc: object, name: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise TokenFileError("the file is not a JSON object")
    section = doc.get(name)
    if not isinstance(section, dict):
        raise TokenFileError(f"it has no {name!r} object")
    return section


def _required_string(section: dict[str, Any], key: str, where: str) -> str:
    value = section.get(key)
    if not isinstance(value, str) or not value:
        raise TokenFileError(f"it has no {where}.{key}")
    return value


def _optional_string(section: dict[str, Any], key: str) -> str | None:
    value = section.get(key)
    return value if isinstance(value, str) and value else None


def _copy_object(doc: object) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise TokenFileError("the file is not a JSON object")
    return copy.deepcopy(doc)


def _positive_number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        # A JSON integer past float's range raised OverflowError here, and Infinity came back
        # as inf; neither is a usable expiry, so both count as none.
        try:
            number = float(value)
        except OverflowError:
            return None
        return number if math.isfinite(number) else None
    return None


# No token endpoint grants a token for longer; a bigger `expires_in` (1e306) also overflowed
# the expiry written back to the file (epoch milliseconds, or an ISO date before year 10000).
_MAX_EXPIRES_IN = 10 * 365 * 24 * 3600.0


def _lifetime(value: object) -> float | None:
    """A grant's `expires_in`, or None when it is missing, malformed or unbelievably long."""
    seconds = _positive_number(value)
    return seconds if seconds is not None and seconds <= _MAX_EXPIRES_IN else None


# Epoch values above this are milliseconds (in seconds it would be the year 5138).
_MILLISECONDS_FROM = 100_000_000_000


def _epoch_seconds(value: object) -> float | None:
    """An expiry as epoch seconds, from epoch seconds, epoch milliseconds or an ISO 8601 string."""
    number = _positive_number(value)
    if number is not None:
        return number / 1000 if number >= _MILLISECONDS_FROM else number
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            if parsed.tzinfo is not None:
                return parsed.timestamp()
    return None


def _same_unit(old: object, expires_at: float) -> object:
    """Write a new expiry in the same form the file already used for it."""
    number = _positive_number(old)
    if number is not None:
        return int(expires_at * 1000) if number >= _MILLISECONDS_FROM else int(expires_at)
    if isinstance(old, str):
        return datetime.fromtimestamp(expires_at, UTC).isoformat().replace("+00:00", "Z")
    return old


_SAFE_ERROR_CODE = re.compile(r"^[A-Za-z0-9_.\- ]{1,60}$")


def _error_code(body: object) -> str | None:
    """The OAuth error code (`invalid_grant`) if the body has a short plain one; never free text."""
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if isinstance(error, dict):
        error = error.get("type")
    if isinstance(error, str) and _SAFE_ERROR_CODE.match(error):
        return error
    return None
