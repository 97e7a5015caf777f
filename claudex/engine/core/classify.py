"""Map every upstream outcome onto claudex's outcome kinds — the only place that inspects
status codes or transport exceptions.

The tree of outcomes (DESIGN.md, failure table)::

    Outcome
    ├── OK                 2xx
    ├── CLIENT_ERROR       400 404 409 413 422 and other 4xx: the client's request;
    │                      returned unchanged
    ├── TOKEN_LIMIT        a 400 stating the provider's max_tokens range: retry once at that
    │                      cap (remembered), then fail over; not a breaker failure
    ├── CONTEXT_EXCEEDED   a 400 stating the conversation is over the context window, at a
    │                      backup: fail over to the next (the window is remembered); not a
    │                      breaker failure. At the addressed profile it is a CLIENT_ERROR
    ├── RATE_LIMITED       429: retry the same provider with backoff, then fail over;
    │                      not a breaker failure
    ├── PLAN_LIMIT         429 saying the plan's window is spent (Anthropic unified status
    │                      `rejected`, ChatGPT `usage_limit_reached`): never retried, fail
    │                      over at once, the provider skipped until the window resets;
    │                      not a breaker failure
    ├── AUTH_ERROR         401/403 (api-key profile): fail over; breaker failure; status "auth"
    ├── TOKEN_EXPIRED      401 on an oauth profile: refresh the token and retry once
    ├── SERVER_ERROR       5xx and 529: fail over; breaker failure
    ├── CONNECT_ERROR      refused, DNS, connect timeout: fail over at once; breaker failure
    ├── TIMEOUT            no first byte within read_timeout; a stream with no headers or
    │                      first event within stream_first_byte_timeout, or no content
    │                      within stream_commit_timeout (`StreamStalled`): fail over;
    │                      breaker failure
    ├── DISCONNECTED       upstream closed the connection before answering: fail over;
    │                      breaker failure
    ├── STREAM_ERROR       stream failed (error event, cut); before commit fail over,
    │                      after commit passed to the client as an SSE error;
    │                      breaker failure either way
    ├── UNSUPPORTED_FIELD  a cloud refused what the Anthropic API accepts (Bedrock's
    │                      `invalid beta flag`, `<field>: Extra inputs are not permitted`):
    │                      retry once without it (remembered), then fail over
    ├── MODEL_UNAVAILABLE  the profile's model cannot be used there (Vertex: not enabled
    │                      for the project; Bedrock: an invalid model id): fail over;
    │                      breaker failure
    └── an upstream proxy's failure (issue 36; engine/network/failures.py tells it from the
        provider's): the next proxy of the route at once, then the next provider; never
        the provider's breaker, health or failure counts (the proxy's own, proxy_state.py)
        ├── PROXY_REFUSED          refused, does not resolve, connect timeout, TLS failed
        ├── PROXY_AUTH_FAILED      CONNECT answered 407 (or tinyproxy's 401); SOCKS auth
        ├── PROXY_REJECTED         CONNECT answered 403; a SOCKS rule refused it
        ├── PROXY_BAD_GATEWAY      CONNECT answered 502, 503, 504
        ├── PROXY_RATE_LIMITED     CONNECT answered 429: backoff at that proxy, then the next
        └── CERTIFICATE_UNTRUSTED  through a proxy, a certificate that does not verify
    UNTRUSTED_PROVIDER     a provider reached directly whose certificate does not verify: no
                           retry, fail over at once; the provider's breaker failure, the
                           provider red with the issuer's name (its trail word is
                           `certificate_untrusted` too: the row of the route it failed on)

`classify_cloud()` maps a Bedrock or Vertex error (read by `claudex.providers.bedrock` /
`.vertex`: statuses, `X-Amzn-ErrorType`, Google's `status`) onto these kinds: their own 400 that
is a rate limit (ServiceQuotaExceededException), 408/424 that are the service's failures.

`map_transport_error()` turns aiohttp and httpx exceptions into these kinds at one place. What
each kind then does (retry, fail over, breaker and health effects) is one table:
`engine/core/policy.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from enum import StrEnum

import aiohttp
import httpx

from claudex.engine.network.failures import ProxyKind
from claudex.providers.bedrock.errors import BedrockError, BedrockFailure
from claudex.providers.context_limits import ContextRefusal, context_refusal
from claudex.providers.limits import stated_max_tokens
from claudex.providers.vertex.errors import VertexError, VertexFailure
from claudex.providers.windows import spent_window


class Outcome(StrEnum):
    OK = "ok"
    CLIENT_ERROR = "client_error"
    RATE_LIMITED = "rate_limited"
    AUTH_ERROR = "auth_error"
    TOKEN_EXPIRED = "token_expired"
    SERVER_ERROR = "server_error"
    CONNECT_ERROR = "connect_error"
    TIMEOUT = "timeout"
    DISCONNECTED = "disconnected"
    STREAM_ERROR = "stream_error"
    TOKEN_LIMIT = "max_tokens_limit"
    PLAN_LIMIT = "plan_limit"
    CONTEXT_EXCEEDED = "context_exceeded"
    UNSUPPORTED_FIELD = "unsupported_field"
    MODEL_UNAVAILABLE = "model_unavailable"
    PROXY_REFUSED = "proxy_refused"
    PROXY_AUTH_FAILED = "proxy_auth_failed"
    PROXY_REJECTED = "proxy_rejected"
    PROXY_BAD_GATEWAY = "proxy_bad_gateway"
    PROXY_RATE_LIMITED = "proxy_rate_limited"
    CERTIFICATE_UNTRUSTED = "certificate_untrusted"
    # The policy's key for the direct case; the attempt carries CERTIFICATE_UNTRUSTED's word.
    UNTRUSTED_PROVIDER = "certificate_untrusted_direct"


PROXY_OUTCOMES: dict[ProxyKind, Outcome] = {
    ProxyKind.REFUSED: Outcome.PROXY_REFUSED,
    ProxyKind.UNRESOLVABLE: Outcome.PROXY_REFUSED,
    ProxyKind.CONNECT_TIMEOUT: Outcome.PROXY_REFUSED,
    ProxyKind.TLS_FAILED: Outcome.PROXY_REFUSED,
    ProxyKind.AUTH_FAILED: Outcome.PROXY_AUTH_FAILED,
    ProxyKind.REJECTED: Outcome.PROXY_REJECTED,
    ProxyKind.BAD_GATEWAY: Outcome.PROXY_BAD_GATEWAY,
    ProxyKind.RATE_LIMITED: Outcome.PROXY_RATE_LIMITED,
    ProxyKind.UNTRUSTED: Outcome.CERTIFICATE_UNTRUSTED,
}
"""A proxy's failure (engine/network/failures.py `proxy_failure`) as the policy's outcome."""


class StreamStalled(TimeoutError):
    """One of claudex's own stream deadlines passed (not the socket's read timeout); `words`
    say which, for the attempt list."""

    def __init__(self, words: str) -> None:
        super().__init__(words)
        self.words = words


def classify_status(status: int, *, oauth: bool = False) -> Outcome:
    """Classify an upstream HTTP status. `oauth` marks profiles whose tokens can be refreshed."""
    if 200 <= status < 300:
        return Outcome.OK
    if status == 429:
        return Outcome.RATE_LIMITED
    if status == 401:
        return Outcome.TOKEN_EXPIRED if oauth else Outcome.AUTH_ERROR
    if status == 403:
        return Outcome.AUTH_ERROR
    if status >= 500:  # 500 502 503 504 529 and any other server-side failure
        return Outcome.SERVER_ERROR
    if 400 <= status < 500:
        return Outcome.CLIENT_ERROR
    # 1xx/3xx: a proxy should never see these from an API; treat as a broken upstream.
    return Outcome.SERVER_ERROR


_BEDROCK: dict[BedrockFailure, Outcome] = {
    BedrockFailure.RATE_LIMITED: Outcome.RATE_LIMITED,
    BedrockFailure.QUOTA: Outcome.RATE_LIMITED,  # a 400, and a rate limit all the same
    BedrockFailure.SERVER: Outcome.SERVER_ERROR,  # 500, 503, 408 ModelTimeout, 424 ModelStream
    BedrockFailure.AUTH: Outcome.AUTH_ERROR,
    BedrockFailure.MODEL_UNAVAILABLE: Outcome.MODEL_UNAVAILABLE,
    BedrockFailure.DROP_FIELD: Outcome.UNSUPPORTED_FIELD,
    BedrockFailure.DROP_BETAS: Outcome.UNSUPPORTED_FIELD,
    BedrockFailure.CLIENT: Outcome.CLIENT_ERROR,
}
_VERTEX: dict[VertexFailure, Outcome] = {
    VertexFailure.RATE_LIMITED: Outcome.RATE_LIMITED,
    VertexFailure.SERVER: Outcome.SERVER_ERROR,
    VertexFailure.TOKEN_REJECTED: Outcome.TOKEN_EXPIRED,  # mint a token again, retry once
    VertexFailure.AUTH: Outcome.AUTH_ERROR,
    VertexFailure.MODEL_UNAVAILABLE: Outcome.MODEL_UNAVAILABLE,
    VertexFailure.CLIENT: Outcome.CLIENT_ERROR,
}


def classify_cloud(error: BedrockError | VertexError) -> Outcome:
    """The outcome of a Bedrock or Vertex error answer (never a 2xx)."""
    if isinstance(error, BedrockError):
        return _BEDROCK[error.failure]
    return _VERTEX[error.failure]


def cloud_words(error: BedrockError | VertexError) -> str:
    """A cloud error in one line for the attempt: its type and its own words."""
    kind = error.error_type if isinstance(error, BedrockError) else error.status
    words = error.message[:300]
    return f"{kind}: {words}" if kind and words else (words or kind or "refused")


def stated_token_limit(outcome: Outcome, status: int, message: str) -> int | None:
    """For a client error whose message states the provider's max_tokens range: the largest
    value it accepts (`Outcome.TOKEN_LIMIT`); None for every other answer."""
    if outcome is not Outcome.CLIENT_ERROR or status != 400:
        return None
    return stated_max_tokens(message)


def plan_limit(outcome: Outcome, status: int, headers: Mapping[str, str],
               payload: bytes) -> bool:
    """For a rate limit: whether it says the plan's window is spent (`Outcome.PLAN_LIMIT`),
    which no retry before its reset can change."""
    return outcome is Outcome.RATE_LIMITED and spent_window(status, headers, payload)
def stated_context_window(outcome: Outcome, status: int, message: str,
                          payload: bytes) -> ContextRefusal | None:
    """For a client error saying the prompt is over the provider's context window: the
    refusal (with the window when stated); None for every other answer."""
    if outcome is not Outcome.CLIENT_ERROR or status not in (400, 413):
        return None
    return context_refusal(message, payload)


def map_transport_error(exc: BaseException) -> tuple[Outcome, str]:
    """Turn a transport exception (aiohttp on the data plane, httpx on the control plane) into
    an outcome and a short plain description without secrets."""
    if isinstance(exc, StreamStalled):
        return Outcome.TIMEOUT, exc.words
    # aiohttp
    if isinstance(exc, aiohttp.ServerTimeoutError | asyncio.TimeoutError | TimeoutError):
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            return Outcome.CONNECT_ERROR, "connect timeout"
        return Outcome.TIMEOUT, "no response in time"
    if isinstance(exc, aiohttp.ClientConnectorError):
        reason = _connector_reason(exc)
        return Outcome.CONNECT_ERROR, reason
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return Outcome.DISCONNECTED, "server closed the connection"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return Outcome.STREAM_ERROR, "connection lost mid-response"
    if isinstance(exc, aiohttp.ClientError):
        return Outcome.DISCONNECTED, type(exc).__name__
    # httpx
    if isinstance(exc, httpx.ConnectTimeout):
        return Outcome.CONNECT_ERROR, "connect timeout"
    if isinstance(exc, httpx.TimeoutException):
        return Outcome.TIMEOUT, "no response in time"
    if isinstance(exc, httpx.ConnectError):
        return Outcome.CONNECT_ERROR, "connection refused"
    if isinstance(exc, httpx.RemoteProtocolError):
        return Outcome.DISCONNECTED, "server closed the connection"
    if isinstance(exc, httpx.TransportError):
        return Outcome.DISCONNECTED, type(exc).__name__
    if isinstance(exc, ConnectionError | OSError):
        return Outcome.CONNECT_ERROR, exc.strerror or type(exc).__name__
    return Outcome.DISCONNECTED, type(exc).__name__


def _connector_reason(exc: aiohttp.ClientConnectorError) -> str:
    os_error = exc.os_error
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return "DNS lookup failed"
    if isinstance(os_error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(os_error, TimeoutError):
        return "connect timeout"
    return (os_error.strerror if os_error and os_error.strerror else None) or "cannot connect"


def describe(outcome: Outcome, status: int | None = None) -> str:
    """Words for an outcome, as shown in attempt lists and panels."""
    words = {
        Outcome.OK: "ok",
        Outcome.CLIENT_ERROR: "rejected the request",
        Outcome.RATE_LIMITED: "rate limited",
        Outcome.AUTH_ERROR: "auth failed",
        Outcome.TOKEN_EXPIRED: "token expired",
        Outcome.SERVER_ERROR: "server error",
        Outcome.CONNECT_ERROR: "cannot connect",
        Outcome.TIMEOUT: "timed out",
        Outcome.DISCONNECTED: "disconnected",
        Outcome.STREAM_ERROR: "stream failed",
        Outcome.TOKEN_LIMIT: "max_tokens over the provider's limit",
        Outcome.CONTEXT_EXCEEDED: "conversation over the provider's context window",
        Outcome.UNSUPPORTED_FIELD: "refused a field or beta the Anthropic API accepts",
        Outcome.MODEL_UNAVAILABLE: "model not available there",
        Outcome.PROXY_REFUSED: "upstream proxy unreachable",
        Outcome.PROXY_AUTH_FAILED: "upstream proxy refused the credentials",
        Outcome.PROXY_REJECTED: "upstream proxy refused the connection",
        Outcome.PROXY_BAD_GATEWAY: "upstream proxy bad gateway",
        Outcome.PROXY_RATE_LIMITED: "upstream proxy rate limited",
        Outcome.CERTIFICATE_UNTRUSTED: "certificate not trusted",
        Outcome.UNTRUSTED_PROVIDER: "certificate not trusted",
    }[outcome]
    return f"{words} ({status})" if status is not None else words
