"""Google access tokens for Vertex AI, minted by google-auth.

    GoogleTokenSource   credentials from a service-account or ADC JSON file (or, without one,
                        google-auth's default chain: GOOGLE_APPLICATION_CREDENTIALS, gcloud's
                        ADC file, the metadata server), loaded and refreshed in a thread
                        (google-auth blocks), the token cached until `refresh_margin_s` before
                        its expiry, one mint shared by every caller waiting, and
                        `invalidate(token)` after a 401 so the next call mints again

google-auth's HTTP (the token endpoint, the metadata server) goes through httpx here, the
control plane's client, so `requests` is not needed: google-auth is the only dependency
(`claudex[vertex]`), imported inside the functions that use it.

A service account's key is used as google-auth uses it: a JWT assertion signed RS256 with the
key (`iss` the account's email, `aud` https://oauth2.googleapis.com/token, `scope`, `iat`, `exp`
one hour on), posted as `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` to the file's
`token_uri`, which answers `{"access_token", "expires_in", "token_type"}` (google-auth
`oauth2/service_account.py`, `oauth2/_client.py`; RFC 7523). anthropic-sdk-python's
`lib/vertex` asks for the same scope, cloud-platform. Nothing here logs or repeats a token or a
key: errors name the credentials file and the token endpoint's own words.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import json
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx

from claudex.engine.credentials.single_flight import SingleFlight
from claudex.engine.masking.secrets import mask_secret

__all__ = [
    "CLOUD_PLATFORM_SCOPE",
    "REFRESH_MARGIN_S",
    "GoogleToken",
    "GoogleTokenError",
    "GoogleTokenSource",
]

CLOUD_PLATFORM_SCOPE: Final = "https://www.googleapis.com/auth/cloud-platform"
REFRESH_MARGIN_S: Final = 300.0
"""A token is minted again this long before it expires (Google's last five minutes)."""
_HTTP_TIMEOUT_S: Final = 30.0
_INSTALL_HINT: Final = "pip install 'claudex[vertex]'"


class GoogleTokenError(Exception):
    """No token could be minted; the message says from what and why, never a secret."""


@dataclass(frozen=True, slots=True)
class GoogleToken:
    value: str = field(repr=False)
    expires_at: float | None
    """Seconds since the epoch; None when google-auth gave no expiry."""

    def __repr__(self) -> str:
        return f"GoogleToken(value={mask_secret(self.value)!r}, expires_at={self.expires_at!r})"


def _google_auth() -> Any:
    try:
        import google.auth
        import google.auth.exceptions
        import google.auth.transport
    except ImportError:
        raise GoogleTokenError(f"Vertex AI credentials need google-auth: {_INSTALL_HINT}") \
            from None
    return google.auth


@functools.cache
def _transport_class() -> Any:
    """google-auth's transport interface over an httpx client (made once, on first use)."""
    import google.auth.exceptions
    import google.auth.transport

    class HttpxResponse(google.auth.transport.Response):
        def __init__(self, response: httpx.Response) -> None:
            self._response = response

        @property
        def status(self) -> int:
            return self._response.status_code

        @property
        def headers(self) -> dict[str, str]:
            return dict(self._response.headers)

        @property
        def data(self) -> bytes:
            return self._response.content

    class HttpxRequest(google.auth.transport.Request):
        def __init__(self, client: httpx.Client) -> None:
            self._client = client

        def __call__(self, url: str, method: str = "GET", body: bytes | None = None,
                     headers: dict[str, str] | None = None, timeout: float | None = None,
                     **kwargs: Any) -> HttpxResponse:
            try:
                response = self._client.request(
                    method, url, content=body, headers=headers,
                    timeout=timeout if timeout is not None else _HTTP_TIMEOUT_S)
            except httpx.HTTPError as error:
                raise google.auth.exceptions.TransportError(  # type: ignore[no-untyped-call]
                    f"{type(error).__name__}: {error}") from error
            return HttpxResponse(response)

    return HttpxRequest


def _epoch(expiry: Any) -> float | None:
    if not isinstance(expiry, datetime.datetime):
        return None
    if expiry.tzinfo is None:  # google-auth's expiry is naive UTC
        expiry = expiry.replace(tzinfo=datetime.UTC)
    return float(expiry.timestamp())


def _refusal(error: BaseException) -> str:
    """google-auth's RefreshError carries ("invalid_grant: Invalid JWT Signature.", body):
    the sentence, not the body."""
    first = error.args[0] if error.args else ""
    return first if isinstance(first, str) and first else type(error).__name__


class GoogleTokenSource:
    """Access tokens for one set of Google credentials.

    `credentials_file`: a service-account or ADC JSON (None: google-auth's default chain).
    `clock`: seconds since the epoch (tests inject one). `load` replaces the loading of the
    credentials (it returns google-auth credentials and a project id, as
    `google.auth.default` does); `http` makes the httpx client google-auth's requests go
    through (phase 2: the profile's network route)."""

    def __init__(self, *, credentials_file: str | os.PathLike[str] | None = None,
                 scopes: Sequence[str] = (CLOUD_PLATFORM_SCOPE,),
                 clock: Callable[[], float] = time.time,
                 refresh_margin_s: float = REFRESH_MARGIN_S,
                 load: Callable[[], tuple[Any, str | None]] | None = None,
                 http: Callable[[], httpx.Client] | None = None) -> None:
        self.credentials_file = Path(credentials_file) if credentials_file else None
        self.scopes = tuple(scopes)
        self._clock = clock
        self._margin = refresh_margin_s
        self._load = load
        self._http = http or (lambda: httpx.Client(timeout=_HTTP_TIMEOUT_S))
        self._credentials: Any = None
        self._token: GoogleToken | None = None
        self._minting: SingleFlight[GoogleToken] = SingleFlight()
        self.project_id: str | None = None
        """The project the credentials name (a service account's `project_id`, ADC's quota
        project), once loaded; None before or when they name none."""
        self.mints = 0
        """Tokens minted so far (status, tests)."""

    def use_http(self, http: Callable[[], httpx.Client]) -> None:
        """Mint tokens through `http`'s clients from now on (issue 36: the profile's route)."""
        self._http = http

    @property
    def where(self) -> str:
        if self.credentials_file is not None:
            return f"credentials file {str(self.credentials_file)!r}"
        return "Google's application default credentials"

    def cached(self) -> GoogleToken | None:
        """The token a request may use now without minting, if any."""
        token = self._token
        if token is None:
            return None
        if token.expires_at is not None and self._clock() >= token.expires_at - self._margin:
            return None
        return token

    async def token(self) -> str:
        """A token to send as `Authorization: Bearer`: the cached one, or a new one."""
        cached = self.cached()
        if cached is not None:
            return cached.value
        minted = await self._minting.run(lambda: asyncio.to_thread(self._mint_blocking))
        return minted.value

    def invalidate(self, token: str | None = None) -> None:
        """The service refused `token` (a 401): the next `token()` mints again. A token that is
        no longer the cached one (another request already minted anew) changes nothing."""
        current = self._token
        if current is not None and (token is None or token == current.value):
            self._token = None

    def _mint_blocking(self) -> GoogleToken:
        auth = _google_auth()
        try:
            if self._credentials is None:
                self._credentials, project = self._load_credentials(auth)
                self.project_id = project or getattr(self._credentials, "project_id", None)
            with self._http() as client:
                self._credentials.refresh(_transport_class()(client))
        except GoogleTokenError:
            raise
        except auth.exceptions.DefaultCredentialsError as error:
            raise GoogleTokenError(f"no usable Google credentials in {self.where}: "
                                   f"{_refusal(error)}") from None
        except auth.exceptions.RefreshError as error:
            raise GoogleTokenError(f"the token endpoint refused {self.where}: "
                                   f"{_refusal(error)}") from None
        except auth.exceptions.TransportError as error:
            raise GoogleTokenError(f"the token endpoint could not be reached for {self.where}: "
                                   f"{_refusal(error)}") from None
        except OSError as error:
            raise GoogleTokenError(f"{self.where} could not be read: "
                                   f"{error.strerror or type(error).__name__}") from None
        except ValueError as error:  # not JSON, or not a credentials JSON google-auth knows
            raise GoogleTokenError(f"{self.where} is not a Google credentials file: "
                                   f"{error}") from None
        value = getattr(self._credentials, "token", None)
        if not isinstance(value, str) or not value:
            raise GoogleTokenError(f"google-auth minted no token from {self.where}")
        token = GoogleToken(value, _epoch(getattr(self._credentials, "expiry", None)))
        self._token = token
        self.mints += 1
        return token

    def _load_credentials(self, auth: Any) -> tuple[Any, str | None]:
        if self._load is not None:
            return self._load()
        if self.credentials_file is not None:
            credentials, project = self._from_file(auth)
        else:
            credentials, project = auth.default(scopes=list(self.scopes))
        return credentials, project

    def _from_file(self, auth: Any) -> tuple[Any, str | None]:
        """A service-account key or gcloud's ADC file (authorized_user) read directly; other
        kinds (external_account, impersonated) through google-auth's general loader, whose
        deprecation warns of files from untrusted sources: this one is the user's own."""
        assert self.credentials_file is not None
        info = json.loads(self.credentials_file.read_text(encoding="utf-8"))
        kind = info.get("type") if isinstance(info, dict) else None
        scopes = list(self.scopes)
        if kind == "service_account":
            from google.oauth2 import service_account

            account = service_account.Credentials.from_service_account_info(  # type: ignore[no-untyped-call]
                info, scopes=scopes)
            return account, info.get("project_id")
        if kind == "authorized_user":
            from google.oauth2 import credentials as user_credentials

            user = user_credentials.Credentials.from_authorized_user_info(  # type: ignore[no-untyped-call]
                info, scopes=scopes)
            return user, info.get("quota_project_id")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            loaded: tuple[Any, str | None] = auth.load_credentials_from_file(
                str(self.credentials_file), scopes=scopes)
        return loaded
