"""The commit rule: nothing reaches the client before the first content event."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import anthropic_body, build_config, eventually, openai_body, profile_toml


def sse_events(raw: str) -> list[tuple[str | None, str]]:
    events = []
    for block in raw.replace("\r\n", "\n").split("\n\n"):
        name, data = None, []
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if name or data:
            events.append((name, "\n".join(data)))
    return events


async def pair(fakes: Any, proxy_factory: Any, protocol: str = "anthropic") -> Any:
    f = await fakes(("primary", protocol), ("backup", protocol))
    config = build_config(profile_toml("primary", f["primary"], backups=["backup"])
                          + profile_toml("backup", f["backup"]))
    return await proxy_factory(config, fakes=f)


async def test_stream_passes_through_complete(fakes: Any, proxy_factory: Any) -> None:
    proxy = await pair(fakes, proxy_factory)
    resp = await proxy.messages(anthropic_body("events:20", stream=True))
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/event-stream")
    names = [n for n, _ in sse_events(resp.text)]
    assert names[0] == "message_start" and names[-1] == "message_stop"
    assert names.count("content_block_delta") == 20
    assert proxy.engine.runtimes["primary"].stats.successes == 1


async def test_cut_before_content_fails_over_transparently(fakes: Any, proxy_factory: Any) -> None:
    proxy = await pair(fakes, proxy_factory)
    proxy.fakes["primary"].set_fault("cut_before_content")
    resp = await proxy.messages(anthropic_body(stream=True))
    assert resp.status_code == 200
    assert resp.headers["x-claudex-provider"] == "backup"
    events = sse_events(resp.text)
    # Exactly one message_start: the primary's partial stream never reached the client.
    assert [n for n, _ in events].count("message_start") == 1
    assert "backup" in "".join(json.loads(d).get("delta", {}).get("text", "")
                               for n, d in events if n == "content_block_delta")
    assert proxy.engine.runtimes["primary"].breaker.snapshot().consecutive_failures == 1


async def test_error_event_before_content_fails_over(fakes: Any, proxy_factory: Any) -> None:
    proxy = await pair(fakes, proxy_factory)
    proxy.fakes["primary"].set_fault("stream_error", cut_after_events=0)
    resp = await proxy.messages(anthropic_body(stream=True))
    assert resp.headers["x-claudex-attempts"] == "primary:stream_error,backup:200"
    assert "error" not in [n for n, _ in sse_events(resp.text)]


async def test_cut_after_content_yields_sse_error_and_no_second_call(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await pair(fakes, proxy_factory)
    proxy.fakes["primary"].set_fault("cut", cut_after_events=3)
    resp = await proxy.messages(anthropic_body("events:10", stream=True))
    assert resp.status_code == 200
    events = sse_events(resp.text)
    names = [n for n, _ in events]
    assert names.count("content_block_delta") == 3
    assert names[-1] == "error"
    error = json.loads(events[-1][1])
    assert error["type"] == "error" and "primary" in error["error"]["message"]
    assert proxy.fakes["backup"].request_count == 0  # never billed twice
    snap = proxy.engine.runtimes["primary"].breaker.snapshot()
    assert snap.consecutive_failures == 1


async def test_a_codec_failing_after_content_ends_the_stream_with_one_error_and_no_traceback(
    fakes: Any, proxy_factory: Any, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """claudex's own code failing on a chunk after the commit (a translator's bug) ends the
    client's stream the way an upstream break does: one SSE error event that says what
    happened, no second upstream call, and no traceback in claudex's log."""
    from claudex.engine.core import stream_codec
    proxy = await pair(fakes, proxy_factory)
    proxy.fakes["primary"].stream_delay_ms = 20  # an event a chunk
    real_feed = stream_codec.Relay.feed
    seen = {"deltas": 0}

    def failing_feed(self: stream_codec.Relay, chunk: bytes) -> bytes:
        if b"content_block_delta" in chunk:
            seen["deltas"] += 1
            if seen["deltas"] == 3:
                raise RuntimeError("a bug in claudex")
        return real_feed(self, chunk)

    monkeypatch.setattr(stream_codec.Relay, "feed", failing_feed)
    resp = await proxy.messages(anthropic_body("events:10", stream=True))
    assert resp.status_code == 200
    events = sse_events(resp.text)
    names = [n for n, _ in events]
    assert names[-1] == "error" and names.count("error") == 1
    message = json.loads(events[-1][1])["error"]["message"]
    assert "primary" in message and "could not translate" in message
    assert proxy.fakes["backup"].request_count == 0
    assert "Traceback" not in caplog.text and "a bug in claudex" not in caplog.text


