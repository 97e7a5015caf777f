"""Fake replies in the OpenAI Chat Completions format: the completion, its SSE stream, errors,
models.

Pure functions over a `Reply` (see `claudex.demo.fake_replies`, which re-exports them).
"""

from __future__ import annotations

from typing import Any, Final

from claudex.demo.replies_common import Reply, StreamParts, dumps, json_text

_MODEL_CREATED: Final = 1_735_689_600


def openai_completion(reply: Reply, created: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None}
    if reply.tool_call is not None:
        call = reply.tool_call
        message["content"] = None
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
        ]
    return {
        "id": "chatcmpl-" + reply.id,
        "object": "chat.completion",
        "created": created,
        "model": reply.model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "stop" if reply.tool_call is None else "tool_calls",
            }
        ],
        "usage": _openai_usage(reply),
        "system_fingerprint": None,
    }


def _openai_usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def openai_stream(reply: Reply, created: int, include_usage: bool) -> StreamParts:
    envelope = {
        "id": "chatcmpl-" + reply.id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": reply.model,
        "system_fingerprint": None,
    }
    usage_field = ',"usage":null' if include_usage else ""

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        body = dumps({**envelope, "choices": [choice]})
        return f"data: {body[:-1]}{usage_field}}}\n\n".encode()

    # The deltas are many (benchmarks stream thousands): format them from a template.
    head = "data: " + dumps(envelope)[:-1] + ',"choices":[{"index":0,"delta":'
    tail = ',"logprobs":null,"finish_reason":null}]' + usage_field + "}\n\n"
    opening: list[bytes] = []
    if reply.tool_call is None:
        first = chunk({"role": "assistant", "content": "", "refusal": None})
        deltas = [
            (head + '{"content":' + json_text(piece) + "}" + tail).encode()
            for piece in reply.text_deltas
        ]
        finish = "stop"
    else:
        call = reply.tool_call
        first = chunk({"role": "assistant", "content": None})
        opening.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        deltas = [
            (
                head
                + '{"tool_calls":[{"index":0,"function":{"arguments":'
                + dumps(piece)
                + "}}]}"
                + tail
            ).encode()
            for piece in reply.argument_deltas
        ]
        finish = "tool_calls"
    closing = [chunk({}, finish)]
    if include_usage:
        usage_chunk = {**envelope, "choices": [], "usage": _openai_usage(reply)}
        closing.append(f"data: {dumps(usage_chunk)}\n\n".encode())
    closing.append(b"data: [DONE]\n\n")
    overloaded = openai_error("server_error", "The server is overloaded.", "overloaded")
    return StreamParts(
        preamble=[first],
        opening=opening,
        deltas=deltas,
        closing=closing,
        error=f"data: {dumps(overloaded)}\n\n".encode(),
    )


def openai_error(error_type: str, message: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


def openai_models(model_ids: tuple[str, ...], owner: str) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {"id": model_id, "object": "model", "created": _MODEL_CREATED, "owned_by": owner}
            for model_id in model_ids
        ],
    }
