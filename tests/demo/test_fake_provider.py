"""The fake providers, driven by httpx and by the official SDKs on 127.0.0.1."""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from anthropic.types import ToolParam
from openai.types.chat import ChatCompletionToolParam

from claudex.demo.fake_provider import (
    FakeProvider,
    FakeTokenServer,
    FaultConfigError,
    FaultState,
    start_fakes,
    stop_fakes,
)
from claudex.demo.fake_replies import example_value
from claudex.demo.recording import mask_secret
from claudex.demo.serve_fakes import parse_spec

KEY = "sk-test-0123456789abcdef"
TOOLS: list[ToolParam] = [
    {
        "name": "get_weather",
        "description": "Weather for a city",
        "input_schema": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer"},
            },
            "required": ["city", "unit"],
        },
    }
]
OPENAI_TOOLS: list[ChatCompletionToolParam] = [
    {
        "type": "function",
        "function": {"name": tool["name"], "parameters": dict(tool["input_schema"])},
    }
    for tool in TOOLS
]


@pytest.fixture
async def claude() -> AsyncIterator[FakeProvider]:
    async with FakeProvider("claude", "anthropic") as fake:
        yield fake


@pytest.fixture
async def grok() -> AsyncIterator[FakeProvider]:
    async with FakeProvider("grok", "openai", models=("grok-3-beta", "grok-3-mini")) as fake:
        yield fake


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=5.0) as client:
        yield client


def anthropic_client(fake: FakeProvider, **kw: Any) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=fake.base_url, api_key=KEY, max_retries=0, **kw)


def openai_client(fake: FakeProvider, **kw: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=fake.base_url, api_key=KEY, max_retries=0, **kw)


def message_body(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-test",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": text}],
        **extra,
    }


def chat_body(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"model": "grok-3-beta", "messages": [{"role": "user", "content": text}], **extra}


async def post_messages(
    http: httpx.AsyncClient, fake: FakeProvider, body: dict[str, Any] | None = None
) -> httpx.Response:
    return await http.post(
        f"{fake.base_url}/v1/messages", json=body or message_body(), headers={"x-api-key": KEY}
    )


async def read_sse(
    http: httpx.AsyncClient, url: str, body: dict[str, Any]
) -> tuple[list[tuple[str | None, str]], Exception | None]:
    """Every (event, data) received, and the error that ended the stream (None: clean end)."""
    events: list[tuple[str | None, str]] = []
    event: str | None = None
    try:
        async with http.stream("POST", url, json=body, headers={"x-api-key": KEY}) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    event = line[len("event: ") :]
                elif line.startswith("data: "):
                    events.append((event, line[len("data: ") :]))
                    event = None
    except httpx.TransportError as error:
        return events, error
    return events, None


def names(events: list[tuple[str | None, str]]) -> list[str | None]:
    return [name for name, _ in events]


# ---------------------------------------------------------------- normal answers