async def test_error_event_after_content_reaches_client_and_counts(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await pair(fakes, proxy_factory)
    proxy.fakes["primary"].set_fault("stream_error", cut_after_events=2)
    resp = await proxy.messages(anthropic_body("events:5", stream=True))
    names = [n for n, _ in sse_events(resp.text)]
    assert names.count("content_block_delta") == 2 and "error" in names
    assert proxy.fakes["backup"].request_count == 0
    assert proxy.engine.runtimes["primary"].breaker.snapshot().consecutive_failures == 1


async def test_openai_stream_cut_before_content_fails_over(fakes: Any, proxy_factory: Any) -> None:
    proxy = await pair(fakes, proxy_factory, "openai")
    proxy.fakes["primary"].set_fault("cut_before_content")
    resp = await proxy.chat(openai_body("events:4", stream=True))
    assert resp.headers["x-claudex-provider"] == "backup"
    datas = [d for _, d in sse_events(resp.text)]
    assert datas[-1] == "[DONE]"
    chunks = [json.loads(d) for d in datas[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert "backup" in text


async def test_openai_stream_cut_after_content_gets_error_chunk(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await pair(fakes, proxy_factory, "openai")
    proxy.fakes["primary"].set_fault("cut", cut_after_events=2)
    resp = await proxy.chat(openai_body("events:6", stream=True))
    datas = [d for _, d in sse_events(resp.text)]
    assert "error" in json.loads(datas[-1])
    assert proxy.fakes["backup"].request_count == 0


async def test_stream_429_before_commit_fails_over(fakes: Any, proxy_factory: Any) -> None:
    proxy = await pair(fakes, proxy_factory)
    proxy.fakes["primary"].set_fault("429", retry_after=300)
    resp = await proxy.messages(anthropic_body(stream=True))
    assert resp.headers["x-claudex-attempts"] == "primary:429,backup:200"
    assert [n for n, _ in sse_events(resp.text)][-1] == "message_stop"


async def test_client_leaving_mid_stream_frees_the_half_open_probe(
    fakes: Any, proxy_factory: Any
) -> None:
    from claudex.demo.fake_provider import FakeProvider

    slow = FakeProvider("primary", "anthropic", stream_delay_ms=20)
    await slow.start()
    try:
        now = [1000.0]
        config = build_config(profile_toml("primary", slow))
        proxy = await proxy_factory(config, clock=lambda: now[0])
        breaker = proxy.engine.runtimes["primary"].breaker
        for _ in range(3):
            breaker.record_failure(None)
        now[0] += 31
        assert breaker.state.value == "half_open"
        async with proxy.client.stream("POST", "/v1/messages",
                                       json=anthropic_body("events:100000", stream=True)) as resp:
            async for chunk in resp.aiter_bytes():
                if b"content_block_delta" in chunk:
                    break  # leave mid-stream
        # The upstream stream would run for over half an hour (100,000 events 20 ms apart), so
        # only abandoning it on the client's disconnect can free the probe slot.
        await eventually(lambda: breaker.snapshot().probes_in_flight == 0)
        assert breaker.state.value == "half_open"  # a neutral outcome: still trying
    finally:
        await slow.stop()


async def test_a_stream_is_in_flight_until_it_ends_or_the_client_leaves(
    fakes: Any, proxy_factory: Any
) -> None:
    from claudex.demo.fake_provider import FakeProvider

    slow = FakeProvider("primary", "anthropic", stream_delay_ms=20)
    await slow.start()
    try:
        proxy = await proxy_factory(build_config(profile_toml("primary", slow)))
        totals = proxy.engine.totals
        async with proxy.client.stream("POST", "/v1/messages",
                                       json=anthropic_body("events:100000", stream=True)) as resp:
            async for chunk in resp.aiter_bytes():
                if b"content_block_delta" in chunk:
                    # Committed and streaming: the console's quit must still see it in flight.
                    assert totals.in_flight == 1
                    break  # leave mid-stream
        await eventually(lambda: totals.in_flight == 0)
        resp2 = await proxy.messages(anthropic_body("events:3", stream=True))
        assert resp2.status_code == 200 and "message_stop" in resp2.text
        assert totals.in_flight == 0  # a stream read to its end is no longer in flight
    finally:
        await slow.stop()
