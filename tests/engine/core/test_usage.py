"""Token usage: read from answers in each protocol, streamed (in any chunking) or not, in one
convention (four parts that add up: input not cached, output, cache reads, cache writes), and
summed per provider and profile through the proxy for every client/provider pair."""

from __future__ import annotations

import json
from typing import Any

import pytest

from claudex.engine.core.usage import Usage, UsageScanner, normalise, usage_in_body
from tests.conftest import anthropic_body, build_config, openai_body, profile_toml

ANTHROPIC_STREAM = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","usage":'
    b'{"input_tokens":25,"cache_read_input_tokens":7,"cache_creation_input_tokens":4,'
    b'"output_tokens":1}}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
    b'{"type":"text_delta","text":"a \\"usage\\": {\\"output_tokens\\": 999} trap"}}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":42}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)
OPENAI_STREAM = (
    b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}\n\n'
    b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":5,'
    b'"prompt_tokens_details":{"cached_tokens":10}}}\n\n'
    b"data: [DONE]\n\n"
)
RESPONSES_STREAM = (
    b'event: response.completed\ndata: {"type":"response.completed","response":{"usage":'
    b'{"input_tokens":12,"output_tokens":3,"input_tokens_details":{"cached_tokens":2}}}}\n\n'
)


def scan(data: bytes, size: int) -> Usage | None:
    scanner = UsageScanner()
    for i in range(0, len(data), size):
        scanner.feed(data[i:i + size])
    scanner.finish()
    return scanner.usage


@pytest.mark.parametrize("size", [1, 2, 3, 7, 16, 64, 10_000])
def test_streams_in_every_chunking(size: int) -> None:
    assert scan(ANTHROPIC_STREAM, size) == Usage(25, 42, 7, 4)  # the escaped trap is text
    # OpenAI's and Responses' input counts hold the cached part; here it is taken out.
    assert scan(OPENAI_STREAM, size) == Usage(20, 5, 10)
    assert scan(RESPONSES_STREAM, size) == Usage(10, 3, 2)
    assert scan(b'data: {"choices":[]}\n\n', size) is None


def test_a_last_line_without_newline_is_read() -> None:
    assert scan(b'data: {"usage":{"prompt_tokens":1,"completion_tokens":2}}', 5) == Usage(1, 2)


def test_bodies_and_garbage() -> None:
    anthropic = json.dumps({"content": [{"type": "text", "text": '"usage": 5'}],
                            "usage": {"input_tokens": 9, "output_tokens": 4}}).encode()
    assert usage_in_body(anthropic) == Usage(9, 4)
    assert usage_in_body(b'{"usage": {"prompt_tokens": 3, "completion_tokens": 1}}') == Usage(3, 1)
    for garbage in (b"", b"not json", b'{"usage": 5}', b'{"usage": {', b'\xff"usage"'):
        assert usage_in_body(garbage) is None
    assert normalise({"input_tokens": -3, "output_tokens": True}) == Usage()


def test_one_convention_for_every_protocol() -> None:
    """The same answer as each protocol reports it reads as the same four counts; Anthropic's
    cache writes come back out of OpenRouter's `cache_write_tokens` (which claudex's Anthropic
    -> OpenAI translation sets) and out of a gateway's top-level Anthropic counters."""
    same = Usage(input_tokens=100, output_tokens=20, cache_read_tokens=3000, cache_write_tokens=50)
    assert same.all_input == 3150 and same.total == 3170
    assert normalise({"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 3000,
                      "cache_creation_input_tokens": 50}) == same
    assert normalise({"prompt_tokens": 3150, "completion_tokens": 20, "prompt_tokens_details":
                      {"cached_tokens": 3000, "cache_write_tokens": 50}}) == same
    assert normalise({"prompt_tokens": 3150, "completion_tokens": 20,
                      "cache_read_input_tokens": 3000, "cache_creation_input_tokens": 50}) == same
    assert normalise({"input_tokens": 3150, "output_tokens": 20, "total_tokens": 3170,
                      "input_tokens_details": {"cached_tokens": 3000,
                                               "cache_write_tokens": 50}}) == same
    # A count that does not add up never goes below zero.
    assert normalise({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 9}}) == \
        Usage(0, 0, 9)


