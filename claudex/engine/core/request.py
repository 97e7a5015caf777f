"""The request the server hands the engine, and what the engine hands back."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from claudex.config.model import Protocol as WireProtocol
from claudex.engine.core.usage import Usage

Endpoint = Literal["messages", "count_tokens", "chat", "responses"]


@dataclass(frozen=True)
class Routed:
    """Why a request on a default route went to another profile than the default one
    (DESIGN.md "Routes"): the route (`long_context`, `router:code`) and the profile (or pool)
    whose chain served it."""

    route: str
    profile: str

    @property
    def label(self) -> str:
        """As the trail, the log line and the `x-claudex-route` header name it."""
        return f"{self.route} -> {self.profile}"


@dataclass(slots=True)
class ProxyRequest:
    protocol: WireProtocol             # the client's protocol
    endpoint: Endpoint
    body: dict[str, Any]
    raw: bytes                         # the body as received; forwarded as is when nothing changes
    headers: Mapping[str, str]         # the client's headers (case-insensitive mapping)
    profile: str | None = None         # the addressed profile; None = the default profile
    failover: bool = True
    query: str = ""                    # the client's query string (`beta=true`), undecoded
    route: str = ""                    # the path the client used (`/proxy/grok/v1/messages`)
    request_id: str = ""               # set by the engine: unique among its requests
    routed: Routed | None = None       # set by the engine when a route chose the profile

    @property
    def stream(self) -> bool:
        return self.body.get("stream") is True

    @property
    def model(self) -> str | None:
        model = self.body.get("model")
        return model if isinstance(model, str) else None


@dataclass(frozen=True, slots=True)
class Attempt:
    provider: str
    outcome: str                       # an Outcome value, or a skip reason such as "breaker_open"
    status: int | None = None
    message: str = ""
    latency_ms: float | None = None
    # What the request detail view shows about one attempt (issue 15); unset for skips.
    headers_ms: float | None = None        # time to the upstream's response headers
    first_content_ms: float | None = None  # streams: time to the first content event
    model: str | None = None               # the model sent upstream
    max_tokens: int | None = None          # the max_tokens cap applied, when one was
    breaker: str | None = None             # the breaker state this attempt met
    dropped: tuple[str, ...] = ()          # what translation left out for this provider
    pool: str | None = None                # the pool `provider` served as a member of
    proxy: str | None = None               # the upstream proxy the attempt went through

    @property
    def skipped(self) -> bool:
        return self.outcome in SKIP_OUTCOMES

    def token(self) -> str:
        """The compact form used in the `x-claudex-attempts` header."""
        if self.pool is not None:
            return f"{self.pool}/{self.provider}:{self._result()}"
        return f"{self.provider}:{self._result()}"

    def label(self) -> str:
        """The form used in log lines and the console's trail: `grok 503`, `anth stream_error`,
        a pool's member `claude/acct-b 200`."""
        # `_result`, written in: every journal row makes its trail of these.
        status = self.status
        result = str(status) if status is not None and \
            self.outcome not in _NAMED_EVEN_WITH_STATUS else self.outcome
        if self.pool is not None:
            return f"{self.pool}/{self.provider} {result}"
        return f"{self.provider} {result}"

    def _result(self) -> str:
        # A stream that died before content answered 200 first: its status says nothing.
        if self.status is not None and self.outcome not in _NAMED_EVEN_WITH_STATUS:
            return str(self.status)
        return self.outcome

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "provider": self.provider,
            "outcome": self.outcome,
            "status": self.status,
            "message": self.message,
        }
        # The detail fields only when known, so error bodies and headers stay small (in
        # _DETAIL_FIELDS' order, each read directly: every journal row makes these).
        if self.latency_ms is not None:
            out["latency_ms"] = self.latency_ms
        if self.headers_ms is not None:
            out["headers_ms"] = self.headers_ms
        if self.first_content_ms is not None:
            out["first_content_ms"] = self.first_content_ms
        if self.model is not None:
            out["model"] = self.model
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        if self.breaker is not None:
            out["breaker"] = self.breaker
        dropped = self.dropped
        if dropped is not None and dropped != ():
            out["dropped"] = list(dropped) if isinstance(dropped, tuple) else dropped
        if self.pool is not None:
            out["pool"] = self.pool
        if self.proxy is not None:
            out["proxy"] = self.proxy
        return out


_DETAIL_FIELDS = ("latency_ms", "headers_ms", "first_content_ms", "model", "max_tokens",
                  "breaker", "dropped", "pool", "proxy")

SKIP_OUTCOMES = frozenset({
    "breaker_open", "forced_open", "half_open_busy", "cooling_down", "disabled",
    "misconfigured", "needs_translation", "round_cap", "unknown_profile", "queue_full",
    "window_spent", "reserve", "slow",
    "context_too_small", "no_route",
})
# An upstream proxy's failure (issue 36): the request never reached the provider, so it is
# no error of the provider's (not in its error series, never its breaker's).
PROXY_OUTCOMES = frozenset({"proxy_refused", "proxy_auth_failed", "proxy_rejected",
                            "proxy_bad_gateway", "proxy_rate_limited", "certificate_untrusted"})
# A profile that cannot be used as configured (its credentials included) says nothing about the
# other providers: a chain whose other attempts were all rate limited still answers 429.
CONFIG_SKIPS = frozenset({"disabled", "misconfigured", "needs_translation", "unknown_profile",
                          "credentials"})
_NAMED_EVEN_WITH_STATUS = frozenset({"stream_error", "token_expired", "max_tokens_limit",
                                     "timeout", "plan_limit", "context_exceeded"})


@dataclass
class Failure:
    """Why one provider could not serve; `retry_after` is set for rate limits."""

    attempt: Attempt
    retry_after: float | None = None


@dataclass
class Trail:
    """Everything one request tried, in order."""

    attempts: list[Attempt] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)

    def skip(self, attempt: Attempt, retry_after: float | None = None) -> None:
        self.attempts.append(attempt)
        self.failures.append(Failure(attempt, retry_after))


class AnswerStream(Protocol):
    """A committed stream as the server relays it (engine/core/streaming.py `RelayedStream`):
    its chunks, `aclose` when the client is gone, `count`, called once when it ends with the
    usage its events reported, and `usage_lines`, the first and last lines that reported it."""

    def __aiter__(self) -> AsyncIterator[bytes]: ...

    async def __anext__(self) -> bytes: ...

    async def aclose(self) -> None: ...

    def count(self, done: Callable[[Usage | None], None]) -> None: ...

    def usage_lines(self) -> tuple[str | None, str | None]: ...


@dataclass(slots=True)
class ForwardResult:
    status: int
    headers: dict[str, str]
    provider: str | None
    attempts: list[Attempt] = field(default_factory=list)
    body: bytes | None = None
    stream: AnswerStream | None = None  # a committed stream (engine/core/streaming.py)
    # What translation (or claudex's conversation repairs) left out of the request that was
    # served, by short name ("thinking", "cache_control"): shown in the request log.
    dropped: tuple[str, ...] = ()
    # What claudex changed so the conversation stays valid at this provider ("thinking off:
    # last tool-use turn served elsewhere"): sentences, shown in the request log only.
    notes: tuple[str, ...] = ()
