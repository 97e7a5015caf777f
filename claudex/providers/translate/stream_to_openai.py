"""Upstream Anthropic stream events -> OpenAI chat.completion.chunk lines, incrementally.

Chunks produced (all `{"id","object":"chat.completion.chunk","created","model","choices":[...]}`):
  at message_start: delta {"role": "assistant", "content": ""}
  text_delta: delta {"content": text}
  tool_use block start: delta {"tool_calls": [{"index": i, "id", "type": "function",
                        "function": {"name", "arguments": ""}}]}, i counting tool calls only
  input_json_delta: delta {"tool_calls": [{"index": i, "function": {"arguments": fragment}}]}
  message_stop: delta {} with finish_reason, then (when the client asked for
                `stream_options.include_usage`) a chunk with no choices and the usage,
                then `data: [DONE]`.
`ping` and `content_block_stop` produce nothing. Thinking and server-tool blocks are left out
(see `responses`). Text that resumes after a tool call starts a new paragraph, as in the
non-streaming translation.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from claudex.providers.sse import SseEvent
from claudex.providers.translate.errors import (
    anthropic_stream_error_to_openai,
    stream_error_message,
)
from claudex.providers.translate.reasons import openai_finish_reason, openai_usage
from claudex.providers.translate.responses import UNKNOWN_MODEL, synthetic_id
from claudex.providers.translate.stream_base import StreamTranslator, plausible_usage
from claudex.providers.translate.tools import ToolNameMap
from claudex.providers.translate.wire import (
    SSE_DONE,
    as_object,
    parse_json_object,
    sse_data,
)

log = logging.getLogger("claudex.translate")


class AnthropicToOpenAIStream(StreamTranslator):
    def __init__(self, *, tool_names: ToolNameMap, model: str | None,
                 message_id: str | None = None, include_usage: bool = False,
                 created: int | None = None) -> None:
        super().__init__()
        self._names = tool_names
        self._model = model or UNKNOWN_MODEL
        self._id = message_id
        self._include_usage = include_usage
        self._created = created if created is not None else int(time.time())
        self._role_sent = False
        self._block_kinds: dict[int, str] = {}
        self._tool_ordinals: dict[int, int] = {}   # Anthropic block index -> OpenAI tool index
        self._wrote_text = False
        self._paragraph_due = False
        self._stop_reason: Any = None
        self._usage: dict[str, Any] = {}

    # -- events ----------------------------------------------------------------------------

    def _on_event(self, event: SseEvent) -> bytes:
        payload = parse_json_object(event.data)
        kind = event.event or (payload or {}).get("type")
        if kind == "error" or (payload is not None and payload.get("type") == "error"):
            payload = payload or {"error": {"message": event.data or "error event"}}
            self._error = stream_error_message(payload)
            return anthropic_stream_error_to_openai(payload)
        if payload is None:
            if event.data.strip():
                log.debug("ignoring a stream event that is not a JSON object: %.80s", event.data)
            return b""
        handler = _HANDLERS.get(str(kind))
        return handler(self, payload) if handler is not None else b""

    def _unreadable(self, message: str) -> bytes:
        payload = {"type": "error", "error": {"type": "api_error", "message": message}}
        self._error = message
        return anthropic_stream_error_to_openai(payload)

    def _message_start(self, payload: dict[str, Any]) -> bytes:
        message = as_object(payload.get("message"))
        upstream_id = message.get("id")
        # Only a string id is passed on: a broken upstream's number or list would make an
        # invalid chunk (a synthetic id is made instead).
        self._id = self._id or (upstream_id if isinstance(upstream_id, str) and upstream_id
                                else None)
        if message.get("model"):
            self._model = str(message["model"])
        self._merge_usage(message.get("usage"))
        return self._role()

    def _block_start(self, payload: dict[str, Any]) -> bytes:
        index = payload.get("index")
        block = payload.get("content_block")
        if not isinstance(index, int) or not isinstance(block, dict):
            return b""
        kind = str(block.get("type"))
        self._block_kinds[index] = kind
        out = self._role()
        if kind == "text":
            return out + self._text(str(block.get("text") or ""))
        if self._wrote_text:
            self._paragraph_due = True
        if kind != "tool_use":
            return out
        ordinal = len(self._tool_ordinals)
        self._tool_ordinals[index] = ordinal
        call = {"index": ordinal, "id": str(block.get("id", "")), "type": "function",
                "function": {"name": self._names.restore(str(block.get("name", ""))),
                             "arguments": ""}}
        out += self._chunk({"tool_calls": [call]})
        if block.get("input"):  # a block that arrives whole rather than as deltas
            out += self._arguments(ordinal, _json(block["input"]))
        return out

    def _block_delta(self, payload: dict[str, Any]) -> bytes:
        index = payload.get("index")
        delta = payload.get("delta")
        if not isinstance(index, int) or not isinstance(delta, dict):
            return b""
        kind = delta.get("type")
        if kind == "text_delta" and self._block_kinds.get(index) == "text":
            return self._text(str(delta.get("text") or ""))
        if kind == "input_json_delta" and index in self._tool_ordinals:
            return self._arguments(self._tool_ordinals[index],
                                   str(delta.get("partial_json") or ""))
        return b""  # thinking, signature and citation deltas have no OpenAI counterpart

    def _message_delta(self, payload: dict[str, Any]) -> bytes:
        delta = as_object(payload.get("delta"))
        if delta.get("stop_reason"):
            self._stop_reason = delta["stop_reason"]
            self._finished = True
        self._merge_usage(payload.get("usage"))
        return b""

    def _message_stop(self, _payload: dict[str, Any]) -> bytes:
        self._finished = True
        return self._close()

    # -- output ----------------------------------------------------------------------------

    def _merge_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            usage = plausible_usage(usage)  # absurd counts would overflow json.dumps when summed
            self._usage.update({k: v for k, v in usage.items() if v is not None})

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return sse_data(self._envelope([{"index": 0, "delta": delta, "logprobs": None,
                                         "finish_reason": finish_reason}]))

    def _envelope(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        if self._id is None:
            self._id = synthetic_id("chatcmpl-", self._created, self._model)
        return {"id": self._id, "object": "chat.completion.chunk", "created": self._created,
                "model": self._model, "choices": choices}

    def _role(self) -> bytes:
        if self._role_sent:
            return b""
        self._role_sent = True
        return self._chunk({"role": "assistant", "content": ""})

    def _text(self, text: str) -> bytes:
        if not text:
            return b""
        if self._paragraph_due:
            text = "\n\n" + text
            self._paragraph_due = False
        self._wrote_text = True
        return self._chunk({"content": text})

    def _arguments(self, ordinal: int, fragment: str) -> bytes:
        if not fragment:
            return b""
        return self._chunk({"tool_calls": [{"index": ordinal,
                                            "function": {"arguments": fragment}}]})

    def _close(self) -> bytes:
        if self._closed:
            return b""
        out = self._role()
        self._closed = True
        finish = openai_finish_reason(self._stop_reason,
                                      has_tool_calls=bool(self._tool_ordinals))
        out += self._chunk({}, finish)
        if self._include_usage:
            usage_chunk = self._envelope([])
            usage_chunk["usage"] = openai_usage(self._usage)
            out += sse_data(usage_chunk)
        return out + SSE_DONE


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


_HANDLERS = {
    "message_start": AnthropicToOpenAIStream._message_start,
    "content_block_start": AnthropicToOpenAIStream._block_start,
    "content_block_delta": AnthropicToOpenAIStream._block_delta,
    "message_delta": AnthropicToOpenAIStream._message_delta,
    "message_stop": AnthropicToOpenAIStream._message_stop,
}
