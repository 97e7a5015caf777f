"""Anthropic and Chat clients (the official SDKs) through the proxy to a Responses provider
(the Responses fake): JSON and streams, tool calls, the ChatGPT backend's rules, and failover
between a Responses provider and an Anthropic one in both directions."""

from __future__ import annotations

from typing import Any

import anthropic
import openai

from tests.conftest import build_config, profile_toml

TOOL = {"name": "get_weather", "description": "Weather for a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                         "required": ["city"]}}


async def test_anthropic_sdk_json_stream_and_tool_loop(fakes: Any, proxy_factory: Any) -> None:
    f = await fakes(("codex", "responses"),)
    proxy = await proxy_factory(build_config(profile_toml("codex", f["codex"])), fakes=f)
    client = anthropic.AsyncAnthropic(base_url=proxy.url + "/proxy/codex", api_key="unused",
                                      max_retries=0)
    message = await client.messages.create(
        model="claude-sonnet-4-5", max_tokens=64, system="Be brief.",
        messages=[{"role": "user", "content": "hello"}])
    assert message.content[0].type == "text"
    assert "codex" in message.content[0].text and "codex-model" in message.content[0].text
    assert message.stop_reason == "end_turn" and message.usage.input_tokens > 0
    sent = f["codex"].requests[-1]
    assert sent.path == "/v1/responses"
    assert sent.json["instructions"] == "Be brief." and sent.json["store"] is False
    assert sent.json["max_output_tokens"] == 64 and sent.json["model"] == "codex-model"

    async with client.messages.stream(
        model="claude-sonnet-4-5", max_tokens=64,
        messages=[{"role": "user", "content": "events:5"}],
    ) as stream:
        text = "".join([chunk async for chunk in stream.text_stream])
        final = await stream.get_final_message()
    assert len(text.split()) == 5 and final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 5

    turn = await client.messages.create(
        model="claude-sonnet-4-5", max_tokens=64, tools=[TOOL],  # type: ignore[list-item]
        messages=[{"role": "user", "content": "use tool"}])
    [call] = [b for b in turn.content if b.type == "tool_use"]
    assert call.name == "get_weather" and turn.stop_reason == "tool_use"
    assert isinstance(call.input, dict) and "city" in call.input
    await client.messages.create(
        model="claude-sonnet-4-5", max_tokens=64, tools=[TOOL],  # type: ignore[list-item]
        messages=[{"role": "user", "content": "use tool"},
                  {"role": "assistant", "content": turn.content},  # type: ignore[typeddict-item]
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                                "content": "sunny"}]}])
    items = f["codex"].requests[-1].json["input"]
    # The model's reasoning of the tool turn went back to it, in front of its call (the fake
    # refuses reasoning it did not make, or one sent with an id while nothing is stored).
    assert [i["type"] for i in items[1:]] == ["reasoning", "function_call",
                                              "function_call_output"]
    assert items[1]["encrypted_content"].startswith("enc:codex:") and "id" not in items[1]
    assert items[2]["call_id"] == items[3]["call_id"] == call.id
    assert items[3]["output"] == "sunny"
    assert f["codex"].requests[-1].status == 200
    await client.close()


async def test_openai_sdk_chat_json_stream_and_streamed_tool_call(
    fakes: Any, proxy_factory: Any
) -> None:
    f = await fakes(("codex", "responses"),)
    proxy = await proxy_factory(build_config(profile_toml("codex", f["codex"])), fakes=f)
    client = openai.AsyncOpenAI(base_url=proxy.url + "/proxy/codex/v1", api_key="unused",
                                max_retries=0)
    completion = await client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "system", "content": "sys"},
                                  {"role": "user", "content": "hello"}])
    assert "codex" in (completion.choices[0].message.content or "")
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.prompt_tokens > 0
    stream = await client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "events:4"}], stream=True,
        stream_options={"include_usage": True})
    chunks = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(text.split()) == 4
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 4
    tools: Any = [{"type": "function", "function": {
        "name": "lookup", "parameters": {"type": "object",
                                         "properties": {"q": {"type": "string"}}}}}]
    calls = await client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "use tool"}], tools=tools,
        stream=True)
    pieces = [c async for c in calls]
    deltas = [d for c in pieces if c.choices for d in c.choices[0].delta.tool_calls or ()]
    assert deltas[0].function is not None and deltas[0].function.name == "lookup"
    arguments = "".join(d.function.arguments or "" for d in deltas if d.function)
    assert arguments.startswith("{") and '"q"' in arguments
    assert pieces[-1].choices[0].finish_reason == "tool_calls"
    await client.close()


