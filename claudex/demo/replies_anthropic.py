"""Fake replies in the Anthropic Messages format: the message, its SSE stream, errors, models.

Pure functions over a `Reply` (see `claudex.demo.fake_replies`, which re-exports them).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Final

from claudex.demo.replies_common import Reply, StreamParts, dumps, json_text

_MODEL_CREATED_AT: Final = "2025-01-01T00:00:00Z"


@lru_cache(maxsize=4096)
def _anthropic_delta(delta_type: str, key: str, piece: str, index: int = 0) -> bytes:
    data = (
        '{"type":"content_block_delta","index":'
        + str(index)
        + ',"delta":{"type":"'
        + delta_type
        + '","'
        + key
        + '":'
        + json_text(piece)
        + "}}"
    )
    return b"event: content_block_delta\ndata: " + data.encode() + b"\n\n"


def anthropic_message(reply: Reply) -> dict[str, Any]:
    content: list[dict[str, Any]]
    if reply.tool_call is None:
        content = [{"type": "text", "text": reply.text}]
    else:
        call = reply.tool_call
        content = [
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": json.loads(call.arguments),
            }
        ]
    if reply.thinking is not None:
        content.insert(0, reply.thinking.as_block())
    return {
        "id": "msg_01" + reply.id,
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": content,
        "stop_reason": "end_turn" if reply.tool_call is None else "tool_use",
        "stop_sequence": None,
        "usage": _anthropic_usage(reply.input_tokens, reply.output_tokens, reply),
    }


def _anthropic_usage(input_tokens: int, output_tokens: int,
                     reply: Reply | None = None) -> dict[str, int]:
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": reply.cache_creation if reply is not None else 0,
        "cache_read_input_tokens": reply.cache_read if reply is not None else 0,
        "output_tokens": output_tokens,
    }


def _sse(event: str, data: str) -> bytes:
    return f"event: {event}\ndata: {data}\n\n".encode()


def anthropic_stream(reply: Reply) -> StreamParts:
    start = anthropic_message(reply)
    start.update(content=[], stop_reason=None, usage=_anthropic_usage(reply.input_tokens, 1, reply))
    # A thinking block comes first, as index 0; the answer's own block follows it.
    thinking = _thinking_events(reply)
    at = 1 if thinking else 0
    if reply.tool_call is None:
        block: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [_anthropic_delta("text_delta", "text", piece, at)
                  for piece in reply.text_deltas]
    else:
        call = reply.tool_call
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        deltas = [
            _anthropic_delta("input_json_delta", "partial_json", piece, at)
            for piece in reply.argument_deltas
        ]
    message_delta = {
        "type": "message_delta",
        "delta": {
            "stop_reason": "end_turn" if reply.tool_call is None else "tool_use",
            "stop_sequence": None,
        },
        "usage": {"output_tokens": reply.output_tokens},
    }
    return StreamParts(
        preamble=[
            _sse("message_start", dumps({"type": "message_start", "message": start})),
            _sse("ping", '{"type":"ping"}'),
        ],
        opening=[
            *thinking,
            _sse(
                "content_block_start",
                dumps({"type": "content_block_start", "index": at, "content_block": block}),
            ),
        ],
        deltas=deltas,
        closing=[
            _sse("content_block_stop", f'{{"type":"content_block_stop","index":{at}}}'),
            _sse("message_delta", dumps(message_delta)),
            _sse("message_stop", '{"type":"message_stop"}'),
        ],
        error=_sse("error", dumps(anthropic_error("overloaded_error", "Overloaded"))),
    )


def _thinking_events(reply: Reply) -> list[bytes]:
    """A thinking block as the real API streams it: started empty, its text in thinking_delta,
    its signature in one signature_delta; a redacted one arrives whole in its start."""
    thinking = reply.thinking
    if thinking is None:
        return []
    stop = _sse("content_block_stop", '{"type":"content_block_stop","index":0}')
    if thinking.kind == "redacted_thinking":
        start = {"type": "content_block_start", "index": 0, "content_block": thinking.as_block()}
        return [_sse("content_block_start", dumps(start)), stop]
    empty = {"type": "thinking", "thinking": "", "signature": ""}
    events = [_sse("content_block_start",
                   dumps({"type": "content_block_start", "index": 0, "content_block": empty}))]
    if thinking.text:
        events.append(_anthropic_delta("thinking_delta", "thinking", thinking.text))
    # Uncached: every signature is new, and would only push the words out of the cache.
    events.append(_anthropic_delta.__wrapped__("signature_delta", "signature", thinking.signed))
    events.append(stop)
    return events


def anthropic_error(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def anthropic_models(model_ids: tuple[str, ...]) -> dict[str, Any]:
    data = [
        {
            "type": "model",
            "id": model_id,
            "display_name": model_id.replace("-", " ").title(),
            "created_at": _MODEL_CREATED_AT,
        }
        for model_id in model_ids
    ]
    return {
        "data": data,
        "has_more": False,
        "first_id": model_ids[0] if model_ids else None,
        "last_id": model_ids[-1] if model_ids else None,
    }