async def test_anthropic_sdk_parses_json_answer_and_request_is_recorded(
    claude: FakeProvider,
) -> None:
    client = anthropic_client(claude)
    message = await client.messages.create(
        model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    assert message.content[0].type == "text"
    assert message.content[0].text == "Hello from claude (model claude-test)."
    assert message.model == "claude-test"
    assert message.stop_reason == "end_turn"
    assert message.id.startswith("msg_")
    assert message.usage.output_tokens == 5
    assert claude.request_count == 1
    recorded = claude.requests[0]
    assert (recorded.method, recorded.path) == ("POST", "/v1/messages")
    assert recorded.headers["x-api-key"] == KEY
    assert "anthropic-version" in recorded.headers
    assert recorded.json["model"] == "claude-test"
    assert KEY not in repr(recorded)


async def test_anthropic_stream_has_the_real_event_sequence(
    claude: FakeProvider, http: httpx.AsyncClient
) -> None:
    events, error = await read_sse(
        http, f"{claude.base_url}/v1/messages", message_body(stream=True)
    )
    assert error is None
    assert names(events) == [
        "message_start",
        "ping",
        "content_block_start",
        *["content_block_delta"] * 5,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    for name, data in events:
        assert json.loads(data)["type"] == name
    text = "".join(json.loads(d)["delta"]["text"] for n, d in events if n == "content_block_delta")
    assert text == "Hello from claude (model claude-test)."
    assert json.loads(events[-2][1])["delta"]["stop_reason"] == "end_turn"


async def test_anthropic_sdk_streams(claude: FakeProvider) -> None:
    client = anthropic_client(claude)
    async with client.messages.stream(
        model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        pieces = [text async for text in stream.text_stream]
        final = await stream.get_final_message()
    assert "".join(pieces) == "Hello from claude (model claude-test)."
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 5


async def test_openai_sdk_parses_json_and_stream_with_usage(grok: FakeProvider) -> None:
    client = openai_client(grok)
    completion = await client.chat.completions.create(
        model="grok-3-beta", messages=[{"role": "user", "content": "hi"}]
    )
    assert completion.choices[0].message.content == "Hello from grok (model grok-3-beta)."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.completion_tokens == 5

    stream = await client.chat.completions.create(
        model="grok-3-beta",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello from grok (model grok-3-beta)."
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5
    assert grok.requests[-1].headers["authorization"] == f"Bearer {KEY}"


async def test_openai_stream_ends_with_done_and_has_no_usage_unless_asked(
    grok: FakeProvider, http: httpx.AsyncClient
) -> None:
    events, error = await read_sse(
        http, f"{grok.base_url}/chat/completions", chat_body(stream=True)
    )
    assert error is None
    assert events[-1] == (None, "[DONE]")
    chunks = [json.loads(data) for _, data in events[:-1]]
    assert all("usage" not in chunk for chunk in chunks)
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)


async def test_events_knob_sets_the_number_of_deltas_and_words(
    claude: FakeProvider, grok: FakeProvider, http: httpx.AsyncClient
) -> None:
    events, _ = await read_sse(
        http, f"{claude.base_url}/v1/messages", message_body("events:500", stream=True)
    )
    assert names(events).count("content_block_delta") == 500
    assert json.loads(events[-2][1])["usage"]["output_tokens"] == 500

    response = await post_messages(http, claude, message_body("give me events:7 please"))
    assert len(response.json()["content"][0]["text"].split()) == 7

    chat_events, _ = await read_sse(
        http, f"{grok.base_url}/chat/completions", chat_body("events:40", stream=True)
    )
    contents = [json.loads(d)["choices"][0]["delta"].get("content") for _, d in chat_events[:-1]]
    assert len([c for c in contents if c]) == 40


async def test_anthropic_tool_use_answer(claude: FakeProvider) -> None:
    client = anthropic_client(claude)
    message = await client.messages.create(
        model="claude-test",
        max_tokens=64,
        tools=TOOLS,
        messages=[{"role": "user", "content": "please use tool"}],
    )
    block = message.content[0]
    assert message.stop_reason == "tool_use"
    assert block.type == "tool_use"
    assert block.name == "get_weather" and block.id.startswith("toolu_")
    assert block.input == {"city": "example", "unit": "celsius"}

    async with client.messages.stream(
        model="claude-test",
        max_tokens=64,
        tools=TOOLS,
        messages=[{"role": "user", "content": "use tool get_weather"}],
    ) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert final.content[0].type == "tool_use"
    assert final.content[0].input == {"city": "example", "unit": "celsius"}


async def test_tools_without_the_knob_get_text(claude: FakeProvider) -> None:
    message = await anthropic_client(claude).messages.create(
        model="claude-test",
        max_tokens=64,
        tools=TOOLS,
        messages=[{"role": "user", "content": "what is the weather?"}],
    )
    assert message.stop_reason == "end_turn"


async def test_openai_tool_calls_answer(grok: FakeProvider) -> None:
    client = openai_client(grok)
    completion = await client.chat.completions.create(
        model="grok-3-beta",
        tools=OPENAI_TOOLS,
        messages=[{"role": "user", "content": "use tool"}],
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    call = choice.message.tool_calls[0]
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "example", "unit": "celsius"}

    stream = await client.chat.completions.create(
        model="grok-3-beta",
        tools=OPENAI_TOOLS,
        messages=[{"role": "user", "content": "use tool"}],
        stream=True,
    )
    arguments, finish = "", None
    async for chunk in stream:
        for tool_call in chunk.choices[0].delta.tool_calls or []:
            assert tool_call.index == 0
            arguments += (tool_call.function and tool_call.function.arguments) or ""
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls"
    assert json.loads(arguments) == {"city": "example", "unit": "celsius"}


async def test_count_tokens_and_models(claude: FakeProvider, grok: FakeProvider) -> None:
    client = anthropic_client(claude)
    count = await client.messages.count_tokens(
        model="claude-test", messages=[{"role": "user", "content": "hi"}]
    )
    assert count.input_tokens > 0
    models = await client.models.list()
    assert [m.id for m in models.data] == list(claude.models)
    assert models.data[0].type == "model"
    assert models.has_more is False and models.first_id == claude.models[0]

    openai_models = await openai_client(grok).models.list()
    assert [m.id for m in openai_models.data] == list(grok.models)
    assert openai_models.data[0].owned_by == "grok"


async def test_bad_requests_get_protocol_errors(
    claude: FakeProvider, grok: FakeProvider, http: httpx.AsyncClient
) -> None:
    no_max_tokens = {"model": "claude-test", "messages": [{"role": "user", "content": "hi"}]}
    response = await post_messages(http, claude, no_max_tokens)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    response = await http.post(f"{claude.base_url}/v1/nope", json={})
    assert response.status_code == 404 and response.json()["type"] == "error"
    response = await http.get(f"{claude.base_url}/v1/messages")
    assert response.status_code == 405
    response = await http.post(f"{grok.base_url}/chat/completions", json={"model": "m"})
    assert response.status_code == 400 and "message" in response.json()["error"]


async def test_a_model_the_provider_does_not_serve_is_404_in_each_apis_words(
    claude: FakeProvider, grok: FakeProvider, http: httpx.AsyncClient
) -> None:
    response = await http.post(f"{grok.base_url}/chat/completions",
                               json=chat_body(model="claude-sonnet-4-6"))
    assert response.status_code == 404
    assert response.json() == {"error": {
        "message": "The model `claude-sonnet-4-6` does not exist or you do not have access to it.",
        "type": "invalid_request_error", "param": None, "code": "model_not_found"}}
    response = await post_messages(http, claude, message_body(model="gpt-4o"))
    assert response.status_code == 404
    assert response.json() == {"type": "error",
                               "error": {"type": "not_found_error", "message": "model: gpt-4o"}}
    count_body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]}
    count = await http.post(f"{claude.base_url}/v1/messages/count_tokens", json=count_body)
    assert count.status_code == 404
    # Every claude- name is served (Claude Code asks for new models and haiku ones), and each
    # model the provider lists.
    for model in ("claude-opus-5-5", "claude-haiku-4-5-20251001", "claude-test"):
        assert (await post_messages(http, claude, message_body(model=model))).status_code == 200
    for model in grok.models:
        response = await http.post(f"{grok.base_url}/chat/completions", json=chat_body(model=model))
        assert response.status_code == 200


async def test_strict_models_off_serves_any_name(http: httpx.AsyncClient) -> None:
    async with FakeProvider("lax", "openai", strict_models=False) as lax, \
            FakeProvider("laxa", "anthropic", strict_models=False) as laxa:
        response = await http.post(f"{lax.base_url}/chat/completions",
                                   json=chat_body(model="claude-sonnet-4-6"))
        assert response.status_code == 200
        assert response.json()["model"] == "claude-sonnet-4-6"
        assert (await post_messages(http, laxa, message_body(model="gpt-4o"))).status_code == 200


async def test_openai_max_tokens_over_the_limit_gets_deepseeks_range_error(
    http: httpx.AsyncClient,
) -> None:
    async with FakeProvider("deepseek", "openai", max_output_tokens=8192) as deepseek:
        url = f"{deepseek.base_url}/chat/completions"
        for key in ("max_tokens", "max_completion_tokens"):
            response = await http.post(url, json=chat_body(model="deepseek-chat", **{key: 8193}))
            assert response.status_code == 400
            assert response.json() == {"error": {
                "message": "Invalid max_tokens value, the valid range of max_tokens is [1, 8192]",
                "type": "invalid_request_error", "param": None,
                "code": "invalid_request_error"}}
            ok = await http.post(url, json=chat_body(model="deepseek-chat", **{key: 8192}))
            assert ok.status_code == 200
        # An SDK sees it as a BadRequestError, the class claudex's clients see.
        with pytest.raises(openai.BadRequestError):
            await openai_client(deepseek).chat.completions.create(
                model="deepseek-chat", max_tokens=32000,
                messages=[{"role": "user", "content": "hi"}])


async def test_anthropic_max_tokens_limit_is_configurable(http: httpx.AsyncClient) -> None:
    async with FakeProvider("small", "anthropic", max_output_tokens=32000) as small:
        response = await post_messages(http, small,
                                       message_body(model="claude-sonnet-4-5", max_tokens=64000))
        assert response.status_code == 400
        assert response.json() == {"type": "error", "error": {
            "type": "invalid_request_error",
            "message": "max_tokens: 64000 > 32000, which is the maximum allowed number of "
                       "output tokens for claude-sonnet-4-5"}}
        ok = await post_messages(http, small,
                                 message_body(model="claude-sonnet-4-5", max_tokens=32000))
        assert ok.status_code == 200
    # Unset, the limit is the fakes' general one.
    async with FakeProvider("big", "anthropic") as big:
        assert (await post_messages(http, big, message_body(max_tokens=128_000))).status_code \
            == 200
        assert (await post_messages(http, big, message_body(max_tokens=128_001))).status_code \
            == 400
    with pytest.raises(ValueError):
        FakeProvider("bad", "openai", max_output_tokens=0)


# ---------------------------------------------------------------- faults


async def test_server_errors_in_both_formats(claude: FakeProvider, grok: FakeProvider) -> None:
    claude.set_fault("500")
    with pytest.raises(anthropic.InternalServerError) as anthropic_error:
        await anthropic_client(claude).messages.create(
            model="claude-test", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
    assert anthropic_error.value.status_code == 500
    assert anthropic_error.value.body["error"]["type"] == "api_error"  # type: ignore[index]

    claude.set_fault("529")
    with pytest.raises(anthropic.APIStatusError) as overloaded:
        await anthropic_client(claude).messages.create(
            model="claude-test", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
    assert overloaded.value.status_code == 529
    assert overloaded.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]

    grok.set_fault("500")
    with pytest.raises(openai.InternalServerError) as openai_error:
        await openai_client(grok).chat.completions.create(
            model="grok-3-beta", messages=[{"role": "user", "content": "hi"}]
        )
    assert openai_error.value.status_code == 500
    assert openai_error.value.type == "server_error"


async def test_rate_limit_headers(claude: FakeProvider, http: httpx.AsyncClient) -> None:
    claude.set_fault("429", retry_after=2, retry_after_ms=1500)
    response = await post_messages(http, claude)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "2"
    assert response.headers["retry-after-ms"] == "1500"
    assert response.json()["error"]["type"] == "rate_limit_error"

    claude.set_fault("429", retry_after=None)
    response = await post_messages(http, claude)
    assert "retry-after" not in response.headers and "retry-after-ms" not in response.headers

    claude.set_fault("429", retry_after="Wed, 21 Oct 2099 07:28:00 GMT")
    response = await post_messages(http, claude)
    assert response.headers["retry-after"] == "Wed, 21 Oct 2099 07:28:00 GMT"


async def test_openai_rate_limit_through_the_sdk(grok: FakeProvider) -> None:
    grok.set_fault("429", retry_after=0.5)
    with pytest.raises(openai.RateLimitError) as error:
        await openai_client(grok).chat.completions.create(
            model="grok-3-beta", messages=[{"role": "user", "content": "hi"}]
        )
    assert error.value.response.headers["retry-after"] == "0.5"
    assert error.value.code == "rate_limit_exceeded"


async def test_auth_fault_and_valid_tokens(
    claude: FakeProvider, grok: FakeProvider, http: httpx.AsyncClient
) -> None:
    claude.set_fault("401")
    with pytest.raises(anthropic.AuthenticationError) as anthropic_error:
        await anthropic_client(claude).messages.create(
            model="claude-test", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
    assert anthropic_error.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]

    grok.set_fault("ok", valid_tokens={"fresh-token"})
    with pytest.raises(openai.AuthenticationError) as openai_error:
        await openai_client(grok).chat.completions.create(
            model="grok-3-beta", messages=[{"role": "user", "content": "hi"}]
        )
    assert openai_error.value.code == "invalid_api_key"
    good = openai.AsyncOpenAI(base_url=grok.base_url, api_key="fresh-token", max_retries=0)
    completion = await good.chat.completions.create(
        model="grok-3-beta", messages=[{"role": "user", "content": "hi"}]
    )
    assert completion.choices[0].message.content is not None
    # Changing the fault keeps the accepted tokens; x-api-key counts as well as a bearer token.
    grok.set_fault("ok")
    response = await http.get(f"{grok.base_url}/models", headers={"x-api-key": "fresh-token"})
    assert response.status_code == 200
    response = await http.get(f"{grok.base_url}/models", headers={"x-api-key": "stale"})
    assert response.status_code == 401


async def test_down_refuses_connections_then_recovers_on_the_same_port(
    claude: FakeProvider, http: httpx.AsyncClient
) -> None:
    assert (await post_messages(http, claude)).status_code == 200  # leaves a kept-alive connection
    port = claude.port
    claude.set_fault("down")
    assert claude.state()["listening"] is False
    with pytest.raises(httpx.TransportError):
        await post_messages(http, claude)  # the old connection is gone too
    with pytest.raises(httpx.ConnectError):
        await post_messages(http, claude)
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    claude.set_fault("ok")
    assert claude.port == port
    response = await post_messages(http, claude)
    assert response.status_code == 200
    assert claude.state()["listening"] is True


async def test_setting_the_mode_field_directly_takes_effect(
    grok: FakeProvider, http: httpx.AsyncClient
) -> None:
    grok.faults.mode = "down"
    with pytest.raises(httpx.ConnectError):
        await http.get(f"{grok.base_url}/models")
    grok.faults.mode = "ok"
    assert (await http.get(f"{grok.base_url}/models")).status_code == 200
    grok.faults = FaultState(mode="500")
    assert (await http.get(f"{grok.base_url}/models")).status_code == 500
    with pytest.raises(FaultConfigError):
        grok.faults.mode = "exploded"  # type: ignore[assignment]


async def test_slow_delays_the_answer(claude: FakeProvider) -> None:
    claude.set_fault("slow", latency_ms=250)
    # Only the read is impatient: a connect slowed by a loaded machine is not what is tested.
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0, read=0.05)) as impatient:
        with pytest.raises(httpx.ReadTimeout):
            await post_messages(impatient, claude)
    async with httpx.AsyncClient(timeout=5) as patient:
        response = await post_messages(patient, claude)
    assert response.status_code == 200


