"""The official SDKs as clients of the proxy (same-protocol chains), including failover."""

from __future__ import annotations

from typing import Any

import anthropic
import openai

from tests.conftest import build_config, profile_toml


async def test_anthropic_sdk_json_and_stream_through_failover(
    fakes: Any, proxy_factory: Any
) -> None:
    f = await fakes(("claude", "anthropic"), ("backup", "anthropic"))
    config = build_config(profile_toml("claude", f["claude"], backups=["backup"])
                          + profile_toml("backup", f["backup"]))
    proxy = await proxy_factory(config, fakes=f)
    client = anthropic.AsyncAnthropic(base_url=proxy.url, api_key="unused", max_retries=0)
    message = await client.messages.create(
        model="claude-sonnet-4-5", max_tokens=64,
        messages=[{"role": "user", "content": "hello"}])
    assert message.content[0].type == "text" and "claude" in message.content[0].text
    f["claude"].set_fault("500")
    async with client.messages.stream(
        model="claude-sonnet-4-5", max_tokens=64,
        messages=[{"role": "user", "content": "events:5"}],
    ) as stream:
        text = "".join([chunk async for chunk in stream.text_stream])
        final = await stream.get_final_message()
    assert "backup" in text
    assert final.stop_reason == "end_turn"
    await client.close()


async def test_openai_sdk_json_and_stream(fakes: Any, proxy_factory: Any) -> None:
    f = await fakes(("grok", "openai"), ("deepseek", "openai"))
    config = build_config(profile_toml("grok", f["grok"], backups=["deepseek"])
                          + profile_toml("deepseek", f["deepseek"]))
    proxy = await proxy_factory(config, fakes=f)
    client = openai.AsyncOpenAI(base_url=proxy.url + "/proxy/grok/v1", api_key="unused",
                                max_retries=0)
    completion = await client.chat.completions.create(
        model="grok-model", messages=[{"role": "user", "content": "hello"}])
    assert "grok" in (completion.choices[0].message.content or "")
    f["grok"].set_fault("down")
    stream = await client.chat.completions.create(
        model="grok-model", messages=[{"role": "user", "content": "events:4"}], stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert "deepseek" in text
    await client.close()


async def test_anthropic_sdk_sees_all_failed_as_api_error(fakes: Any, proxy_factory: Any) -> None:
    f = await fakes(("claude", "anthropic"),)
    proxy = await proxy_factory(build_config(profile_toml("claude", f["claude"])), fakes=f)
    f["claude"].set_fault("529")
    client = anthropic.AsyncAnthropic(base_url=proxy.url, api_key="unused", max_retries=0)
    try:
        await client.messages.create(model="m", max_tokens=8,
                                     messages=[{"role": "user", "content": "x"}])
    except anthropic.APIStatusError as exc:
        assert exc.status_code == 502
        assert "claude" in exc.message
    else:
        raise AssertionError("expected an error")
    await client.close()
