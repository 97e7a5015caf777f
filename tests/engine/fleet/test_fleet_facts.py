"""The fleet's pure parts: merging facts, the view they give, and applying them to local
breakers (injected clocks, no Redis)."""

from __future__ import annotations

import pytest

from claudex.config import parse_config
from claudex.engine.breaker.circuit import BreakerState
from claudex.engine.clock import FakeClock
from claudex.engine.engine import Engine
from claudex.engine.fleet.coordinator import Fleet
from claudex.engine.fleet.facts import BadFact, Fact, Registers, decode, view
from tests.conftest import TEST_ENV

T0 = 1_750_000_000.0

PROFILE = """
[[profiles]]
name = "p"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "FAKE_KEY"
"""


def fact(register: str, state: str, at: float, by: str = "x",
         until: float | None = None, reason: str | None = None) -> Fact:
    return Fact("p", register, state, at, by, until, reason)  # type: ignore[arg-type]


# -- merging -------------------------------------------------------------------------------


def test_the_later_fact_wins_and_a_tie_is_broken_by_the_writers_name() -> None:
    regs = Registers()
    assert regs.offer(fact("operator", "forced_open", T0 + 2, "a"))
    assert not regs.offer(fact("operator", "reset", T0 + 1, "b"))  # older: a stale reset
    assert regs.operator is not None and regs.operator.state == "forced_open"
    assert regs.offer(fact("operator", "reset", T0 + 2, "b"))  # same time, later name
    assert not regs.offer(fact("operator", "forced_open", T0 + 2, "a"))
    assert not regs.offer(fact("operator", "reset", T0 + 2, "b"))  # the same fact again


def test_a_trip_holds_whatever_traffic_says_until_a_later_reset() -> None:
    regs = Registers()
    regs.offer(fact("operator", "forced_open", T0))
    regs.offer(fact("traffic", "closed", T0 + 5))
    assert view(regs, T0 + 6).breaker == "forced_open"
    regs.offer(fact("operator", "reset", T0 + 7))
    assert view(regs, T0 + 8).breaker == "closed"


def test_a_reset_cancels_what_came_before_it_not_what_came_after() -> None:
    regs = Registers()
    regs.offer(fact("traffic", "open", T0, until=T0 + 30))
    regs.offer(fact("cooldown", "cooling", T0, until=T0 + 60))
    regs.offer(fact("operator", "reset", T0 + 1))
    shown = view(regs, T0 + 2)
    assert (shown.breaker, shown.cooling_until) == ("closed", None)
    regs.offer(fact("traffic", "open", T0 + 3, until=T0 + 33))
    regs.offer(fact("cooldown", "cooling", T0 + 3, until=T0 + 20))
    shown = view(regs, T0 + 4)
    assert (shown.breaker, shown.open_until, shown.cooling_until) == ("open", T0 + 33, T0 + 20)


def test_an_open_or_a_cooldown_stops_holding_at_its_until() -> None:
    regs = Registers()
    regs.offer(fact("traffic", "open", T0, until=T0 + 30))
    regs.offer(fact("cooldown", "cooling", T0, until=T0 + 10))
    assert view(regs, T0 + 9.9).cooling_until == T0 + 10
    assert view(regs, T0 + 10).cooling_until is None
    assert view(regs, T0 + 29.9).breaker == "open"
    assert view(regs, T0 + 30).breaker == "closed"


def test_record_lifetimes_a_trip_until_reset_the_rest_until_they_stop_holding() -> None:
    assert fact("operator", "forced_open", T0).ttl_s(T0) is None
    assert fact("traffic", "open", T0, until=T0 + 30).ttl_s(T0 + 10) == 20
    assert fact("traffic", "open", T0, until=T0 + 30).ttl_s(T0 + 40) == 1.0  # still lands
    assert fact("operator", "reset", T0).ttl_s(T0) == 24 * 3600


def test_facts_round_trip_and_anything_else_is_refused_whole() -> None:
    original = fact("cooldown", "cooling", T0, "a:1", until=T0 + 5)
    assert decode(original.encode()) == original
    for raw in ("", "[]", "{}", '{"register":"operator","state":"open"}',
                '{"provider":"p","register":"traffic","state":"open","at":"now","by":"a"}',
                '{"provider":"p","register":"traffic","state":"open","at":1,"by":"a",'
                '"until":true}', b"\xff"):
        with pytest.raises(BadFact):
            decode(raw)


# -- applying facts to an engine's breakers ------------------------------------------------


