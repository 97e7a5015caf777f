"""What the engine keeps per provider, and the green/yellow/red rule (DESIGN.md, Health)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

from claudex.config.model import Profile
from claudex.engine.addons.stats import ProviderStats
from claudex.engine.breaker.circuit import BreakerState, CircuitBreaker
from claudex.engine.breaker.trips import trip_words
from claudex.engine.clouds.wire import Wire
from claudex.engine.core.concurrency import AdaptiveLimit
from claudex.engine.core.gate import ProviderGate, RetryBudget
from claudex.engine.credentials.upstream import UpstreamCredentials
from claudex.engine.health.slowness import Slowness
from claudex.engine.network.routes import Route
from claudex.providers.windows import RawHeaders, Window, clock_text, read_windows, window_words

Color = Literal["green", "yellow", "red"]
_MAX_REMEMBERED_LIMITS = 64  # models per provider; a request cannot grow this without bound


@dataclass
class HealthState:
    last_checked: float | None = None      # wall time of the last probe
    last_ok: bool | None = None
    latency_ms: float | None = None
    error: str | None = None
    probe_failures: int = 0                # consecutive failed probes
    unsupported: bool = False              # the provider has no models endpoint (404/405)
    auth_failing: bool = False             # last probe or request was refused with 401/403
    live_failure_since_probe: bool = False
    credentials_problem: str | None = None  # the last probe could not get credentials: why
    # Reached directly, its certificate did not verify: the words (issuer, hint), until a
    # success, a reset or a reload (issue 36's failure table).
    untrusted: str | None = None


@dataclass
class ProviderRuntime:
    profile: Profile
    breaker: CircuitBreaker
    credentials: UpstreamCredentials
    # Bedrock's and Vertex's URL, body, signer and stream (engine/clouds/); None: the protocol's
    # own wire. One per runtime: it keeps what it learned of the provider.
    wire: Wire | None = None
    stats: ProviderStats = field(default_factory=ProviderStats)
    health: HealthState = field(default_factory=HealthState)
    cooldown_until: float = 0.0            # monotonic; rate-limited until then
    # Output-token limits the provider stated in a 400, per model sent (DESIGN.md failure
    # table): later requests are capped before they are sent.
    token_limits: dict[str, int] = field(default_factory=dict)
    # Context windows the provider stated in a 400 (or, when it did not say the size, the
    # estimate of the prompt it refused), per model sent (DESIGN.md failure table): a later
    # request estimated over one skips this provider as a backup without sending.
    context_limits: dict[str, int] = field(default_factory=dict)
    # A spent plan window (DESIGN.md failure table, issue 22): skipped until then, epoch
    # seconds (a reset time the provider states is wall-clock, and the fleet shares it).
    window_spent_until: float = 0.0
    window_spent_name: str | None = None   # the spent window ("5h"), when the answer said
    # The quota windows the provider's answers last described (claudex/providers/windows.py;
    # the windows addon keeps them): shown, and read by the pools' balance and `reserve`.
    # The latest answer's quota headers wait in `window_headers` until `windows` is read.
    _windows: tuple[Window, ...] = ()
    window_headers: tuple[float, RawHeaders] | None = None
    # Real traffic's latency against its own baseline (engine/health/slowness.py, issue 30): judged
    # every few seconds by the engine's slow watch, never on the request path.
    slowness: Slowness = field(default_factory=Slowness)
    # How requests reach the provider (issue 36, engine/network/routes.py): None for a plain
    # direct route with default TLS, so the usual request pays one `is None` and nothing else;
    # resolved when the config loads, never per request.
    route: Route | None = None
    # claudex's own limits here (engine/core/gate.py): slots in flight, the queue, 429 retries.
    gate: ProviderGate = field(init=False)
    budget: RetryBudget = field(init=False)

    def __post_init__(self) -> None:
        profile = self.profile
        self.gate = ProviderGate(profile.max_connections, AdaptiveLimit(profile.max_concurrency))
        self.budget = RetryBudget(profile.retry_budget)

    def update_limits(self, profile: Profile) -> None:
        """A reload changed the profile: new limits apply from the next request on."""
        limit = self.gate.limit
        if limit.ceiling != profile.max_concurrency:
            limit.ceiling = profile.max_concurrency
            limit.reset()
        self.gate.max_connections = profile.max_connections
        self.budget.share = profile.retry_budget
        self.gate.wake()

    @property
    def windows(self) -> tuple[Window, ...]:
        """The windows the latest answer that described any described (read when asked)."""
        raw = self.window_headers
        if raw is not None:
            self.window_headers = None
            windows = read_windows(raw[1], raw[0])
            if windows is not None:
                self._windows = windows
        return self._windows

    @windows.setter
    def windows(self, windows: tuple[Window, ...]) -> None:
        self._windows, self.window_headers = windows, None

    def window_used(self) -> float:
        """The largest share (0-1) of any quota window the provider's answers last reported:
        the headroom a pool's sticky balance compares (DESIGN.md "Pools"). 0.0 until the
        windows are read."""
        windows = self.windows
        if not windows:
            return 0.0
        return max(w.used for w in windows)

    def window_spent(self, wall: float) -> bool:
        """Whether the plan's window is spent at wall time `wall` (epoch s)."""
        return wall < self.window_spent_until

    def spent_words(self, wall: float | None = None) -> str:
        """`5-hour window spent until 14:05`."""
        words = window_words(self.window_spent_name) if self.window_spent_name else \
            "plan's window"
        return f"{words} spent until {clock_text(self.window_spent_until, wall)}"

    def max_tokens_cap(self, model: str | None) -> int | None:
        """The profile's `max_tokens`, or the lower limit the provider stated for `model`."""
        learned = self.token_limits.get(model or "")
        configured = self.profile.max_tokens
        if learned is None or (configured is not None and configured <= learned):
            return configured
        return learned

    def learn_token_limit(self, model: str | None, limit: int) -> None:
        if len(self.token_limits) >= _MAX_REMEMBERED_LIMITS and model not in self.token_limits:
            self.token_limits.pop(next(iter(self.token_limits)))
        self.token_limits[model or ""] = limit

    def context_window(self, model: str | None) -> int | None:
        """The smaller of the profile's `context_window` and the one learned for `model`."""
        learned = self.context_limits.get(model or "") if self.context_limits else None
        configured = self.profile.context_window
        if learned is None or (configured is not None and configured <= learned):
            return configured
        return learned

    def learn_context_window(self, model: str | None, window: int) -> bool:
        """Remember `window` for `model`; whether it is new."""
        key = model or ""
        if self.context_limits.get(key) == window:
            return False
        if len(self.context_limits) >= _MAX_REMEMBERED_LIMITS and key not in self.context_limits:
            self.context_limits.pop(next(iter(self.context_limits)))
        self.context_limits[key] = window
        return True

    @property
    def name(self) -> str:
        return self.profile.name

    def cooling_down(self, now: float) -> bool:
        return now < self.cooldown_until

    def color(self, now: float, degraded_latency_ms: float,
              wall: float | None = None) -> tuple[Color, str]:
        """The panel colour and the reason in words; `wall`: the wall clock at `now` (a spent
        plan window is kept in wall time)."""
        profile, health = self.profile, self.health
        state = self.breaker.state
        if profile.problem is not None:
            return "red", f"misconfigured: {profile.problem}"
        if not profile.enabled:
            return "yellow", "disabled"
        if health.credentials_problem is not None:  # found at run time (a token_command failing)
            return "red", f"misconfigured: {health.credentials_problem}"
        if health.untrusted is not None:
            return "red", health.untrusted
        if state is BreakerState.FORCED_OPEN:
            return "red", f"breaker {self.trip_text()}"
        if state is BreakerState.OPEN:
            return "red", "breaker open"
        if self.credentials.status == "needs login":
            return "red", "needs login"
        if health.auth_failing:
            return "red", "auth failing"
        if health.probe_failures >= 2:
            return "red", f"last {health.probe_failures} probes failed"
        if state is BreakerState.HALF_OPEN:
            return "yellow", "breaker half-open: trying again"
        failures = self.breaker.snapshot().consecutive_failures
        if failures > 0:
            return "yellow", f"{failures} recent failure{'s' if failures != 1 else ''}"
        if self.window_spent_until and self.window_spent(time.time() if wall is None else wall):
            return "yellow", self.spent_words(wall)
        if self.cooling_down(now):
            return "yellow", f"rate limited, cooling down {self.cooldown_until - now:.0f}s"
        limited = self.gate.limit.snapshot(now)
        if limited.limit is not None and limited.reason is not None:
            return "yellow", f"{limited.reason}: {limited.limit} at once"
        slow = self.slowness.verdict
        if slow is not None:
            return "yellow", slow.words()
        if health.probe_failures == 1:
            return "yellow", "last probe failed"
        if (
            health.latency_ms is not None
            and health.last_ok
            and health.latency_ms > degraded_latency_ms
        ):
            return "yellow", f"slow: {health.latency_ms:.0f} ms"
        if health.unsupported:
            return "green", f"ok ({health.error or 'probe unsupported'})"
        if health.last_checked is None:
            return "green", "ok (not probed yet)"
        return "green", "ok"

    def trip_text(self) -> str:
        """The trip in force in words: `tripped by operator: maintenance (12m left)`."""
        snap = self.breaker.snapshot()
        reason = snap.trip.reason if snap.trip is not None else None
        return trip_words(reason, snap.retry_in_s)

    def status_json(self, now: float, degraded_latency_ms: float,
                    wall: float | None = None) -> dict[str, Any]:
        """`wall`: the wall clock's reading at `now`, for a timed trip's `until` (epoch s)."""
        snap = self.breaker.snapshot()
        color, reason = self.color(now, degraded_latency_ms, wall)
        trip = snap.trip
        until = None
        if trip is not None and trip.until is not None and snap.retry_in_s is not None:
            until = round((now if wall is None else wall) + snap.retry_in_s, 3)
        return {
            "name": self.profile.name,
            "provider_type": self.profile.provider_type,
            "base_url": self.profile.base_url,
            "enabled": self.profile.enabled,
            "problem": self.profile.problem,
            "backup_providers": list(self.profile.backup_providers),
            # While tripped, also when a timed trip ends (epoch s).
            "breaker": {**snap.status_json(), "until": until},
            "health": {
                "color": color,
                "reason": reason,
                "latency_ms": self.health.latency_ms,
                "last_checked": self.health.last_checked,
                "error": self.health.error,
                "probe_unsupported": self.health.unsupported,
                "auth": self.credentials.status
                or ("failing" if self.health.auth_failing else "ok"),
                # Slow from real traffic (None when it is not): the measure, its recent p95,
                # its usual one, and since when (epoch s).
                "slow": None if (slow := self.slowness.verdict) is None else slow.to_json(),
                "latency_baseline": self.slowness.baselines_json(),
            },
            "cooldown_s": round(max(0.0, self.cooldown_until - now), 3),
            # The plan's quota windows as the last answer described them, and a spent one's
            # reset (epoch s; None when none is spent).
            "windows": [w.to_json() for w in self.windows],
            "window_spent_until": self._spent_until(wall),
            "window_spent": self.window_spent_name if self._spent_until(wall) else None,
            "max_tokens": self.profile.max_tokens,
            "learned_max_tokens": dict(self.token_limits),
            "context_window": self.profile.context_window,
            "learned_context_window": dict(self.context_limits),
            "concurrency": self.concurrency_json(now),
            "stats": self.stats.to_json(),
            "cloud": self.wire.status_json() if self.wire is not None else None,
        }

    def _spent_until(self, wall: float | None) -> float | None:
        until = self.window_spent_until
        if not until or not self.window_spent(time.time() if wall is None else wall):
            return None
        return round(until, 3)

    def concurrency_json(self, now: float) -> dict[str, Any]:
        """claudex's own limits here, for status, metrics and the console."""
        gate, snap = self.gate, self.gate.limit.snapshot(now)
        return {
            "limit": snap.limit,
            "reason": snap.reason,
            "in_flight": gate.in_flight,
            "queued": gate.queued,
            "waited": gate.waited,
            "queue_full": gate.queue_full,
            "max_connections": gate.max_connections,
            "recent_429": snap.recent_429,
            "retries_refused": self.budget.refused,
        }
