"""The per-proxy state (engine/network/proxy_state.py), on an injected clock."""

from __future__ import annotations

from claudex.config.model import BreakerSettings
from claudex.engine.events import Event
from claudex.engine.network.failures import ProxyFailure, ProxyKind
from claudex.engine.network.proxy_state import DefaultSpec, ProxyBoard
from claudex.engine.network.routes import Hop, Route

CORP = Hop("corp", "http://proxy.corp:3128", "http", "alice", "s3cret")
CORP2 = Hop("corp-2", "http://proxy2.corp:3128", "http")
REFUSED = ProxyFailure(ProxyKind.REFUSED, "connection refused")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def board(threshold: int = 2) -> tuple[ProxyBoard, Clock, list[Event]]:
    clock, events = Clock(), list[Event]()
    b = ProxyBoard(clock, events.append)
    settings = BreakerSettings(failure_threshold=threshold, recovery_seconds=30)
    b.configure({"corp": DefaultSpec(CORP, settings, profiles=("claude",)),
                 "corp-2": DefaultSpec(CORP2, settings)})
    return b, clock, events


def fail(b: ProxyBoard, name: str, failure: ProxyFailure = REFUSED) -> None:
    b.failed(name, b.acquire(name), failure)


def test_failures_open_the_proxys_breaker_with_an_event_naming_it() -> None:
    b, clock, events = board()
    fail(b, "corp")
    assert b.out_reason("corp", clock.now) is None
    fail(b, "corp")
    assert b.out_reason("corp", clock.now) == "open (connection refused)"
    assert [e.message for e in events if e.kind == "proxy"] == [
        "proxy corp opened (connection refused)"]
    route = Route((CORP, CORP2))
    assert b.eligible(route.hops, clock.now) == [CORP2]
    assert b.trouble(route, clock.now) == "proxy corp open (connection refused)"
    clock.now += 31
    assert b.eligible(route.hops, clock.now) == [CORP, CORP2]  # half-open: one trial


def test_auth_failed_is_red_until_a_success_reset_or_reload() -> None:
    b, clock, _ = board(threshold=5)
    fail(b, "corp", ProxyFailure(ProxyKind.AUTH_FAILED, "proxy authentication required (407)"))
    assert b.out_reason("corp", clock.now) == "auth failed (proxy authentication required (407))"
    snap = b.snapshot()[0]
    assert snap["health"] == "red" and snap["auth_failed"] is True
    assert b.reset("corp") == ["auth failed"]
    assert b.out_reason("corp", clock.now) is None


def test_a_429_cools_the_proxy_and_counts_no_failure() -> None:
    b, clock, events = board(threshold=1)
    fail(b, "corp", ProxyFailure(ProxyKind.RATE_LIMITED, "rate limited (429)", 5.0))
    assert b.get("corp").breaker.snapshot().consecutive_failures == 0  # type: ignore[union-attr]
    b.cool("corp", 5.0)
    assert b.out_reason("corp", clock.now) == "rate limited, cooling down 5s"
    clock.now += 5
    assert b.out_reason("corp", clock.now) is None
    assert "proxy corp rate limited: cooling down 5s" in [e.message for e in events]


def test_snapshot_masks_the_password_and_names_the_profiles() -> None:
    b, _, _ = board()
    snap = b.snapshot()
    assert snap[0]["url"] == "http://alice:****@proxy.corp:3128"
    assert "s3cret" not in repr(snap)
    assert snap[0]["profiles"] == ["claude"]
    assert snap[0]["breaker"]["state"] == "closed" and snap[0]["health"] == "green"


def test_trip_and_reset_and_a_reload_keeps_the_breaker() -> None:
    b, _clock, _ = board()
    assert b.trip("corp")
    assert b.state_code("corp") == 2
    assert b.reset("corp") == ["breaker"]
    fail(b, "corp")
    b.configure({"corp": DefaultSpec(CORP, BreakerSettings(failure_threshold=2))},
                [Route((CORP, Hop("env", "http://e:1", "http")))])
    assert b.get("corp").breaker.snapshot().consecutive_failures == 1  # type: ignore[union-attr]
    assert "env" in b and "corp-2" not in b
    assert b.trip("nope") is False


def test_a_proxys_429s_narrow_its_own_limit_and_successes_grow_it_back() -> None:
    """Seed 001: a proxy refusing tunnels is sent fewer at once. Its limit is its own adaptive
    limit (engine/core/concurrency.py), on the board's clock; tries through it queue on it."""
    b, clock, _ = board()
    gate = b.gate("corp")
    assert gate is not None and gate.limit.limit is None
    for _ in range(8):  # eight tunnels open at once
        assert gate.take_now()
    for _ in range(3):  # three of them refused with 429: a burst
        gate.release()
        gate.limit.on_rate_limited(clock.now, gate.in_flight + 1, clock.now)
    assert gate.limit.limit == 5  # what the proxy accepted then, less the 429 that said so
    snap = b.snapshot()[0]
    assert snap["limit"] == 5 and snap["concurrency"]["recent_429"] == 3
    assert snap["concurrency"]["reason"] == "limited: 3 × 429 in 10 s"
    assert (snap["health"], snap["health_reason"]) == ("yellow", "limited: 3 × 429 in 10 s: "
                                                       "5 at once")
    assert not gate.take_now()  # five in flight: the next try waits in line
    while gate.in_flight:
        gate.release()
    clock.now += 11  # the 429s are out of the window: one more after `limit` carried tries
    for _ in range(5):
        b.succeeded("corp", b.acquire("corp"))  # type: ignore[arg-type]
    assert gate.limit.limit == 6
    for _ in range(6):  # past the 6 in flight at the burst, no 429 for a window: unlimited
        b.succeeded("corp", b.acquire("corp"))  # type: ignore[arg-type]
    assert gate.limit.limit is None and b.snapshot()[0]["limit"] is None


def test_reset_and_reload_start_a_proxys_limit_again() -> None:
    b, clock, _ = board()
    gate = b.gate("corp")
    assert gate is not None
    for _ in range(3):
        gate.limit.on_rate_limited(clock.now, 4)
    assert gate.limit.limit == 3
    assert b.reset("corp") == ["concurrency limit"]
    assert gate.limit.limit is None
    for _ in range(3):
        gate.limit.on_rate_limited(clock.now, 4)
    b.configure({"corp": DefaultSpec(CORP)})
    assert b.gate("corp") is gate and gate.limit.limit is None
