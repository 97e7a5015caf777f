"""AWS request signing for Bedrock (and AWS's other Anthropic-wire endpoints): SigV4 with
botocore, or a Bedrock API key as a Bearer token.

    AwsCredentialSource   where the keys come from: given keys, or botocore's standard chain
                          (environment keys, AWS_PROFILE or a named profile, SSO, web
                          identity, container and instance roles), resolved off the event
                          loop (the chain does file and network I/O); refreshable credentials
                          are refreshed off the loop, once for all the callers waiting, when
                          botocore's `refresh_needed()` says so
    SigV4Signer           (method, url, headers, body) -> the headers that sign it, with
                          botocore's `SigV4Auth` for a service name ("bedrock",
                          "bedrock-mantle") and a region
    bedrock_api_key       AWS_BEARER_TOKEN_BEDROCK, as the SDKs read it; `bearer_headers`
                          sends a key as `Authorization: Bearer` — no botocore needed

botocore is imported only here, inside the functions that need it (`claudex[bedrock]`), so a
process without a SigV4 profile never loads it. Secrets never reach a message or a repr:
`AwsCredentials` masks its repr, errors name the credential source, never a key.

Sources: anthropic-sdk-python `lib/bedrock/_auth.py` (SigV4Auth over the request's method,
URL, headers less `connection`, and body) and `_client.py` (AWS_BEARER_TOKEN_BEDROCK as
`Authorization: Bearer`); botocore `auth.py` (`SigV4Auth.add_auth`), `credentials.py`
(`RefreshableCredentials.refresh_needed`, `get_frozen_credentials`), `utils.py`
(`AWS_BEARER_TOKEN_{SIGNING_NAME}`); AWS's "Use an Amazon Bedrock API key".
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from claudex.engine.credentials.single_flight import SingleFlight
from claudex.engine.masking.secrets import mask_secret

__all__ = [
    "BEDROCK_API_KEY_ENV",
    "AwsCredentialSource",
    "AwsCredentials",
    "AwsCredentialsError",
    "SigV4Signer",
    "bearer_headers",
    "bedrock_api_key",
    "sign_request",
]

BEDROCK_API_KEY_ENV: Final = "AWS_BEARER_TOKEN_BEDROCK"
_UNSIGNED: Final = frozenset({"connection"})  # a proxy may drop it: the SDK leaves it unsigned
_INSTALL_HINT: Final = "pip install 'claudex[bedrock]'"


class AwsCredentialsError(Exception):
    """No AWS credentials could be had, or signing failed; the message names the source
    (profile, chain step) and never a key."""


@dataclass(frozen=True, slots=True)
class AwsCredentials:
    """One set of keys, as of now (a refreshed set is a new object)."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        token = ", session_token=…" if self.session_token else ""
        return f"AwsCredentials(access_key_id={mask_secret(self.access_key_id)!r}{token})"


def bedrock_api_key(environ: Mapping[str, str] | None = None) -> str | None:
    """The Bedrock API key the SDKs and boto3 read from the environment, if set."""
    value = (os.environ if environ is None else environ).get(BEDROCK_API_KEY_ENV, "").strip()
    return value or None


def bearer_headers(api_key: str) -> dict[str, str]:
    """A Bedrock API key's request header (AWS's "Use an Amazon Bedrock API key")."""
    return {"Authorization": f"Bearer {api_key}"}


def _botocore() -> Any:
    try:
        import botocore.session  # type: ignore[import-untyped]
    except ImportError:
        raise AwsCredentialsError(
            f"signing Bedrock requests with AWS credentials needs botocore: {_INSTALL_HINT}"
        ) from None
    return botocore.session


def _frozen(credentials: Any) -> AwsCredentials:
    frozen = credentials.get_frozen_credentials()
    return AwsCredentials(frozen.access_key, frozen.secret_key, frozen.token or None)


def _needs_refresh(credentials: Any) -> bool:
    refresh_needed = getattr(credentials, "refresh_needed", None)
    return bool(refresh_needed()) if callable(refresh_needed) else False


