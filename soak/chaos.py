"""The fault schedule: a seeded, endless, deterministic sequence of things going wrong.

The same seed gives the same actions at the same offsets; what they do to traffic depends on
timing, which is the point of a soak. Most faults end by themselves (`times` or `duration_s`), so
the providers are healthy often enough for failover and recovery to be exercised both ways.

Actions:
    a fault mode   set on one fake provider (see claudex/demo/faults.py)
    rotate         the OAuth provider starts accepting only a new access token, which the fake
                   token endpoint hands out on the next refresh (the proxy must refresh on 401)
    trip / reset   an operator trips a breaker through the admin API, and resets it later
    context_small  the provider's context window shrinks below the traffic's long prompts
                   (`CONTEXT_WINDOW` of the fakes' tokens) for a while: a long request is
                   refused there with the real 400 wording; as a backup claudex fails over,
                   learns the window and passes it over for later long requests
    window_spent   the provider becomes a subscription whose window is spent until T (1-4 s
                   later): it answers the service's "window spent" 429 without Retry-After
                   (claudex/demo/fake_plans.py), claudex fails over at once and must send it
                   nothing more until T
    turns_slow     the provider's answers get slower in steps (`SLOW_STEPS_MS` added before
                   each, 1.5 s apart), stay at the slowest for 6-9 s, and it `recovers`: slow
                   enough for claudex's watch (engine/health/slowness.py: p95 3x its own
                   baseline and over 500 ms, judged every 5 s) to call it slow, and, with
                   `avoid_slow` on, to start new conversations elsewhere; under the streams'
                   first-byte timeout, so every answer still comes. While it is slow no other
                   fault mode is set on it (one would end the spell at once)

Actions on the upstream proxy (only when the schedule is given one; claudex/demo/fake_proxy.py),
each ended by a `proxy_back` (mode ok, the same port) before the next proxy action:
    proxy_refuses  the proxy refuses connections (mode down) for 1-3 s
    proxy_429      the proxy answers CONNECT and requests with 429 and a short Retry-After
                   (0.1-0.8 s, under max_retry_after) for 1-3 s
    proxy_dies     the proxy is gone (mode down, every connection dropped) for 5-8 s, longer
                   than the recovery time, so its breaker's half-open probes fail and back off
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from claudex.demo.fake_plans import Plan

MODES_WEIGHTED: tuple[tuple[str, int], ...] = (
    ("down", 3), ("500", 3), ("529", 3), ("429", 4), ("slow", 3), ("hang", 2), ("cut", 3),
    ("cut_before_content", 3), ("stream_error", 2), ("stall", 2), ("ok", 8), ("rotate", 3),
    ("trip", 2), ("context_small", 2), ("window_spent", 2), ("turns_slow", 1),
)
PROXY_WEIGHTED: tuple[tuple[str, int], ...] = (
    ("proxy_refuses", 3), ("proxy_429", 3), ("proxy_dies", 2),
)
"""Drawn with the modes above when the schedule has a proxy (not in the fleet soak's)."""
PROXY_ACTIONS: Final = frozenset(kind for kind, _ in PROXY_WEIGHTED) | {"proxy_back"}
SLOW_STEPS_MS: Final = (200, 450, 700)
"""A `turns_slow` spell's latencies: the last is the only one over slowness' 500 ms floor, and
it stays under the soak's `stream_first_byte_timeout` (1 s)."""
SLOW_STEP_S: Final = 1.5
CONTEXT_WINDOW = 200
"""The window a `context_small` fault sets, in the fakes' tokens (a quarter of the body's bytes):
over the traffic's short prompts (~50), under its long ones (~260). Always the same, so what
claudex learned from one such fault is what the next one refuses."""


@dataclass(frozen=True)
class ChaosAction:
    at: float
    """Seconds after the soak's start."""
    target: str
    kind: str
    """A fault mode, or one of the actions above ("reset" and "recovers" end a "trip" and a
    "turns_slow")."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for `FakeProvider.set_fault` (fault modes only)."""

    def describe(self) -> str:
        extra = ", ".join(f"{k}={v}" for k, v in self.settings.items())
        return f"+{self.at:6.2f}s {self.target:<6} {self.kind}" + (f" ({extra})" if extra else "")


def fault_of(action: ChaosAction) -> tuple[str, dict[str, Any]]:
    """The fault mode and `FakeProvider.set_fault` settings an action that sets one means: a
    fault mode itself, or a step of a `turns_slow` spell ("slow", until changed) and its end
    ("recovers": "ok")."""
    if action.kind == "turns_slow":
        return "slow", {"latency_ms": action.settings["latency_ms"]}
    if action.kind == "recovers":
        return "ok", {}
    return action.kind, action.settings


def proxy_mode_of(action: ChaosAction) -> tuple[str, dict[str, Any]]:
    """The `FakeProxy.set_mode` mode and keyword arguments of a proxy action."""
    if action.kind == "proxy_429":
        return "rate_limited", {"retry_after": action.settings["retry_after"]}
    if action.kind in ("proxy_refuses", "proxy_dies"):
        return "down", {}
    return "ok", {}


def shrink_context(fake: Any, settings: dict[str, Any]) -> None:
    """A `context_small` action on `fake` (a `FakeProvider`): its window shrinks to
    `settings["window"]` for `settings["duration_s"]`, then it is unlimited again."""
    window = settings["window"]
    fake.context_window = window

    def restore() -> None:
        if fake.context_window == window:
            fake.context_window = None

    asyncio.get_running_loop().call_later(settings["duration_s"], restore)


def spend_window(fake: Any, settings: dict[str, Any]) -> float:
    """A `window_spent` action on `fake` (a `FakeProvider`): a subscription plan (Claude's
    for an Anthropic fake, ChatGPT's for the others) whose window is spent for
    `settings["duration_s"]`; its reset time (monotonic) is returned, for the judge."""
    if fake.plan is None:
        fake.plan = Plan.claude() if fake.protocol == "anthropic" else Plan.chatgpt()
    fake.plan.spend(settings["duration_s"])
    return time.monotonic() + float(settings["duration_s"])


def _retry_after(rng: random.Random) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.45:  # short: worth waiting for
        return {"retry_after": round(rng.uniform(0.05, 0.5), 2)}
    if roll < 0.6:  # short, in milliseconds as well
        return {"retry_after": 1, "retry_after_ms": rng.randint(20, 300)}
    if roll < 0.8:  # longer than max_retry_after: fail over at once
        return {"retry_after": rng.randint(3, 10)}
    if roll < 0.9:  # an HTTP-date a few seconds ahead
        return {"retry_after": email.utils.formatdate(time.time() + rng.randint(1, 4),
                                                      usegmt=True)}
    return {"retry_after": None}


def _settings(kind: str, rng: random.Random) -> dict[str, Any]:
    # Outages last a while (real incidents are measured in time, not in requests); faults
    # counted in requests also end after a few seconds, because while a breaker is open no
    # request arrives to use them up.
    outage = round(rng.uniform(0.3, 2.0), 2)
    if kind in ("down", "hang", "500", "529", "cut_before_content"):
        return {"duration_s": outage}
    if kind == "429":
        return {"duration_s": outage, **_retry_after(rng)}
    if kind == "slow":
        return {"latency_ms": rng.randint(20, 300), "duration_s": round(rng.uniform(0.5, 3), 2)}
    if kind == "cut":
        return {"cut_after_events": rng.randint(1, 3), "times": rng.randint(2, 30),
                "duration_s": 3.0}
    if kind == "stall":  # 0: stalled before content (fails over), else silent after it
        return {"cut_after_events": rng.randint(0, 2), "duration_s": outage}
    if kind == "context_small":
        return {"window": CONTEXT_WINDOW, "duration_s": round(rng.uniform(1.0, 4.0), 2)}
    if kind == "window_spent":
        return {"duration_s": round(rng.uniform(1.0, 4.0), 2)}
    if kind == "stream_error":
        return {"cut_after_events": rng.randint(0, 3), "times": rng.randint(2, 20),
                "duration_s": 3.0}
    return {}


def schedule(seed: int, providers: tuple[str, ...], oauth_provider: str,
             proxy: str | None = None) -> Iterator[ChaosAction]:
    """Endless actions, in time order, 0.15–0.8 s apart; a trip is always followed by its reset
    (0.3–2 s later) before the same breaker is tripped again, and a `turns_slow` spell by its
    steps and its `recovers` before any other fault mode is set on that provider. With `proxy`,
    the proxy actions are drawn too, each followed by its `proxy_back` before the next (without,
    the schedule is what it was before there were any)."""
    rng = random.Random(seed)
    drawn = MODES_WEIGHTED + (PROXY_WEIGHTED if proxy is not None else ())
    kinds = [kind for kind, _ in drawn]
    weights = [weight for _, weight in drawn]
    pending: list[ChaosAction] = []  # resets and the rest of slow spells, when they are due
    tripped: set[str] = set()
    slow: set[str] = set()  # providers in a turns_slow spell
    proxy_out = False  # a proxy action not yet ended by its proxy_back
    # The first proxy actions are one of each kind, in a seeded order: a short soak (the CI's
    # 30 s) meets all three; drawn by weight after that.
    firsts = rng.sample([kind for kind, _ in PROXY_WEIGHTED], len(PROXY_WEIGHTED)) if proxy else []
    at = 0.5
    while True:
        at += rng.uniform(0.15, 0.8)
        due = sorted((r for r in pending if r.at <= at), key=lambda r: r.at)
        for action in due:
            pending.remove(action)
            if action.kind == "reset":
                tripped.discard(action.target)
            elif action.kind == "recovers":
                slow.discard(action.target)
            elif action.kind == "proxy_back":
                proxy_out = False
            yield action
        target = rng.choice(providers)
        kind = rng.choices(kinds, weights)[0]
        if kind in PROXY_ACTIONS:
            assert proxy is not None
            if proxy_out:
                continue
            if firsts:
                kind = firsts.pop(0)
            proxy_out = True
            settings = _proxy_settings(kind, rng)
            pending.append(ChaosAction(round(at + settings["duration_s"], 3), proxy,
                                       "proxy_back"))
            yield ChaosAction(round(at, 3), proxy, kind, settings)
            continue
        if kind == "rotate":
            target = oauth_provider
        if kind == "trip":
            if target in tripped:
                continue
            tripped.add(target)
            pending.append(ChaosAction(round(at + rng.uniform(0.3, 2.0), 3), target, "reset"))
        if target in slow and kind not in _NOT_MODES:
            continue  # a fault mode would end the spell
        if kind == "turns_slow":
            slow.add(target)
            for step, latency in enumerate(SLOW_STEPS_MS[1:], start=1):
                pending.append(ChaosAction(round(at + step * SLOW_STEP_S, 3), target, kind,
                                           {"latency_ms": latency}))
            end = at + (len(SLOW_STEPS_MS) - 1) * SLOW_STEP_S + rng.uniform(6.0, 9.0)
            pending.append(ChaosAction(round(end, 3), target, "recovers"))
            yield ChaosAction(round(at, 3), target, kind, {"latency_ms": SLOW_STEPS_MS[0]})
            continue
        yield ChaosAction(round(at, 3), target, kind, _settings(kind, rng))


def _proxy_settings(kind: str, rng: random.Random) -> dict[str, Any]:
    if kind == "proxy_dies":
        return {"duration_s": round(rng.uniform(5.0, 8.0), 2)}
    if kind == "proxy_429":
        return {"duration_s": round(rng.uniform(1.0, 3.0), 2),
                "retry_after": round(rng.uniform(0.1, 0.8), 2)}
    return {"duration_s": round(rng.uniform(1.0, 3.0), 2)}


# The actions that set no fault mode on the fake (its `faults.mode` is left as it is).
_NOT_MODES: Final = frozenset({"rotate", "trip", "context_small", "window_spent"})
