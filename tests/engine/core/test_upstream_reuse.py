"""claudex keeps its connections to a provider: a stream read to its end leaves its connection in
the pool for the next request, as a whole answer does (aiohttp releases it at the payload's end;
the relay's close afterwards must not undo that), so a streamed request (Claude Code streams every
one) does not pay a new TCP connection. A stream given up before its end must not hand back a
connection with unread bytes on it."""

from __future__ import annotations

from typing import Any

from tests.conftest import anthropic_body, build_config, eventually, openai_body, profile_toml
from tests.engine.core.test_proxy_streaming import sse_events


async def one(fakes: Any, proxy_factory: Any, protocol: str = "anthropic") -> Any:
    f = await fakes(("only", protocol))
    return await proxy_factory(build_config(profile_toml("only", f["only"])), fakes=f)


async def test_streams_one_after_another_share_one_connection(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await one(fakes, proxy_factory)
    for _ in range(8):
        resp = await proxy.messages(anthropic_body("events:3", stream=True))
        assert resp.status_code == 200
        assert sse_events(resp.text)[-1][0] == "message_stop"
    fake = proxy.fakes["only"]
    assert fake.request_count == 8
    assert fake.connections_served == 1


async def test_whole_answers_and_streams_mixed_share_one_connection(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await one(fakes, proxy_factory, "openai")
    for i in range(6):
        resp = await proxy.chat(openai_body("events:2", stream=i % 2 == 0))
        assert resp.status_code == 200
    assert proxy.fakes["only"].connections_served == 1


async def test_a_stream_given_up_midway_does_not_hand_back_its_connection(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await one(fakes, proxy_factory)
    fake = proxy.fakes["only"]
    fake.stream_delay_ms = 50  # 40 events: two seconds of stream
    async with proxy.client.stream("POST", "/v1/messages",
                                   json=anthropic_body("events:40", stream=True)) as resp:
        assert resp.status_code == 200
        async for chunk in resp.aiter_bytes():
            if b"content_block_delta" in chunk:
                break  # the client leaves with most of the stream unread
    # claudex notices and lets the stream go (out of flight) while two seconds of it are
    # still to come, so the connection it gives up has unread bytes on it.
    await eventually(lambda: proxy.engine.totals.in_flight == 0)
    fake.stream_delay_ms = 0
    # The next request gets a whole, clean answer: on a new connection, since the abandoned
    # one still had the rest of its stream coming.
    resp = await proxy.messages(anthropic_body("events:2", stream=True))
    assert resp.status_code == 200
    assert sse_events(resp.text)[-1][0] == "message_stop"
    resp = await proxy.messages(anthropic_body())
    assert resp.status_code == 200 and resp.json()["content"][0]["type"] == "text"
    assert fake.connections_served == 2
