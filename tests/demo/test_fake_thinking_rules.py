"""Anthropic fakes keep Anthropic's thinking rules (claudex.demo.thinking_rules): they sign
the thinking they answer with, refuse blocks they did not sign, refuse a tool-use loop whose
last turn lacks thinking, and refuse thinking types a model does not take."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from claudex.demo import thinking_rules
from claudex.demo.fake_provider import FakeProvider
from claudex.providers.sse import split_events

TOOLS = [{"name": "Bash", "input_schema": {"type": "object",
                                           "properties": {"command": {"type": "string"}},
                                           "required": ["command"]}}]


def request(messages: list[dict[str, Any]], *, model: str = "claude-opus-4-6",
            thinking: dict[str, Any] | None = None, stream: bool = False,
            **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": 1000, "stream": stream,
                            "tools": TOOLS, "messages": messages, **extra}
    if thinking is not None:
        body["thinking"] = thinking
    return body


ADAPTIVE = {"type": "adaptive", "display": "omitted"}


async def post(fake: FakeProvider, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=fake.base_url, timeout=5) as client:
        return await client.post("/v1/messages", json=body)


def streamed_content(raw: bytes) -> list[dict[str, Any]]:
    """The content blocks a stream builds, as a client assembles them."""
    blocks: dict[int, dict[str, Any]] = {}
    for event in split_events(bytearray(raw)):
        data = json.loads(event.data)
        if data["type"] == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"])
        elif data["type"] == "content_block_delta":
            block, delta = blocks[data["index"]], data["delta"]
            for kind, key, field in (("thinking_delta", "thinking", "thinking"),
                                     ("signature_delta", "signature", "signature"),
                                     ("text_delta", "text", "text"),
                                     ("input_json_delta", "partial_json", "_json")):
                if delta["type"] == kind:
                    block[field] = block.get(field, "") + delta[key]
    for block in blocks.values():
        if "_json" in block:
            block["input"] = json.loads(block.pop("_json"))
    return [blocks[i] for i in sorted(blocks)]


@pytest.fixture
async def two() -> Any:
    a, b = FakeProvider("a", "anthropic"), FakeProvider("b", "anthropic")
    await a.start()
    await b.start()
    yield a, b
    await a.stop()
    await b.stop()


async def tool_turn(fake: FakeProvider, *, stream: bool) -> list[dict[str, Any]]:
    body = request([{"role": "user", "content": "use tool Bash"}], thinking=ADAPTIVE,
                   stream=stream)
    resp = await post(fake, body)
    assert resp.status_code == 200, resp.text
    return streamed_content(resp.content) if stream else resp.json()["content"]


@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_with_thinking_on_starts_with_a_block_only_its_fake_signed(
        two: Any, stream: bool) -> None:
    a, b = two
    content = await tool_turn(a, stream=stream)
    assert [blk["type"] for blk in content] == ["thinking", "tool_use"]
    assert content[0]["thinking"] == ""  # display "omitted", as Claude Code asks
    conversation = [{"role": "user", "content": "use tool Bash"},
                    {"role": "assistant", "content": content},
                    {"role": "user", "content": [{"type": "tool_result",
                                                  "tool_use_id": content[1]["id"],
                                                  "content": "a.txt"}]}]
    again = request(conversation, thinking=ADAPTIVE, stream=stream)
    assert (await post(a, again)).status_code == 200
    refused = await post(b, again)
    assert refused.status_code == 400
    assert refused.json()["error"] == {
        "type": "invalid_request_error",
        "message": "messages.1.content.0: Invalid `signature` in `thinking` block"}


async def test_a_changed_thinking_text_is_refused_too(two: Any) -> None:
    a, _ = two
    body = request([{"role": "user", "content": "hi"}],
                   thinking={"type": "enabled", "budget_tokens": 500})
    content = (await post(a, body)).json()["content"]
    assert content[0]["thinking"]  # shown, not omitted
    content[0]["thinking"] += " (edited)"
    later = request([{"role": "user", "content": "hi"}, {"role": "assistant",
                     "content": content}, {"role": "user", "content": "and?"}],
                    thinking={"type": "enabled", "budget_tokens": 500})
    assert (await post(a, later)).status_code == 400


@pytest.mark.parametrize("stream", [False, True])
async def test_redacted_thinking_is_bound_to_its_fake(two: Any, stream: bool) -> None:
    a, b = two
    first = [{"role": "user", "content": "redact thinking please"}]
    resp = await post(a, request(first, thinking=ADAPTIVE, stream=stream))
    content = streamed_content(resp.content) if stream else resp.json()["content"]
    assert content[0]["type"] == "redacted_thinking" and content[0]["data"]
    later = request([*first, {"role": "assistant", "content": content},
                     {"role": "user", "content": "go on"}], thinking=ADAPTIVE)
    assert (await post(a, later)).status_code == 200
    refused = await post(b, later)
    assert refused.json()["error"]["message"] == \
        "messages.1.content.0: Invalid `data` in `redacted_thinking` block"


async def test_thinking_off_answers_without_a_thinking_block(two: Any) -> None:
    a, _ = two
    for thinking in (None, {"type": "disabled"}):
        resp = await post(a, request([{"role": "user", "content": "hi"}], thinking=thinking))
        assert [blk["type"] for blk in resp.json()["content"]] == ["text"]


def open_loop(first_block: dict[str, Any] | None) -> list[dict[str, Any]]:
    content = [{"type": "text", "text": "Looking."},
               {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]
    if first_block is not None:
        content.insert(0, first_block)
    return [{"role": "user", "content": "list"},
            {"role": "assistant", "content": content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                          "content": "a.txt"}]}]


async def test_an_open_tool_loop_without_thinking_is_refused_while_thinking_is_on(
        two: Any) -> None:
    a, _ = two
    refused = await post(a, request(open_loop(None), thinking=ADAPTIVE))
    assert refused.status_code == 400
    message = refused.json()["error"]["message"]
    assert message.startswith("messages.1.content.0.type: Expected `thinking` or "
                              "`redacted_thinking`, but found `text`. When `thinking` is "
                              "enabled, a final `assistant` message must start with a "
                              "thinking block")
    # Thinking off, or a model that cannot turn it off: accepted.
    assert (await post(a, request(open_loop(None)))).status_code == 200
    assert (await post(a, request(open_loop(None), thinking={"type": "disabled"}))
            ).status_code == 200
    assert (await post(a, request(open_loop(None), model="claude-opus-5-5",
                                  thinking=ADAPTIVE))).status_code == 200
    # A finished loop needs nothing: the user asked something new.
    finished = [*open_loop(None), {"role": "assistant", "content": "Done."},
                {"role": "user", "content": "thanks"}]
    assert (await post(a, request(finished, thinking=ADAPTIVE))).status_code == 200


@pytest.mark.parametrize(("model", "thinking", "extra", "refused"), [
    ("claude-opus-5-5", {"type": "disabled"}, {}, '"thinking.type.disabled" is not supported'),
    ("claude-opus-5-5", {"type": "enabled", "budget_tokens": 9}, {},
     '"thinking.type.enabled" is not supported'),
    ("claude-fable-5-1", {"type": "disabled"}, {}, '"thinking.type.disabled"'),
    ("claude-opus-4-7", {"type": "enabled", "budget_tokens": 9}, {}, '"thinking.type.enabled"'),
    ("claude-sonnet-4-5", ADAPTIVE, {}, "adaptive thinking is not supported"),
    ("claude-opus-4-6", {"type": "between_tools"}, {}, '"thinking.type.between_tools"'),
    ("claude-sonnet-5-5", {"type": "disabled"}, {}, '"thinking.type.disabled"'),
    ("claude-opus-5", {"type": "disabled"}, {"output_config": {"effort": "max"}},
     'effort "max"'),
    ("claude-opus-4-6", None,
     {"context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}},
     "`clear_thinking_20251015` requires `thinking`"),
    ("claude-opus-4-6", ADAPTIVE, {}, None),
    ("claude-opus-5", {"type": "disabled"}, {"output_config": {"effort": "high"}}, None),
    ("claude-sonnet-5-5", {"type": "between_tools"}, {}, None),
    ("claude-opus-5-5", None, {}, None),
])
def test_thinking_types_a_model_does_not_take(model: str, thinking: dict[str, Any] | None,
                                              extra: dict[str, Any],
                                              refused: str | None) -> None:
    body = request([{"role": "user", "content": "hi"}], model=model, thinking=thinking, **extra)
    answer = thinking_rules.refusal(body, b"key")
    if refused is None:
        assert answer is None
    else:
        assert answer is not None and refused in answer


def test_signatures_verify_only_under_their_key_and_text() -> None:
    signed = thinking_rules.sign(b"k1", "text")
    assert thinking_rules.verify(b"k1", "text", signed)
    assert not thinking_rules.verify(b"k2", "text", signed)
    assert not thinking_rules.verify(b"k1", "other", signed)
    assert not thinking_rules.verify(b"k1", "text", signed, redacted=True)
    for junk in (None, 5, "", "!!", "c2ln", signed[:-4]):
        assert not thinking_rules.verify(b"k1", "text", junk)
    assert thinking_rules.sign(b"k1", "text") != signed  # a fresh nonce each time


async def test_a_fake_without_a_key_has_no_thinking_rules() -> None:
    async with FakeProvider("plain", "anthropic") as fake:
        fake.signing_key = None
        resp = await post(fake, request(open_loop({"type": "thinking", "thinking": "x",
                                                   "signature": "forged"}),
                                        thinking=ADAPTIVE))
        assert resp.status_code == 200
        assert [blk["type"] for blk in resp.json()["content"]] == ["text"]