def fleet_engine(clock: FakeClock, name: str = "me") -> tuple[Engine, Fleet]:
    config = parse_config(f'[fleet]\nredis_url = "redis://127.0.0.1:9"\nname = "{name}"\n'
                          + PROFILE, env=TEST_ENV)
    engine = Engine(config, clock=clock, wall=clock.wall, env=TEST_ENV)
    assert engine.fleet is not None
    return engine, engine.fleet


def test_local_breaker_news_becomes_facts_and_peers_news_drives_the_breaker() -> None:
    clock = FakeClock()
    engine, fleet = fleet_engine(clock)
    breaker = engine.runtimes["p"].breaker
    for _ in range(3):
        breaker.record_failure()
    own = fleet.registers["p"].traffic
    assert own is not None and (own.state, own.by) == ("open", "me")
    assert own.until == clock.wall() + 30

    engine.reset("p")  # the operator: a fact of its own, and the breaker closes
    assert fleet.registers["p"].operator is not None
    clock.advance(1)
    # A peer's open, written after the reset, opens this breaker without being sent back.
    assert fleet.receive(Fact("p", "traffic", "open", clock.wall(), "peer", clock.wall() + 30))
    assert breaker.state is BreakerState.OPEN
    learned = fleet.registers["p"].traffic
    assert learned is not None and learned.by == "peer"
    clock.advance(1)
    assert fleet.receive(Fact("p", "traffic", "closed", clock.wall(), "peer"))
    assert breaker.state is BreakerState.CLOSED
    clock.advance(1)
    assert fleet.receive(Fact("p", "operator", "forced_open", clock.wall(), "peer"))
    assert breaker.state is BreakerState.FORCED_OPEN
    # An older reset (written before the trip, arriving late) changes nothing.
    assert not fleet.receive(Fact("p", "operator", "reset", clock.wall() - 0.5, "other"))
    assert breaker.state is BreakerState.FORCED_OPEN


def test_a_peers_cooldown_holds_here_and_a_reset_ends_it() -> None:
    clock = FakeClock()
    engine, fleet = fleet_engine(clock)
    rt = engine.runtimes["p"]
    assert fleet.receive(Fact("p", "cooldown", "cooling", clock.wall(), "peer",
                              clock.wall() + 20))
    assert rt.cooldown_until == pytest.approx(clock() + 20)
    fleet.watch_cooldowns()  # a cooldown learned from a peer is not re-sent
    learned = fleet.registers["p"].cooldown
    assert learned is not None and learned.by == "peer"
    clock.advance(1)
    assert fleet.receive(Fact("p", "operator", "reset", clock.wall(), "peer"))
    assert rt.cooldown_until == 0.0


def test_a_local_cooldown_becomes_a_fact_once() -> None:
    clock = FakeClock()
    engine, fleet = fleet_engine(clock)
    engine.runtimes["p"].cooldown_until = clock() + 15  # what failover.py does on a 429
    fleet.watch_cooldowns()
    cool = fleet.registers["p"].cooldown
    assert cool is not None and cool.by == "me" and cool.until == clock.wall() + 15
    clock.advance(0.2)
    fleet.watch_cooldowns()
    assert fleet.registers["p"].cooldown is cool


def test_in_a_fleet_events_name_the_instance_that_produced_them() -> None:
    engine, _ = fleet_engine(FakeClock(), name="gw-2")
    engine.trip("p")
    assert engine.events.recent[-1].data["instance"] == "gw-2"
    assert engine.events.recent[-1].data["new"] == "forced_open"


def test_a_finished_requests_deferred_event_names_the_instance_too() -> None:
    """A request's event is kept deferred (engine/addons/request_report.py): a fleet's bus
    stamps it with the instance when it is kept, the plain bus leaves it unset."""
    from claudex.engine.addons.request_report import RequestRecord
    from claudex.engine.core.request import Attempt, ForwardResult, ProxyRequest

    def record() -> RequestRecord:
        req = ProxyRequest("anthropic", "messages", {"model": "m"}, b"{}", {})
        result = ForwardResult(200, {}, "p", [Attempt("p", "ok", 200)], body=b"{}")
        return RequestRecord(req, result, 1.0, None, 0.0)

    engine, _ = fleet_engine(FakeClock(), name="gw-3")
    engine.events.publish_deferred(item := record())
    assert item.instance == "gw-3" and item.event().data["instance"] == "gw-3"
    plain = Engine(parse_config(PROFILE, env=TEST_ENV), env=TEST_ENV)
    plain.events.publish_deferred(item := record())
    assert item.instance is None and "instance" not in item.event().data


def test_without_redis_url_there_is_no_fleet_and_the_status_is_unchanged() -> None:
    engine = Engine(parse_config(PROFILE, env=TEST_ENV), env=TEST_ENV)
    assert engine.fleet is None
    assert "fleet" not in engine.snapshot()
    engine.trip("p")
    assert "instance" not in engine.events.recent[-1].data


