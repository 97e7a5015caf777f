"""Subscription plans for the fake providers: quota windows that fill with the tokens served and
reset, described on every answer and refused when full, as the real services do (issue 22).

A Claude plan (Pro/Max) answers with Anthropic's unified headers, the names Claude Code reads
(`src/services/claudeAiLimits.ts`): `anthropic-ratelimit-unified-status` (`allowed`,
`allowed_warning` past the warning threshold, `rejected`), `-representative-claim`
(`five_hour`, `seven_day`), `-reset` (epoch s) and per window `-5h-utilization` (0-1), `-5h-reset`,
`-5h-status`, `-5h-surpassed-threshold` (only once passed). A full window is a 429
`rate_limit_error` with status `rejected` and no Retry-After (subscription 429s come without one:
CLIProxyAPI PR 4674).

A ChatGPT plan (Plus/Pro) answers with `x-codex-primary-used-percent` (0-100),
`-primary-window-minutes`, `-primary-reset-at` and the secondary window likewise (openai/codex
`codex-rs/codex-api/src/rate_limits.rs`); a full window is `429 {"error": {"type":
"usage_limit_reached", "plan_type", "resets_at", "resets_in_seconds"}}` without Retry-After
(openai/codex `codex-rs/core/src/api_bridge.rs`).

Not confirmed: the real warning thresholds (0.75 here, Claude Code shows a warning from the
header's status) and how the real windows count tokens (cache reads, models weighted).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

PlanKind = Literal["claude", "chatgpt"]
_CLAIMS = {"5h": "five_hour", "7d": "seven_day"}
_MINUTES = {"5h": 300, "7d": 10080}


@dataclass
class PlanWindow:
    name: str           # "5h", "7d"
    seconds: float      # its length
    capacity: int       # tokens it holds
    used: int = 0
    started: float | None = None  # epoch s of its first use; None: not started

    def roll(self, now: float) -> None:
        if self.started is not None and now >= self.started + self.seconds:
            self.used, self.started = 0, None

    def share(self) -> float:
        return min(1.0, self.used / self.capacity) if self.capacity > 0 else 1.0

    def reset_at(self, now: float) -> float:
        return (self.started if self.started is not None else now) + self.seconds


@dataclass
class Plan:
    """A subscription's windows at one fake provider; `clock` is the wall clock (epoch s)."""

    kind: PlanKind
    windows: list[PlanWindow] = field(default_factory=list)
    warn_at: float = 0.75
    clock: Callable[[], float] = time.time
    plan_type: str = "plus"
    refused: int = 0  # requests answered "window spent"

    @classmethod
    def claude(cls, tokens_5h: int = 200_000, tokens_7d: int = 5_000_000,
               seconds_5h: float = 5 * 3600, **kw: Any) -> Plan:
        return cls("claude", [PlanWindow("5h", seconds_5h, tokens_5h),
                              PlanWindow("7d", 7 * 86400, tokens_7d)], **kw)

    @classmethod
    def chatgpt(cls, tokens_5h: int = 200_000, tokens_7d: int = 5_000_000,
                seconds_5h: float = 5 * 3600, **kw: Any) -> Plan:
        return cls("chatgpt", [PlanWindow("5h", seconds_5h, tokens_5h),
                               PlanWindow("7d", 7 * 86400, tokens_7d)], **kw)

    def _now(self) -> float:
        now = self.clock()
        for w in self.windows:
            w.roll(now)
        return now

    def serve(self, tokens: int) -> None:
        """An answer of `tokens` (input and output) was served: every window fills."""
        now = self._now()
        for w in self.windows:
            if w.started is None:
                w.started = now
            w.used += max(0, tokens)

    def spend(self, seconds: float) -> None:
        """The first window is full, and resets in `seconds` (a test's, the soak's fault)."""
        now = self._now()
        first = self.windows[0]
        first.used = first.capacity
        first.started = now + seconds - first.seconds

    def _full(self) -> PlanWindow | None:
        for w in self.windows:
            if w.used >= w.capacity:
                return w
        return None

    def refusal(self) -> tuple[int, dict[str, Any], dict[str, str]] | None:
        """The 429 a full window gets (status, body, headers); None while there is room."""
        now = self._now()
        full = self._full()
        if full is None:
            return None
        self.refused += 1
        reset = full.reset_at(now)
        if self.kind == "claude":
            body = {"type": "error", "error": {
                "type": "rate_limit_error",
                "message": "This request would exceed your account's rate limit. "
                           "Please try again later."}}
            return 429, body, self.headers()
        body = {"error": {"type": "usage_limit_reached",
                          "message": "The usage limit has been reached",
                          "plan_type": self.plan_type, "resets_at": math.ceil(reset),
                          "resets_in_seconds": max(0, math.ceil(reset - now))}}
        return 429, body, self.headers()

    def headers(self) -> dict[str, str]:
        """What every answer says of the windows."""
        now = self._now()
        if self.kind == "chatgpt":
            return self._codex_headers(now)
        out: dict[str, str] = {}
        full = self._full()
        worst = full or max(self.windows, key=PlanWindow.share)
        overall = "allowed"
        for w in self.windows:
            share = w.share()
            status = ("rejected" if share >= 1.0 else "allowed_warning" if share >= self.warn_at
                      else "allowed")
            if status == "rejected" or (status == "allowed_warning" and overall == "allowed"):
                overall = status
            at = f"anthropic-ratelimit-unified-{w.name}"
            out[f"{at}-utilization"] = f"{share:.4g}"
            out[f"{at}-reset"] = str(math.ceil(w.reset_at(now)))
            out[f"{at}-status"] = status
            if share >= self.warn_at:
                out[f"{at}-surpassed-threshold"] = f"{self.warn_at:g}"
        out["anthropic-ratelimit-unified-status"] = overall
        out["anthropic-ratelimit-unified-representative-claim"] = _CLAIMS.get(worst.name,
                                                                              worst.name)
        out["anthropic-ratelimit-unified-reset"] = str(math.ceil(worst.reset_at(now)))
        return out

    def _codex_headers(self, now: float) -> dict[str, str]:
        out: dict[str, str] = {}
        for which, w in zip(("primary", "secondary"), self.windows, strict=False):
            at = f"x-codex-{which}"
            out[f"{at}-used-percent"] = f"{w.share() * 100:.4g}"
            # The window's nominal length (a demo's "5h" window lasts minutes, not hours).
            out[f"{at}-window-minutes"] = str(_MINUTES.get(w.name, int(w.seconds // 60)))
            out[f"{at}-reset-at"] = str(math.ceil(w.reset_at(now)))
        return out

    def rate_limits_event(self) -> bytes:
        """A ChatGPT plan's `codex.rate_limits` stream event, which the backend sends before
        `response.created` (the shape Codex CLI reads: `rate_limits.primary.used_percent`,
        `window_minutes`, `reset_at`, and `secondary`)."""
        now = self._now()
        limits: dict[str, Any] = {"allowed": self._full() is None,
                                  "limit_reached": self._full() is not None}
        for which, w in zip(("primary", "secondary"), self.windows, strict=False):
            limits[which] = {"used_percent": round(w.share() * 100, 2),
                             "window_minutes": _MINUTES.get(w.name, int(w.seconds // 60)),
                             "reset_at": math.ceil(w.reset_at(now))}
        data = {"type": "codex.rate_limits", "plan_type": self.plan_type, "rate_limits": limits}
        return f"event: codex.rate_limits\ndata: {json.dumps(data)}\n\n".encode()

    def to_json(self) -> dict[str, Any]:
        now = self._now()
        return {"kind": self.kind, "refused": self.refused, "windows": [
            {"name": w.name, "used": round(w.share(), 4), "tokens": w.used,
             "capacity": w.capacity, "resets_at": int(w.reset_at(now))} for w in self.windows]}
