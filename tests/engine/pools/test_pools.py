"""Choosing a pool's member and keeping bindings (engine/core/pools.py, bindings.py), with the
clock injected: the move rule (out longer than the cache lives), headroom, weights, LRU and
idle expiry."""

from __future__ import annotations

from typing import Any

import pytest

from claudex.engine.breaker.circuit import BreakerState
from claudex.engine.clock import FakeClock
from claudex.engine.core.bindings import Bindings
from claudex.engine.core.pools import CACHE_S, PoolBalancer
from claudex.engine.core.request import ProxyRequest
from claudex.engine.engine import Engine
from tests.conftest import TEST_ENV, build_config

MEMBER = """
[[profiles]]
name = "{name}"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "FAKE_KEY"
failure_threshold = 1
recovery_seconds = {recovery}
max_recovery_seconds = 1000
"""


def engine_with(pool: str, clock: FakeClock, recovery: float = 30) -> Engine:
    text = "".join(MEMBER.format(name=n, recovery=recovery) for n in ("a", "b", "c")) + pool
    return Engine(build_config(text), env=TEST_ENV, clock=clock, wall=clock.wall,
                  sleep=clock.sleep)


STICKY = '[[profiles]]\nname = "p"\nmembers = ["a", "b", "c"]\n'


def request(first: str = "hello", session: str = "s1") -> ProxyRequest:
    body = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": first}]}
    return ProxyRequest("anthropic", "messages", body, b"",
                        {"x-claude-code-session-id": session}, profile="p")


async def order(engine: Engine, req: ProxyRequest) -> Any:
    assert engine.pools is not None
    pool = engine.config.pool("p")
    assert pool is not None
    return await engine.pools.turn(pool, req)


async def test_a_new_conversation_goes_to_the_member_with_most_headroom() -> None:
    clock = FakeClock()
    engine = engine_with(STICKY, clock)
    used = {"a": 0.5, "b": 0.1, "c": 0.3}
    for name, rt in engine.runtimes.items():
        rt.window_used = lambda n=name: used[n]  # type: ignore[method-assign]
    turn = await order(engine, request())
    assert turn.order == ["b", "c", "a"] and turn.bound is None
    # Equal windows: fewest bindings, then weight.
    used.update(a=0.2, b=0.2, c=0.2)
    assert engine.pools is not None
    engine.pools.served(turn, "b")
    assert (await order(engine, request("other"))).order == ["a", "c", "b"]


async def test_a_bound_member_out_briefly_keeps_the_binding_out_long_loses_it() -> None:
    clock = FakeClock()
    engine = engine_with(STICKY, clock, recovery=30)
    assert engine.pools is not None
    first = await order(engine, request())
    engine.pools.served(first, "a")
    rt = engine.runtimes["a"]
    rt.breaker.record_failure()
    assert rt.breaker.state is BreakerState.OPEN
    turn = await order(engine, request())
    assert turn.order[0] == "a" and turn.bound == "a" and not turn.move  # 30 s: cache warm
    engine.pools.served(turn, "b")
    assert engine.bindings.get("p", turn.conversation).member == "a"  # type: ignore[union-attr]
    # 280 s since a served it, 30 s of opening left: back after the cache is gone.
    clock.advance(CACHE_S - 20)
    rt.breaker.reset()
    rt.breaker.record_failure()
    turn = await order(engine, request())
    assert turn.move
    engine.pools.served(turn, "b")
    assert engine.bindings.get("p", turn.conversation).member == "b"  # type: ignore[union-attr]


@pytest.mark.parametrize("out", ["tripped", "disabled", "spent"])
async def test_a_member_out_for_good_moves_its_conversation(out: str) -> None:
    clock = FakeClock()
    engine = engine_with(STICKY, clock)
    assert engine.pools is not None
    engine.pools.served(await order(engine, request()), "a")
    rt = engine.runtimes["a"]
    if out == "tripped":
        rt.breaker.trip()
    elif out == "spent":
        rt.window_spent_until = clock.wall() + 3600
    else:
        import dataclasses
        rt.profile = dataclasses.replace(rt.profile, enabled=False)
    turn = await order(engine, request())
    assert turn.bound == "a" and turn.move


async def test_round_robin_and_least_busy() -> None:
    clock = FakeClock()
    engine = engine_with('[[profiles]]\nname = "p"\nmembers = ["a", "b", "c"]\n'
                         'balance = "round_robin"\nweights = { b = 2 }\n', clock)
    firsts = [(await order(engine, request())).order[0] for _ in range(8)]
    assert firsts == ["b", "a", "c", "b", "b", "a", "c", "b"]
    engine = engine_with('[[profiles]]\nname = "p"\nmembers = ["a", "b", "c"]\n'
                         'balance = "least_busy"\n', clock)
    engine.runtimes["a"].gate.in_flight = 3
    engine.runtimes["b"].gate.in_flight = 1
    engine.runtimes["c"].gate.in_flight = 2
    assert (await order(engine, request())).order == ["b", "c", "a"]


def test_bindings_are_bounded_and_forgotten_when_idle() -> None:
    clock = FakeClock()
    bindings = Bindings(clock, limit=3, idle_s=3600)
    for n in range(4):
        bindings.bind("p", f"c{n}", "a")
        clock.advance(1)
    assert bindings.get("p", "c0") is None and len(bindings) == 3  # the least recent went
    assert bindings.count("p", "a") == 3
    bindings.seen("p", "c1")  # a turn served elsewhere keeps it alive (at 1004)
    clock.advance(3600)  # c2 and c3 (1002, 1003) are over an hour idle
    assert bindings.get("p", "c2") is None and bindings.get("p", "c1") is not None
    assert bindings.counts("p") == {"a": 1}
    bindings.bind("p", "c1", "b")
    assert bindings.counts("p") == {"b": 1}


def test_the_balancer_costs_nothing_without_pools() -> None:
    clock = FakeClock()
    engine = engine_with("", clock)
    assert engine.pools is None
    assert isinstance(PoolBalancer, type)


async def test_a_member_spent_by_the_turn_itself_loses_the_binding_at_once() -> None:
    clock = FakeClock()
    engine = engine_with(STICKY, clock)
    assert engine.pools is not None
    engine.pools.served(await order(engine, request()), "a")
    turn = await order(engine, request())
    assert turn.bound == "a" and not turn.move  # eligible when the turn started
    engine.runtimes["a"].window_spent_until = clock.wall() + 3600  # its answer: spent
    engine.pools.served(turn, "b")
    assert engine.bindings.get("p", turn.conversation).member == "b"  # type: ignore[union-attr]
