"""claudex's own limits at a provider: the AIMD limit (pure, clock injected), the retry budget,
the FIFO gate, and through the proxy: a 429 burst narrows concurrency without pausing the
provider, a request that cannot get a slot fails over as queue_full."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from claudex.engine.clock import FakeClock
from claudex.engine.core.concurrency import AdaptiveLimit
from claudex.engine.core.explain import all_failed_sentence
from claudex.engine.core.gate import ProviderGate, RetryBudget
from claudex.engine.core.request import Attempt
from claudex.engine.core.retries import Retries
from claudex.engine.engine import Engine
from claudex.engine.events import Event
from tests.conftest import TEST_ENV, anthropic_body, build_config, eventually, profile_toml
from tests.table_world import many_profiles_toml

# -- the adaptive limit --------------------------------------------------------------------------


def test_starts_unlimited_and_comes_down_to_what_was_in_flight_less_the_refusal() -> None:
    limit = AdaptiveLimit()
    assert limit.limit is None and limit.allows(10_000)
    assert not limit.on_rate_limited(0.0, 32)
    assert not limit.on_rate_limited(0.1, 32)
    assert limit.on_rate_limited(0.2, 32)  # the third within the window: a burst
    assert limit.limit == 31               # 32 were in flight, one of them refused
    assert limit.snapshot(0.2).reason == "limited: 3 × 429 in 10 s"
    assert limit.allows(30) and not limit.allows(31)


def test_refusals_of_requests_in_flight_at_the_decrease_bring_the_limit_to_what_was_accepted(
) -> None:
    # 64 sent at once to a provider that takes 8: 56 refusals come back, each with one fewer
    # in flight. The limit lands on 8 in that one round (halving took 64 -> 32 -> 16 -> 8,
    # a round of 429s each), and the round is said once, when it has settled, as 8.
    limit = AdaptiveLimit()
    steps = []
    for i in range(56):
        if limit.on_rate_limited(0.01 + i * 0.001, 64 - i, sent_at=0.0):
            steps.append(limit.limit)
        assert limit.announcement(0.01 + i * 0.001) is None  # the round goes on
    assert limit.limit == 8 and steps[0] == 61 and steps[-1] == 8
    assert limit.announce_in(0.5) == pytest.approx(0.512)  # settle_s after the first (0.012)
    said = limit.announcement(1.02)
    assert said is not None and said.limit == 8 and said.limit == limit.snapshot(1.02).limit
    assert limit.announcement(5.0) is None and limit.announce_in(5.0) is None  # said once
    # Without a send time, a 429 within settle_s of the decrease counts the same way.
    unknown = AdaptiveLimit()
    for t in (0.0, 0.1, 0.2):
        unknown.on_rate_limited(t, 12)
    assert unknown.limit == 11
    assert unknown.on_rate_limited(0.5, 11)  # a decrease (said with the round)
    assert unknown.limit == 10


def test_a_429_sent_after_the_decrease_takes_the_limit_one_below_and_probes_are_rare() -> None:
    limit = AdaptiveLimit()
    for i, in_flight in enumerate((11, 10, 9)):
        limit.on_rate_limited(0.01 * (i + 1), in_flight, sent_at=0.0)
    assert limit.limit == 8
    # 9 was refused with 429s still in the window: tried again after 4 x 8 successes, not 8.
    assert [limit.on_success(0.5) for _ in range(32)] == [False] * 31 + [True]
    assert limit.limit == 9
    assert limit.on_rate_limited(1.01, 10, sent_at=1.0)  # the probe was one too many
    assert limit.limit == 8
    # A slot handed out under 9 just before that decrease, its request sent just after:
    # the same round, so it refines what was accepted (9 -> 8) instead of cutting to 7.
    assert not limit.on_rate_limited(1.02, 9, sent_at=1.015)
    assert limit.limit == 8
    # The probe was refused: the next waits twice as long (8 x 8 successes).
    assert [limit.on_success(2.0) for _ in range(64)] == [False] * 63 + [True]
    assert limit.limit == 9
    # Once the limit grew again, one over it in flight is a new round: one below, not an
    # old slot refining (which would take it to 7).
    assert limit.on_rate_limited(2.1, 10, sent_at=2.05) and limit.limit == 8
    # Refused again: 16 x 8, and no longer than that however often probes fail.
    assert [limit.on_success(3.0) for _ in range(128)] == [False] * 127 + [True]
    assert limit.on_rate_limited(3.1, 10, sent_at=3.05) and limit.limit == 8
    assert [limit.on_success(4.0) for _ in range(128)] == [False] * 127 + [True]
    # A window with no 429: growth is one per `limit` successes again.
    limit.on_rate_limited(5.0, 10, sent_at=4.5)
    assert limit.limit == 8
    assert [limit.on_success(16.0) for _ in range(8)] == [False] * 7 + [True]


def test_never_below_one_and_scattered_429s_are_no_burst() -> None:
    limit = AdaptiveLimit(max_concurrency=2)
    for t in (0.0, 0.1, 0.2):
        limit.on_rate_limited(t, 2)
    assert limit.limit == 1 and limit.at_floor
    for t in (2.0, 2.1, 2.2):
        assert not limit.on_rate_limited(t, 1)
    assert limit.limit == 1
    scattered = AdaptiveLimit()
    for t in (0.0, 11.0, 22.0, 33.0):  # one per window
        assert not scattered.on_rate_limited(t, 50)
    assert scattered.limit is None


def test_grows_by_one_per_limit_successes_and_back_to_unlimited_past_the_burst() -> None:
    limit = AdaptiveLimit(probe=1)  # the rare probe of a refused level is tested above
    for t in (0.0, 0.1, 0.2):
        limit.on_rate_limited(t, 8)
    assert limit.limit == 7
    grew = [limit.on_success(1.0) for _ in range(7)]
    assert grew == [False] * 6 + [True] and limit.limit == 8
    now = 20.0  # the burst has left the window
    while limit.limit is not None:
        limit.on_success(now)
    assert limit.snapshot(now).reason is None


def test_a_fixed_max_concurrency_is_the_start_and_the_ceiling() -> None:
    limit = AdaptiveLimit(max_concurrency=6)
    assert limit.limit == 6 and not limit.allows(6)
    for _ in range(100):
        limit.on_success(50.0)
    assert limit.limit == 6
    for t in (0.0, 0.1, 0.2):
        limit.on_rate_limited(t, 6)
    assert limit.limit == 5
    limit.reset()
    assert limit.limit == 6 and limit.snapshot(0.3).recent_429 == 0


# -- the retry budget ----------------------------------------------------------------------------


def test_the_retry_budget_is_a_share_of_recent_requests_plus_a_floor() -> None:
    budget = RetryBudget(0.2, floor=3, window_s=10.0)
    for _ in range(10):
        budget.request(0.0)
    assert [budget.try_retry(1.0) for _ in range(6)] == [True] * 5 + [False]
    assert budget.refused == 1
    # A window later the old requests and retries are forgotten: the floor alone remains.
    assert [budget.try_retry(20.0) for _ in range(4)] == [True, True, True, False]


# -- the gate --------------------------------------------------------------------------------------


async def test_the_gate_hands_slots_out_in_arrival_order() -> None:
    gate = ProviderGate(1, AdaptiveLimit())
    assert await gate.acquire(5)
    order: list[str] = []

    async def take(name: str) -> None:
        assert await gate.acquire(5)
        order.append(name)

    first = asyncio.create_task(take("first"))
    await eventually(lambda: gate.queued == 1)
    second = asyncio.create_task(take("second"))
    await eventually(lambda: gate.queued == 2)
    gate.release()
    await first
    assert order == ["first"] and gate.in_flight == 1
    gate.release()
    await second
    assert order == ["first", "second"] and gate.queued == 0


async def test_a_wait_past_its_patience_is_queue_full_and_a_cancelled_wait_leaks_nothing() -> None:
    gate = ProviderGate(1, AdaptiveLimit())
    assert await gate.acquire(5)
    assert not await gate.acquire(0.05)  # the holder never lets go
    assert gate.queue_full == 1 and gate.in_flight == 1
    waiting = asyncio.create_task(gate.acquire(5))
    await eventually(lambda: gate.queued == 1)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    gate.release()
    assert gate.in_flight == 0 and gate.queued == 0
    assert await gate.acquire(5)


async def test_a_lowered_limit_holds_new_requests_until_enough_have_finished() -> None:
    limit = AdaptiveLimit(max_concurrency=2)
    gate = ProviderGate(100, limit)
    assert await gate.acquire(5) and await gate.acquire(5)
    for t in (0.0, 0.1, 0.2):
        limit.on_rate_limited(t, 2)
    assert limit.limit == 1
    third = asyncio.create_task(gate.acquire(5))
    await eventually(lambda: gate.queued == 1)
    gate.release()  # 1 in flight: still at the limit
    assert gate.queued == 1
    gate.release()
    assert await third and gate.in_flight == 1


# -- through the proxy -----------------------------------------------------------------------


async def test_a_request_that_gets_no_slot_fails_over_as_queue_full_without_blame(
    fakes: Any, proxy_factory: Any
) -> None:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    config = build_config(
        profile_toml("primary", f["primary"], backups=["backup"],
                     extra="max_connections = 1\nqueue_timeout = 0.2")
        + profile_toml("backup", f["backup"]))
    proxy = await proxy_factory(config, fakes=f)
    f["primary"].set_fault("hang")
    holder = asyncio.create_task(proxy.messages())
    await f["primary"].wait_for_requests(1)
    resp = await proxy.messages()
    assert resp.status_code == 200
    assert resp.headers["x-claudex-attempts"] == "primary:queue_full,backup:200"
    primary = proxy.engine.runtimes["primary"]
    assert primary.breaker.snapshot().consecutive_failures == 0  # claudex's wait, not theirs
    status = (await proxy.client.get("/_claudex/status")).json()
    shown = next(p for p in status["profiles"] if p["name"] == "primary")["concurrency"]
    assert shown["queue_full"] == 1 and shown["in_flight"] == 1 and shown["max_connections"] == 1
    metrics = (await proxy.client.get("/metrics")).text
    assert 'claudex_provider_queue_full_total{provider="primary"} 1.0' in metrics
    assert 'claudex_provider_in_flight{provider="primary"} 1.0' in metrics
    f["primary"].set_fault("ok")  # the hung request is dropped and fails over
    assert (await holder).status_code == 200
    assert primary.gate.in_flight == 0


async def test_a_429_burst_narrows_concurrency_instead_of_pausing_the_provider(
    fakes: Any, proxy_factory: Any
) -> None:
    f = await fakes(("solo", "anthropic"),)
    proxy = await proxy_factory(build_config(profile_toml("solo", f["solo"])), fakes=f)
    solo = f["solo"]
    solo.max_in_flight = 2
    solo.set_fault("slow", latency_ms=300, retry_after=1)
    answers = await asyncio.gather(*(proxy.messages(anthropic_body()) for _ in range(12)))
    # The test's sleep returns at once, so retries come back sooner than Retry-After says and
    # some run out of attempts: those get the client's 429, never a 502.
    assert {r.status_code for r in answers} <= {200, 429} and any(
        r.status_code == 200 for r in answers)
    rt = proxy.engine.runtimes["solo"]
    assert rt.gate.limit.limit is not None and rt.gate.limit.limit < 12
    assert not rt.cooling_down(proxy.engine.clock())  # narrowed, never paused
    events = [e for e in proxy.engine.events.recent if e.kind == "limit"]
    assert any("reducing concurrency to" in e.message for e in events)
    status = (await proxy.client.get("/_claudex/status")).json()
    shown = status["profiles"][0]["concurrency"]
    assert shown["limit"] == rt.gate.limit.limit and shown["reason"].startswith("limited: ")


def test_the_limit_event_names_where_the_round_took_the_limit() -> None:
    """64 in flight at a provider that takes 8: the 56 refusals take the limit 64 -> 8 in one
    round, and the one event (and log line) said about it names 8, what status shows."""
    clock = FakeClock()
    engine = Engine(build_config(many_profiles_toml(1)), clock=clock, wall=clock.wall,
                    env=TEST_ENV)
    rt = engine.runtimes["p01"]
    retries = Retries(engine)
    sent_at = clock()
    for refused in range(56):
        clock.advance(0.001)
        rt.gate.in_flight = 63 - refused  # this one's slot is back already
        retries.narrow(rt, clock(), sent_at)
    said = [e for e in engine.events.recent if e.kind == "limit"]
    assert said == [] and rt.gate.limit.limit == 8  # the round may go on: nothing said yet
    clock.advance(1.0)
    retries.say_limit(rt)
    said = [e for e in engine.events.recent if e.kind == "limit"]
    shown = rt.concurrency_json(clock())
    assert [e.message for e in said] == [
        f"p01: reducing concurrency to 8 ({shown['reason']})"]
    assert said[0].data["concurrency"] == shown["limit"] == 8
    retries.say_limit(rt)  # said once
    assert len([e for e in engine.events.recent if e.kind == "limit"]) == 1


async def test_every_limit_and_escalation_sentence_names_the_limit_of_its_moment(
    fakes: Any, proxy_factory: Any
) -> None:
    """Through the proxy: 64 clients at a fake provider that takes 8 at once. Each sentence
    about the limit is checked against the limit as it was when the sentence was published,
    and once the burst is over the last one names the limit status shows. No same-provider
    retries: each refusal goes back to its client, so the round is one of refinements only
    (where the words used to stop at "to 15" while the limit went on down)."""
    f = await fakes(("solo", "anthropic"),)
    proxy = await proxy_factory(build_config(profile_toml("solo", f["solo"],
                                                          extra="max_attempts = 1")), fakes=f)
    solo = f["solo"]
    solo.max_in_flight = 8
    solo.set_fault("slow", latency_ms=300, retry_after=1)
    rt = proxy.engine.runtimes["solo"]
    seen: list[tuple[Event, int | None]] = []
    proxy.engine.events.sinks.append(
        lambda e: seen.append((e, rt.gate.limit.limit)) if e.kind in ("limit", "escalation")
        else None)
    answers = await asyncio.gather(*(proxy.messages(anthropic_body()) for _ in range(64)))
    assert any(r.status_code == 200 for r in answers)

    def limit_said() -> list[tuple[Event, int | None]]:
        return [(e, n) for e, n in seen if e.kind == "limit" and "concurrency" in e.data]

    await eventually(lambda: bool(limit_said())
                     and limit_said()[-1][0].data["concurrency"] == rt.gate.limit.limit,
                     limit_s=10.0)
    for event, limit in limit_said():
        assert event.data["concurrency"] == limit
        assert event.message.startswith(f"solo: reducing concurrency to {limit} (")
    escalations = [(e, n) for e, n in seen if e.kind == "escalation"
                   and "reducing concurrency" in e.message]
    for event, limit in escalations:
        assert f"(solo to {limit} at once)" in event.message
    status = (await proxy.client.get("/_claudex/status")).json()
    assert status["profiles"][0]["concurrency"]["limit"] == limit_said()[-1][0].data[
        "concurrency"]


def test_the_escalation_sentence_names_the_narrowed_limit() -> None:
    attempts = [Attempt("grok", "rate_limited", 429, "slow down"),
                Attempt("deepseek", "queue_full", None, "waited 30 s")]
    sentence = all_failed_sentence(attempts, rate_limited=True, narrowed={"grok": 4})
    assert sentence == ("Repeated rate-limit errors from grok and deepseek — reducing "
                        "concurrency (grok to 4 at once); retry later or reduce concurrent "
                        "requests.")
    plain = all_failed_sentence(attempts, rate_limited=True)
    assert plain.startswith("Repeated rate-limit errors from grok and deepseek — pausing")
