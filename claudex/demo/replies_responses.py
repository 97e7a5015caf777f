"""Fake replies in the OpenAI Responses format: the response object and its event stream.

Pure functions over a `Reply` (`claudex.demo.replies_common`). Events carry both the `event:`
line and the `type` field, and a `sequence_number`, as the API sends them; the terminal
`response.completed` holds the whole response (output and usage), which is what the openai
SDK's stream accumulator reads.
"""

from __future__ import annotations

from typing import Any

from claudex.demo.replies_common import Reply, StreamParts, dumps


def _usage(reply: Reply) -> dict[str, Any]:
    return {"input_tokens": reply.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": reply.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reply.input_tokens + reply.output_tokens}


def _output(reply: Reply) -> list[dict[str, Any]]:
    if reply.tool_call is not None:
        call = reply.tool_call
        return [{"type": "function_call", "id": "fc_" + reply.id, "call_id": call.id,
                 "name": call.name, "arguments": call.arguments, "status": "completed"}]
    return [{"type": "message", "id": "msg_" + reply.id, "role": "assistant",
             "status": "completed",
             "content": [{"type": "output_text", "text": reply.text, "annotations": []}]}]


def _response(reply: Reply, created: int, status: str, output: list[dict[str, Any]],
              usage: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": "resp_" + reply.id, "object": "response", "created_at": created,
            "status": status, "model": reply.model, "output": output, "usage": usage,
            "error": None, "incomplete_details": None, "parallel_tool_calls": True,
            "store": False}


def responses_object(reply: Reply, created: int,
                     reasoning: dict[str, Any] | None = None) -> dict[str, Any]:
    output = ([reasoning] if reasoning else []) + _output(reply)
    return _response(reply, created, "completed", output, _usage(reply))


def responses_stream(reply: Reply, created: int,
                     reasoning: dict[str, Any] | None = None) -> StreamParts:
    sequence = iter(range(1_000_000_000))

    def event(kind: str, **fields: Any) -> bytes:
        return f"event: {kind}\ndata: {dumps({'type': kind, 'sequence_number': next(sequence), **fields})}\n\n".encode()  # noqa: E501

    pending = _response(reply, created, "in_progress", [], None)
    preamble = [event("response.created", response=pending),
                event("response.in_progress", response=pending)]
    if reasoning is not None:  # reasoning first, as the models do: not content
        preamble += [event("response.output_item.added", output_index=0,
                           item={**reasoning, "encrypted_content": None}),
                     event("response.output_item.done", output_index=0, item=reasoning)]
    at = 1 if reasoning is not None else 0
    [item] = _output(reply)
    if reply.tool_call is not None:
        opening = [event("response.output_item.added", output_index=at,
                         item={**item, "arguments": "", "status": "in_progress"})]
        deltas = [event("response.function_call_arguments.delta", item_id=item["id"],
                        output_index=at, delta=piece) for piece in reply.argument_deltas]
        closing = [event("response.function_call_arguments.done", item_id=item["id"],
                         output_index=at, arguments=reply.tool_call.arguments)]
    else:
        opening = [event("response.output_item.added", output_index=at,
                         item={**item, "content": [], "status": "in_progress"}),
                   event("response.content_part.added", item_id=item["id"], output_index=at,
                         content_index=0,
                         part={"type": "output_text", "text": "", "annotations": []})]
        deltas = [event("response.output_text.delta", item_id=item["id"], output_index=at,
                        content_index=0, delta=piece) for piece in reply.text_deltas]
        closing = [event("response.output_text.done", item_id=item["id"], output_index=at,
                         content_index=0, text=reply.text),
                   event("response.content_part.done", item_id=item["id"], output_index=at,
                         content_index=0, part=item["content"][0])]
    closing += [event("response.output_item.done", output_index=at, item=item),
                event("response.completed",
                      response=responses_object(reply, created, reasoning))]
    error = event("error", code="server_error", message="The server is overloaded.",
                  param=None)
    return StreamParts(preamble=preamble, opening=opening, deltas=deltas, closing=closing,
                       error=error)


# The Responses API's own words for a prompt over the model's context window, with no size
# (anomalyco/opencode#6071; openai/codex codex-rs/codex-api/src/sse/responses.rs's fixture).
CONTEXT_WORDS = ("Your input exceeds the context window of this model. Please adjust your input "
                 "and try again.")


def refused_stream(reply_id: str, model: str, created: int, how: str) -> list[bytes]:
    """A streamed request over the context window, refused inside a 200 stream before any
    content, as the Responses API does: `response.created`, `response.in_progress`, then
    `how` = "response.failed" (the failed response carrying `error: {code:
    "context_length_exceeded", message}`, the shape of codex-rs's `context_window_error_is_fatal`
    fixture, which Codex CLI reads as ContextWindowExceeded) or "error" (the `error` event:
    type, code, message, param, sequence_number, as OpenAI's ResponseErrorEvent schema has it)."""
    sequence = iter(range(1_000_000))

    def event(kind: str, **fields: Any) -> bytes:
        data = dumps({"type": kind, "sequence_number": next(sequence), **fields})
        return f"event: {kind}\ndata: {data}\n\n".encode()

    pending = {"id": "resp_" + reply_id, "object": "response", "created_at": created,
               "status": "in_progress", "model": model, "output": [], "usage": None,
               "error": None, "incomplete_details": None, "parallel_tool_calls": True,
               "store": False}
    events = [event("response.created", response=pending),
              event("response.in_progress", response=pending)]
    if how == "error":
        events.append(event("error", code="context_length_exceeded", message=CONTEXT_WORDS,
                            param="input"))
    else:
        failed = {**pending, "status": "failed",
                  "error": {"code": "context_length_exceeded", "message": CONTEXT_WORDS}}
        events.append(event("response.failed", response=failed))
    return events
