"""What the forwarding loop (core/one_provider.py) carries between the tries of one request at one
provider: what a try came to (`Seen`), what the failure policy's retry said next (`Step`), what
has been used of the row's retries (`Tries`); and the part of the engine it works with
(`EngineCore`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from claudex.config.model import Config
from claudex.engine.addons.signatures import SignatureMemory
from claudex.engine.clock import Clock, Sleep, WallClock
from claudex.engine.core.exchange import Exchange
from claudex.engine.core.hooks import Hooks
from claudex.engine.core.ledger import Ledger
from claudex.engine.core.policy import Key
from claudex.engine.core.request import Attempt, ForwardResult
from claudex.engine.core.runtime import ProviderRuntime
from claudex.engine.core.transport import Transport, UpstreamResponse
from claudex.engine.credentials.cache import AuthHeaders
from claudex.engine.events import EventBus
from claudex.engine.network.failures import ProxyFailure
from claudex.engine.network.proxy_state import ProxyBoard
from claudex.engine.network.routes import Hop

if TYPE_CHECKING:  # routing builds requests the core serves: a type only, no import cycle
    from claudex.engine.core.pools import PoolBalancer
    from claudex.engine.health.slow_watch import SlowWatch
    from claudex.engine.routing import Routing


class EngineCore(Protocol):
    config: Config
    runtimes: dict[str, ProviderRuntime]
    transport: Transport
    clock: Clock
    wall: WallClock
    sleep: Sleep
    rand: Callable[[], float]
    events: EventBus
    signatures: SignatureMemory
    hooks: Hooks
    routing: Routing | None
    pools: PoolBalancer | None
    slow: SlowWatch
    proxies: ProxyBoard  # the upstream proxies' state (read only for a routed provider)

    def escalate(self, sentence: str) -> None: ...




@dataclass
class Seen:
    """One try's outcome (the policy's key), its attempt, and what the row's actions read."""

    key: Key
    attempt: Attempt
    result: ForwardResult | None = None  # an answer for the client, when one was made
    resp: UpstreamResponse | None = None  # a non-2xx answer: its headers (Retry-After, ...)
    payload: bytes = b""                  # ... and its body, scrubbed
    limit: int | None = None              # TOKEN_LIMIT: the max_tokens the provider stated
    auth: AuthHeaders | None = None       # the credentials sent (a refresh replaces them)
    problem: str | None = None            # CREDENTIALS: why they could not be read
    sent_at: float = 0.0                  # when it was sent (the adaptive limit reads it)
    alone: bool = False                   # it was claudex's only request in flight there
    proxy: ProxyFailure | None = None     # a proxy's failure: what it was (its Retry-After)


@dataclass(frozen=True)
class Step:
    """After an outcome: try the same provider again (after `wait` seconds), or conclude —
    with `retry_after` for the trail, or with another outcome `instead` (a refresh that
    cannot happen)."""

    again: bool = False
    wait: float | None = None
    retry_after: float | None = None
    instead: Seen | None = None


@dataclass
class Tries:
    """What one request has used of a provider's retries, and the body it sends there."""

    url: str
    body: bytes | None = None  # None: to be built (again, after a new max_tokens cap)
    rate_limited: int = 0      # 429s so far
    refreshed: bool = False
    capped: bool = False
    mended: int = 0            # tries again without what a cloud refused (engine/clouds/)
    # Through upstream proxies (issue 36, seed 000): the hop in use, the hops that failed in
    # this request, how many were eligible when it started, the proxy's 429s at this hop.
    hop: Hop | None = None
    failed_hops: list[str] = field(default_factory=list)
    hop_cap: int = 0
    proxy_rate_limited: int = 0


RetryHandler = Callable[[Ledger, Exchange, Seen, Tries], Awaitable[Step]]
