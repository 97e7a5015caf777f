"""An API key's rate limits for the fake providers: buckets that empty with the requests and
tokens served and refill continuously, described on every answer in the service's headers and
refused with 429 when empty, as the real APIs do (DESIGN.md "Windows").

Anthropic (docs.anthropic.com/en/api/rate-limits, "Response headers"; the token bucket
algorithm, "capacity is continuously replenished up to your maximum limit"):
`anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}`,
reset in RFC 3339 (when the bucket is full again); the `tokens` ones are the most restrictive
token limit in effect (here: the input or output bucket with less left). A refusal is 429
`rate_limit_error` with `retry-after` in seconds.

OpenAI (platform.openai.com/docs/guides/rate-limits, "Rate limits in headers"):
`x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, reset a duration until the limit is back
to its initial state ("1s", "6m0s", "12ms" in the guide's and its users' samples).

Not confirmed: how each service estimates a request's tokens before serving it (Anthropic counts
output against `max_tokens` first and adjusts later); here a request's tokens count when served.
The defaults are far above what a test or `make soak` sends, so nothing is refused unless a
test lowers them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

Style = Literal["anthropic", "openai"]


@dataclass
class Bucket:
    """`limit` per minute, refilled continuously; `level` is what is left at `at` (wall s)."""

    limit: int
    level: float = -1.0
    at: float = 0.0

    def left(self, now: float) -> float:
        if self.level < 0:
            self.level, self.at = float(self.limit), now
        self.level = min(float(self.limit), self.level + (now - self.at) * self.limit / 60.0)
        self.at = now
        return self.level

    def take(self, amount: float, now: float) -> None:
        self.level = max(0.0, self.left(now) - amount)

    def full_in(self, now: float) -> float:
        """Seconds until the bucket is full again."""
        return (self.limit - self.left(now)) * 60.0 / self.limit if self.limit > 0 else 0.0


def _duration(seconds: float) -> str:
    """Go's duration form, as OpenAI writes its resets: "6m0s", "1s", "20ms"."""
    if seconds < 1.0:
        return f"{max(0, math.ceil(seconds * 1000))}ms"
    whole = math.ceil(seconds)
    minutes, secs = divmod(whole, 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(math.ceil(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class RateLimits:
    """An API key's limits at one fake provider; `clock` is the wall clock (epoch s)."""

    style: Style
    requests: Bucket = field(default_factory=lambda: Bucket(100_000))
    input_tokens: Bucket = field(default_factory=lambda: Bucket(100_000_000))
    output_tokens: Bucket = field(default_factory=lambda: Bucket(20_000_000))
    clock: Callable[[], float] = time.time
    refused: int = 0

    @classmethod
    def of(cls, style: Style, requests: int = 100_000, tokens: int = 100_000_000) -> RateLimits:
        """Limits per minute; OpenAI counts one token limit (input and output together)."""
        return cls(style, Bucket(requests), Bucket(tokens), Bucket(max(1, tokens // 5)))

    def refusal_in(self) -> float | None:
        """Seconds until a request fits again (the 429's retry-after), None while it fits;
        otherwise the request is counted."""
        now = self.clock()
        waits = [(1.0 - b.left(now)) * 60.0 / b.limit for b in
                 (self.requests, *self._token_buckets()) if b.limit > 0 and b.left(now) < 1.0]
        if waits:
            self.refused += 1
            return max(waits)
        self.requests.take(1, now)
        return None

    def serve(self, input_tokens: int, output_tokens: int) -> None:
        now = self.clock()
        if self.style == "anthropic":
            self.input_tokens.take(input_tokens, now)
            self.output_tokens.take(output_tokens, now)
        else:
            self.input_tokens.take(input_tokens + output_tokens, now)

    def _token_buckets(self) -> tuple[Bucket, ...]:
        return ((self.input_tokens, self.output_tokens) if self.style == "anthropic"
                else (self.input_tokens,))

    def headers(self) -> dict[str, str]:
        """What every answer says of the limits."""
        now = self.clock()
        if self.style == "openai":
            out: dict[str, str] = {}
            for name, b in (("requests", self.requests), ("tokens", self.input_tokens)):
                out[f"x-ratelimit-limit-{name}"] = str(b.limit)
                out[f"x-ratelimit-remaining-{name}"] = str(int(b.left(now)))
                out[f"x-ratelimit-reset-{name}"] = _duration(b.full_in(now))
            return out
        tokens = min(self._token_buckets(), key=lambda b: b.left(now) / b.limit)
        out = {}
        for name, b in (("requests", self.requests), ("tokens", tokens),
                        ("input-tokens", self.input_tokens),
                        ("output-tokens", self.output_tokens)):
            at = f"anthropic-ratelimit-{name}"
            out[f"{at}-limit"] = str(b.limit)
            out[f"{at}-remaining"] = str(int(b.left(now)))
            out[f"{at}-reset"] = _rfc3339(now + b.full_in(now))
        return out
