"""What a complete, well-formed answer looks like to a client, in each protocol.

These checks are the soak's judge and the translation tests' oracle: an answer either passes (and
is summarised), or `Malformed` says what is wrong with it. They read only what a client receives —
JSON bodies and SSE text — and know nothing of claudex's internals.

Streams end in exactly one of two ways: the protocol's normal ending (Anthropic `message_stop`,
OpenAI `[DONE]`), or one error event, last. An error body is `{"type":"error","error":{...}}`
(Anthropic) or `{"error":{...}}` (OpenAI) with a non-empty message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

from openai.types.chat import ChatCompletionChunk


class Malformed(AssertionError):
    """An answer a client could not accept. An AssertionError, so tests can use it directly."""


def require(condition: object, problem: str) -> None:
    if not condition:
        raise Malformed(problem)


# -- SSE framing -----------------------------------------------------------------------------------

def sse_events(raw: bytes) -> list[tuple[str | None, str]]:
    """(event name, data) for each event of a complete SSE body with `\\n` line endings."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Malformed(f"stream is not UTF-8: {exc}") from None
    require("\u2028" not in text and "\u2029" not in text, "raw line separators in the stream")
    require(text.endswith("\n\n") or not text, "stream does not end with a blank line")
    events: list[tuple[str | None, str]] = []
    for block in text.split("\n\n")[:-1]:
        name: str | None = None
        data: list[str] = []
        for line in block.split("\n"):
            if line.startswith(":"):
                continue  # an SSE comment (keep-alive)
            key, _, value = line.partition(": ")
            if key == "event":
                name = value
            elif key == "data":
                data.append(value)
            else:
                raise Malformed(f"unexpected SSE line {line[:80]!r}")
        events.append((name, "\n".join(data)))
    return events


