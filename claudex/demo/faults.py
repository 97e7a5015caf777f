"""Fault modes for the fake providers, and the mutable state that selects one.

A `FaultState` says how a fake provider misbehaves right now. Tests may set its fields directly
(from the fake's own event loop); the owning `FakeProvider` observes every assignment so that, for
example, `faults.mode = "down"` closes the listening socket at once and any other mode reopens it.

Modes (what a request to an API route gets):
    ok                   a normal answer
    down                 connections are refused (the listening socket is closed)
    500 / 529            the protocol's server error / overloaded error
    429                  rate limit error with `retry-after` (and `retry-after-ms` when set)
    slow                 a normal answer after `latency_ms`
    hang                 the request is accepted and never answered
    401                  authentication error
    cut                  streaming: `cut_after_events` content deltas, then the connection drops
    cut_before_content   streaming: only the stream's preamble, then the connection drops
    stream_error         streaming: `cut_after_events` content deltas, then an SSE `error` event
    stall                streaming: the preamble (`message_start`, a ping) and `cut_after_events`
                         content deltas, then silence with the connection held open (0: stalled
                         before content); a non-streamed request hangs
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

Fault = Literal[
    "ok",
    "down",
    "500",
    "529",
    "429",
    "slow",
    "hang",
    "401",
    "cut",
    "cut_before_content",
    "stream_error",
    "stall",
]
FAULT_MODES: Final[tuple[str, ...]] = get_args(Fault)

DEFAULT_SLOW_MS: Final = 2000.0
"""Latency that `set_fault("slow")` uses when no `latency_ms` is given."""

FAULTS_FOR_MODELS: Final = frozenset({"down", "hang", "500", "401"})
"""The faults that health probes (`GET /v1/models`) see; the others only hit API calls."""

STREAM_ONLY_FAULTS: Final = frozenset({"cut", "cut_before_content", "stream_error", "stall"})


class FaultConfigError(ValueError):
    """A fault setting that makes no sense (unknown mode, negative latency, ...)."""


@dataclass(eq=False)
class FaultState:
    """How a fake provider behaves; see the module docstring for the modes."""

    mode: Fault = "ok"
    retry_after: float | str | None = 1.0
    """429: `retry-after` header; seconds, or a string sent verbatim (an HTTP-date); None = none."""
    retry_after_ms: float | None = None
    """429: also send `retry-after-ms` with this value."""
    latency_ms: float = 0.0
    """Added before every answer (API and model routes), in any mode."""
    cut_after_events: int = 3
    """cut / stream_error / stall: content deltas sent before the failure; the first one comes
    with its block's opening (content_block_start), so 0 fails before any content event."""
    valid_tokens: set[str] | None = None
    """When set, a request whose bearer token or x-api-key is not in it gets 401."""
    times: int | None = None
    """Apply the fault to this many requests, then revert to "ok" (None: until changed)."""
    duration_s: float | None = None
    """Apply the fault for this many seconds, then revert to "ok" (None: until changed)."""
    _observer: Callable[[str], None] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "mode" and value not in FAULT_MODES:
            raise FaultConfigError(f"unknown fault mode {value!r}; expected one of {FAULT_MODES}")
        object.__setattr__(self, name, value)
        observer = self.__dict__.get("_observer")
        if observer is not None and not name.startswith("_"):
            observer(name)

    def observe(self, observer: Callable[[str], None] | None) -> None:
        """Call `observer(field_name)` after every public field assignment (None: stop)."""
        object.__setattr__(self, "_observer", observer)

    def consume_one(self) -> None:
        """Count one request against `times`; revert to "ok" when spent.

        The revert is deliberately not reported to the observer: it is not an operator's change,
        so requests left hanging by an earlier "hang" stay hung.
        """
        if self.times is None:
            return
        remaining = self.times - 1
        if remaining > 0:
            object.__setattr__(self, "times", remaining)
        else:
            object.__setattr__(self, "times", None)
            object.__setattr__(self, "mode", "ok")

    def to_json(self) -> dict[str, Any]:
        """The state as shown by `GET /_fake/state` (token values are not shown)."""
        return {
            "mode": self.mode,
            "retry_after": self.retry_after,
            "retry_after_ms": self.retry_after_ms,
            "latency_ms": self.latency_ms,
            "cut_after_events": self.cut_after_events,
            "valid_tokens": None if self.valid_tokens is None else len(self.valid_tokens),
            "times": self.times,
            "duration_s": self.duration_s,
        }


def _number(name: str, value: object, *, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FaultConfigError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < minimum:
        raise FaultConfigError(f"{name} must be a finite number >= {minimum:g}, got {value!r}")
    return number


def _count(name: str, value: object, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FaultConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def make_fault_state(
    mode: object,
    settings: Mapping[str, object],
    *,
    valid_tokens: set[str] | None = None,
) -> FaultState:
    """Validate `mode` and `settings` (JSON-like values) into a fresh FaultState.

    Fields not in `settings` take their defaults, except `valid_tokens`, which the caller passes
    (it is configuration more than a fault, so changing the fault keeps it).
    """
    if mode not in FAULT_MODES:
        raise FaultConfigError(f"unknown fault mode {mode!r}; expected one of {FAULT_MODES}")
    known = {
        "retry_after",
        "retry_after_ms",
        "latency_ms",
        "cut_after_events",
        "valid_tokens",
        "times",
        "duration_s",
    }
    unknown = sorted(set(settings) - known)
    if unknown:
        raise FaultConfigError(f"unknown fault setting(s): {', '.join(unknown)}")
    state = FaultState(mode=mode)  # type: ignore[arg-type]  # checked against FAULT_MODES above
    if "retry_after" in settings:
        value = settings["retry_after"]
        state.retry_after = (
            value if value is None or isinstance(value, str) else _number("retry_after", value)
        )
    if settings.get("retry_after_ms") is not None:
        state.retry_after_ms = _number("retry_after_ms", settings["retry_after_ms"])
    if settings.get("latency_ms") is not None:
        state.latency_ms = _number("latency_ms", settings["latency_ms"])
    elif mode == "slow":
        state.latency_ms = DEFAULT_SLOW_MS
    if "cut_after_events" in settings:
        state.cut_after_events = _count("cut_after_events", settings["cut_after_events"], minimum=0)
    tokens = settings.get("valid_tokens", valid_tokens)
    state.valid_tokens = None if tokens is None else _token_set(tokens)
    if settings.get("times") is not None:
        if mode == "down":
            raise FaultConfigError(
                "times does not apply to 'down' (a refused connection is never seen as a "
                "request); use duration_s"
            )
        state.times = _count("times", settings["times"], minimum=1)
    if settings.get("duration_s") is not None:
        state.duration_s = _number("duration_s", settings["duration_s"])
    return state


def _token_set(tokens: object) -> set[str]:
    if isinstance(tokens, str) or not isinstance(tokens, Iterable):
        raise FaultConfigError("valid_tokens must be a list of strings")
    result = set()
    for token in tokens:
        if not isinstance(token, str):
            raise FaultConfigError("valid_tokens must be a list of strings")
        result.add(token)
    return result
