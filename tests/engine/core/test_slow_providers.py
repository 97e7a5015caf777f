"""Slow is yellow, and avoided (issue 30), through a real server on 127.0.0.1: a fake whose
answers take 0.6 s more than they did turns yellow from the real traffic's latency (the
words, an event, status JSON, `/metrics`) and green again when it recovers; with `avoid_slow`
new conversations start on a healthy backup (or pool member), those under way stay, and a
slow provider still serves when nothing healthy is left.

The wall clock is the test's (samples are kept at wall times, and judged at them); the watch
has no rounds of its own here (`judge_slowness_every=None`): the test judges when it means to.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from claudex.config.loader import parse_config
from tests.conftest import GLOBALS, TEST_ENV, anthropic_body, profile_toml

SLOW_MS = 600.0  # over the 500 ms floor, and 3x anything a local fake answers in
MIN = 10         # answers in the window before a provider is judged


class Wall:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def config_text(avoid: bool, body: str) -> Any:
    health = f"enabled = false\nslow_min_samples = {MIN}\navoid_slow = {str(avoid).lower()}"
    return parse_config(GLOBALS.replace("enabled = false", health) + body, "test.toml",
                        env=TEST_ENV)


async def chain(fakes: Any, proxy_factory: Any, *, avoid: bool) -> Any:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    config = config_text(avoid, profile_toml("primary", f["primary"], backups=["backup"])
                         + profile_toml("backup", f["backup"]))
    wall = Wall()
    proxy = await proxy_factory(config, fakes=f, wall=wall, judge_slowness_every=None)
    proxy.wall = wall
    return proxy


def continuing(text: str) -> dict[str, Any]:
    """A later turn of a conversation: the model has answered in it already."""
    body = anthropic_body(text)
    body["messages"] = [{"role": "user", "content": text},
                        {"role": "assistant", "content": "ok"},
                        {"role": "user", "content": "and then?"}]
    return body


async def traffic(proxy: Any, count: int, profile: str | None = "primary") -> None:
    """`count` answers at once, each a new conversation, every one served."""
    answers = await asyncio.gather(*(proxy.messages(anthropic_body(f"q{i}"), profile=profile)
                                     for i in range(count)))
    refused = [(a.status_code, a.text[:300]) for a in answers if a.status_code != 200]
    assert not refused, refused[:1]


async def make_slow(proxy: Any, name: str = "primary") -> None:
    """A baseline from fast answers, then as many 0.6 s ones, judged between and after."""
    await traffic(proxy, MIN, profile=name)
    proxy.engine.slow.judge_all()  # the baseline: the first reading with enough answers
    assert proxy.engine.runtimes[name].slowness.baselines["duration"].p95_ms < 100.0
    proxy.fakes[name].set_fault("slow", latency_ms=SLOW_MS)
    await traffic(proxy, MIN, profile=name)
    proxy.wall.now += 5.0
    proxy.engine.slow.judge_all()


async def status_of(proxy: Any, name: str) -> dict[str, Any]:
    status = (await proxy.client.get("/_claudex/status")).json()
    return dict(next(p for p in status["profiles"] if p["name"] == name))


async def test_a_slowed_provider_turns_yellow_and_green_again(fakes: Any,
                                                              proxy_factory: Any) -> None:
    proxy = await chain(fakes, proxy_factory, avoid=False)
    rt = proxy.engine.runtimes["primary"]
    before = await status_of(proxy, "primary")
    assert before["health"]["slow"] is None
    await make_slow(proxy)

    verdict = rt.slowness.verdict
    assert verdict is not None and verdict.measure == "duration"
    assert verdict.p95_ms >= SLOW_MS
    words = verdict.words()
    assert words.startswith("slow: whole answers p95 0.6") and ", usually " in words
    status = await status_of(proxy, "primary")
    assert status["health"]["color"] == "yellow"
    assert status["health"]["reason"] == words
    assert status["health"]["slow"]["measure"] == "duration"
    assert status["health"]["slow"]["samples"] == 2 * MIN
    assert status["health"]["latency_baseline"]["duration_p95_ms"] < 100.0
    events = [e for e in proxy.engine.events.since(0) if e.kind == "slow"]
    assert [e.message for e in events] == [f"primary: {words}"]
    assert events[0].data["slow"] is True
    metrics = (await proxy.client.get("/metrics")).text
    assert 'claudex_provider_slow{provider="primary"} 1.0' in metrics
    assert 'claudex_provider_slow{provider="backup"} 0.0' in metrics
    assert 'claudex_provider_latency_baseline_seconds{measure="duration",provider="primary"}' \
        in metrics
    assert (await status_of(proxy, "backup"))["health"]["color"] == "green"

    # It recovers: once the slow answers have left the five-minute window, fast ones say so.
    proxy.fakes["primary"].set_fault("ok")
    proxy.wall.now += 301.0
    await traffic(proxy, MIN)
    proxy.engine.slow.judge_all()
    assert rt.slowness.verdict is None
    status = await status_of(proxy, "primary")
    assert status["health"]["color"] == "green" and status["health"]["slow"] is None
    told = [e for e in proxy.engine.events.since(0) if e.kind == "slow"]
    assert len(told) == 2 and told[1].data["slow"] is False
    assert told[1].message.startswith("primary: no longer slow (whole answers p95 ")
    metrics = (await proxy.client.get("/metrics")).text
    assert 'claudex_provider_slow{provider="primary"} 0.0' in metrics


async def test_without_avoidance_a_slow_provider_keeps_its_traffic(fakes: Any,
                                                                   proxy_factory: Any) -> None:
    proxy = await chain(fakes, proxy_factory, avoid=False)
    await make_slow(proxy)
    assert proxy.engine.slow.names == {"primary"}
    assert proxy.engine.slow.avoided == frozenset()
    proxy.fakes["primary"].set_fault("ok")  # (quick answers from here: the test's time)
    resp = await proxy.messages(anthropic_body("a new one"))
    assert resp.headers["x-claudex-attempts"] == "primary:200"


async def test_avoidance_starts_new_conversations_on_a_healthy_backup(
        fakes: Any, proxy_factory: Any) -> None:
    proxy = await chain(fakes, proxy_factory, avoid=True)
    await make_slow(proxy)
    assert proxy.engine.slow.avoided == {"primary"}
    proxy.fakes["primary"].set_fault("ok")
    primary, backup = proxy.fakes["primary"], proxy.fakes["backup"]
    sent_primary, sent_backup = primary.request_count, backup.request_count

    new = await proxy.messages(anthropic_body("a new one"))
    assert new.status_code == 200
    assert new.headers["x-claudex-attempts"] == "primary:slow,backup:200"
    assert primary.request_count == sent_primary  # passed over without sending
    assert backup.request_count == sent_backup + 1
    # Its later turns stay on the backup, where its prompt cache now is.
    later = await proxy.messages(continuing("a new one"))
    assert later.headers["x-claudex-attempts"] == "primary:slow,backup:200"

    # A conversation under way on the slow provider stays there.
    under_way = await proxy.messages(continuing("an old one"))
    assert under_way.headers["x-claudex-attempts"] == "primary:200"

    # Nothing healthy left: the slow one serves.
    proxy.engine.trip("backup")
    last = await proxy.messages(anthropic_body("another new one"))
    assert last.status_code == 200
    assert last.headers["x-claudex-attempts"].endswith("primary:200")
    assert "primary:slow" not in last.headers["x-claudex-attempts"]


async def test_avoidance_in_a_pool_binds_new_conversations_to_a_healthy_member(
        fakes: Any, proxy_factory: Any) -> None:
    f = await fakes(("one", "anthropic"), ("two", "anthropic"))
    body = (profile_toml("one", f["one"]) + profile_toml("two", f["two"])
            + '\n[[profiles]]\nname = "team"\nmembers = ["one", "two"]\n')
    wall = Wall()
    proxy = await proxy_factory(config_text(True, body), fakes=f, wall=wall,
                                judge_slowness_every=None)
    proxy.wall = wall

    # A conversation bound to "one" before it turns slow.
    first = await proxy.messages(anthropic_body("bound early"), profile="team")
    bound_to = first.headers["x-claudex-attempts"].split(":")[0].removeprefix("team/")
    await make_slow(proxy, bound_to)
    other = "two" if bound_to == "one" else "one"
    assert proxy.engine.slow.avoided == {bound_to}
    proxy.fakes[bound_to].set_fault("ok")

    for i in range(4):  # new bindings: all to the healthy member
        resp = await proxy.messages(anthropic_body(f"new {i}"), profile="team")
        assert resp.headers["x-claudex-attempts"] == f"team/{other}:200"
    # The early conversation stays where its cache is.
    again = await proxy.messages(continuing("bound early"), profile="team")
    assert again.headers["x-claudex-attempts"] == f"team/{bound_to}:200"