def _json(data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        raise Malformed(f"event data is not JSON: {data[:80]!r}") from None


# -- errors ----------------------------------------------------------------------------------------

def error_message(protocol: str, payload: Any) -> str:
    """The message of an error body in `protocol`'s format; Malformed if it is not one."""
    require(isinstance(payload, dict), "error body is not a JSON object")
    if protocol == "anthropic":
        require(payload.get("type") == "error", 'Anthropic error without "type": "error"')
    error = payload.get("error")
    require(isinstance(error, dict), 'error body without an "error" object')
    require(isinstance(error.get("type"), str), "error without a type")
    message = error.get("message")
    require(isinstance(message, str) and message.strip(), "error without a message")
    require("Traceback (most recent call last)" not in message, "a traceback in an error")
    return str(message)


# -- Anthropic -------------------------------------------------------------------------------------

@dataclass
class AnthropicSummary:
    blocks: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None


_DELTA_FOR: Final = {"text": "text_delta", "tool_use": "input_json_delta"}
STOP_REASONS: Final = frozenset({"end_turn", "max_tokens", "stop_sequence", "tool_use", "refusal"})


def anthropic_events(raw: bytes) -> list[dict[str, Any]]:
    out = []
    for name, data in sse_events(raw):
        payload = _json(data)
        require(isinstance(payload, dict) and name == payload.get("type"),
                "event name and data type differ")
        out.append(payload)
    return out


def validate_anthropic(events: list[dict[str, Any]]) -> AnthropicSummary:
    """message_start first; blocks opened and closed in order with increasing indices; deltas
    only inside the open block and of its kind; tool input JSON complete at block stop;
    message_delta then message_stop last — or an error event, last."""
    summary = AnthropicSummary()
    if events and events[0]["type"] == "error":
        require(len(events) == 1, "events after an error")
        error_message("anthropic", events[0])
        summary.error = events[0]["error"]
        return summary
    require(events and events[0]["type"] == "message_start", "stream must open with message_start")
    summary.usage = dict(events[0]["message"]["usage"])
    open_block: dict[str, Any] | None = None
    saw_delta = False
    for position, event in enumerate(events[1:], start=1):
        kind = event["type"]
        last = position == len(events) - 1
        if kind == "error":
            require(last, "an error event ends the stream")
            error_message("anthropic", event)
            summary.error = event["error"]
            return summary
        if kind == "ping":
            continue
        require(not saw_delta or kind == "message_stop", f"{kind} after message_delta")
        if kind == "content_block_start":
            require(open_block is None, "a block opened inside another")
            require(event["index"] == len(summary.blocks), "block indices must count up from 0")
            block = dict(event["content_block"])
            require(block["type"] in _DELTA_FOR, f"unknown block type {block['type']!r}")
            if block["type"] == "tool_use":
                require(block["id"] and block["name"] and block["input"] == {},
                        "tool_use block must open with an id, a name and empty input")
                block["json"] = ""
            summary.blocks.append(block)
            open_block = block
        elif kind == "content_block_delta":
            require(open_block is not None and event["index"] == len(summary.blocks) - 1,
                    "a delta outside the open block")
            assert open_block is not None
            delta = event["delta"]
            require(delta["type"] == _DELTA_FOR[open_block["type"]], "delta of the wrong kind")
            if delta["type"] == "text_delta":
                open_block["text"] += delta["text"]
            else:
                open_block["json"] += delta["partial_json"]
        elif kind == "content_block_stop":
            require(open_block is not None and event["index"] == len(summary.blocks) - 1,
                    "content_block_stop without an open block")
            assert open_block is not None
            if open_block["type"] == "tool_use":
                parsed = _json(open_block.pop("json") or "{}")
                require(isinstance(parsed, dict), "tool input is not a JSON object")
                open_block["input"] = parsed
            open_block = None
        elif kind == "message_delta":
            require(open_block is None, "message_delta with a block still open")
            require(event["delta"]["stop_reason"] in STOP_REASONS, "unknown stop_reason")
            summary.stop_reason = event["delta"]["stop_reason"]
            summary.usage.update(event["usage"])
            saw_delta = True
        elif kind == "message_stop":
            require(saw_delta and last, "message_stop must follow message_delta and end it")
        else:
            raise Malformed(f"unknown event {kind}")
    require(events[-1]["type"] == "message_stop", "stream ended without message_stop")
    return summary


def validate_anthropic_message(payload: Any) -> None:
    """A complete non-streamed Messages API answer."""
    require(isinstance(payload, dict) and payload.get("type") == "message", "not a message")
    require(payload.get("role") == "assistant", "role is not assistant")
    content = payload.get("content")
    require(isinstance(content, list) and content, "no content blocks")
    for block in content:
        require(isinstance(block, dict) and block.get("type") in _DELTA_FOR,
                "unknown content block")
    require(payload.get("stop_reason") in STOP_REASONS, "missing or unknown stop_reason")
    require(isinstance(payload.get("usage"), dict), "no usage")


# -- OpenAI ----------------------------------------------------------------------------------------

@dataclass
class OpenAISummary:
    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    model: str = ""


def validate_openai(raw: bytes) -> OpenAISummary:
    """Every chunk a valid ChatCompletionChunk; one role delta, first; tool call arguments
    concatenate to JSON objects; finish_reason exactly once; at most a usage chunk after it;
    `[DONE]` last — or an error line, last."""
    summary = OpenAISummary()
    events = sse_events(raw)
    require(all(name is None for name, _ in events), "OpenAI streams carry no event names")
    datas = [data for _, data in events]
    for position, data in enumerate(datas):
        last = position == len(datas) - 1
        if data == "[DONE]":
            require(last and summary.finish_reason is not None, "[DONE] before the finish")
            return summary
        payload = _json(data)
        if isinstance(payload, dict) and "error" in payload:
            require(last, "an error ends the stream")
            error_message("openai", payload)
            summary.error = payload["error"]
            return summary
        try:
            chunk = ChatCompletionChunk.model_validate(payload)
        except ValueError as exc:
            raise Malformed(f"not a chat.completion.chunk: {exc}") from None
        summary.model = chunk.model
        if not chunk.choices:
            require(summary.finish_reason is not None and chunk.usage is not None,
                    "a chunk without choices must be the usage chunk after the finish")
            summary.usage = payload["usage"]
            continue
        require(summary.finish_reason is None, "a chunk after the finish chunk")
        require(len(chunk.choices) == 1, "more than one choice")
        (choice,) = chunk.choices
        delta = choice.delta
        require((delta.role == "assistant") == (position == 0), "one role delta, first")
        summary.content += delta.content or ""
        for call in delta.tool_calls or ():
            if call.index == len(summary.tool_calls):
                require(call.id and call.function and call.function.name and call.type,
                        "a new tool call needs an id, a type and a name")
                assert call.function is not None
                summary.tool_calls.append({"id": call.id, "name": call.function.name,
                                           "arguments": call.function.arguments or ""})
            else:
                require(call.index == len(summary.tool_calls) - 1 and call.id is None
                        and call.function is not None, "tool call deltas out of order")
                assert call.function is not None
                summary.tool_calls[-1]["arguments"] += call.function.arguments or ""
        if choice.finish_reason is not None:
            summary.finish_reason = choice.finish_reason
    raise Malformed("stream ended without [DONE] or an error")


def validate_openai_completion(payload: Any) -> None:
    """A complete non-streamed chat.completion answer."""
    require(isinstance(payload, dict) and payload.get("object") == "chat.completion",
            "not a chat.completion")
    choices = payload.get("choices")
    require(isinstance(choices, list) and len(choices) == 1, "expected exactly one choice")
    message = choices[0].get("message")
    require(isinstance(message, dict) and message.get("role") == "assistant",
            "choice without an assistant message")
    require(isinstance(message.get("content"), str) or message.get("tool_calls"),
            "message with neither content nor tool calls")
    require(choices[0].get("finish_reason") in ("stop", "length", "tool_calls", "content_filter"),
            "missing or unknown finish_reason")
