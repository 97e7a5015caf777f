"""A conversation survives the way back (DESIGN.md "Portable conversations"): turns served by a
backup on another provider, then the first provider again once its breaker is reset — through a
real proxy on 127.0.0.1 and fakes that keep Anthropic's thinking rules."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from claudex.config.model import Protocol
from claudex.demo.fake_provider import FakeProvider
from claudex.engine.addons.signatures import SignatureMemory
from claudex.engine.core.exchange import Exchange
from claudex.engine.core.request import ProxyRequest
from claudex.providers.sse import split_events
from tests.conftest import build_config

TOOLS = [{"name": "Bash", "description": "Run a command",
          "input_schema": {"type": "object", "properties": {"command": {"type": "string"}},
                           "required": ["command"]}},
         {"name": "WebFetch", "input_schema": {"type": "object"}, "defer_loading": True}]


def claude_code_body(model: str, messages: list[dict[str, Any]], *,
                     stream: bool) -> dict[str, Any]:
    """A request shaped like Claude Code 2.1.332's."""
    return {
        "model": model, "max_tokens": 128000, "stream": stream,
        "system": [{"type": "text", "text": "You are a coding agent."}],
        "tools": TOOLS,
        "thinking": {"type": "adaptive", "display": "omitted"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "medium"},
        "messages": messages,
    }


def content_of(resp: httpx.Response, stream: bool) -> list[dict[str, Any]]:
    """The assistant content, assembled from the stream as a client does."""
    if not stream:
        content: list[dict[str, Any]] = resp.json()["content"]
        return content
    blocks: dict[int, dict[str, Any]] = {}
    for event in split_events(bytearray(resp.content)):
        data = json.loads(event.data)
        if data["type"] == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"])
        elif data["type"] == "content_block_delta":
            block, delta = blocks[data["index"]], data["delta"]
            for kind, key in (("thinking_delta", "thinking"), ("signature_delta", "signature"),
                              ("text_delta", "text"), ("input_json_delta", "_json")):
                if delta["type"] == kind:
                    field = "partial_json" if key == "_json" else key
                    block[key] = block.get(key, "") + delta[field]
    for block in blocks.values():
        if "_json" in block:
            block["input"] = json.loads(block.pop("_json"))
    return [blocks[i] for i in sorted(blocks)]


class Session:
    """Claude Code's side of a tool loop: every turn calls Bash, every result asks again."""

    def __init__(self, client: httpx.AsyncClient, model: str) -> None:
        self.client = client
        self.model = model
        self.messages: list[dict[str, Any]] = [
            {"role": "user", "content": "List the files. use tool Bash"}]

    def body(self, *, stream: bool) -> dict[str, Any]:
        return claude_code_body(self.model, self.messages, stream=stream)

    async def turn(self, *, stream: bool) -> tuple[str, list[dict[str, Any]]]:
        resp = await self.client.post("/proxy/a/v1/messages", json=self.body(stream=stream))
        assert resp.status_code == 200, resp.text
        content = content_of(resp, stream)
        call = next(b for b in content if b["type"] == "tool_use")
        self.messages += [
            {"role": "assistant", "content": content},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call["id"], "content": "a.txt b.txt"},
                {"type": "text", "text": "Count the lines too. use tool Bash"}]},
        ]
        return resp.headers["x-claudex-provider"], content


def toml_profile(name: str, fake: FakeProvider, model: str, backups: str = "") -> str:
    kind = "DirectAnthropic" if fake.protocol == "anthropic" else "OpenAICompatible"
    return f"""
[[profiles]]
name = "{name}"
provider_type = "{kind}"
base_url = "{fake.base_url}"
api_key_env = "FAKE_KEY"
default_model = "{model}"
backup_providers = [{backups}]
"""


@pytest.fixture
async def world(proxy_factory: Any) -> AsyncIterator[Any]:
    """`await world(backup_protocol, model)` -> (proxy, fake a, fake b): a's backup is b; both
    Anthropic profiles serve `model`."""
    started: list[FakeProvider] = []

    async def make(backup: Protocol, model: str) -> tuple[Any, FakeProvider, FakeProvider]:
        a = FakeProvider("a", "anthropic")
        b = FakeProvider("b", backup, models=("b-chat",) if backup == "openai" else None)
        for fake in (a, b):
            await fake.start()
            started.append(fake)
        b_model = "b-chat" if backup == "openai" else model
        config = build_config(toml_profile("a", a, model, '"b"')
                              + toml_profile("b", b, b_model))
        proxy = await proxy_factory(config, fakes={"a": a, "b": b})
        return proxy, a, b

    yield make
    for fake in started:
        await fake.stop()


async def go_back_to_a(proxy: Any, a: FakeProvider) -> None:
    a.set_fault("ok")
    assert proxy.engine.reset("a")
    a.reset_log()


async def direct(fake: FakeProvider, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=fake.base_url, timeout=5) as client:
        return await client.post("/v1/messages", json=body)


