"""Event ids and the resumable event stream (`GET /_claudex/events` with `Last-Event-ID`)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from claudex.engine.events import Event, EventBus, first_event_id
from tests.conftest import eventually
from tests.server.test_admin_api import two


def test_ids_grow_by_one_and_the_backlog_answers_since() -> None:
    bus = EventBus(backlog_size=3, first_id=100)
    for n in range(5):
        bus.publish(Event("reload", f"r{n}"))
    assert bus.last_id == 104 and bus.first_id == 102  # the two oldest fell out
    assert [e.message for e in bus.since(102)] == ["r3", "r4"]
    assert [e.id for e in bus.since(0)] == [102, 103, 104]  # from before the backlog: all of it
    assert bus.since(104) == [] and bus.since(10**18) == []
    assert [e.kind for e in bus.since(0, {"breaker"})] == []


def test_a_later_bus_starts_above_an_earlier_one() -> None:
    earlier = EventBus(first_id=first_event_id(1_000.0))
    for _ in range(10_000):
        earlier.publish(Event("request", ""))
    later = EventBus(first_id=first_event_id(1_000.1))  # restarted 100 ms later
    later.publish(Event("reload", ""))
    assert later.last_id > earlier.last_id


def test_event_round_trips_through_json() -> None:
    bus = EventBus()
    bus.publish(Event("breaker", "a: closed -> open", "a", {"new": "open"}, time=5.0))
    event = bus.since(0)[0]
    assert Event.from_json(json.loads(json.dumps(event.to_json()))) == event
    assert Event.from_json({"kind": "reload"}).message == ""


async def read_frames(proxy: Any, count: int, headers: dict[str, str] | None = None,
                      path: str = "/_claudex/events") -> list[tuple[int, dict[str, Any]]]:
    """The first `count` events of one stream, as (SSE id, parsed data)."""
    frames: list[tuple[int, dict[str, Any]]] = []
    async with proxy.client.stream("GET", path, headers=headers or {}) as resp:
        assert resp.status_code == 200
        sse_id: int | None = None
        async for line in resp.aiter_lines():
            if line.startswith("id:"):
                sse_id = int(line[3:])
            elif line.startswith("data:"):
                assert sse_id is not None
                frames.append((sse_id, json.loads(line[5:])))
                if len(frames) == count:
                    return frames
    raise AssertionError("the event stream ended")


async def test_resume_sends_what_was_missed_once(fakes: Any, proxy_factory: Any) -> None:
    proxy = await two(fakes, proxy_factory)
    first = asyncio.create_task(read_frames(proxy, 1))
    await eventually(lambda: proxy.engine.events.has_subscribers)
    await proxy.client.post("/_claudex/breakers/grok/trip")
    [(seen, data)] = await asyncio.wait_for(first, 5)
    assert data["id"] == seen and data["kind"] == "breaker"
    # Disconnected: three things happen meanwhile (the reset is two events: the breaker's
    # transition, and the operator's reset saying what it ended).
    await proxy.client.post("/_claudex/breakers/grok/reset")
    assert (await proxy.chat(profile="deepseek")).status_code == 200
    await proxy.client.post("/_claudex/breakers/deepseek/trip")
    frames = await asyncio.wait_for(
        read_frames(proxy, 4, headers={"last-event-id": str(seen)}), 5)
    ids = [i for i, _ in frames]
    assert ids == sorted(ids) and ids[0] > seen and len(set(ids)) == 4
    kinds = [(d["kind"], d["profile"]) for _, d in frames]
    assert kinds == [("breaker", "grok"), ("reset", "grok"), ("request", "deepseek"),
                     ("breaker", "deepseek")]
    # ?since= does the same, filtered by kind too.
    again = await asyncio.wait_for(read_frames(
        proxy, 2, path=f"/_claudex/events?since={seen}&kinds=breaker"), 5)
    assert [d["profile"] for _, d in again] == ["grok", "deepseek"]


async def test_resume_with_garbage_id_is_a_clear_400(fakes: Any, proxy_factory: Any) -> None:
    proxy = await two(fakes, proxy_factory)
    resp = await proxy.client.get("/_claudex/events", headers={"last-event-id": "abc"})
    assert resp.status_code == 400 and "whole number" in resp.json()["error"]
