"""How a profile's token goes on the wire: the headers that carry it upstream, and `AuthHeaders`,
which remembers the token they carry so that a 401 can say which one failed.

Kept apart from credentials.py (which token, and when to replace it): the wire form depends only
on the profile and the kind of source. An Anthropic API key goes in `x-api-key`, anything else as
a Bearer token; a ChatGPT (Codex) login adds its account and Codex CLI's originator; a Claude
login at Anthropic adds the OAuth beta to `anthropic-beta`. `AuthHeaders`' repr masks the token.
"""

from __future__ import annotations

from dataclasses import dataclass

from claudex.config.model import Profile
from claudex.engine.credentials.oauth import OAuthToken
from claudex.engine.credentials.token_sources import SourceKind
from claudex.engine.masking.secrets import mask_secret

OAUTH_BETA = "oauth-2025-04-20"
CODEX_ORIGINATOR = "codex_cli_rs"


@dataclass(frozen=True)
class AuthHeaders:
    headers: dict[str, str]
    token: str  # the secret used, so that a 401 can say which token failed
    beta: str | None = None  # an anthropic-beta value to merge into the forwarded header

    def __repr__(self) -> str:  # a stray debug print must not leak the token
        return f"AuthHeaders(token={mask_secret(self.token)!r}, beta={self.beta!r})"


def oauth_beta(profile: Profile) -> str | None:
    """The anthropic-beta value a Claude login needs at Anthropic; None for every other profile."""
    return (
        OAUTH_BETA
        if profile.auth_type == "oauth"
        and profile.oauth_provider == "claude"
        and profile.provider_type == "DirectAnthropic"
        else None
    )


def headers_for(profile: Profile, kind: SourceKind, token: OAuthToken,
                beta: str | None) -> AuthHeaders:
    """The headers carrying `token` for `profile` (`beta`: `oauth_beta(profile)`, read once)."""
    secret = token.access_token
    if not secret:  # `api_key = ""`: a local server (Ollama, LM Studio) that takes no key
        return AuthHeaders({}, secret)
    if kind == "key" and profile.provider_type == "DirectAnthropic":
        return AuthHeaders({"x-api-key": secret}, secret)
    headers = {"authorization": f"Bearer {secret}"}
    if token.account_id:
        # A ChatGPT (Codex) login: the backend wants the account, and Codex CLI's
        # originator (codex-rs/codex-api/src/auth.rs,
        # codex-rs/login/src/auth/default_client.rs).
        headers["chatgpt-account-id"] = token.account_id
        headers["originator"] = CODEX_ORIGINATOR
    return AuthHeaders(headers, secret, beta)