@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-opus-4-6"])
async def test_back_at_the_first_provider_after_an_anthropic_backup(world: Any,
                                                                    model: str) -> None:
    proxy, a, b = await world("anthropic", model)
    session = Session(proxy.client, model)
    served, first = await session.turn(stream=True)
    assert served == "a" and first[0]["type"] == "thinking"
    assert proxy.engine.signatures.signer(first[0]["signature"]) == "a"

    a.set_fault("down")
    for stream in (False, True):
        served, _ = await session.turn(stream=stream)
        assert served == "b"
    # What b received never held a's block: b would have refused it.
    assert all(block.get("signature") != first[0]["signature"]
               for req in b.requests for m in req.json["messages"]
               for block in (m["content"] if isinstance(m["content"], list) else ()))
    b_signatures = [blk["signature"] for m in session.messages if m["role"] == "assistant"
                    for blk in m["content"] if blk["type"] == "thinking"
                    and proxy.engine.signatures.signer(blk["signature"]) == "b"]
    if model == "claude-opus-5-5":
        assert len(b_signatures) == 2  # opus 5.5 always thinks: b signed turns 2 and 3
    else:
        assert b_signatures == []      # thinking off at b: its turns have no thinking at all

    await go_back_to_a(proxy, a)
    body = session.body(stream=False)
    # Without claudex's rewrite, a refuses the conversation as the real API does.
    refused = await direct(a, body)
    assert refused.status_code == 400
    expected = ("Invalid `signature` in `thinking` block" if model == "claude-opus-5-5"
                else "Expected `thinking` or `redacted_thinking`, but found `tool_use`")
    assert expected in refused.json()["error"]["message"]

    resp = await proxy.client.post("/proxy/a/v1/messages", json=body)
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-claudex-provider"] == "a"
    sent = a.requests[-1].json
    kept = [blk for m in sent["messages"] if m["role"] == "assistant"
            for blk in m["content"] if blk["type"] == "thinking"]
    assert kept == [first[0]]  # a's own block went back to a; b's did not
    if model == "claude-opus-5-5":
        assert sent["thinking"] == body["thinking"]
    else:
        assert "thinking" not in sent and "context_management" not in sent
    assert sent["output_config"] == {"effort": "medium"}


async def test_back_at_the_first_provider_after_an_openai_backup(world: Any) -> None:
    proxy, a, _ = await world("openai", "claude-opus-4-6")
    session = Session(proxy.client, "claude-opus-4-6")
    served, first = await session.turn(stream=False)
    assert served == "a" and first[0]["type"] == "thinking"

    a.set_fault("down")
    for stream in (True, False):
        served, content = await session.turn(stream=stream)
        assert served == "b"
        assert [blk["type"] for blk in content] == ["tool_use"]  # no thinking from OpenAI

    await go_back_to_a(proxy, a)
    body = session.body(stream=True)
    refused = await direct(a, {**body, "stream": False})
    assert refused.status_code == 400
    assert "but found `tool_use`" in refused.json()["error"]["message"]

    resp = await proxy.client.post("/proxy/a/v1/messages", json=body)
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-claudex-provider"] == "a"
    assert [blk["type"] for blk in content_of(resp, True)] == ["tool_use"]
    sent = a.requests[-1].json
    assert "thinking" not in sent
    assert sent["messages"][1]["content"][0] == first[0]  # a's own block kept


# -- the Exchange hook ------------------------------------------------------------------------


def exchange_for(body: dict[str, Any], memory: SignatureMemory, target: str) -> Exchange:
    config = build_config(f"""
[[profiles]]
name = "{target}"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "FAKE_KEY"
""")
    raw = json.dumps(body).encode()
    req = ProxyRequest("anthropic", "messages", body, raw, {}, profile=target)
    exchange = Exchange(req, config.profiles[0], addressed=True)
    exchange.signatures = memory
    return exchange


def test_the_clients_bytes_go_untouched_unless_something_is_dropped() -> None:
    memory = SignatureMemory()
    messages = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "", "signature": "sig-a"},
                    {"type": "text", "text": "hello"}]},
                {"role": "user", "content": "again"}]
    body = claude_code_body("claude-opus-4-6", messages, stream=False)
    memory.remember("a", "sig-a")
    memory.remember("b", "sig-other")
    exchange = exchange_for(body, memory, "a")
    assert exchange.body() is exchange.req.raw
    assert exchange.portable_notes == ()

    to_b = exchange_for(body, memory, "b")
    sent = json.loads(to_b.body())
    assert [blk["type"] for blk in sent["messages"][1]["content"]] == ["text"]
    assert to_b.portable_notes == ("dropped: thinking (signed by a)",)


def test_an_answer_and_a_relayed_stream_are_remembered() -> None:
    memory = SignatureMemory()
    exchange = exchange_for(claude_code_body("claude-opus-4-6", [], stream=True), memory, "a")
    answer = {"content": [{"type": "thinking", "thinking": "", "signature": "sig-json"}]}
    assert exchange.answer(json.dumps(answer).encode()) == json.dumps(answer).encode()
    codec = exchange.stream_codec()
    event = {"type": "content_block_delta", "index": 0,
             "delta": {"type": "signature_delta", "signature": "sig-stream"}}
    raw = f"event: content_block_delta\ndata: {json.dumps(event)}\n\n".encode()
    assert codec.feed(raw[:30]) + codec.feed(raw[30:]) == raw  # relayed byte for byte
    assert memory.signer("sig-json") == "a" and memory.signer("sig-stream") == "a"
