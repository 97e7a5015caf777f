"""Upstream OpenAI chunks -> Anthropic stream events, incrementally.

Event sequence produced:
  message_start (usage.input_tokens 0 unless the upstream said already)
  for each run of content, in arrival order, a block at the next index:
    text:      content_block_start{text ""}, content_block_delta{text_delta}..., content_block_stop
    tool call: content_block_start{tool_use id, name, input {}},
               content_block_delta{input_json_delta partial_json}..., content_block_stop
  message_delta{stop_reason, usage}, message_stop
A new block starts whenever the kind of content changes or a new tool call (by OpenAI `index`,
or by `id` for servers that repeat index 0) begins. The end of the message waits for `[DONE]`
(or `finish()`), because usage may come in a last chunk with no choices.

Not carried: `reasoning_content` deltas (see `responses`), logprobs, choices other than the
first. A tool call whose arguments resume after another block began cannot be reopened in
Anthropic's sequential blocks: such a late fragment is logged and left out (no known server
interleaves them).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from claudex.providers.sse import SseEvent
from claudex.providers.translate.errors import (
    openai_stream_error_to_anthropic,
    stream_error_message,
)
from claudex.providers.translate.reasons import anthropic_stop_reason, anthropic_usage
from claudex.providers.translate.responses import UNKNOWN_MODEL, synthetic_id
from claudex.providers.translate.stream_base import StreamTranslator, plausible_usage
from claudex.providers.translate.tools import ToolNameMap
from claudex.providers.translate.wire import (
    as_object,
    parse_json_object,
    sse_event,
)

log = logging.getLogger("claudex.translate")

UNNAMED_TOOL = "unknown_tool"


@dataclass
class _ToolCall:
    id: str | None
    name: str | None = None
    pending_arguments: str = ""
    block_index: int | None = None  # set once its content_block_start went out


class OpenAIToAnthropicStream(StreamTranslator):
    def __init__(self, *, tool_names: ToolNameMap, model: str | None,
                 message_id: str | None = None) -> None:
        super().__init__()
        self._names = tool_names
        self._model = model
        self._message_id = message_id
        self._started = False
        self._next_index = 0
        self._open_kind: str | None = None      # "text" | "tool" | None
        self._open_tool: _ToolCall | None = None
        self._by_index: dict[int, _ToolCall] = {}
        self._by_id: dict[str, _ToolCall] = {}
        self._calls: list[_ToolCall] = []
        self._finish_reason: Any = None
        self._refused = False
        self._usage: dict[str, Any] | None = None

    # -- events ----------------------------------------------------------------------------

    def _on_event(self, event: SseEvent) -> bytes:
        data = event.data.strip()
        if data == "[DONE]":
            self._finished = True
            return self._close()
        payload = parse_json_object(data)
        if payload is None:
            if event.event == "error":
                return self._fail({"error": {"message": data or "error event"}})
            if data:
                log.debug("ignoring a stream event that is not a JSON object: %.80s", data)
            return b""
        if event.event == "error" or payload.get("error"):
            return self._fail(payload)
        out = self._start(payload)
        if isinstance(payload.get("usage"), dict):
            self._usage = plausible_usage(payload["usage"])
        choices = payload.get("choices")
        # Only an array holds choices; iterating `"choices": 5` raised TypeError.
        for choice in choices if isinstance(choices, list) else ():
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                out += self._on_choice(choice)
        return out

    def _on_choice(self, choice: dict[str, Any]) -> bytes:
        out = b""
        delta = choice.get("delta") or {}
        if isinstance(delta, dict):
            for key in ("content", "refusal"):
                text = delta.get(key)
                if isinstance(text, str) and text:
                    self._refused = self._refused or key == "refusal"
                    out += self._text(text)
            calls = delta.get("tool_calls")
            for call in calls if isinstance(calls, list) else ():  # as for choices
                if isinstance(call, dict):
                    out += self._tool_fragment(call)
            if isinstance(delta.get("function_call"), dict):  # legacy single call
                out += self._tool_fragment({"index": 0, "function": delta["function_call"]})
        if choice.get("finish_reason"):
            self._finish_reason = choice["finish_reason"]
            self._finished = True
            out += self._close_block()
        return out

    def _fail(self, payload: dict[str, Any]) -> bytes:
        self._error = stream_error_message(payload)
        return openai_stream_error_to_anthropic(payload)

    def _unreadable(self, message: str) -> bytes:
        return self._fail({"error": {"message": message, "type": "server_error"}})

    # -- message and blocks -----------------------------------------------------------------

    def _start(self, payload: dict[str, Any]) -> bytes:
        if self._started:
            return b""
        self._started = True
        message_id = self._message_id or payload.get("id") or synthetic_id(
            "msg_", payload.get("created"), self._model)
        self._message_id = str(message_id)
        usage = anthropic_usage(plausible_usage(payload.get("usage")))
        usage["output_tokens"] = 0
        return sse_event("message_start", {"type": "message_start", "message": {
            "id": str(message_id), "type": "message", "role": "assistant",
            "model": _text(payload.get("model")) or self._model or UNKNOWN_MODEL,
            "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage,
        }})

    def _open_block(self, kind: str, block: dict[str, Any]) -> tuple[int, bytes]:
        out = self._close_block()
        index = self._next_index
        self._next_index += 1
        self._open_kind = kind
        out += sse_event("content_block_start", {"type": "content_block_start", "index": index,
                                                 "content_block": block})
        return index, out

    def _close_block(self) -> bytes:
        if self._open_kind is None:
            return b""
        index = self._next_index - 1
        self._open_kind, self._open_tool = None, None
        return sse_event("content_block_stop", {"type": "content_block_stop", "index": index})

    def _text(self, text: str) -> bytes:
        out = b""
        if self._open_kind != "text":
            _, out = self._open_block("text", {"type": "text", "text": ""})
        return out + sse_event("content_block_delta", {
            "type": "content_block_delta", "index": self._next_index - 1,
            "delta": {"type": "text_delta", "text": text}})

    def _find_call(self, call: dict[str, Any]) -> _ToolCall:
        raw_id = call.get("id")
        # Ids are kept and looked up as text: a list id (`"id": [1]`) is unhashable, and a
        # number would never match the text it was stored under.
        call_id = str(raw_id) if raw_id else None
        index = call.get("index")
        if call_id is not None and call_id in self._by_id:
            return self._by_id[call_id]
        if call_id is None:
            if isinstance(index, int) and index in self._by_index:
                return self._by_index[index]
            if index is None and self._open_tool is not None:
                return self._open_tool
        found = _ToolCall(id=call_id)
        self._calls.append(found)
        if call_id is not None:
            self._by_id[call_id] = found
        if isinstance(index, int):
            self._by_index[index] = found
        return found

    def _tool_fragment(self, call: dict[str, Any]) -> bytes:
        tool = self._find_call(call)
        function = as_object(call.get("function"))
        name, arguments = function.get("name"), function.get("arguments")
        if tool.block_index is not None and tool is not self._open_tool:
            if arguments:
                log.warning("tool call %s resumed after its block closed; fragment dropped",
                            tool.id)
            return b""
        if isinstance(name, str) and name and tool.name is None:
            tool.name = name
        if isinstance(arguments, str):
            tool.pending_arguments += arguments
        out = b""
        if tool.block_index is None and tool.name is not None:
            out += self._open_tool_block(tool)
        return out + self._flush_arguments(tool)

    def _flush_arguments(self, tool: _ToolCall) -> bytes:
        if tool.block_index is None or not tool.pending_arguments:
            return b""
        fragment, tool.pending_arguments = tool.pending_arguments, ""
        return sse_event("content_block_delta", {
            "type": "content_block_delta", "index": tool.block_index,
            "delta": {"type": "input_json_delta", "partial_json": fragment}})

    def _open_tool_block(self, tool: _ToolCall) -> bytes:
        if tool.id is None:
            tool.id = synthetic_id("toolu_", self._message_id, self._calls.index(tool), tool.name)
        index, out = self._open_block("tool", {
            "type": "tool_use", "id": tool.id,
            "name": self._names.restore(tool.name or UNNAMED_TOOL), "input": {}})
        tool.block_index = index
        self._open_tool = tool
        return out

    def _close(self) -> bytes:
        if self._closed:
            return b""
        out = self._start({})
        for tool in self._calls:  # a call whose name never came: still give it a block
            if tool.block_index is None:
                log.warning("tool call %s arrived without a name", tool.id)
                tool.name = UNNAMED_TOOL
                out += self._open_tool_block(tool) + self._flush_arguments(tool)
        out += self._close_block()
        self._closed = True
        usage: dict[str, Any] = {"output_tokens": 0}
        if self._usage is not None:
            converted = anthropic_usage(self._usage)
            usage = {"output_tokens": converted.pop("output_tokens"), **converted}
        stop_reason = anthropic_stop_reason(
            self._finish_reason, has_tool_calls=bool(self._calls), refused=self._refused)
        out += sse_event("message_delta", {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": usage})
        return out + sse_event("message_stop", {"type": "message_stop"})


def _text(value: Any) -> str | None:
    """A non-empty string as is; anything else (a broken upstream's number, list) as nothing."""
    return value if isinstance(value, str) and value else None