def test_translations_keep_cache_writes() -> None:
    from claudex.providers.translate.reasons import anthropic_usage, openai_usage
    from claudex.providers.translate.responses_client_answers import responses_usage

    anthropic = {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 3000,
                 "cache_creation_input_tokens": 50}
    chat = openai_usage(anthropic)
    assert chat["prompt_tokens"] == 3150
    assert chat["prompt_tokens_details"] == {"cached_tokens": 3000, "cache_write_tokens": 50}
    assert anthropic_usage(chat) == anthropic
    assert normalise(chat) == normalise(anthropic) == normalise(responses_usage(chat))


async def pair(fakes: Any, proxy_factory: Any) -> Any:
    f = await fakes(("claude", "anthropic"), ("gpt", "openai"))
    config = build_config(profile_toml("claude", f["claude"]) + profile_toml("gpt", f["gpt"]))
    return await proxy_factory(config, fakes=f)


def tokens(status: dict[str, Any], name: str) -> dict[str, int]:
    return dict(next(p for p in status["profiles"] if p["name"] == name)["tokens"])


@pytest.mark.parametrize("client", ["anthropic", "openai"])
@pytest.mark.parametrize("provider", ["claude", "gpt"])
@pytest.mark.parametrize("stream", [False, True])
async def test_every_pair_counts_tokens(fakes: Any, proxy_factory: Any, client: str,
                                        provider: str, stream: bool) -> None:
    proxy = await pair(fakes, proxy_factory)
    if client == "anthropic":
        resp = await proxy.messages(anthropic_body(stream=stream), profile=provider)
    else:
        body = openai_body(stream=stream)
        if stream:
            body["stream_options"] = {"include_usage": True}
        resp = await proxy.chat(body, profile=provider)
    assert resp.status_code == 200
    status = (await proxy.client.get("/_claudex/status")).json()
    counted = tokens(status, provider)
    assert counted["input_tokens"] > 0 and counted["output_tokens"] > 0
    other = "gpt" if provider == "claude" else "claude"
    assert tokens(status, other) == {"input_tokens": 0, "output_tokens": 0,
                                     "cache_read_tokens": 0, "cache_write_tokens": 0}
    assert status["tokens_by_profile"][provider] == counted
    metrics = (await proxy.client.get("/metrics")).text
    line = (f'claudex_provider_tokens_total{{kind="output",provider="{provider}"}} '
            f'{float(counted["output_tokens"])}')
    assert line in metrics


async def test_request_events_carry_the_usage(fakes: Any, proxy_factory: Any) -> None:
    proxy = await pair(fakes, proxy_factory)
    assert (await proxy.messages(anthropic_body(stream=True), profile="claude")).status_code == 200
    [event] = [e for e in proxy.engine.events.since(0) if e.kind == "request"]
    assert event.data["usage"]["output_tokens"] > 0


def test_panel_words() -> None:
    from claudex.console.format import token_words

    assert token_words({"tokens": {"input_tokens": 1234, "output_tokens": 40}}) == " · 1.2k/40 tok"
    assert token_words({"tokens": {"input_tokens": 0, "output_tokens": 0}}) == ""
    assert token_words({}) == ""


# -- a Chat stream's usage, asked for or not -----------------------------------------------------


async def _chat_stream(proxy: Any, profile: str, asked: bool) -> list[bytes]:
    """The raw SSE events a Chat client streaming through `profile` receives."""
    body = openai_body(stream=True)
    if asked:
        body["stream_options"] = {"include_usage": True}
    async with proxy.client.stream("POST", f"/proxy/{profile}/v1/chat/completions",
                                   json=body) as resp:
        assert resp.status_code == 200
        raw = b"".join([chunk async for chunk in resp.aiter_raw()])
    return [event for event in raw.split(b"\n\n") if event]