async def test_failover_from_a_529_responses_primary_to_an_anthropic_backup_and_back(
    fakes: Any, proxy_factory: Any
) -> None:
    f = await fakes(("codex", "responses"), ("claude", "anthropic"))
    config = build_config(profile_toml("codex", f["codex"], backups=["claude"])
                          + profile_toml("claude", f["claude"], backups=["codex"]))
    proxy = await proxy_factory(config, fakes=f)
    f["codex"].set_fault("529")
    client = anthropic.AsyncAnthropic(base_url=proxy.url + "/proxy/codex", api_key="unused",
                                      max_retries=0)
    async with client.messages.stream(
        model="claude-sonnet-4-5", max_tokens=64,
        messages=[{"role": "user", "content": "events:3"}],
    ) as stream:
        text = "".join([chunk async for chunk in stream.text_stream])
    assert "claude" in text
    resp = await proxy.messages(profile="codex")
    assert resp.headers["x-claudex-attempts"] == "codex:529,claude:200"

    f["codex"].set_fault("ok")
    f["claude"].set_fault("529")
    chat = openai.AsyncOpenAI(base_url=proxy.url + "/proxy/claude/v1", api_key="unused",
                              max_retries=0)
    stream_chat = await chat.chat.completions.create(
        model="claude-sonnet-4-5", messages=[{"role": "user", "content": "events:3"}],
        stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream_chat if c.choices])
    assert "codex" in text
    resp = await proxy.chat(profile="claude")
    assert resp.status_code == 200
    assert resp.headers["x-claudex-attempts"] == "claude:529,codex:200"
    assert f["codex"].requests[-1].json["model"] == "codex-model"
    await client.close()
    await chat.close()


async def test_a_responses_stream_failing_before_content_fails_over_and_after_is_an_error(
    fakes: Any, proxy_factory: Any
) -> None:
    f = await fakes(("codex", "responses"), ("claude", "anthropic"))
    config = build_config(profile_toml("codex", f["codex"], backups=["claude"])
                          + profile_toml("claude", f["claude"]))
    proxy = await proxy_factory(config, fakes=f)
    f["codex"].set_fault("stream_error", cut_after_events=0)
    resp = await proxy.messages({"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": True,
                                 "messages": [{"role": "user", "content": "events:3"}]},
                                profile="codex")
    assert resp.headers["x-claudex-attempts"] == "codex:stream_error,claude:200"
    assert b"claude" in resp.content
    f["codex"].set_fault("stream_error", cut_after_events=2)
    resp = await proxy.messages({"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": True,
                                 "messages": [{"role": "user", "content": "events:5"}]},
                                profile="codex")
    assert resp.headers["x-claudex-provider"] == "codex"
    events = [line for line in resp.text.split("\n") if line.startswith("event: ")]
    assert events[-1] == "event: error" and "event: message_stop" not in events
    assert "overloaded" in resp.text


async def test_reasoning_goes_back_only_to_the_provider_that_made_it(
    fakes: Any, proxy_factory: Any
) -> None:
    """A tool turn served by gpt-5a (with its encrypted reasoning: a gpt-5 model reasons), the
    next turn at gpt-5b after gpt-5a fails: gpt-5b gets no reasoning (it would refuse
    another's); back at gpt-5a, its reasoning returns. Streamed, so the reasoning is
    remembered from the stream."""
    f = await fakes(("gpt-5a", "responses"), ("gpt-5b", "responses"))
    config = build_config(profile_toml("gpt-5a", f["gpt-5a"], backups=["gpt-5b"])
                          + profile_toml("gpt-5b", f["gpt-5b"]))
    proxy = await proxy_factory(config, fakes=f)
    client = anthropic.AsyncAnthropic(base_url=proxy.url + "/proxy/gpt-5a", api_key="unused",
                                      max_retries=0)
    async with client.messages.stream(
        model="claude-sonnet-4-5", max_tokens=64, tools=[TOOL],  # type: ignore[list-item]
        messages=[{"role": "user", "content": "use tool"}],
    ) as stream:
        turn = await stream.get_final_message()
    [call] = [b for b in turn.content if b.type == "tool_use"]
    history: Any = [{"role": "user", "content": "use tool"},
                    {"role": "assistant", "content": turn.content},
                    {"role": "user", "content": [{"type": "tool_result",
                                                  "tool_use_id": call.id, "content": "ok"}]}]
    f["gpt-5a"].set_fault("529")
    await client.messages.create(model="claude-sonnet-4-5", max_tokens=64, tools=[TOOL],  # type: ignore[list-item]
                                 messages=history)
    at_two = f["gpt-5b"].requests[-1]
    assert at_two.status == 200
    assert not [i for i in at_two.json["input"] if i.get("type") == "reasoning"]
    f["gpt-5a"].set_fault("ok")
    await client.messages.create(model="claude-sonnet-4-5", max_tokens=64, tools=[TOOL],  # type: ignore[list-item]
                                 messages=history)
    back = f["gpt-5a"].requests[-1]
    assert back.status == 200
    [reasoning] = [i for i in back.json["input"] if i.get("type") == "reasoning"]
    assert reasoning["encrypted_content"].startswith("enc:gpt-5a:")
    await client.close()
