"""The request the server hands the engine, and what the engine hands back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from claudex.config.model import Protocol
from claudex.engine.secrets import SCRUBBER, mask_secret

if TYPE_CHECKING:  # the stream's module builds results: a type only, no import cycle
    from claudex.engine.core.streaming import RelayedStream

Endpoint = Literal["messages", "count_tokens", "chat", "responses"]


@dataclass
class ProxyRequest:
    protocol: Protocol                 # the client's protocol
    endpoint: Endpoint
    body: dict[str, Any]
    raw: bytes                         # the body as received; forwarded as is when nothing changes
    headers: Mapping[str, str]         # the client's headers (case-insensitive mapping)
    profile: str | None = None         # the addressed profile; None = the default profile
    failover: bool = True
    query: str = ""                    # the client's query string (`beta=true`), undecoded
    route: str = ""                    # the path the client used (`/proxy/grok/v1/messages`)
    request_id: str = ""               # set by the engine: unique among its requests

    @property
    def stream(self) -> bool:
        return self.body.get("stream") is True

    @property
    def model(self) -> str | None:
        model = self.body.get("model")
        return model if isinstance(model, str) else None


# A client's credentials: shown masked whatever they hold (`Bearer sk-…abcd`).
_CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "cookie", "proxy-authorization"})
_SCHEMES = frozenset({"bearer", "basic", "token"})


def shown_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The client's headers as received, for the request detail: credentials masked, and any
    other value the scrubber knows (or that looks like a key) masked too.

    A client sends the same headers on request after request, and every request event keeps
    its copy in the event backlog (2,000 of them): the same headers give the same dict object,
    so the backlog holds one copy, not 2,000. The result is shared: never mutate it."""
    key = tuple(headers.items())
    return _SHOWN.get(key) or _SHOWN.put(key, _shown_headers(headers))


def _shown_headers(headers: Mapping[str, str]) -> dict[str, str]:
    shown: dict[str, str] = {}
    for name, value in headers.items():
        if name.lower() in _CREDENTIAL_HEADERS:
            scheme, space, rest = value.partition(" ")
            shown[name] = (f"{scheme} {mask_secret(rest.strip())}"
                           if space and scheme.lower() in _SCHEMES else mask_secret(value))
        else:
            shown[name] = _SCRUBBED.text(value)
    return shown


class _ScrubbedValues:
    """`SCRUBBER.text` of header values, remembered: a client sends the same ones on every
    request (this runs for each), and scrubbing costs a few regex passes per value. Forgotten
    whenever a secret is registered, and when it holds `size` values."""

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._seen: dict[str, str] = {}
        self._generation = -1

    def text(self, value: str) -> str:
        if self._generation != SCRUBBER.generation or len(self._seen) >= self._size:
            self._seen = {}
            self._generation = SCRUBBER.generation
        shown = self._seen.get(value)
        if shown is None:
            shown = self._seen[value] = SCRUBBER.text(value)
        return shown


class _ShownHeaders:
    """The last `size` distinct header sets shown, forgotten whenever a secret is registered
    (a value shown before may have to be masked now)."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._seen: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        self._generation = -1

    def get(self, key: tuple[tuple[str, str], ...]) -> dict[str, str] | None:
        if self._generation != SCRUBBER.generation:
            self._seen = {}
            self._generation = SCRUBBER.generation
        return self._seen.get(key)

    def put(self, key: tuple[tuple[str, str], ...], shown: dict[str, str]) -> dict[str, str]:
        if len(self._seen) >= self._size:
            self._seen = {}
        self._seen[key] = shown
        return shown


_SCRUBBED = _ScrubbedValues()
_SHOWN = _ShownHeaders()


@dataclass(frozen=True)
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

    @property
    def skipped(self) -> bool:
        return self.outcome in SKIP_OUTCOMES

    def token(self) -> str:
        """The compact form used in the `x-claudex-attempts` header."""
        return f"{self.provider}:{self._result()}"

    def label(self) -> str:
        """The form used in log lines and the console's trail: `grok 503`, `anth stream_error`."""
        return f"{self.provider} {self._result()}"

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
        # The detail fields only when known, so error bodies and headers stay small.
        for key in _DETAIL_FIELDS:
            value = getattr(self, key)
            if value is not None and value != ():
                out[key] = list(value) if isinstance(value, tuple) else value
        return out


_DETAIL_FIELDS = ("latency_ms", "headers_ms", "first_content_ms", "model", "max_tokens",
                  "breaker", "dropped")

SKIP_OUTCOMES = frozenset({
    "breaker_open", "forced_open", "half_open_busy", "cooling_down", "disabled",
    "misconfigured", "needs_translation", "round_cap", "unknown_profile", "queue_full",
})
# A profile that cannot be used as configured (its credentials included) says nothing about the
# other providers: a chain whose other attempts were all rate limited still answers 429.
CONFIG_SKIPS = frozenset({"disabled", "misconfigured", "needs_translation", "unknown_profile",
                          "credentials"})
_NAMED_EVEN_WITH_STATUS = frozenset({"stream_error", "token_expired", "max_tokens_limit",
                                     "timeout"})


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


@dataclass
class ForwardResult:
    status: int
    headers: dict[str, str]
    provider: str | None
    attempts: list[Attempt] = field(default_factory=list)
    body: bytes | None = None
    stream: RelayedStream | None = None  # a committed stream (engine/core/streaming.py)
    # What translation (or claudex's conversation repairs) left out of the request that was
    # served, by short name ("thinking", "cache_control"): shown in the request log.
    dropped: tuple[str, ...] = ()
    # What claudex changed so the conversation stays valid at this provider ("thinking off:
    # last tool-use turn served elsewhere"): sentences, shown in the request log only.
    notes: tuple[str, ...] = ()
