"""Adaptive concurrency per provider: how many requests claudex lets be in flight at once.

A burst of 429s from a provider that limits requests in flight is cured by sending fewer at
once, not by pausing everything (the proxy-resilience seed: reduce concurrent dispatch before
increasing backoff). So each provider has a limit that grows additively with successes, as in
TCP congestion control and Netflix's concurrency-limits, and comes down to what the provider
was seen to accept (Vegas-like) rather than by half:

    state        signal                                   effect
    unlimited    `burst` 429s within `window_s`            limit = accepted = in flight at the
                                                          burst, less the 429 that made it
    limited      a 429 to a request sent after the last   accepted as above, limit =
                 decrease, with `burst` in the window     min(limit - 1, accepted): the last
                                                          increase was one too many
    any          a 429 that answers the last decrease's   accepted - 1, limit = min(limit,
                 concurrency: sent before it (unknown:    accepted): one more of those in
                 within `settle_s`), or let in over the   flight then was refused
                 lowered limit before it grew again
    limited      `limit` successes since the last change  limit + 1; unlimited again once past
                 (`probe` x `limit` to reach a level      what was in flight at the first burst
                 refused while 429s are in the window,    with no 429 for a window
                 twice that after each refused probe,
                 up to `MAX_SPACING` times)

Halving (plain AIMD) throws away half the capacity at every burst and lets the limit swing
around the provider's own; counting what the provider demonstrably accepted lands on it within
one round (64 sent at once to a provider that takes 8: 56 refused, limit 8), and probing the
refused level only every `probe` rounds (up to 16 once probes keep failing) keeps it there
with few 429s. Every decrease returns True; what is said about them waits for the round to
settle (`announcement`: `settle_s` after the first decrease not yet said), so a burst of 56
refusals is one event and one log line, and it names the limit the round ended at (the one
status shows then), not a step on the way.

A fixed `max_concurrency` is where the limit starts and the most it grows back to. The state
machine is pure: it takes `now` from the caller and does no I/O; `gate.ProviderGate` applies it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

BURST = 3            # 429s ...
WINDOW_S = 10.0      # ... within this many seconds make a burst
SETTLE_S = 1.0       # after a decrease, 429s this soon are answers to the old concurrency
PROBE = 4            # a level refused within the window is tried again after PROBE x limit
                     # successes, not limit; twice as long after each refused probe, up to
MAX_SPACING = 4      # ... this many times as long (while 429s stay in the window)


@dataclass(frozen=True)
class LimitSnapshot:
    limit: int | None           # None: unlimited
    reason: str | None          # "limited: 12 × 429 in 10 s", None while unlimited
    recent_429: int             # within the window


class AdaptiveLimit:
    """One provider's limit on requests in flight."""

    def __init__(self, max_concurrency: int | None = None, *, burst: int = BURST,
                 window_s: float = WINDOW_S, settle_s: float = SETTLE_S,
                 probe: int = PROBE) -> None:
        self.ceiling = max_concurrency
        self.limit: int | None = max_concurrency
        self.burst = burst
        self.window_s = window_s
        self.settle_s = settle_s
        self.probe = probe
        self._429s: deque[float] = deque()
        self._last_decrease: float | None = None
        self._successes = 0          # since the limit last changed
        self._peak = 0               # in flight when an unlimited provider was first limited
        self._accepted = 0           # in flight at the last decrease and not (yet) refused
        self._refused_at = 0         # the limit (or in flight) that the last decrease left
        self._grew = False           # the limit went up since the last decrease
        self._spacing = 1            # doubled by each refused probe, 1 once the window is clear
        self._announced: int | None = None  # the limit last said in words (None: none yet)
        self._unsaid_since: float | None = None  # the first decrease not said yet
        self.reason: str | None = None

    # -- signals -----------------------------------------------------------------------------

    def on_rate_limited(self, now: float, in_flight: int, sent_at: float | None = None) -> bool:
        """A 429 answered a request sent at `sent_at` while `in_flight` requests (itself
        included) were at the provider; True when the limit went down (`announcement` says
        when to put it in words)."""
        self._429s.append(now)
        self._forget(now)
        if self._answers_last_decrease(now, in_flight, sent_at):
            # In flight at the last decrease, and refused: the provider accepted one fewer.
            self._accepted = max(1, self._accepted - 1)
            if self.limit is None or self._accepted >= self.limit:
                return False
            self.limit = self._accepted
            self._successes = 0
            self.reason = self._reason()
            self._unsaid(now)
            return True
        if len(self._429s) < self.burst:
            return False
        accepted = max(1, in_flight - 1)
        if self.limit is None:
            self._peak = max(in_flight, 1)
            new = accepted
        else:
            new = max(1, min(self.limit - 1, accepted))
            if new >= self.limit:
                return False  # already at 1
            if self._grew:  # a probe above the last decrease was refused: probe less often
                self._spacing = min(self._spacing * 2, MAX_SPACING)
        self._refused_at = self.limit if self.limit is not None else self._peak
        self.limit = new
        self._accepted = accepted
        self._last_decrease = now
        self._grew = False
        self._successes = 0
        self.reason = self._reason()
        self._unsaid(now)
        return True

    def _unsaid(self, now: float) -> None:
        if self._unsaid_since is None:
            self._unsaid_since = now

    def _answers_last_decrease(self, now: float, in_flight: int, sent_at: float | None) -> bool:
        """Whether a 429 answers the concurrency of the last decrease: sent before it (unknown:
        within `settle_s`), or let in over the lowered limit before the limit grew again
        (a slot handed out just before the decrease, the request sent just after)."""
        last = self._last_decrease
        if last is None:
            return False
        if sent_at < last if sent_at is not None else now - last < self.settle_s:
            return True
        return not self._grew and self.limit is not None and in_flight > self.limit

    def _reason(self) -> str:
        return f"limited: {len(self._429s)} × 429 in {self.window_s:g} s"

    def on_success(self, now: float) -> bool:
        """A request at this provider succeeded; True when the limit went up."""
        if self.limit is None or (self.ceiling is not None and self.limit >= self.ceiling):
            return False
        self._successes += 1
        self._forget(now)
        needed = self.limit
        if not self._429s:
            self._spacing = 1
        elif self.limit + 1 >= self._refused_at:
            # That level was refused within the window: probe it rarely.
            needed *= self.probe * self._spacing
        if self._successes < needed:
            return False
        self._successes = 0
        self.limit += 1
        self._grew = True
        self._forget(now)
        if not self._429s and self.ceiling is None and self.limit > self._peak:
            # Past what was in flight at the burst, with no 429 for a whole window: the
            # provider's limit is not (or no longer) the cause; stop counting.
            self.limit = None
            self.reason = None
            self._last_decrease = None
            self._announced = self._unsaid_since = None
        return True

    def reset(self) -> None:
        """An operator reset (or a reload): back to the configured start."""
        self.limit = self.ceiling
        self._429s.clear()
        self._last_decrease = None
        self._successes = 0
        self._accepted = self._refused_at = 0
        self._announced = self._unsaid_since = None
        self._spacing = 1
        self.reason = None

    # -- in words ----------------------------------------------------------------------------

    def announce_in(self, now: float) -> float | None:
        """Seconds until a decrease is due to be said (0: now); None when none waits."""
        if self._unsaid_since is None:
            return None
        return max(0.0, self._unsaid_since + self.settle_s - now)

    def announcement(self, now: float, *, due: bool = False) -> LimitSnapshot | None:
        """The limit to say now, once per round of decreases: `settle_s` after the first one
        not said yet (or at once with `due`, from a timer that waited that long), as the limit
        is then. None while the round may go on, when nothing waits, or when the limit is
        already what was said last (or no longer held)."""
        wait = self.announce_in(now)
        if wait is None or (wait > 0 and not due):
            return None
        self._unsaid_since = None
        if self.limit is None or self.limit == self._announced:
            return None
        self._announced = self.limit
        return self.snapshot(now)

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
