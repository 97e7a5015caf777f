"""What instances of a fleet tell each other, and the pure rules for merging it.

A fleet shares *facts*, never breaker tables: each instance keeps its own `CircuitBreaker`
(pure, local, authoritative for its own requests) and drives it toward what the facts say.

A fact is about one provider and lives in one of three registers:

- `operator`: "forced_open" (tripped) or "reset"; written by trip/reset from any instance. A
  trip carries the operator's `reason`, and a timed one its `until`: when that passes every
  instance's breaker goes half-open by itself (the breaker reads the deadline), so it ends
  everywhere at once without another write.
- `traffic`: "open" (failures opened a breaker, until `until`) or "closed" (a probe succeeded).
- `cooldown`: "cooling" until `until` (a 429's Retry-After).
- `window`: "spent" until `until` (a plan's quota window, until its reset; `reason` names the
  window, `5h`). An operator's reset ends one written before it (the operator knows something
  claudex does not: extra usage bought, another account); a plan still spent is marked again
  by its next answer, a newer fact.
- `context`: "window", one record per model sent (`model`): the provider's context window for
  it, `tokens` (stated in a 400, or learned just under a refused prompt's estimate), so every
  instance passes a backup too small for a long conversation over without each paying a refused
  request. Nothing else reads it: an operator's reset does not end it (the model's window is
  what it is), and it stays a day in Redis (`SETTLED_TTL_S`), as long as the instances keep it.

Each register holds the last write: the newer fact wins, newer meaning a later `(at, by)` — the
wall time it was written and the instance that wrote it (a tie between two instances is broken by
name, so every instance picks the same one). Because every fact carries its time, a stale fact
republished after Redis comes back (an old trip, say) loses to the later one instead of being
resurrected.

Between registers, operator intent wins: a trip holds whatever traffic says until a later reset;
a reset cancels the traffic open, the cooldown and the spent window written before it, not
those written after.
`view()` computes that, given the wall time; it does no I/O and reads no clock of its own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

Register = Literal["operator", "traffic", "cooldown", "window", "context"]
REGISTERS: tuple[Register, ...] = ("operator", "traffic", "cooldown", "window", "context")
_STATES: dict[Register, frozenset[str]] = {
    "operator": frozenset({"forced_open", "reset"}),
    "traffic": frozenset({"open", "closed"}),
    "cooldown": frozenset({"cooling"}),
    "window": frozenset({"spent"}),
    "context": frozenset({"window"}),
}
# Context windows kept per provider (as ProviderRuntime keeps them): a peer cannot grow this
# without bound either.
MAX_CONTEXTS = 64

# How long Redis keeps a record that does not expire by itself: long enough that an instance
# cut off for a while cannot resurrect what it missed, short enough that dead providers' keys go.
SETTLED_TTL_S = 24 * 3600.0


@dataclass(frozen=True)
class Fact:
    provider: str
    register: Register
    state: str
    at: float  # wall-clock seconds when written
    by: str  # the instance that wrote it
    until: float | None = None  # wall time an "open", "cooling" or timed trip stops holding
    reason: str | None = None  # a trip's: the operator's words
    model: str | None = None  # a context window's: the model it is for ("" when none was sent)
    tokens: int | None = None  # a context window's size

    def newer_than(self, other: Fact | None) -> bool:
        return other is None or (self.at, self.by) > (other.at, other.by)

    def live(self, now_wall: float) -> bool:
        return self.until is None or now_wall < self.until

    def ttl_s(self, now_wall: float) -> float | None:
        """How long Redis should keep the record: None for a trip until reset, else until it
        stops holding (never less than a second, so a write always lands)."""
        if self.state == "forced_open" and self.until is None:
            return None
        if self.until is None:
            return SETTLED_TTL_S
        return max(1.0, self.until - now_wall)

    def key(self) -> str:
        if self.register == "context":
            return f"context:{self.provider}:{self.model or ''}"
        return f"{self.register}:{self.provider}"

    def encode(self) -> str:
        data: dict[str, Any] = {"provider": self.provider, "register": self.register,
                                "state": self.state, "at": self.at, "by": self.by,
                                "until": self.until}
        if self.reason is not None:
            data["reason"] = self.reason
        if self.register == "context":
            data["model"], data["tokens"] = self.model or "", self.tokens
        return json.dumps(data, separators=(",", ":"))


class BadFact(ValueError):
    """A record that is not a fact this version understands (another program's key, a newer
    claudex's shape): ignored, never applied half-read."""


def decode(raw: str | bytes) -> Fact:
    try:
        data: Any = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadFact(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadFact("not an object")
    register, state = data.get("register"), data.get("state")
    if register not in _STATES or state not in _STATES[register]:
        raise BadFact(f"unknown register/state {register!r}/{state!r}")
    provider, by = data.get("provider"), data.get("by")
    at, until = data.get("at"), data.get("until")
    if not isinstance(provider, str) or not isinstance(by, str) or not provider or not by:
        raise BadFact("provider and by must be names")
    if isinstance(at, bool) or not isinstance(at, int | float):
        raise BadFact("at must be a time")
    if until is not None and (isinstance(until, bool) or not isinstance(until, int | float)):
        raise BadFact("until must be a time or null")
    reason = data.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise BadFact("reason must be a string or absent")
    model, tokens = data.get("model"), data.get("tokens")
    if register == "context":
        if not isinstance(model, str):
            raise BadFact("a context window names its model")
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            raise BadFact("a context window's tokens must be a positive integer")
    else:
        model, tokens = None, None
    return Fact(provider, register, state, float(at), by,
                None if until is None else float(until), reason or None, model, tokens)


@dataclass
class Registers:
    """The newest fact known locally for one provider, per register."""

    operator: Fact | None = None
    traffic: Fact | None = None
    cooldown: Fact | None = None
    window: Fact | None = None
    # The `context` register holds one fact per model: model -> its newest context window.
    contexts: dict[str, Fact] = field(default_factory=dict)

    def get(self, register: Register, model: str | None = None) -> Fact | None:
        if register == "context":
            return self.contexts.get(model or "")
        value: Fact | None = getattr(self, register)
        return value

    def offer(self, fact: Fact) -> bool:
        """Keep `fact` if it is newer than what its register holds; True when it was kept."""
        if not fact.newer_than(self.get(fact.register, fact.model)):
            return False
        if fact.register == "context":
            model = fact.model or ""
            if len(self.contexts) >= MAX_CONTEXTS and model not in self.contexts:
                self.contexts.pop(next(iter(self.contexts)))
            self.contexts[model] = fact
        else:
            setattr(self, fact.register, fact)
        return True

    def facts(self) -> list[Fact]:
        return [f for f in (self.operator, self.traffic, self.cooldown, self.window)
                if f is not None] + list(self.contexts.values())


BreakerView = Literal["forced_open", "open", "closed"]


@dataclass(frozen=True)
class View:
    """What the facts say a provider's breaker and cooldown should be, at one wall time."""

    breaker: BreakerView
    open_until: float | None = None  # wall time, for "open"
    cooling_until: float | None = None  # wall time; None when no cooldown holds
    reset_at: float | None = None  # the reset that cancelled what came before, if any
    spent_until: float | None = None  # wall time a plan's spent window resets; None: not spent


def view(regs: Registers, now_wall: float) -> View:
    op, traffic, cool, window = regs.operator, regs.traffic, regs.cooldown, regs.window
    # Only a reset ends a spent window: a timed trip's end says nothing about the plan's quota.
    last_reset = op if op is not None and op.state == "reset" else None
    spent = window.until if window is not None and window.live(now_wall) \
        and window.newer_than(last_reset) else None
    if op is not None and op.state == "forced_open" and op.live(now_wall):
        return View("forced_open", cooling_until=_cooling(cool, None, now_wall),
                    spent_until=spent)
    # A timed trip that ended counts as the operator's last word, like a reset: what traffic
    # said before it is over too.
    reset = op if op is not None else None
    breaker: BreakerView = "closed"
    open_until = None
    if (traffic is not None and traffic.state == "open" and traffic.live(now_wall)
            and traffic.newer_than(reset)):
        breaker, open_until = "open", traffic.until
    return View(breaker, open_until, _cooling(cool, reset, now_wall),
                None if reset is None else reset.at, spent)


def _cooling(cool: Fact | None, reset: Fact | None, now_wall: float) -> float | None:
    if cool is None or not cool.live(now_wall) or not cool.newer_than(reset):
        return None
    return cool.until