def test_a_half_open_breaker_admits_trials_only_while_it_holds_the_fleets_slot() -> None:
    clock = FakeClock()
    engine, fleet = fleet_engine(clock)
    breaker = engine.runtimes["p"].breaker
    for _ in range(3):
        breaker.record_failure()
    clock.advance(30)
    assert breaker.state is BreakerState.HALF_OPEN
    fleet.redis = "connected"  # as the fleet task sets it; the slot is someone else's
    assert breaker.try_acquire() is None
    fleet.probe_slots.add("p")
    permit = breaker.try_acquire()
    assert permit is not None and permit.probe
    fleet.probe_slots.clear()
    fleet.redis = "unreachable"  # alone again: the instance decides for itself
    breaker.release(permit)
    assert breaker.try_acquire() is not None


def test_a_spent_window_holds_until_its_reset_or_an_operators_reset() -> None:
    regs = Registers()
    regs.offer(fact("window", "spent", T0, until=T0 + 600, reason="5h"))
    assert view(regs, T0 + 1).spent_until == T0 + 600
    assert view(regs, T0 + 600).spent_until is None  # the plan's own reset
    # A timed trip that ended is not the operator's word on the plan's quota.
    regs.offer(fact("operator", "forced_open", T0 + 2, until=T0 + 3))
    assert view(regs, T0 + 4).spent_until == T0 + 600
    regs.offer(fact("operator", "reset", T0 + 5))  # the operator's reset ends it everywhere
    assert view(regs, T0 + 6).spent_until is None
    # A plan still spent is marked again by its next answer: a newer fact, which holds.
    regs.offer(fact("window", "spent", T0 + 7, until=T0 + 600, reason="5h"))
    assert view(regs, T0 + 8).spent_until == T0 + 600
    again = decode(fact("window", "spent", T0, until=T0 + 600, reason="5h").encode())
    assert (again.register, again.state, again.reason) == ("window", "spent", "5h")


def context(tokens: int, at: float, by: str = "x", model: str = "m") -> Fact:
    return Fact("p", "context", "window", at, by, model=model, tokens=tokens)


def test_a_context_window_is_a_record_per_model_and_the_newest_wins() -> None:
    regs = Registers()
    assert regs.offer(context(8192, T0, model="small"))
    assert regs.offer(context(131072, T0, model="big"))  # another model: its own record
    assert not regs.offer(context(4000, T0 - 1, model="small"))  # older
    assert regs.offer(context(4000, T0 + 1, model="small"))
    assert {f.model: f.tokens for f in regs.facts()} == {"small": 4000, "big": 131072}
    assert context(1, T0, model="small").key() == "context:p:small"
    assert context(1, T0).ttl_s(T0) == 24 * 3600  # a day in Redis, not for ever
    # Nothing else reads it: the breaker's view is untouched.
    assert view(regs, T0 + 2) == view(Registers(), T0 + 2)
    again = decode(context(8192, T0, "a", "qwen2.5:7b").encode())
    assert (again.register, again.model, again.tokens) == ("context", "qwen2.5:7b", 8192)
    for bad in ('"tokens":0,"model":"m"', '"tokens":true,"model":"m"', '"tokens":9',
                '"tokens":"9","model":"m"'):
        with pytest.raises(BadFact):
            decode('{"provider":"p","register":"context","state":"window","at":1,"by":"a",'
                   + bad + "}")


def test_a_learned_context_window_is_told_once_and_a_peers_is_learned_here() -> None:
    clock = FakeClock()
    engine, fleet = fleet_engine(clock)
    rt = engine.runtimes["p"]
    rt.learn_context_window("small", 8192)  # what one_provider.py does on a backup's 400
    fleet.watch_cooldowns()
    told = fleet.registers["p"].get("context", "small")
    assert told is not None and (told.by, told.tokens) == ("me", 8192)
    fleet.watch_cooldowns()
    assert fleet.registers["p"].get("context", "small") is told  # not news twice
    clock.advance(1)
    assert fleet.receive(context(4000, clock.wall(), "peer", "small"))
    assert rt.context_window("small") == 4000
    fleet.watch_cooldowns()  # heard from a peer: not sent back as this instance's
    heard = fleet.registers["p"].get("context", "small")
    assert heard is not None and heard.by == "peer"
    # A window learned here before a peer's older word arrives is kept, and told.
    rt.learn_context_window("other", 2000)
    assert not fleet.receive(context(9000, clock.wall() - 5, "peer", "other"))
    assert rt.context_window("other") == 2000
    mine = fleet.registers["p"].get("context", "other")
    assert mine is not None and mine.by == "me"
