"""A fake Google OAuth 2.0 token endpoint for service accounts, on 127.0.0.1.

`POST /token` with `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` and `assertion=<a
JWT>` (RFC 7523, as google-auth's `oauth2/_client.jwt_grant` posts it). The assertion is checked
as Google checks it: signed RS256 with the key of a service account the fake knows (the test
makes the key pair and registers the public half), `iss` that account's email, `aud`
https://oauth2.googleapis.com/token (what google-auth always puts there, whatever the file's
`token_uri`), a `scope`, and `iat`/`exp` at most an hour apart with `exp` not past (300 s of
clock skew allowed). It answers `{"access_token", "expires_in", "token_type": "Bearer"}`; a
refusal is `400 {"error", "error_description"}` in Google's words:

    bad signature, or not RS256     invalid_grant "Invalid JWT Signature."
    unknown account                 invalid_grant "Invalid grant: account not found"
    wrong audience                  invalid_grant "Invalid JWT: Failed audience check."
    no scope                        invalid_scope "Invalid OAuth scope or ID token audience
                                    provided."
    times                           invalid_grant "Invalid JWT: Token must be a short-lived
                                    token (60 minutes) and in a reasonable timeframe. Check your
                                    iat and exp values in the JWT claim."
    another grant_type              unsupported_grant_type "Invalid grant_type: <it>"

The fake Vertex (`fake_vertex`) asks `valid(token)` whether a token it is shown was minted here
and is still alive (by `clock`); `revoke` and `expire_all` make tokens stop working early.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qs

from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from claudex.demo.cloud_server import FakeCloudServer, IncomingRequest

__all__ = ["GOOGLE_TOKEN_AUDIENCE", "JWT_BEARER_GRANT", "FakeGoogleTokenServer", "Minted"]

JWT_BEARER_GRANT: Final = "urn:ietf:params:oauth:grant-type:jwt-bearer"
GOOGLE_TOKEN_AUDIENCE: Final = "https://oauth2.googleapis.com/token"
_AUDIENCES: Final = frozenset({GOOGLE_TOKEN_AUDIENCE, "https://accounts.google.com/o/oauth2/token"})
_SKEW_S: Final = 300
_MAX_LIFETIME_S: Final = 3600
_TIMES: Final = ("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable "
                 "timeframe. Check your iat and exp values in the JWT claim.")


@dataclass(frozen=True, slots=True)
class Minted:
    account: str
    scope: str
    expires_at: float


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


class _Refused(Exception):
    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error
        self.description = description


class FakeGoogleTokenServer(FakeCloudServer):
    def __init__(self, *, clock: Callable[[], float] = time.time, lifetime_s: int = 3599,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        self.clock = clock
        self.lifetime_s = lifetime_s
        self.delay_s = 0.0
        """Wait this long before answering (concurrent mints overlap in tests)."""
        self.accounts: dict[str, rsa.RSAPublicKey] = {}
        self.minted: dict[str, Minted] = {}

    @property
    def token_url(self) -> str:
        return self.root_url + "/token"

    def add_service_account(self, email: str, public_key: rsa.RSAPublicKey | bytes) -> None:
        """Accept assertions from `email` signed with the private half of `public_key` (an
        RSA key, or its PEM)."""
        if isinstance(public_key, bytes):
            loaded = serialization.load_pem_public_key(public_key)
            if not isinstance(loaded, rsa.RSAPublicKey):
                raise ValueError("a service account's key is RSA")
            public_key = loaded
        self.accounts[email] = public_key

    def valid(self, token: str) -> bool:
        minted = self.minted.get(token)
        return minted is not None and self.clock() < minted.expires_at

    def revoke(self, token: str) -> None:
        self.minted.pop(token, None)

    def expire_all(self) -> None:
        self.minted.clear()

    async def answer(self, request: web.BaseRequest,
                     incoming: IncomingRequest) -> web.StreamResponse:
        if incoming.raw_path != "/token" or incoming.method != "POST":
            return web.json_response({"error": "invalid_request",
                                      "error_description": "Not found"}, status=404)
        if self.delay_s > 0:
            await asyncio.sleep(self.delay_s)
        form = {key: values[0] for key, values in
                parse_qs(incoming.body.decode("utf-8", "replace")).items()}
        try:
            grant = form.get("grant_type", "")
            if grant != JWT_BEARER_GRANT:
                raise _Refused("unsupported_grant_type", f"Invalid grant_type: {grant}")
            claims = self._check(form.get("assertion", ""))
        except _Refused as refused:
            return web.json_response({"error": refused.error,
                                      "error_description": refused.description}, status=400)
        token = "ya29.fake-" + secrets.token_urlsafe(24)
        self.minted[token] = Minted(claims["iss"], claims["scope"],
                                    self.clock() + self.lifetime_s)
        return web.json_response({"access_token": token, "expires_in": self.lifetime_s,
                                  "token_type": "Bearer"})

    def _check(self, assertion: str) -> dict[str, Any]:
        parts = assertion.split(".")
        if len(parts) != 3:
            raise _Refused("invalid_grant", "Invalid JWT Signature.")
        try:
            header = json.loads(_b64url(parts[0]))
            claims = json.loads(_b64url(parts[1]))
            signature = _b64url(parts[2])
        except (ValueError, UnicodeDecodeError):
            raise _Refused("invalid_grant", "Invalid JWT Signature.") from None
        if not isinstance(header, dict) or not isinstance(claims, dict) \
                or header.get("alg") != "RS256":
            raise _Refused("invalid_grant", "Invalid JWT Signature.")
        key = self.accounts.get(str(claims.get("iss")))
        if key is None:
            raise _Refused("invalid_grant", "Invalid grant: account not found")
        try:
            key.verify(signature, f"{parts[0]}.{parts[1]}".encode(), padding.PKCS1v15(),
                       hashes.SHA256())
        except InvalidSignature:
            raise _Refused("invalid_grant", "Invalid JWT Signature.") from None
        if claims.get("aud") not in _AUDIENCES:
            raise _Refused("invalid_grant", "Invalid JWT: Failed audience check.")
        if not isinstance(claims.get("scope"), str) or not claims["scope"].strip():
            raise _Refused("invalid_scope", "Invalid OAuth scope or ID token audience provided.")
        iat, exp, now = claims.get("iat"), claims.get("exp"), self.clock()
        if not isinstance(iat, int | float) or not isinstance(exp, int | float) \
                or exp - iat > _MAX_LIFETIME_S or exp <= now or iat > now + _SKEW_S:
            raise _Refused("invalid_grant", _TIMES)
        return claims