@pytest.mark.parametrize("provider", ["gpt", "claude"])
@pytest.mark.parametrize("asked", [False, True])
async def test_a_chat_stream_is_counted_whether_or_not_the_client_asked_for_usage(
        fakes: Any, proxy_factory: Any, provider: str, asked: bool) -> None:
    """claudex asks an OpenAI-compatible upstream for usage on every stream (and a translator
    always makes the usage chunk); a client that did not ask sees neither the usage chunk nor
    the `"usage":null` the upstream then adds to every chunk, yet the tokens are counted."""
    proxy = await pair(fakes, proxy_factory)
    events = await _chat_stream(proxy, provider, asked)
    assert events[-1] == b"data: [DONE]"
    chunks = [json.loads(e.removeprefix(b"data: ")) for e in events[:-1]]
    assert any(c["choices"] and c["choices"][0]["delta"].get("content") for c in chunks)
    usage_chunks = [c for c in chunks if not c["choices"]]
    if asked:
        assert len(usage_chunks) == 1 and usage_chunks[0]["usage"]["completion_tokens"] > 0
    else:
        assert usage_chunks == []
        assert all("usage" not in c for c in chunks)
    if provider == "gpt":
        [sent] = proxy.fakes["gpt"].requests
        assert sent.json["stream_options"] == {"include_usage": True}
    status = (await proxy.client.get("/_claudex/status")).json()
    counted = tokens(status, provider)
    assert counted["input_tokens"] > 0 and counted["output_tokens"] > 0


async def test_the_openai_sdk_streams_as_without_claudex(fakes: Any, proxy_factory: Any) -> None:
    import openai

    proxy = await pair(fakes, proxy_factory)
    client = openai.AsyncOpenAI(base_url=f"{proxy.url}/proxy/gpt/v1", api_key="sk-client",
                                max_retries=0)
    try:
        stream = await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hello"}], stream=True)
        plain = [chunk async for chunk in stream]
        stream = await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hello"}], stream=True,
            stream_options={"include_usage": True})
        asked = [chunk async for chunk in stream]
    finally:
        await client.close()
    assert plain and all(c.choices and c.usage is None for c in plain)
    assert asked[-1].choices == [] and asked[-1].usage is not None
    assert asked[-1].usage.completion_tokens > 0
    status = (await proxy.client.get("/_claudex/status")).json()
    assert tokens(status, "gpt")["output_tokens"] == 2 * asked[-1].usage.completion_tokens


@pytest.mark.parametrize("size", [1, 5, 17, 64, 10_000])
def test_hidden_usage_in_any_chunking(size: int) -> None:
    from claudex.providers.usage_chunks import HiddenUsage

    stream = (b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"a \\"usage\\":{"}}],'
              b'"usage":null}\n\n'
              b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}'
              b'\r\n\r\n'
              b"data: [DONE]\n\n")
    hider = HiddenUsage()
    out = b"".join(hider.feed(stream[i:i + size]) for i in range(0, len(stream), size))
    out += hider.finish()
    assert out == (b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"a \\"usage\\":{"}}]}'
                   b"\n\ndata: [DONE]\n\n")


async def test_a_chat_stream_from_a_responses_provider_is_counted_and_hidden(
        fakes: Any, proxy_factory: Any) -> None:
    f = await fakes(("resp", "responses"))
    proxy = await proxy_factory(build_config(profile_toml("resp", f["resp"])), fakes=f)
    events = await _chat_stream(proxy, "resp", asked=False)
    chunks = [json.loads(e.removeprefix(b"data: ")) for e in events[:-1]]
    assert chunks and all(c["choices"] and "usage" not in c for c in chunks)
    counted = tokens((await proxy.client.get("/_claudex/status")).json(), "resp")
    assert counted["input_tokens"] > 0 and counted["output_tokens"] > 0


async def test_include_usage_false_is_overridden_upstream_and_kept_for_the_client(
        fakes: Any, proxy_factory: Any) -> None:
    proxy = await pair(fakes, proxy_factory)
    body = openai_body(stream=True)
    body["stream_options"] = {"include_usage": False}
    async with proxy.client.stream("POST", "/proxy/gpt/v1/chat/completions", json=body) as resp:
        raw = b"".join([chunk async for chunk in resp.aiter_raw()])
    assert b'"usage"' not in raw and raw.endswith(b"data: [DONE]\n\n")
    [sent] = proxy.fakes["gpt"].requests
    assert sent.json["stream_options"] == {"include_usage": True}
    assert tokens((await proxy.client.get("/_claudex/status")).json(), "gpt")["output_tokens"] > 0
