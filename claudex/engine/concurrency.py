"""Adaptive concurrency per provider: how many requests claudex lets be in flight at once.

A burst of 429s from a provider that limits requests in flight is cured by sending fewer at
once, not by pausing everything (the proxy-resilience seed: reduce concurrent dispatch before
increasing backoff). So each provider has an AIMD limit, as in TCP congestion control and
Netflix's concurrency-limits:

    state        signal                                   effect
    unlimited    `burst` 429s within `window_s`            limit = in flight at the burst / 2
    limited      `burst` 429s within `window_s`            limit = limit / 2 (at least 1)
    limited      `limit` successes since the last change  limit + 1; unlimited again once past
                                                          what was in flight at the first burst
                                                          with no 429 for a window
    any          a 429 to a request sent before the last   ignored: it answers the old
                 decrease (unknown: within `settle_s`)     concurrency

A fixed `max_concurrency` is where the limit starts and the most it grows back to. The state
machine is pure: it takes `now` from the caller and does no I/O; `gate.ProviderGate` applies it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

BURST = 3            # 429s ...
WINDOW_S = 10.0      # ... within this many seconds make a burst
SETTLE_S = 1.0       # after a decrease, 429s this soon are answers to the old concurrency


@dataclass(frozen=True)
class LimitSnapshot:
    limit: int | None           # None: unlimited
    reason: str | None          # "limited: 12 × 429 in 10 s", None while unlimited
    recent_429: int             # within the window


class AdaptiveLimit:
    """One provider's limit on requests in flight."""

    def __init__(self, max_concurrency: int | None = None, *, burst: int = BURST,
                 window_s: float = WINDOW_S, settle_s: float = SETTLE_S) -> None:
        self.ceiling = max_concurrency
        self.limit: int | None = max_concurrency
        self.burst = burst
        self.window_s = window_s
        self.settle_s = settle_s
        self._429s: deque[float] = deque()
        self._last_decrease: float | None = None
        self._successes = 0          # since the limit last changed
        self._peak = 0               # in flight when an unlimited provider was first limited
        self.reason: str | None = None

    # -- signals -----------------------------------------------------------------------------

    def on_rate_limited(self, now: float, in_flight: int, sent_at: float | None = None) -> bool:
        """A 429 answered a request sent at `sent_at`; True when the limit went down."""
        self._429s.append(now)
        self._forget(now)
        if len(self._429s) < self.burst:
            return False
        last = self._last_decrease
        if last is not None and (sent_at < last if sent_at is not None
                                 else now - last < self.settle_s):
            return False  # sent before the last decrease: it answers the old concurrency
        current = self.limit if self.limit is not None else max(in_flight, 1)
        if self.limit is None:
            self._peak = current
        new = max(1, current // 2)
        if self.limit is not None and new >= self.limit:
            return False  # already at 1
        self.limit = new
        self._last_decrease = now
        self._successes = 0
        self.reason = (f"limited: {len(self._429s)} × 429 in {self.window_s:g} s")
        return True

    def on_success(self, now: float) -> bool:
        """A request at this provider succeeded; True when the limit went up."""
        if self.limit is None or (self.ceiling is not None and self.limit >= self.ceiling):
            return False
        self._successes += 1
        if self._successes < self.limit:
            return False
        self._successes = 0
        self.limit += 1
        self._forget(now)
        if not self._429s and self.ceiling is None and self.limit > self._peak:
            # Past what was in flight at the burst, with no 429 for a whole window: the
            # provider's limit is not (or no longer) the cause; stop counting.
            self.limit = None
            self.reason = None
        return True

    def reset(self) -> None:
        """An operator reset (or a reload): back to the configured start."""
        self.limit = self.ceiling
        self._429s.clear()
        self._last_decrease = None
        self._successes = 0
        self.reason = None

    # -- views -------------------------------------------------------------------------------

    def allows(self, in_flight: int) -> bool:
        return self.limit is None or in_flight < self.limit

    def snapshot(self, now: float) -> LimitSnapshot:
        self._forget(now)
        return LimitSnapshot(self.limit, self.reason if self.limit is not None else None,
                             len(self._429s))

    @property
    def at_floor(self) -> bool:
        return self.limit == 1

    def _forget(self, now: float) -> None:
        while self._429s and now - self._429s[0] > self.window_s:
            self._429s.popleft()
