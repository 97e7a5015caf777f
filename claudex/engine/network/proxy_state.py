"""What the engine keeps per upstream proxy (issue 36): its own circuit breaker (the proxy's
`[breaker]` settings, the engine's clock), "proxy auth failed" (red until a success, a reset or a
reload), a 429's cooldown, its counters and last error — never any of it on a provider.

A request picks its hop through `eligible()` (seed 000: the first eligible hop of its route, the
failed ones of this request excluded by the caller); each try through a hop takes a permit of
the hop's breaker (`acquire`) and hands it back exactly once (`succeeded`, `failed`, `release`).
Every transition is one engine Event (kind "proxy") and one log line:
`proxy corp opened (connection refused)`.

Each proxy also has claudex's own gate (engine/core/gate.py) with an adaptive limit
(engine/core/concurrency.py), as a provider has: a try through the proxy holds one of its slots
from before it is sent until its answer (or stream) ends, so requests of every provider behind
the proxy queue on it. A CONNECT answered 429 narrows the limit (retries.py), every try the proxy
carried to its provider lets it grow back. The proxy's own limit, not the providers': a proxy
shared by several providers refuses tunnels for all of them together, and a provider's limit
keeps measuring the provider alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from claudex.config.model import BreakerSettings, RetrySettings
from claudex.engine.breaker.circuit import BreakerState, CircuitBreaker, Permit, Transition
from claudex.engine.breaker.trips import trip_words
from claudex.engine.clock import Clock
from claudex.engine.core.concurrency import AdaptiveLimit
from claudex.engine.core.gate import ProviderGate
from claudex.engine.events import Event
from claudex.engine.network.failures import ProxyFailure, ProxyKind
from claudex.engine.network.routes import Hop, Route

log = logging.getLogger("claudex.engine")
Color = Literal["green", "yellow", "red"]
PROXY_MAX_CONNECTIONS = 1 << 30  # a proxy has no `max_connections`: only its adaptive limit


class ProxySpecLike(Protocol):
    """One proxy as the config resolves it (engine/network/resolve.py `ProxySpec`)."""

    @property
    def hop(self) -> Hop: ...
    @property
    def breaker(self) -> BreakerSettings: ...
    @property
    def retry(self) -> RetrySettings: ...
    @property
    def enabled(self) -> bool: ...
    @property
    def profiles(self) -> tuple[str, ...]: ...
    @property
    def problem(self) -> str | None: ...  # why it cannot be used at all (a bad env URL)


@dataclass(frozen=True)
class DefaultSpec:
    """A hop the config names no settings for (an environment proxy, an inline URL): the
    global breaker and retry settings."""

    hop: Hop
    breaker: BreakerSettings = field(default_factory=BreakerSettings)
    retry: RetrySettings = field(default_factory=RetrySettings)
    enabled: bool = True
    profiles: tuple[str, ...] = ()
    problem: str | None = None


@dataclass
class ProxyRuntime:
    spec: ProxySpecLike
    breaker: CircuitBreaker
    auth_failed: str | None = None   # the words of the refusal, while it holds
    untrusted: str | None = None     # a certificate that did not verify, until a success
    cooling_until: float = 0.0       # monotonic: a 429's cooldown
    requests: int = 0
    failures: int = 0
    rate_limited: int = 0
    last_error: str | None = None
    # Tries through it by what came of them ("ok", or a ProxyKind: "refused", ...): /metrics.
    outcomes: dict[str, int] = field(default_factory=dict)
    # Tunnels claudex lets be open through it at once: no fixed bound, the adaptive limit.
    gate: ProviderGate = field(
        default_factory=lambda: ProviderGate(PROXY_MAX_CONNECTIONS, AdaptiveLimit()))

    def count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    @property
    def name(self) -> str:
        return self.spec.hop.name

    @property
    def hop(self) -> Hop:
        return self.spec.hop


class ProxyBoard:
    def __init__(self, clock: Clock, publish: Callable[[Event], None]) -> None:
        self._clock = clock
        self._publish = publish
        self._proxies: dict[str, ProxyRuntime] = {}

    # -- config --------------------------------------------------------------------------------

    def configure(self, specs: Mapping[str, ProxySpecLike], routes: Iterable[Route] = (),
                  breaker: BreakerSettings | None = None,
                  retry: RetrySettings | None = None) -> None:
        """The proxies of a config (load or reload): kept ones keep their breaker and counters
        (settings updated; "auth failed" cleared: the password may be new); hops a route names
        without settings of their own take the global `breaker` / `retry`."""
        wanted: dict[str, ProxySpecLike] = dict(specs)
        for route in routes:
            for hop in route.hops:
                if hop.name not in wanted:
                    wanted[hop.name] = DefaultSpec(hop, breaker or BreakerSettings(),
                                                   retry or RetrySettings())
        fresh: dict[str, ProxyRuntime] = {}
        for name, spec in wanted.items():
            rt = self._proxies.get(name)
            if rt is None:
                rt = ProxyRuntime(spec, CircuitBreaker(name, spec.breaker, self._clock,
                                                       self._on_transition))
            else:
                rt.breaker.update_settings(spec.breaker)
                rt.spec, rt.auth_failed, rt.untrusted = spec, None, None
                rt.gate.limit.reset()  # a reload starts the limit again, as a provider's
                rt.gate.wake()
            fresh[name] = rt
        self._proxies = fresh

    def __contains__(self, name: object) -> bool:
        return name in self._proxies

    def get(self, name: str) -> ProxyRuntime | None:
        return self._proxies.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._proxies)

    # -- choosing a hop -----------------------------------------------------------------------

    def out_reason(self, name: str, now: float) -> str | None:
        """Why the proxy cannot take a request now, in words; None: it can."""
        rt = self._proxies.get(name)
        if rt is None:
            return None  # not on the board (a route resolved without it): never blocked here
        if rt.spec.problem is not None:
            return f"unusable ({rt.spec.problem})"
        if not rt.spec.enabled:
            return "disabled"
        if rt.auth_failed is not None:
            return f"auth failed ({rt.auth_failed})"
        state = rt.breaker.state
        if state is BreakerState.FORCED_OPEN:
            return self._trip_text(rt)
        if state is BreakerState.OPEN:
            return f"open ({rt.last_error})" if rt.last_error else "open"
        if now < rt.cooling_until:
            return f"rate limited, cooling down {rt.cooling_until - now:.0f}s"
        return None

    def eligible(self, hops: Iterable[Hop], now: float,
                 excluded: Iterable[str] = ()) -> list[Hop]:
        """The hops that can take a request now, in the route's order."""
        out = set(excluded)
        return [hop for hop in hops if hop.name not in out
                and self.out_reason(hop.name, now) is None]

    def trouble(self, route: Route, now: float) -> str | None:
        """`proxy corp open (connection refused)`: the first hop of the route that is out
        (the route is out, or degraded to a later hop); None when every hop is fine."""
        for hop in route.hops:
            reason = self.out_reason(hop.name, now)
            if reason is not None:
                return f"proxy {hop.name} {reason}"
        return None

    def no_route(self, route: Route, now: float) -> str:
        """Why a provider behind `route` is skipped: `no route: proxy corp open (...)`."""
        reasons = [f"proxy {hop.name} {self.out_reason(hop.name, now) or 'busy'}"
                   for hop in route.hops]
        return "no route: " + ", ".join(reasons)

    # -- one try through a hop ----------------------------------------------------------------

    def gate(self, name: str) -> ProviderGate | None:
        """The proxy's slots (None: not on the board, never limited here)."""
        rt = self._proxies.get(name)
        return None if rt is None else rt.gate

    def acquire(self, name: str) -> Permit | None:
        rt = self._proxies.get(name)
        if rt is None:
            return None
        permit = rt.breaker.try_acquire()
        if permit is not None:
            rt.requests += 1
        return permit

    def succeeded(self, name: str, permit: Permit) -> None:
        """The proxy carried the request to the provider (whatever the provider answered)."""
        rt = self._proxies.get(name)
        if rt is None:
            return
        if rt.auth_failed is not None or rt.untrusted is not None:
            rt.auth_failed = rt.untrusted = None
            self._say(rt, f"proxy {name} works again", {"state": "ok"})
        rt.count("ok")
        rt.breaker.record_success(permit)
        if rt.gate.limit.on_success(self._clock()):
            rt.gate.wake()  # the proxy's adaptive limit grew back by one

    def release(self, name: str, permit: Permit) -> None:
        """Neither the proxy's success nor its failure (cancelled, or a 429: it cools down)."""
        rt = self._proxies.get(name)
        if rt is not None:
            rt.breaker.release(permit)

    def failed(self, name: str, permit: Permit | None, failure: ProxyFailure) -> None:
        """The proxy's failure: its breaker counts it (a 429 does not: `cool`); a refused
        password marks it "auth failed" (red until a success, a reset or a reload)."""
        rt = self._proxies.get(name)
        if rt is None:
            return
        rt.last_error = failure.words
        rt.count(failure.kind.value)
        if failure.kind is ProxyKind.RATE_LIMITED:
            rt.rate_limited += 1
            if permit is not None:
                rt.breaker.release(permit)
            return
        rt.failures += 1
        if failure.kind is ProxyKind.AUTH_FAILED and rt.auth_failed is None:
            rt.auth_failed = failure.words
            self._say(rt, f"proxy {name} auth failed ({failure.words})",
                      {"state": "auth_failed"}, warn=True)
        if failure.kind is ProxyKind.UNTRUSTED and rt.untrusted is None:
            rt.untrusted = failure.words
            self._say(rt, f"proxy {name}: {failure.words}", {"state": "untrusted"}, warn=True)
        if permit is not None:
            rt.breaker.record_failure(permit)
        else:
            rt.breaker.record_failure()

    def cool(self, name: str, seconds: float) -> None:
        """A 429 whose retries are spent: the proxy is passed over for `seconds`."""
        rt = self._proxies.get(name)
        if rt is None:
            return
        until = self._clock() + max(0.0, seconds)
        if until > rt.cooling_until:
            rt.cooling_until = until
            self._say(rt, f"proxy {name} rate limited: cooling down {seconds:.0f}s",
                      {"state": "cooling", "seconds": round(seconds, 3)})

    # -- the operator ---------------------------------------------------------------------------

    def trip(self, name: str, until: float | None = None, reason: str | None = None) -> bool:
        rt = self._proxies.get(name)
        if rt is None:
            return False
        rt.breaker.trip(until=until, reason=reason)
        return True

    def reset(self, name: str) -> list[str] | None:
        """Closed and cleared, "auth failed" and a cooldown ended; what it ended, in words."""
        rt = self._proxies.get(name)
        if rt is None:
            return None
        ended = []
        if rt.breaker.state is not BreakerState.CLOSED:
            ended.append("breaker")
        if rt.auth_failed is not None:
            ended.append("auth failed")
        if rt.cooling_until > self._clock():
            ended.append("cooldown")
        if rt.gate.limit.limit is not None:
            ended.append("concurrency limit")
        rt.auth_failed = rt.untrusted = None
        rt.cooling_until = 0.0
        rt.breaker.reset()
        rt.gate.limit.reset()
        rt.gate.wake()
        return ended

    # -- status ---------------------------------------------------------------------------------

    def color(self, rt: ProxyRuntime, now: float) -> tuple[Color, str]:
        if rt.spec.problem is not None:
            return "red", f"unusable ({rt.spec.problem})"
        if not rt.spec.enabled:
            return "yellow", "disabled"
        state = rt.breaker.state
        if state is BreakerState.FORCED_OPEN:
            return "red", self._trip_text(rt)
        if rt.auth_failed is not None:
            return "red", f"auth failed ({rt.auth_failed})"
        if rt.untrusted is not None:
            return "red", rt.untrusted
        if state is BreakerState.OPEN:
            return "red", f"open ({rt.last_error})" if rt.last_error else "open"
        if state is BreakerState.HALF_OPEN:
            return "yellow", "half-open: trying again"
        if now < rt.cooling_until:
            return "yellow", f"rate limited, cooling down {rt.cooling_until - now:.0f}s"
        failures = rt.breaker.snapshot().consecutive_failures
        if failures:
            return "yellow", f"{failures} recent failure{'s' if failures != 1 else ''}"
        limited = rt.gate.limit.snapshot(now)
        if limited.limit is not None and limited.reason is not None:
            return "yellow", f"{limited.reason}: {limited.limit} at once"
        return "green", "ok"

    @staticmethod
    def concurrency_json(rt: ProxyRuntime, now: float) -> dict[str, Any]:
        """claudex's own limit on tries through the proxy (a provider's `concurrency`, less
        `max_connections`, which a proxy does not have)."""
        gate, snap = rt.gate, rt.gate.limit.snapshot(now)
        return {"limit": snap.limit, "reason": snap.reason, "in_flight": gate.in_flight,
                "queued": gate.queued, "waited": gate.waited, "queue_full": gate.queue_full,
                "recent_429": snap.recent_429}

    def snapshot(self, now: float | None = None) -> list[dict[str, Any]]:
        """Status JSON `upstream_proxies` (no password: the URL as `Hop.shown`)."""
        now = self._clock() if now is None else now
        out = []
        for name, rt in self._proxies.items():
            snap = rt.breaker.snapshot()
            color, reason = self.color(rt, now)
            out.append({
                "name": name,
                "url": rt.hop.shown,
                "scheme": rt.hop.scheme,
                "enabled": rt.spec.enabled,
                "breaker": snap.status_json(),
                "health": color,
                "health_reason": reason,
                "auth_failed": rt.auth_failed is not None,
                "cooldown_s": round(max(0.0, rt.cooling_until - now), 3),
                "requests": rt.requests,
                "failures": rt.failures,
                "rate_limited": rt.rate_limited,
                "last_error": rt.last_error,
                "profiles": list(rt.spec.profiles),
                "limit": rt.gate.limit.limit,   # None: unlimited (the adaptive limit not held)
                "concurrency": self.concurrency_json(rt, now),
            })
        return out

    def runtimes(self) -> list[ProxyRuntime]:
        return list(self._proxies.values())

    def state_code(self, name: str) -> int:
        """/metrics `claudex_upstream_proxy_state`: 0 closed, 1 half-open, 2 open (forced too)."""
        rt = self._proxies.get(name)
        if rt is None:
            return 0
        state = rt.breaker.state
        return {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1}.get(state, 2)

    # -- events ---------------------------------------------------------------------------------

    @staticmethod
    def _trip_text(rt: ProxyRuntime) -> str:
        snap = rt.breaker.snapshot()
        return trip_words(snap.trip.reason if snap.trip is not None else None, snap.retry_in_s)

    def _on_transition(self, t: Transition) -> None:
        rt = self._proxies.get(t.provider)
        if t.new is BreakerState.OPEN:
            said = rt.last_error if rt is not None and rt.last_error else t.reason
            words = f"proxy {t.provider} opened ({said})"
        elif t.new is BreakerState.FORCED_OPEN:
            words = f"proxy {t.provider} {trip_words(t.trip.reason if t.trip else None, None)}"
        elif t.new is BreakerState.HALF_OPEN:
            words = f"proxy {t.provider} half-open: trying again"
        else:
            words = f"proxy {t.provider} closed ({t.reason})"
        data = {"proxy": t.provider, "old": t.old.value, "new": t.new.value, "reason": t.reason,
                "at": t.at}
        self._publish(Event("proxy", words, t.provider, data))

    def _say(self, rt: ProxyRuntime, words: str, data: dict[str, Any], *,
             warn: bool = False) -> None:
        (log.warning if warn else log.info)("%s", words)
        self._publish(Event("proxy", words, rt.name, {"proxy": rt.name} | data))