async def test_hang_times_out_the_client_and_stop_is_prompt(claude: FakeProvider) -> None:
    claude.set_fault("hang")
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0, read=0.2)) as client:
        with pytest.raises(httpx.ReadTimeout):
            await post_messages(client, claude)
        pending = asyncio.create_task(post_messages(client, claude))
        async with asyncio.timeout(2):
            await claude.wait_for_requests(2)
        await asyncio.wait_for(claude.stop(), timeout=2)
        with pytest.raises(httpx.TransportError):
            await pending


async def test_hung_request_is_dropped_when_the_fault_changes(
    claude: FakeProvider, http: httpx.AsyncClient
) -> None:
    claude.set_fault("hang")
    pending = asyncio.create_task(post_messages(http, claude))
    async with asyncio.timeout(2):
        await claude.wait_for_requests(1)
    claude.set_fault("ok")
    with pytest.raises(httpx.RemoteProtocolError):
        await pending
    assert (await post_messages(http, claude)).status_code == 200


async def test_cut_drops_the_stream_after_some_deltas(
    claude: FakeProvider, grok: FakeProvider, http: httpx.AsyncClient
) -> None:
    claude.set_fault("cut", cut_after_events=2)
    events, error = await read_sse(
        http, f"{claude.base_url}/v1/messages", message_body(stream=True)
    )
    assert isinstance(error, httpx.RemoteProtocolError)
    assert names(events) == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
    ]

    grok.set_fault("cut")
    chat_events, chat_error = await read_sse(
        http, f"{grok.base_url}/chat/completions", chat_body(stream=True)
    )
    assert isinstance(chat_error, httpx.RemoteProtocolError)
    assert len(chat_events) == 1 + 3
    assert all(data != "[DONE]" for _, data in chat_events)


