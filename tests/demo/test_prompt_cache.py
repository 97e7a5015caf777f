"""The fake Anthropic account's prompt cache (claudex/demo/prompt_cache.py): a prefix up to a
breakpoint is written, a later prompt reads its longest cached prefix, entries live 5 minutes
from their last use, short prefixes are not cached, each account has its own; the answer's usage
says so."""

from __future__ import annotations

from typing import Any

import httpx

from claudex.demo.fake_provider import FakeProvider
from claudex.demo.prompt_cache import PromptCache
from claudex.engine.clock import FakeClock

SYSTEM = "Stable system prompt. " * 300  # well over 1,024 tokens


def body(*turns: str, marked: bool = True, model: str = "claude-sonnet-4-5") -> dict[str, Any]:
    messages = []
    for n, text in enumerate(turns):
        if n:
            messages.append({"role": "assistant", "content": [{"type": "text",
                                                               "text": f"answer {n}"}]})
        messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
    if marked:
        messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    system = [{"type": "text", "text": SYSTEM}]
    if marked:
        system[0]["cache_control"] = {"type": "ephemeral"}
    return {"model": model, "max_tokens": 8, "system": system, "messages": messages}


def test_a_turn_reads_the_previous_turns_prefix_and_writes_its_own() -> None:
    clock = FakeClock()
    cache = PromptCache(clock)
    first = cache.serve(body("hello"))
    assert first.read == 0 and first.written == first.prompt_tokens and first.input_tokens == 0
    second = cache.serve(body("hello", "more"))
    assert second.read == first.prompt_tokens
    assert second.written == second.prompt_tokens - first.prompt_tokens
    # Another conversation with the same system prompt reads the system prompt alone.
    other = cache.serve(body("something else"))
    assert 0 < other.read < first.prompt_tokens


def test_entries_live_five_minutes_from_their_last_use() -> None:
    clock = FakeClock()
    cache = PromptCache(clock)
    cache.serve(body("hello"))
    clock.advance(299)
    assert cache.serve(body("hello")).read > 0  # read: refreshed for 5 more minutes
    clock.advance(299)
    assert cache.serve(body("hello")).read > 0
    clock.advance(301)
    assert cache.serve(body("hello")).read == 0


def test_no_breakpoint_or_a_short_prefix_caches_nothing() -> None:
    cache = PromptCache(FakeClock())
    assert cache.serve(body("hello", marked=False)).written == 0
    short = {"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi",
                                      "cache_control": {"type": "ephemeral"}}]}]}
    usage = cache.serve(short)
    assert usage.written == 0 and usage.read == 0 and usage.input_tokens > 0
    # Haiku 4.5's floor is 4,096 tokens: the same prompt is too short there.
    assert cache.serve(body("hello", model="claude-haiku-4-5")).written == 0


async def test_each_account_has_its_own_cache_and_says_so_in_usage() -> None:
    a, b = FakeProvider("a", "anthropic"), FakeProvider("b", "anthropic")
    for fake in (a, b):
        fake.prompt_cache = PromptCache()
        await fake.start()
    try:
        async with httpx.AsyncClient(timeout=10.0) as client:
            async def usage(fake: FakeProvider, sent: dict[str, Any]) -> dict[str, int]:
                resp = await client.post(fake.base_url + "/v1/messages", json=sent,
                                         headers={"x-api-key": "k",
                                                  "anthropic-version": "2023-06-01"})
                assert resp.status_code == 200, resp.text
                return dict(resp.json()["usage"])

            first = await usage(a, body("hello"))
            assert first["cache_read_input_tokens"] == 0
            assert first["cache_creation_input_tokens"] > 0
            again = await usage(a, body("hello", "next"))
            assert again["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
            elsewhere = await usage(b, body("hello", "next"))  # another account: cold
            assert elsewhere["cache_read_input_tokens"] == 0
    finally:
        for fake in (a, b):
            await fake.stop()
