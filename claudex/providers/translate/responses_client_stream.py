"""Chat Completions (and, through its Chat form, Anthropic) streams as a Responses API event
stream, incrementally.

Events, in the order the openai SDK's accumulator (`lib/streaming/responses`) and Codex CLI
expect them, every one with `type` and a `sequence_number` counting from 0:
  response.created, response.in_progress          at the first upstream event
  text:       response.output_item.added (message), response.content_part.added,
              response.output_text.delta ...
  a tool call: response.output_item.added (function_call, empty arguments),
              response.function_call_arguments.delta ...
  at the end: for the message: response.output_text.done, response.content_part.done,
              response.output_item.done; for each call in output order:
              response.function_call_arguments.done, response.output_item.done;
              then response.completed (response.incomplete for a length or content-filter
              stop) with the whole output and the usage.
Text that starts while a message is open continues it; a tool call closes the open message (its
item is done before the call's is added); calls stay open until the end, so interleaved
argument deltas of parallel calls land in the right item. Custom and local_shell calls carry
no deltas: their input is known only once the function's JSON arguments are complete, and
their done item holds it. An upstream error becomes `response.failed`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from claudex.providers.sse import SseEvent
from claudex.providers.translate.errors import stream_error_message
from claudex.providers.translate.responses_client_answers import (
    finish_status,
    message_item,
    response_envelope,
    response_id,
    responses_usage,
)
from claudex.providers.translate.responses_client_tools import ResponsesTools
from claudex.providers.translate.stream_base import StreamTranslator, plausible_usage
from claudex.providers.translate.stream_to_openai import AnthropicToOpenAIStream
from claudex.providers.translate.tools import ToolNameMap
from claudex.providers.translate.wire import as_object, parse_json_object, sse_event


@dataclass
class _Call:
    output_index: int
    item_id: str
    call_id: str
    name: str
    arguments: str = ""


@dataclass
class _Message:
    output_index: int
    item_id: str
    text: list[str] = field(default_factory=list)


def failed_event(message: str, *, code: str = "server_error", rid: str = "resp_claudex",
                 sequence_number: int = 0, envelope: dict[str, Any] | None = None) -> bytes:
    """A `response.failed` event: what Codex CLI and the openai SDK read as a failed stream."""
    response = dict(envelope) if envelope is not None else {
        "id": rid, "object": "response", "created_at": int(time.time()), "output": []}
    response.update(status="failed", error={"code": code, "message": message})
    return sse_event("response.failed", {"type": "response.failed", "response": response,
                                         "sequence_number": sequence_number})


class ChatToResponsesStream(StreamTranslator):
    def __init__(self, *, tools: ResponsesTools, request: dict[str, Any], model: str | None,
                 created: int | None = None) -> None:
        super().__init__()
        self._tools = tools
        self._request = request
        self._model = model or "unknown"
        self._created = created if created is not None else int(time.time())
        self._rid: str | None = None
        self._sequence = 0
        self._output: list[dict[str, Any] | None] = []  # done items, in output order
        self._message: _Message | None = None
        self._calls: dict[int, _Call] = {}
        self._finish_reason: Any = None
        self._usage: Any = None

    # -- input -----------------------------------------------------------------------------

    def _on_event(self, event: SseEvent) -> bytes:
        if event.data.strip() == "[DONE]":
            self._finished = True
            return self._close()
        payload = parse_json_object(event.data)
        if payload is None:
            return b""
        if "error" in payload:
            return self._fail(stream_error_message(payload))
        out = self._start(payload)
        if isinstance(payload.get("usage"), dict):
            self._usage = plausible_usage(payload["usage"])
        choices = payload.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = as_object(choice.get("delta"))
            content = delta.get("content")
            if isinstance(content, str) and content:
                out += self._text(content)
            calls = delta.get("tool_calls")
            for call in calls if isinstance(calls, list) else ():
                if isinstance(call, dict):
                    out += self._call_delta(call)
            if choice.get("finish_reason"):
                self._finish_reason = choice["finish_reason"]
                self._finished = True
        return out

    def _unreadable(self, message: str) -> bytes:
        return self._fail(message)

    # -- output ----------------------------------------------------------------------------

    def _emit(self, name: str, payload: dict[str, Any]) -> bytes:
        payload = {"type": name, **payload, "sequence_number": self._sequence}
        self._sequence += 1
        return sse_event(name, payload)

    def _envelope(self, status: str) -> dict[str, Any]:
        return response_envelope(self._request, rid=self._rid or "resp_claudex",
                                 model=self._model, created=self._created, status=status)

    def _start(self, payload: dict[str, Any] | None) -> bytes:
        if self._rid is not None:
            return b""
        payload = payload or {}
        if isinstance(payload.get("model"), str) and payload["model"]:
            self._model = payload["model"]
        self._rid = response_id(payload.get("id"), self._created, self._model)
        envelope = self._envelope("in_progress")
        return (self._emit("response.created", {"response": envelope})
                + self._emit("response.in_progress", {"response": envelope}))

    def _text(self, text: str) -> bytes:
        out = b""
        if self._message is None:
            index = len(self._output)
            self._output.append(None)
            self._message = _Message(index, f"msg_{self._rid_tail()}_{index}")
            item = message_item(self._message.item_id, "", "in_progress")
            item["content"] = []
            out += self._emit("response.output_item.added", {"output_index": index,
                                                             "item": item})
            out += self._emit("response.content_part.added", {
                "item_id": self._message.item_id, "output_index": index, "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": [],
                         "logprobs": []}})
        self._message.text.append(text)
        return out + self._emit("response.output_text.delta", {
            "item_id": self._message.item_id, "output_index": self._message.output_index,
            "content_index": 0, "delta": text, "logprobs": []})

    def _close_message(self) -> bytes:
        message, self._message = self._message, None
        if message is None:
            return b""
        text = "".join(message.text)
        where = {"item_id": message.item_id, "output_index": message.output_index,
                 "content_index": 0}
        item = message_item(message.item_id, text)
        self._output[message.output_index] = item
        return (self._emit("response.output_text.done", {**where, "text": text,
                                                         "logprobs": []})
                + self._emit("response.content_part.done", {**where,
                                                            "part": item["content"][0]})
                + self._emit("response.output_item.done", {
                    "output_index": message.output_index, "item": item}))

    def _call_delta(self, delta: dict[str, Any]) -> bytes:
        index = delta.get("index", 0)
        index = index if isinstance(index, int) else 0
        function = as_object(delta.get("function"))
        fragment = function.get("arguments")
        fragment = fragment if isinstance(fragment, str) else ""
        out = b""
        call = self._calls.get(index)
        if call is None:
            out += self._close_message()
            output_index = len(self._output)
            self._output.append(None)
            upstream_id = delta.get("id")
            call_id = upstream_id if isinstance(upstream_id, str) and upstream_id \
                else f"call_{self._rid_tail()}_{output_index}"
            call = _Call(output_index, f"fc_{call_id}", call_id, str(function.get("name") or ""))
            self._calls[index] = call
            item = self._tools.call_item(call.name, call.call_id, "", call.item_id,
                                         "in_progress")
            out += self._emit("response.output_item.added", {"output_index": output_index,
                                                             "item": item})
        if fragment:
            call.arguments += fragment
            if self._tools.origin(call.name).kind == "function":
                out += self._emit("response.function_call_arguments.delta", {
                    "item_id": call.item_id, "output_index": call.output_index,
                    "delta": fragment})
        return out

    def _close_call(self, call: _Call) -> bytes:
        arguments = call.arguments or "{}"
        item = self._tools.call_item(call.name, call.call_id, arguments, call.item_id)
        self._output[call.output_index] = item
        out = b""
        if item["type"] == "function_call":
            out += self._emit("response.function_call_arguments.done", {
                "item_id": call.item_id, "output_index": call.output_index,
                "name": item["name"], "arguments": arguments})
        return out + self._emit("response.output_item.done", {
            "output_index": call.output_index, "item": item})

    def _close(self) -> bytes:
        if self._closed:
            return b""
        out = self._start(None)
        self._closed = True
        out += self._close_message()
        for call in sorted(self._calls.values(), key=lambda c: c.output_index):
            out += self._close_call(call)
        status, incomplete = finish_status(self._finish_reason)
        response = self._envelope(status)
        response["incomplete_details"] = incomplete
        response["output"] = [item for item in self._output if item is not None]
        response["usage"] = responses_usage(self._usage)
        name = "response.completed" if status == "completed" else "response.incomplete"
        return out + self._emit(name, {"response": response})

    def fail(self, message: str) -> bytes:
        """claudex's own failure event when the upstream broke mid-stream: it continues the
        sequence numbers the client has seen."""
        if self._closed or self._error is not None:
            return b""
        return self._fail(message)

    def _fail(self, message: str) -> bytes:
        self._error = message
        out = self._start(None)
        envelope = self._envelope("failed")
        sequence = self._sequence
        self._sequence += 1
        return out + failed_event(message, envelope=envelope, sequence_number=sequence)

    def _rid_tail(self) -> str:
        return (self._rid or "resp_claudex")[5:]


class AnthropicToResponsesStream:
    """An Anthropic stream through its Chat Completions form into Responses events."""

    def __init__(self, *, tools: ResponsesTools, upstream_names: ToolNameMap,
                 request: dict[str, Any], model: str | None) -> None:
        self._inner = AnthropicToOpenAIStream(tool_names=upstream_names, model=model,
                                              include_usage=True)
        self._outer = ChatToResponsesStream(tools=tools, request=request, model=model)

    def feed(self, chunk: bytes) -> bytes:
        inner = self._inner.feed(chunk)
        return self._outer.feed(inner) if inner else b""

    def finish(self) -> bytes:
        inner = self._inner.finish()
        out = self._outer.feed(inner) if inner else b""
        return out + self._outer.finish()

    def fail(self, message: str) -> bytes:
        return self._outer.fail(message)

    @property
    def finished(self) -> bool:
        return self._inner.finished or self._outer.finished

    @property
    def error(self) -> str | None:
        return self._inner.error or self._outer.error