async def test_cut_before_content_sends_only_the_preamble(
    claude: FakeProvider, grok: FakeProvider, http: httpx.AsyncClient
) -> None:
    claude.set_fault("cut_before_content")
    events, error = await read_sse(
        http, f"{claude.base_url}/v1/messages", message_body(stream=True)
    )
    assert isinstance(error, httpx.RemoteProtocolError)
    assert names(events) == ["message_start", "ping"]

    grok.set_fault("cut_before_content")
    chat_events, chat_error = await read_sse(
        http, f"{grok.base_url}/chat/completions", chat_body(stream=True)
    )
    assert isinstance(chat_error, httpx.RemoteProtocolError)
    [(_, first)] = chat_events
    delta = json.loads(first)["choices"][0]["delta"]
    assert delta["role"] == "assistant" and not delta.get("content")


async def test_cut_on_a_json_request_drops_before_any_answer(
    claude: FakeProvider, http: httpx.AsyncClient
) -> None:
    claude.set_fault("cut")
    with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
        await post_messages(http, claude)


async def test_stream_error_sends_an_error_event(
    claude: FakeProvider, grok: FakeProvider, http: httpx.AsyncClient
) -> None:
    claude.set_fault("stream_error", cut_after_events=1)
    events, error = await read_sse(
        http, f"{claude.base_url}/v1/messages", message_body(stream=True)
    )
    assert error is None
    assert names(events) == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "error",
    ]
    assert json.loads(events[-1][1])["error"]["type"] == "overloaded_error"

    claude.set_fault("stream_error", cut_after_events=0)
    events, _ = await read_sse(http, f"{claude.base_url}/v1/messages", message_body(stream=True))
    assert names(events) == ["message_start", "ping", "error"]

    with pytest.raises(anthropic.APIStatusError):
        async with anthropic_client(claude).messages.stream(
            model="claude-test", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            await stream.get_final_message()

    grok.set_fault("stream_error")
    chat_stream = await openai_client(grok).chat.completions.create(
        model="grok-3-beta", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    with pytest.raises(openai.APIError):
        async for _ in chat_stream:
            pass


async def test_times_reverts_to_ok(grok: FakeProvider, http: httpx.AsyncClient) -> None:
    grok.set_fault("500", times=2)
    url = f"{grok.base_url}/chat/completions"
    statuses = [(await http.post(url, json=chat_body())).status_code for _ in range(3)]
    assert statuses == [500, 500, 200]
    assert grok.faults.mode == "ok" and grok.faults.times is None


async def test_duration_reverts_to_ok(claude: FakeProvider, http: httpx.AsyncClient) -> None:
    claude.set_fault("hang", duration_s=0.05)
    # The revert is a fault change, so it releases (drops) the hung request.
    with pytest.raises(httpx.RemoteProtocolError):
        await post_messages(http, claude)
    assert claude.faults.mode == "ok"
    assert (await post_messages(http, claude)).status_code == 200


async def test_models_endpoint_sees_only_probe_faults(
    claude: FakeProvider, http: httpx.AsyncClient
) -> None:
    url = f"{claude.base_url}/v1/models"
    for mode in ("429", "529", "cut", "stream_error", "slow"):
        claude.set_fault(mode, latency_ms=0)
        assert (await http.get(url)).status_code == 200, mode
    claude.set_fault("500")
    assert (await http.get(url)).status_code == 500
    claude.set_fault("401")
    assert (await http.get(url)).status_code == 401
    claude.set_fault("hang")
    with pytest.raises(httpx.ReadTimeout):
        await http.get(url, timeout=httpx.Timeout(5.0, read=0.1))


# ---------------------------------------------------------------- control and bookkeeping


async def test_control_routes(claude: FakeProvider, http: httpx.AsyncClient) -> None:
    control = f"http://127.0.0.1:{claude.port}/_fake"
    response = await http.post(
        f"{control}/fault", json={"mode": "429", "retry_after": 3, "times": 1}
    )
    assert response.status_code == 200
    assert response.json()["faults"]["mode"] == "429"
    first = await post_messages(http, claude)
    assert (first.status_code, first.headers["retry-after"]) == (429, "3")
    assert (await post_messages(http, claude)).status_code == 200

    state = (await http.get(f"{control}/state")).json()
    assert state["faults"]["mode"] == "ok"
    assert state["request_count"] == 2
    assert state["last_request"]["headers"]["x-api-key"] == mask_secret(KEY)

    bad = await http.post(f"{control}/fault", json={"mode": "exploded"})
    assert bad.status_code == 400 and "exploded" in bad.json()["error"]
    bad = await http.post(f"{control}/fault", json={"mode": "down", "times": 2})
    assert bad.status_code == 400

    await http.post(f"{control}/fault", json={"mode": "500"})
    reset = await http.post(f"{control}/reset")
    assert reset.json()["faults"]["mode"] == "ok"
    assert claude.request_count == 0 and claude.requests == []


async def test_down_through_the_control_route_still_answers_the_caller(
    grok: FakeProvider, http: httpx.AsyncClient
) -> None:
    control = f"http://127.0.0.1:{grok.port}/_fake/fault"
    response = await http.post(control, json={"mode": "down", "duration_s": 30})
    assert response.status_code == 200
    with pytest.raises(httpx.ConnectError):
        await http.get(f"{grok.base_url}/models")
    grok.set_fault("ok")
    assert (await http.get(f"{grok.base_url}/models")).status_code == 200


async def test_set_fault_validates() -> None:
    fake = FakeProvider("x", "anthropic")
    with pytest.raises(FaultConfigError):
        fake.set_fault("slow", latency_ms=-1)
    with pytest.raises(FaultConfigError):
        fake.set_fault("down", times=1)
    fake.set_fault("slow")
    assert fake.faults.latency_ms == 2000


async def test_recording_is_bounded(claude: FakeProvider, http: httpx.AsyncClient) -> None:
    claude.max_recorded = 4
    for _ in range(7):
        await http.get(f"{claude.base_url}/v1/models", headers={"X-Custom": "yes"})
    assert claude.request_count == 7
    assert 2 <= len(claude.requests) <= 4
    assert claude.requests[-1].headers["x-custom"] == "yes"
    claude.reset_log()
    assert claude.request_count == 0 and claude.requests == []


async def test_start_fakes_gives_distinct_ports_and_base_urls() -> None:
    fakes = await start_fakes([("a", "anthropic"), ("b", "openai")])
    try:
        a, b = fakes
        assert a.port != b.port
        assert a.base_url == f"http://127.0.0.1:{a.port}"
        assert b.base_url == f"http://127.0.0.1:{b.port}/v1"
    finally:
        await stop_fakes(fakes)
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", a.port)) != 0


# ---------------------------------------------------------------- OAuth token endpoint


async def test_token_server_refreshes_fails_and_rotates(http: httpx.AsyncClient) -> None:
    async with FakeTokenServer() as tokens:
        body = {"grant_type": "refresh_token", "refresh_token": "r1", "client_id": "cid"}
        tokens.set_next("access-2", "r2", expires_in=60)
        response = await http.post(tokens.token_url, json=body)
        assert response.status_code == 200
        assert response.json() == {
            "access_token": "access-2",
            "refresh_token": "r2",
            "expires_in": 60,
            "token_type": "Bearer",
        }
        generated = (await http.post(tokens.token_url, data=body)).json()  # form-encoded
        assert generated["access_token"] != "access-2"
        assert tokens.call_count == 2
        assert tokens.calls[0].json == body

        tokens.set_failing()
        failed = await http.post(tokens.token_url, json=body)
        assert (failed.status_code, failed.json()["error"]) == (400, "invalid_grant")
        tokens.set_failing(None)

        tokens.valid_refresh_tokens = {"r1"}
        tokens.set_next("access-3", "r3")
        assert (await http.post(tokens.token_url, json=body)).status_code == 200
        reused = await http.post(tokens.token_url, json=body)
        assert reused.json()["error"] == "invalid_grant"
        assert tokens.valid_refresh_tokens == {"r3"}

        wrong = await http.post(tokens.token_url, json={**body, "grant_type": "password"})
        assert wrong.json()["error"] == "unsupported_grant_type"


# ---------------------------------------------------------------- small pieces


async def test_forced_tool_choice_calls_the_named_tool(claude: FakeProvider) -> None:
    other: ToolParam = {"name": "lookup", "input_schema": {"type": "object", "properties": {}}}
    message = await anthropic_client(claude).messages.create(
        model="claude-test",
        max_tokens=64,
        tools=[*TOOLS, other],
        tool_choice={"type": "tool", "name": "lookup"},
        messages=[{"role": "user", "content": "hello"}],
    )
    assert message.content[0].type == "tool_use"
    assert message.content[0].name == "lookup" and message.content[0].input == {}


def test_example_value_follows_the_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array"},
            "where": {
                "type": "object",
                "properties": {"lat": {"type": "number"}, "exact": {"type": "boolean"}},
            },
            "mode": {"type": ["null", "string"], "enum": ["fast", "slow"]},
        },
    }
    assert example_value(schema) == {
        "tags": [],
        "where": {"lat": 1, "exact": True},
        "mode": "fast",
    }
    assert example_value(None) == {}


def test_serve_fakes_specs() -> None:
    assert parse_spec("grok:openai:9001") == ("grok", "openai", 9001)
    assert parse_spec("claude:anthropic") == ("claude", "anthropic", 0)
    for bad in ("grok", "grok:grpc", "grok:openai:port"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_spec(bad)
