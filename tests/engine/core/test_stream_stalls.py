"""Stalled streams (DESIGN.md failure table): a provider that accepts a streamed request and then
sends nothing, or only its preamble, is abandoned at the stream deadlines and the request fails
over; a committed stream gone silent ends with one SSE error. The short timeouts here are the
timeouts under test; the assertions are about outcomes, never durations."""

from __future__ import annotations

import json
from typing import Any

import pytest

from claudex.config.loader import ConfigError, parse_config
from tests.conftest import TEST_ENV, anthropic_body, build_config, openai_body, profile_toml
from tests.engine.core.test_proxy_streaming import sse_events


async def pair(fakes: Any, proxy_factory: Any, primary_extra: str,
               protocol: str = "anthropic") -> Any:
    # Only the faulty primary gets the short timeouts: a backup slowed by a loaded machine
    # must still answer.
    f = await fakes(("primary", protocol), ("backup", protocol))
    config = build_config(profile_toml("primary", f["primary"], backups=["backup"],
                                       extra=primary_extra)
                          + profile_toml("backup", f["backup"]))
    return await proxy_factory(config, fakes=f)


def text_deltas(raw: str) -> str:
    return "".join(json.loads(d).get("delta", {}).get("text", "")
                   for n, d in sse_events(raw) if n == "content_block_delta")


async def test_a_stream_with_no_response_headers_fails_over_at_the_first_byte_timeout(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await pair(fakes, proxy_factory, "stream_first_byte_timeout = 0.2")
    proxy.fakes["primary"].set_fault("hang")
    resp = await proxy.messages(anthropic_body(stream=True))
    assert resp.status_code == 200
    assert resp.headers["x-claudex-attempts"] == "primary:timeout,backup:200"
    assert "backup" in text_deltas(resp.text)
    primary = proxy.engine.runtimes["primary"]
    assert primary.breaker.snapshot().consecutive_failures == 1
    assert "no response headers within 0.2 s (stream_first_byte_timeout)" in \
        (primary.stats.last_error or "")


async def test_a_stream_stalled_after_message_start_fails_over_at_the_commit_timeout(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await pair(fakes, proxy_factory, "stream_commit_timeout = 0.3")
    proxy.fakes["primary"].set_fault("stall", cut_after_events=0)
    resp = await proxy.messages(anthropic_body(stream=True))
    assert resp.status_code == 200
    assert resp.headers["x-claudex-attempts"] == "primary:timeout,backup:200"
    names = [n for n, _ in sse_events(resp.text)]
    # The primary's message_start was held back: the client sees one message, the backup's.
    assert names.count("message_start") == 1 and names[-1] == "message_stop"
    assert "backup" in text_deltas(resp.text)
    primary = proxy.engine.runtimes["primary"]
    assert primary.breaker.snapshot().consecutive_failures == 1
    assert "no content within 0.3 s (stream_commit_timeout)" in (primary.stats.last_error or "")


async def test_a_translated_stream_stalled_before_content_fails_over_too(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await pair(fakes, proxy_factory, "stream_commit_timeout = 0.3", protocol="openai")
    proxy.fakes["primary"].set_fault("stall", cut_after_events=0)
    resp = await proxy.messages(anthropic_body(stream=True))  # Anthropic client, OpenAI fakes
    assert resp.status_code == 200
    assert resp.headers["x-claudex-attempts"] == "primary:timeout,backup:200"
    assert "backup" in text_deltas(resp.text)


async def test_a_committed_stream_gone_silent_ends_with_one_sse_error_and_a_breaker_failure(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await pair(fakes, proxy_factory, "stream_idle_timeout = 0.3", protocol="openai")
    proxy.fakes["primary"].set_fault("stall", cut_after_events=2)
    resp = await proxy.chat(openai_body("events:10", stream=True))
    assert resp.status_code == 200
    events = sse_events(resp.text)
    payloads = [json.loads(d) for _, d in events if d != "[DONE]"]
    assert [p for p in payloads if "error" in p] == payloads[-1:]  # exactly one, at the end
    message = payloads[-1]["error"]["message"]
    assert "primary" in message and "stream_idle_timeout" in message
    deltas = [c["delta"].get("content") for p in payloads[:-1] for c in p.get("choices", [])]
    assert sum(1 for d in deltas if d) == 2
    assert proxy.fakes["backup"].request_count == 0  # committed: never billed twice
    assert proxy.engine.runtimes["primary"].breaker.snapshot().consecutive_failures == 1


async def test_a_committed_stream_that_keeps_talking_outlives_its_idle_timeout(
    fakes: Any, proxy_factory: Any
) -> None:
    """The idle timeout bounds a silence, not the stream: seven events 0.5 s apart make a
    stream of more than 3 s, half as long again as the 2 s idle timeout, and no gap comes
    within 1.5 s of it (room for a loaded machine). The relay's one timer a stream comes due
    mid-stream and must wait out the rest."""
    proxy = await pair(fakes, proxy_factory, "stream_idle_timeout = 2.0", protocol="openai")
    proxy.fakes["primary"].stream_delay_ms = 500
    resp = await proxy.chat(openai_body("events:7", stream=True))
    assert resp.status_code == 200
    events = sse_events(resp.text)
    assert events[-1] == (None, "[DONE]")
    payloads = [json.loads(d) for _, d in events[:-1]]
    assert not [p for p in payloads if "error" in p]
    deltas = [c["delta"].get("content") for p in payloads for c in p.get("choices", [])]
    assert sum(1 for d in deltas if d) == 7
    assert proxy.engine.runtimes["primary"].breaker.snapshot().consecutive_failures == 0


async def test_read_timeout_bounds_the_non_streamed_answer_only(
    fakes: Any, proxy_factory: Any
) -> None:
    # The primary answers after at least 0.6 s: past its read_timeout, well within the
    # stream's first-byte timeout (the default, 30 s).
    proxy = await pair(fakes, proxy_factory, "read_timeout = 0.2")
    proxy.fakes["primary"].set_fault("slow", latency_ms=600)
    streamed = await proxy.messages(anthropic_body(stream=True))
    assert streamed.headers["x-claudex-attempts"] == "primary:200"
    plain = await proxy.messages(anthropic_body())
    assert plain.headers["x-claudex-attempts"] == "primary:timeout,backup:200"


def test_the_stream_timeouts_load_globally_and_per_profile() -> None:
    config = parse_config("""
[proxy]
stream_first_byte_timeout = 7

[[profiles]]
name = "a"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:1"
api_key_env = "FAKE_KEY"
stream_commit_timeout = 5

[[profiles]]
name = "b"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:2"
api_key_env = "FAKE_KEY"
""", "test.toml", env=TEST_ENV)
    a, b = config.profiles
    assert (a.stream_first_byte_timeout, a.stream_commit_timeout, a.stream_idle_timeout) == \
        (7.0, 5.0, 300.0)
    assert (b.stream_first_byte_timeout, b.stream_commit_timeout, b.stream_idle_timeout) == \
        (7.0, 60.0, 300.0)
    assert config.proxy.stream_idle_timeout == 300.0


def test_a_bad_stream_timeout_names_its_line_and_key() -> None:
    with pytest.raises(ConfigError) as caught:
        build_config("""
[[profiles]]
name = "a"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:1"
api_key_env = "FAKE_KEY"
stream_idle_timeout = 0
""")
    text = str(caught.value)
    assert "stream_idle_timeout" in text and "greater than 0" in text and "test.toml:" in text
