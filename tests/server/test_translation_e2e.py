"""Cross-protocol failover end to end with the official SDKs as clients (issue 4)."""

from __future__ import annotations

from typing import Any

import anthropic
import openai

from tests.conftest import anthropic_body, build_config, profile_toml

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]},
}


async def mixed(fakes: Any, proxy_factory: Any) -> Any:
    f = await fakes(("claude", "anthropic"), ("grok", "openai"))
    config = build_config(profile_toml("claude", f["claude"], backups=["grok"])
                          + profile_toml("grok", f["grok"]))
    return await proxy_factory(config, fakes=f)


def sdk(proxy: Any, path: str = "") -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=proxy.url + path, api_key="unused", max_retries=0)


async def test_anthropic_sdk_against_openai_provider(fakes: Any, proxy_factory: Any) -> None:
    proxy = await mixed(fakes, proxy_factory)
    client = sdk(proxy, "/proxy/grok")
    message = await client.messages.create(
        model="claude-sonnet-4-5", max_tokens=64, system="Be brief.",
        messages=[{"role": "user", "content": "hello"}])
    assert message.type == "message" and message.stop_reason == "end_turn"
    assert "grok" in message.content[0].text  # type: ignore[union-attr]
    sent = proxy.fakes["grok"].requests[-1].json
    assert sent["messages"][0] == {"role": "system", "content": "Be brief."}
    async with client.messages.stream(
        model="claude-sonnet-4-5", max_tokens=64,
        messages=[{"role": "user", "content": "events:6"}],
    ) as stream:
        text = "".join([t async for t in stream.text_stream])
        final = await stream.get_final_message()
    assert "grok" in text and final.stop_reason == "end_turn"
    await client.close()


async def test_tool_use_round_trip_through_openai_provider(fakes: Any, proxy_factory: Any) -> None:
    proxy = await mixed(fakes, proxy_factory)
    client = sdk(proxy, "/proxy/grok")
    first = await client.messages.create(
        model="claude-sonnet-4-5", max_tokens=128, tools=[WEATHER_TOOL],  # type: ignore[list-item]
        messages=[{"role": "user", "content": "use tool get_weather"}])
    assert first.stop_reason == "tool_use"
    call = next(b for b in first.content if b.type == "tool_use")
    assert call.name == "get_weather" and isinstance(call.input, dict)
    second = await client.messages.create(
        model="claude-sonnet-4-5", max_tokens=128, tools=[WEATHER_TOOL],  # type: ignore[list-item]
        messages=[
            {"role": "user", "content": "use tool get_weather"},
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},  # type: ignore[misc]
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                          "content": "sunny"}]},
        ])
    assert second.stop_reason == "end_turn"
    sent = proxy.fakes["grok"].requests[-1].json["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == call.id
    assert sent[-1] == {"role": "tool", "tool_call_id": call.id, "content": "sunny"}
    # Streaming tool call: input_json_delta fragments rebuild the arguments.
    async with client.messages.stream(
        model="claude-sonnet-4-5", max_tokens=128, tools=[WEATHER_TOOL],  # type: ignore[list-item]
        messages=[{"role": "user", "content": "use tool get_weather"}],
    ) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert next(b for b in final.content if b.type == "tool_use").name == "get_weather"
    await client.close()


async def test_failover_from_anthropic_primary_to_openai_backup(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await mixed(fakes, proxy_factory)
    proxy.fakes["claude"].set_fault("529")
    client = sdk(proxy)
    raw = await client.messages.with_raw_response.create(
        model="claude-sonnet-4-5", max_tokens=64,
        messages=[{"role": "user", "content": "hello"}])
    assert raw.headers["x-claudex-attempts"] == "claude:529,grok:200"
    assert "grok" in raw.parse().content[0].text  # type: ignore[union-attr]
    # The backup got its own default model, in OpenAI form.
    assert proxy.fakes["grok"].requests[-1].json["model"] == "grok-model"
    proxy.fakes["claude"].set_fault("cut_before_content")
    proxy.engine.reset("claude")
    async with client.messages.stream(
        model="claude-sonnet-4-5", max_tokens=64,
        messages=[{"role": "user", "content": "events:3"}],
    ) as stream:
        text = "".join([t async for t in stream.text_stream])
    assert "grok" in text
    # And a tool call through the same failover, streamed.
    proxy.engine.reset("claude")
    async with client.messages.stream(
        model="claude-sonnet-4-5", max_tokens=128, tools=[WEATHER_TOOL],  # type: ignore[list-item]
        messages=[{"role": "user", "content": "use tool get_weather"}],
    ) as tool_stream:
        final = await tool_stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert next(b for b in final.content if b.type == "tool_use").name == "get_weather"
    await client.close()


async def test_openai_sdk_against_anthropic_provider(fakes: Any, proxy_factory: Any) -> None:
    proxy = await mixed(fakes, proxy_factory)
    client = openai.AsyncOpenAI(base_url=proxy.url + "/proxy/claude/v1", api_key="unused",
                                max_retries=0)
    completion = await client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "system", "content": "Be brief."},
                                  {"role": "user", "content": "hello"}])
    assert completion.choices[0].finish_reason == "stop"
    assert "claude" in (completion.choices[0].message.content or "")
    assert proxy.fakes["claude"].requests[-1].json["system"] in (
        "Be brief.", [{"type": "text", "text": "Be brief."}])
    stream = await client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "events:4"}], stream=True,
        stream_options={"include_usage": True})
    chunks = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "claude" in text and chunks[-1].usage is not None
    await client.close()


async def test_count_tokens_for_openai_target_is_a_local_estimate(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await mixed(fakes, proxy_factory)
    resp = await proxy.client.post("/proxy/grok/v1/messages/count_tokens",
                                   json=anthropic_body("count these words please"))
    assert resp.status_code == 200 and resp.json()["input_tokens"] > 0
    assert proxy.fakes["grok"].request_count == 0


async def test_upstream_client_error_is_translated(fakes: Any, proxy_factory: Any) -> None:
    proxy = await mixed(fakes, proxy_factory)
    resp = await proxy.client.post("/proxy/grok/v1/messages",
                                   json={"model": "m", "max_tokens": 5, "messages": []})
    assert 400 <= resp.status_code < 500
    assert resp.json()["type"] == "error"
