"""What a request to a provider carries besides its body: the model name the provider gets
(`map_model`, DESIGN.md "Models"), its headers (`upstream_headers`, DESIGN.md "Headers and
query") and the URL's query string (`with_query`).

Kept apart from `claudex.engine.core.exchange` because this is policy read off the profile and the
client's headers alone, with no request body and no protocol translation: health probes
(`claudex.engine.health.probes`) send the same headers without an exchange, and DESIGN.md's rules
for models and headers are all in this one module.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from claudex import __version__
from claudex.config.model import Profile
from claudex.config.model import Protocol as WireProtocol
from claudex.engine.credentials.auth_headers import AuthHeaders
from claudex.providers import anthropic
from claudex.providers.cloud_models import anthropic_name, cloud_knows, is_cloud_id

CLOUDS = frozenset({"Bedrock", "Vertex"})  # name Claude models their own way


def is_claude_model(model: str) -> bool:
    lower = model.lower()
    return lower.startswith("claude-") or "anthropic.claude" in lower


def map_model(profile: Profile, requested: str | None, addressed: bool,
              aliases: Mapping[str, str] | None = None, *,
              client: WireProtocol = "anthropic") -> str | None:
    """The model sent to `profile` (DESIGN.md "Models"), in order: `model_aliases`; the
    profile's `models` (an exact key, else a family key contained in the name); at the profile
    the request addressed, when it speaks the client's protocol (or the name came from an
    alias), the requested model; anywhere
    else — a backup, or a profile reached through translation, so never a Claude model name
    at a provider that does not speak Anthropic — `default_model`, else the requested model."""
    aliased = False
    if requested and aliases and requested in aliases:
        requested, aliased = aliases[requested], True
    if requested:
        mapped = profile.models.get(requested)
        if mapped:
            return mapped
        lower = requested.lower()
        for family, target in profile.models.items():
            if family.lower() in lower:
                return target
        foreign_claude = (profile.protocol != "anthropic" and is_claude_model(requested)) or (
            profile.provider_type in CLOUDS and not cloud_knows(profile.provider_type, requested))
        # An alias names a model on purpose: it is kept like the client's own choice.
        chosen = addressed and (aliased or profile.protocol == client)
        if chosen and not foreign_claude:
            # A Bedrock- or Vertex-mode client's model id, at the Anthropic API (inline:
            # this is every pass-through request's path).
            if profile.provider_type == "DirectAnthropic" and (
                    "anthropic." in requested or "@" in requested):
                return anthropic_name(requested) or requested
            return requested
    if not profile.default_model and requested and profile.provider_type == "DirectAnthropic" \
            and is_cloud_id(requested):
        return anthropic_name(requested) or requested
    return profile.default_model or requested


@functools.lru_cache(maxsize=256)
def merge_beta(*values: str | None) -> str | None:
    """Comma-separated `anthropic-beta` values merged in order, without repeats (remembered: a
    client sends the same betas on request after request)."""
    seen: list[str] = []
    for value in values:
        for item in (value or "").split(","):
            item = item.strip()
            if item and item not in seen:
                seen.append(item)
    return ",".join(seen) or None


# Never carried from the client to an upstream (DESIGN.md "Headers"): hop-by-hop headers, the
# ones the proxy sets itself, and `accept-encoding` — the upstream's encoding must be one the
# proxy can decode, so aiohttp negotiates its own.
_NOT_FORWARDED = frozenset({
    "connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "host",
    "content-length", "content-type", "accept-encoding", "authorization", "x-api-key",
    "proxy-authorization", "proxy-authenticate", "proxy-connection",
})
_CREDENTIALS = ("authorization", "x-api-key")
USER_AGENT = f"claudex/{__version__}"


def client_headers_to_forward(client: Mapping[str, str]) -> dict[str, str]:
    """The client's headers a same-protocol upstream gets: all but hop-by-hop ones, `host`,
    `content-length`, credentials and `x-claudex-*` (names arrive lowercased from ASGI)."""
    return {k: v for k, v in client.items()
            if k not in _NOT_FORWARDED and not k.startswith(("x-claudex-", "proxy-"))}


def upstream_headers(profile: Profile, auth: AuthHeaders | None, *,
                     client: Mapping[str, str] | None = None,
                     forward: bool = False) -> dict[str, str]:
    """Protocol, credential and custom headers for a request to `profile` — forwarded requests
    and health probes alike. `client` holds the client's headers: with `forward` (the
    same-protocol path) they are carried over (`client_headers_to_forward`), the client's
    `user-agent` included; otherwise only its credentials are read, for passthrough profiles,
    and `anthropic-version`/`-beta` between Anthropic-protocol ends."""
    client = client or {}
    headers: dict[str, str] = {"user-agent": USER_AGENT}
    if forward:
        headers.update(client_headers_to_forward(client))
    if profile.protocol == "anthropic":
        headers["anthropic-version"] = client.get("anthropic-version") or \
            anthropic.DEFAULT_VERSION
        beta = merge_beta(client.get("anthropic-beta"), auth.beta if auth else None)
        if beta:
            headers["anthropic-beta"] = beta
    if profile.auth_type == "passthrough":
        for key in _CREDENTIALS:
            value = client.get(key)
            if value:
                headers[key] = value
    elif auth is not None:
        headers.update(auth.headers)
    headers.update(profile.custom_headers)
    return headers



def credentials_only(headers: Mapping[str, str]) -> dict[str, str]:
    """The client's credentials among `headers` (for a passthrough profile on a translated path)."""
    return {k: v for k in _CREDENTIALS if (v := headers.get(k))}


def with_query(url: str, *queries: str) -> str:
    joined = "&".join(q for q in queries if q)
    return f"{url}?{joined}" if joined else url

