"""Answers from a Responses upstream, in the client's protocol: a Responses JSON object ->
Chat Completions, and -> Anthropic by way of the Chat form (the same rules as a Chat upstream's
answer, so stop reasons, usage and tool calls read alike); a Responses event stream -> Chat
chunks (`ResponsesToChatStream`) and -> Anthropic events (`ResponsesToAnthropicStream`, the Chat
chunks fed through `OpenAIToAnthropicStream`), incrementally.

  Responses                              Chat
  message output_text / refusal          message.content / refusal (deltas: content/refusal)
  function_call item (call_id, name)     tool_calls[i] (id = call_id), arguments streamed
  incomplete, reason max_output_tokens   finish_reason "length" (content_filter likewise)
  a function call in the output          finish_reason "tool_calls", else "stop"
  usage input/output_tokens (+ cached)   usage prompt/completion_tokens (+ cached_tokens)
  response.failed / error event          an error chunk (-> Anthropic `event: error`)
Not carried to the client: reasoning items and their summaries (a Responses model's reasoning
is bound to the provider that made it and never becomes an Anthropic thinking block), and
output items of server-side tools (web search and the like).

`collect_stream` turns a whole event stream into the final response object: the ChatGPT
backend only streams, and a client that did not ask for a stream gets JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from claudex.providers import responses
from claudex.providers.sse import SseEvent
from claudex.providers.translate.responses import (
    UNKNOWN_MODEL,
    openai_to_anthropic_response,
    synthetic_id,
)
from claudex.providers.translate.stream_base import StreamTranslator, plausible_usage
from claudex.providers.translate.stream_to_anthropic import OpenAIToAnthropicStream
from claudex.providers.translate.tools import ToolNameMap
from claudex.providers.translate.wire import (
    SSE_DONE,
    EventReader,
    as_object,
    parse_json_object,
    sse_data,
)

_INCOMPLETE_REASONS = {"max_output_tokens": "length", "content_filter": "content_filter"}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def chat_usage(usage: Any) -> dict[str, Any]:
    usage = plausible_usage(as_object(usage))
    prompt, completion = _int(usage.get("input_tokens")), _int(usage.get("output_tokens"))
    out: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                           "total_tokens": prompt + completion}
    input_details = as_object(usage.get("input_tokens_details"))
    cached, written = _int(input_details.get("cached_tokens")), \
        _int(input_details.get("cache_write_tokens"))
    if cached or written:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
        if written:  # OpenRouter's name for tokens written to a cache (reasons.py)
            out["prompt_tokens_details"]["cache_write_tokens"] = written
    reasoning = _int(as_object(usage.get("output_tokens_details")).get("reasoning_tokens"))
    if reasoning:
        out["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return out


def finish_reason(response: dict[str, Any], *, has_tool_calls: bool) -> str:
    if response.get("status") == "incomplete":
        reason = as_object(response.get("incomplete_details")).get("reason")
        return _INCOMPLETE_REASONS.get(str(reason), "length")
    return "tool_calls" if has_tool_calls else "stop"


def _output_items(response: dict[str, Any]) -> list[dict[str, Any]]:
    output = response.get("output")
    return [item for item in output if isinstance(item, dict)] if isinstance(output, list) \
        else []


def responses_to_chat_response(body: dict[str, Any], *, tool_names: ToolNameMap,
                               fallback_model: str | None) -> dict[str, Any]:
    texts: list[str] = []
    refusals: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in _output_items(body):
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                    refusals.append(part["refusal"])
        elif kind == "function_call":
            arguments = item.get("arguments")
            calls.append({
                "id": str(item.get("call_id") or item.get("id") or
                          synthetic_id("call_", body.get("id"), len(calls))),
                "type": "function",
                "function": {"name": tool_names.restore(str(item.get("name", ""))),
                             "arguments": arguments if isinstance(arguments, str) else "{}"},
            })
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if refusals:
        message["refusal"] = "".join(refusals)
    if calls:
        message["tool_calls"] = calls
    return {
        "id": str(body.get("id") or synthetic_id("chatcmpl-", body.get("created_at"))),
        "object": "chat.completion",
        "created": _int(body.get("created_at")),
        "model": body.get("model") or fallback_model or UNKNOWN_MODEL,
        "choices": [{"index": 0, "message": message,
                     "finish_reason": finish_reason(body, has_tool_calls=bool(calls))}],
        "usage": chat_usage(body.get("usage")),
    }


def responses_to_anthropic_response(body: dict[str, Any], *, tool_names: ToolNameMap,
                                    fallback_model: str | None) -> dict[str, Any]:
    chat = responses_to_chat_response(body, tool_names=tool_names, fallback_model=fallback_model)
    # The names are restored already: the second step must not look them up again.
    return openai_to_anthropic_response(chat, tool_names=ToolNameMap(),
                                        fallback_model=fallback_model)


class StreamFailed(ValueError):
    """A collected stream ended in `response.failed` or an `error` event."""


def collect_stream(raw: bytes) -> dict[str, Any]:
    """The final response object of a whole Responses event stream. Output items come from
    the terminal event, or, when it lists none, from the `response.output_item.done` events.
    Raises StreamFailed for a failed stream and ValueError for one that never finished."""
    reader = EventReader()
    done_items: list[dict[str, Any]] = []
    for event in reader.feed(raw) + reader.flush():
        payload = parse_json_object(event.data) if event.data else None
        kind = responses.event_type(event, payload)
        if kind in responses.ERROR_EVENTS:
            message, _ = responses.error_fields(payload or {"type": kind})
            raise StreamFailed(message or "response failed")
        if payload is None:
            continue
        if kind == "response.output_item.done" and isinstance(payload.get("item"), dict):
            done_items.append(payload["item"])
        elif kind in responses.TERMINAL_EVENTS and isinstance(payload.get("response"), dict):
            final = dict(payload["response"])
            if not _output_items(final):
                final["output"] = done_items
            return final
    raise ValueError("the response stream ended without response.completed")


# -- streams --------------------------------------------------------------------------------

@dataclass
class _Call:
    index: int
    streamed: bool = False  # argument deltas went out (so `done` must not repeat them)


class ResponsesToChatStream(StreamTranslator):
    """Responses events -> Chat Completions chunks, then `[DONE]`."""

    def __init__(self, *, tool_names: ToolNameMap, model: str | None,
                 include_usage: bool,
                 on_item: Callable[[dict[str, Any]], None] | None = None) -> None:
        super().__init__()
        self._on_item = on_item  # sees every finished output item (reasoning included)
        self._names = tool_names
        self._model = model
        self._include_usage = include_usage
        self._id: str | None = None
        self._created = 0
        self._role_sent = False
        self._calls: dict[str, _Call] = {}  # by item id, and by output index ("#2")
        self._call_count = 0

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        if not self._role_sent:
            delta = {"role": "assistant", **delta}
            self._role_sent = True
        return sse_data({
            "id": self._id or synthetic_id("chatcmpl-", self._model), "object":
            "chat.completion.chunk", "created": self._created,
            "model": self._model or UNKNOWN_MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })

    def _on_event(self, event: SseEvent) -> bytes:
        payload = parse_json_object(event.data) if event.data else None
        kind = responses.event_type(event, payload)
        if kind in responses.ERROR_EVENTS:
            return self._fail(payload or {"type": kind})
        if payload is None:
            return b""
        if kind in ("response.created", "response.in_progress"):
            self._started(as_object(payload.get("response")))
            return b""
        if kind == "response.output_text.delta":
            delta = payload.get("delta")
            return self._chunk({"content": delta}) if isinstance(delta, str) and delta else b""
        if kind == "response.refusal.delta":
            delta = payload.get("delta")
            return self._chunk({"refusal": delta}) if isinstance(delta, str) and delta else b""
        if kind == "response.output_item.added":
            return self._call_added(payload)
        if kind == "response.function_call_arguments.delta":
            return self._arguments(payload)
        if kind == "response.output_item.done":
            return self._call_done(payload)
        if kind in responses.TERMINAL_EVENTS:
            return self._end(as_object(payload.get("response")))
        return b""

    def _started(self, response: dict[str, Any]) -> None:
        if self._id is None and isinstance(response.get("id"), str):
            self._id = response["id"]
        self._created = self._created or _int(response.get("created_at"))
        if isinstance(response.get("model"), str) and response["model"]:
            self._model = response["model"]

    def _key(self, payload: dict[str, Any]) -> str:
        item = as_object(payload.get("item"))
        item_id = payload.get("item_id") or item.get("id")
        return str(item_id) if item_id else f"#{payload.get('output_index')}"

    def _call_added(self, payload: dict[str, Any]) -> bytes:
        item = as_object(payload.get("item"))
        if item.get("type") != "function_call":
            return b""
        call = _Call(self._call_count)
        self._call_count += 1
        self._calls[self._key(payload)] = call
        self._calls.setdefault(f"#{payload.get('output_index')}", call)
        call_id = item.get("call_id") or item.get("id") or synthetic_id("call_", self._id,
                                                                        call.index)
        arguments = item.get("arguments")
        function = {"name": self._names.restore(str(item.get("name", ""))),
                    "arguments": arguments if isinstance(arguments, str) else ""}
        call.streamed = bool(function["arguments"])
        return self._chunk({"tool_calls": [{"index": call.index, "id": str(call_id),
                                            "type": "function", "function": function}]})

    def _find(self, payload: dict[str, Any]) -> _Call | None:
        return self._calls.get(self._key(payload)) or \
            self._calls.get(f"#{payload.get('output_index')}")

    def _arguments(self, payload: dict[str, Any]) -> bytes:
        call, delta = self._find(payload), payload.get("delta")
        if call is None or not isinstance(delta, str) or not delta:
            return b""
        call.streamed = True
        return self._chunk({"tool_calls": [{"index": call.index,
                                            "function": {"arguments": delta}}]})

    def _call_done(self, payload: dict[str, Any]) -> bytes:
        item = as_object(payload.get("item"))
        if self._on_item is not None:
            self._on_item(item)
        call = self._find(payload)
        arguments = item.get("arguments")
        if item.get("type") != "function_call" or call is None or call.streamed or \
                not isinstance(arguments, str) or not arguments:
            return b""
        call.streamed = True  # a backend that sends the arguments only whole
        return self._chunk({"tool_calls": [{"index": call.index,
                                            "function": {"arguments": arguments}}]})

    def _end(self, response: dict[str, Any]) -> bytes:
        self._started(response)
        self._finished = True
        reason = finish_reason(response, has_tool_calls=self._call_count > 0)
        out = self._chunk({}, reason)
        if self._include_usage and response.get("usage") is not None:
            out += sse_data({"id": self._id or UNKNOWN_MODEL, "object": "chat.completion.chunk",
                             "created": self._created, "model": self._model or UNKNOWN_MODEL,
                             "choices": [], "usage": chat_usage(response.get("usage"))})
        self._closed = True
        return out + SSE_DONE

    def _fail(self, payload: dict[str, Any]) -> bytes:
        message, code = responses.error_fields(payload)
        self._error = message or "upstream error"
        error = {"message": self._error, "type": "server_error", "param": None,
                 "code": code}
        return sse_data({"error": error})

    def _unreadable(self, message: str) -> bytes:
        return self._fail({"type": "error", "message": message})

    def _close(self) -> bytes:
        # The upstream ended without its terminal event: `finished` stays false, and the
        # engine ends the client's stream with an error event.
        self._closed = True
        return b""


class ResponsesToAnthropicStream:
    """Responses events -> Chat chunks -> Anthropic events."""

    def __init__(self, *, tool_names: ToolNameMap, model: str | None,
                 on_item: Callable[[dict[str, Any]], None] | None = None) -> None:
        self._chat = ResponsesToChatStream(tool_names=tool_names, model=model,
                                           include_usage=True, on_item=on_item)
        # Names are restored by the first step already.
        self._anthropic = OpenAIToAnthropicStream(tool_names=ToolNameMap(), model=model)

    def feed(self, chunk: bytes) -> bytes:
        return self._anthropic.feed(self._chat.feed(chunk))

    def finish(self) -> bytes:
        tail = self._chat.finish()
        out = self._anthropic.feed(tail) if tail else b""
        return out + self._anthropic.finish() if self._chat.finished else out

    @property
    def finished(self) -> bool:
        return self._chat.finished and self._anthropic.finished

    @property
    def error(self) -> str | None:
        return self._chat.error or self._anthropic.error