class AwsCredentialSource:
    """Keys for SigV4. `static` keys are used as given; otherwise botocore's chain for
    `profile` (None: AWS_PROFILE, then the default). `resolve` replaces the chain (tests: a
    `RefreshableCredentials` with an injected clock); it runs off the event loop like it."""

    def __init__(self, *, profile: str | None = None, static: AwsCredentials | None = None,
                 resolve: Callable[[], Any] | None = None) -> None:
        self.profile = profile
        self._static = static
        self._resolve = resolve
        self._credentials: Any = None
        self._loading: SingleFlight[AwsCredentials] = SingleFlight()

    @property
    def where(self) -> str:
        """Where the keys come from, for status and errors (never a key)."""
        if self._static is not None:
            return "the profile's keys"
        method = getattr(self._credentials, "method", None)
        named = f"AWS profile {self.profile!r}" if self.profile else "the AWS credential chain"
        return f"{named} ({method})" if isinstance(method, str) and method else named

    async def get(self) -> AwsCredentials:
        """Keys to sign with now. The first call resolves the chain in a thread; later calls
        are a dictionary read unless botocore says the keys must be refreshed, which one
        thread does for every caller waiting."""
        if self._static is not None:
            return self._static
        credentials = self._credentials
        if credentials is not None and not _needs_refresh(credentials):
            # Not in botocore's refresh windows: get_frozen_credentials does no I/O.
            return _frozen(credentials)
        return await self._loading.run(lambda: asyncio.to_thread(self._load_blocking))

    def _load_blocking(self) -> AwsCredentials:
        try:
            if self._credentials is None:
                self._credentials = self._chain()
            return _frozen(self._credentials)
        except AwsCredentialsError:
            raise
        except Exception as error:  # botocore's many credential errors: say where, not what key
            raise AwsCredentialsError(
                f"AWS credentials from {self.where} could not be had: "
                f"{type(error).__name__}: {error}") from None

    def _chain(self) -> Any:
        if self._resolve is not None:
            credentials = self._resolve()
        else:
            session = _botocore().Session(profile=self.profile)
            credentials = session.get_credentials()
        if credentials is None:
            raise AwsCredentialsError(
                f"no AWS credentials found in {self.where}: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, AWS_PROFILE (or the profile's aws_profile), log in "
                "with `aws sso login`, or run where an instance role is available")
        return credentials


def sign_request(credentials: AwsCredentials, *, service: str, region: str, method: str,
                 url: str, headers: Mapping[str, str], body: bytes) -> dict[str, str]:
    """The headers SigV4 adds to this request (Authorization, X-Amz-Date, and
    X-Amz-Security-Token for temporary keys). `headers` must be the ones sent (each is signed
    but `connection`; `host` is taken from the URL when absent). Blocking-free: only hashing."""
    try:
        from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
        from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
        from botocore.credentials import (  # type: ignore[import-untyped]
            ReadOnlyCredentials,
        )
    except ImportError:
        raise AwsCredentialsError(
            f"signing Bedrock requests with AWS credentials needs botocore: {_INSTALL_HINT}"
        ) from None
    kept = {name: value for name, value in headers.items() if name.lower() not in _UNSIGNED}
    request = AWSRequest(method=method.upper(), url=url, headers=kept, data=body)
    keys = ReadOnlyCredentials(credentials.access_key_id, credentials.secret_access_key,
                               credentials.session_token)
    SigV4Auth(keys, service, region).add_auth(request)
    added = ("Authorization", "X-Amz-Date", "X-Amz-Security-Token")
    return {name: request.headers[name] for name in added if request.headers.get(name)}


class SigV4Signer:
    """Signs requests for one service and region with keys from `credentials`."""

    def __init__(self, credentials: AwsCredentialSource, *, region: str,
                 service: str = "bedrock") -> None:
        self.credentials = credentials
        self.region = region
        self.service = service

    async def sign(self, method: str, url: str, headers: Mapping[str, str],
                   body: bytes) -> dict[str, str]:
        """The headers to add to the request (see `sign_request`)."""
        keys = await self.credentials.get()
        return sign_request(keys, service=self.service, region=self.region, method=method,
                            url=url, headers=headers, body=body)
