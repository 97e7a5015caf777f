"""The upstream credentials of a cloud profile that is neither a key nor an OAuth login
(`engine/credentials/upstream.py`'s interface, as `Credentials` has it):

    SignedCredentials   a SigV4-signed profile (Bedrock on the AWS chain, auth_type
                        "aws-sigv4"): no header of their own — the wire's signer (`AwsSigner`)
                        signs each request over its exact bytes; keys that cannot be had are a
                        `CredentialError` then (the profile shows "misconfigured" and why)
    GoogleCredentials   Vertex with google-auth: `Authorization: Bearer` with the access token
                        the `GoogleTokenSource` minted (off the loop, cached); a 401 invalidates
                        it and mints another, once (the OAuth refresh-then-retry path of DESIGN.md);
                        a mint that fails then says "needs login" with what to do

Every key, session token and access token is registered with the secret scrubber as it is
first used, so no error body, log line, event or status quoting one shows it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Literal

from claudex.config.model import Profile
from claudex.engine.credentials.auth_headers import AuthHeaders
from claudex.engine.credentials.aws_sigv4 import (
    AwsCredentials,
    AwsCredentialsError,
    AwsCredentialSource,
    sign_request,
)
from claudex.engine.credentials.google_tokens import GoogleTokenError, GoogleTokenSource
from claudex.engine.credentials.token_sources import CredentialError
from claudex.engine.events import Event
from claudex.engine.masking.secrets import SCRUBBER

__all__ = ["AwsSigner", "GoogleCredentials", "SignedCredentials"]

log = logging.getLogger("claudex.credentials")
NEEDS_LOGIN = "needs login"
_UNSIGNED = AuthHeaders({}, "")


class AwsSigner:
    """SigV4 for one profile: keys from `source` (the AWS chain, resolved and refreshed off the
    loop), signed for `service` in `region` over the request exactly as sent."""

    def __init__(self, profile: str, source: AwsCredentialSource, *, service: str,
                 region: str) -> None:
        self.profile = profile
        self.source = source
        self.service = service
        self.region = region
        self._noted: AwsCredentials | None = None

    async def sign(self, method: str, url: str, headers: Mapping[str, str],
                   body: bytes) -> dict[str, str]:
        try:
            keys = await self.source.get()
            if keys != self._noted:  # a new set: its secrets are masked from now on
                SCRUBBER.add((keys.secret_access_key, keys.session_token))
                self._noted = keys
            return sign_request(keys, service=self.service, region=self.region, method=method,
                                url=url, headers=headers, body=body)
        except AwsCredentialsError as error:
            raise CredentialError(str(error), profile=self.profile) from None

    @property
    def where(self) -> str:
        return self.source.where


class SignedCredentials:
    """A profile whose every request the wire signs: nothing to add before that."""

    def __init__(self, profile: Profile) -> None:
        self._profile = profile

    @property
    def profile(self) -> Profile:
        return self._profile

    @property
    def status(self) -> str | None:
        return None

    def mark_ok(self) -> None:
        pass

    def headers_now(self) -> AuthHeaders:
        return _UNSIGNED

    async def auth_headers(self) -> AuthHeaders:
        return _UNSIGNED

    async def refresh_after_401(self, failed: AuthHeaders) -> bool:
        return False  # AWS refuses with 403: auth_error, never a 401 to refresh

    async def changed_outside(self) -> str | None:
        return None


class GoogleCredentials:
    """Vertex's access tokens, minted by google-auth."""

    def __init__(self, profile: Profile, source: GoogleTokenSource, *,
                 on_event: Callable[[Event], None] | None = None) -> None:
        self._profile = profile
        self.source = source
        self._on_event = on_event
        self._made: AuthHeaders | None = None
        self._status: str | None = None

    @property
    def profile(self) -> Profile:
        return self._profile

    @property
    def status(self) -> str | None:
        return self._status

    def mark_ok(self) -> None:
        self._status = None

    def _headers(self, token: str) -> AuthHeaders:
        made = self._made
        if made is None or made.token != token:
            SCRUBBER.note(token)
            made = self._made = AuthHeaders({"authorization": f"Bearer {token}"}, token)
        return made

    def headers_now(self) -> AuthHeaders | Literal[False]:
        cached = self.source.cached()
        return False if cached is None else self._headers(cached.value)

    async def auth_headers(self) -> AuthHeaders:
        try:
            token = await self.source.token()
        except GoogleTokenError as error:
            raise CredentialError(str(error), profile=self._profile.name) from None
        return self._headers(token)

    async def refresh_after_401(self, failed: AuthHeaders) -> bool:
        """Vertex refused `failed`: mint another (unless another request already did)."""
        self.source.invalidate(failed.token)
        try:
            token = await self.source.token()
        except GoogleTokenError as error:
            self._give_up(str(error))
            return False
        if token == failed.token:
            self._give_up("Google's token endpoint gave the refused token again")
            return False
        self._headers(token)
        self._status = None
        words = f"{self._profile.name}: Vertex refused the access token; minted a new one"
        log.info("%s", words)
        self._publish(words, ok=True)
        return True

    def _give_up(self, reason: str) -> None:
        words = (f"{self._profile.name}: Vertex refused the access token and no new one could "
                 f"be minted ({reason}); check {self.source.where} (for gcloud's: `gcloud auth "
                 "application-default login`)")
        if self._status != NEEDS_LOGIN:
            log.warning("%s", words)
            self._publish(words, ok=False, reason=reason)
        self._status = NEEDS_LOGIN

    def _publish(self, message: str, *, ok: bool, reason: str | None = None) -> None:
        if self._on_event is None:
            return
        data: dict[str, object] = {"ok": ok}
        if reason is not None:
            data["reason"] = reason
        self._on_event(Event("refresh", message, self._profile.name, data))

    async def changed_outside(self) -> str | None:
        return None
