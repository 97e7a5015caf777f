"""Bodies the fake providers answer with, in the Anthropic Messages and OpenAI Chat formats.

Pure functions: a request body in, JSON values or SSE bytes out. The shapes follow the public API
references closely enough that the official `anthropic` and `openai` SDKs parse them.

What the reply says: "Hello from NAME (model MODEL)." so a test can see which provider answered.
Two knobs in the last user message change it:
    "events:N"   the answer has N words, streamed as N text deltas (benchmarks of long streams)
    "use tool"   when the request offers tools, answer with a call of the first tool (or of the
                 tool named right after: "use tool get_weather"); a forced tool_choice does too
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final, Literal

Protocol = Literal["anthropic", "openai"]

MAX_EVENTS: Final = 100_000
_EVENTS_KNOB = re.compile(r"\bevents:(\d+)\b")
_TOOL_KNOB = re.compile(r"\buse tool\b(?:\s+([A-Za-z0-9_.-]+))?", re.IGNORECASE)
_MODEL_CREATED_AT: Final = "2025-01-01T00:00:00Z"
_MODEL_CREATED: Final = 1_735_689_600


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@lru_cache(maxsize=4096)
def _json_text(text: str) -> str:
    """A JSON string literal; cached because long streams repeat the same few words."""
    return _dumps(text)


@lru_cache(maxsize=4096)
def _anthropic_delta(delta_type: str, key: str, piece: str) -> bytes:
    data = (
        '{"type":"content_block_delta","index":0,"delta":{"type":"'
        + delta_type
        + '","'
        + key
        + '":'
        + _json_text(piece)
        + "}}"
    )
    return b"event: content_block_delta\ndata: " + data.encode() + b"\n\n"


def dumps_bytes(value: Any) -> bytes:
    return _dumps(value).encode()


class BadRequest(Exception):
    """The request body is not one the real API would accept; answered with 400."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str
    """The tool input as JSON text."""


@dataclass(frozen=True, slots=True)
class Reply:
    """What to answer, independent of the wire format."""

    id: str
    model: str
    words: tuple[str, ...]
    tool_call: ToolCall | None
    input_tokens: int

    @property
    def text(self) -> str:
        return " ".join(self.words)

    @property
    def text_deltas(self) -> list[str]:
        """The words as streamed: each after the first keeps its leading space."""
        return [word if index == 0 else " " + word for index, word in enumerate(self.words)]

    @property
    def output_tokens(self) -> int:
        if self.tool_call is not None:
            return max(1, len(self.tool_call.arguments) // 4)
        return len(self.words)

    @property
    def argument_deltas(self) -> list[str]:
        assert self.tool_call is not None
        arguments = self.tool_call.arguments
        return [arguments[start : start + 12] for start in range(0, len(arguments), 12)]


@dataclass(slots=True)
class StreamParts:
    """A stream in four parts, so faults can cut it at the right place.

    `preamble` is not content (Anthropic message_start + ping; OpenAI the role-only first chunk);
    `opening` starts a content block; each of `deltas` is one content event; `closing` ends it.
    """

    preamble: list[bytes]
    opening: list[bytes]
    deltas: list[bytes]
    closing: list[bytes]
    error: bytes
    """The in-stream error event for the "stream_error" fault."""
    everything: bytes = field(init=False)

    def __post_init__(self) -> None:
        self.everything = b"".join((*self.preamble, *self.opening, *self.deltas, *self.closing))


# ---------------------------------------------------------------- reading the request


def plan_reply(
    protocol: Protocol,
    provider: str,
    body: Any,
    body_size: int,
    reply_id: str,
    *,
    needs_max_tokens: bool = True,
) -> Reply:
    """Decide the answer to a messages / chat request, or raise BadRequest."""
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("model: Field required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages: Field required and must be a non-empty list")
    if protocol == "anthropic" and needs_max_tokens:
        max_tokens = body.get("max_tokens")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise BadRequest("max_tokens: Field required and must be a positive integer")
    prompt = _last_user_text(messages[-1])
    tool_call = _tool_call(protocol, body, prompt, reply_id)
    words: tuple[str, ...] = ()
    if tool_call is None:
        words = _words(provider, model, prompt)
    return Reply(
        id=reply_id,
        model=model,
        words=words,
        tool_call=tool_call,
        input_tokens=max(1, body_size // 4),
    )


def _last_user_text(message: Any) -> str:
    """The text of the conversation's final message when the user wrote it, else ""."""
    if not isinstance(message, dict) or message.get("role") != "user":
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        )
    return ""


def _words(provider: str, model: str, prompt: str) -> tuple[str, ...]:
    base = f"Hello from {provider} (model {model}).".split(" ")
    match = _EVENTS_KNOB.search(prompt)
    if match is None:
        return tuple(base)
    count = min(max(int(match.group(1)), 1), MAX_EVENTS)
    return tuple(base[index % len(base)] for index in range(count))


def _tool_call(
    protocol: Protocol, body: dict[str, Any], prompt: str, reply_id: str
) -> ToolCall | None:
    tools = _offered_tools(protocol, body.get("tools"))
    if not tools:
        return None
    forced = _forced_tool(protocol, body.get("tool_choice"))
    asked = _TOOL_KNOB.search(prompt)
    if forced is None and asked is None:
        return None
    wanted = forced if isinstance(forced, str) else (asked.group(1) if asked else None)
    name, schema = next(((n, s) for n, s in tools if n == wanted), tools[0])
    prefix = "toolu_01" if protocol == "anthropic" else "call_"
    return ToolCall(id=prefix + reply_id, name=name, arguments=_dumps(example_value(schema)))


def _offered_tools(protocol: Protocol, tools: Any) -> list[tuple[str, Any]]:
    offered: list[tuple[str, Any]] = []
    if not isinstance(tools, list):
        return offered
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if protocol == "openai":
            tool = tool.get("function")
            if not isinstance(tool, dict):
                continue
        name = tool.get("name")
        if isinstance(name, str):
            offered.append(
                (name, tool.get("input_schema" if protocol == "anthropic" else "parameters"))
            )
    return offered


def _forced_tool(protocol: Protocol, choice: Any) -> str | bool | None:
    """A tool name when one is forced, True when any tool is required, else None."""
    if choice in ("required", "any"):
        return True
    if not isinstance(choice, dict):
        return None
    if protocol == "anthropic":
        if choice.get("type") == "any":
            return True
        if choice.get("type") == "tool" and isinstance(choice.get("name"), str):
            return str(choice["name"])
        return None
    function = choice.get("function")
    if choice.get("type") == "function" and isinstance(function, dict):
        name = function.get("name")
        return name if isinstance(name, str) else True
    return None


def example_value(schema: Any, depth: int = 0) -> Any:
    """A small value that satisfies a simple JSON schema (required properties, enums, types)."""
    if not isinstance(schema, dict) or depth > 6:
        return {} if depth == 0 else "example"
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or (kind is None and "properties" in schema) or depth == 0:
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return {}
        required = schema.get("required")
        names = required if isinstance(required, list) else list(properties)
        return {
            name: example_value(properties.get(name), depth + 1)
            for name in names
            if isinstance(name, str)
        }
    simple: dict[str, Any] = {"integer": 1, "number": 1, "boolean": True, "array": [], "null": None}
    return simple.get(str(kind), "example")


# ---------------------------------------------------------------- Anthropic


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
    return {
        "id": "msg_01" + reply.id,
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": content,
        "stop_reason": "end_turn" if reply.tool_call is None else "tool_use",
        "stop_sequence": None,
        "usage": _anthropic_usage(reply.input_tokens, reply.output_tokens),
    }


def _anthropic_usage(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
    }


def _sse(event: str, data: str) -> bytes:
    return f"event: {event}\ndata: {data}\n\n".encode()


def anthropic_stream(reply: Reply) -> StreamParts:
    start = anthropic_message(reply)
    start.update(content=[], stop_reason=None, usage=_anthropic_usage(reply.input_tokens, 1))
    if reply.tool_call is None:
        block: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [_anthropic_delta("text_delta", "text", piece) for piece in reply.text_deltas]
    else:
        call = reply.tool_call
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        deltas = [
            _anthropic_delta("input_json_delta", "partial_json", piece)
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
            _sse("message_start", _dumps({"type": "message_start", "message": start})),
            _sse("ping", '{"type":"ping"}'),
        ],
        opening=[
            _sse(
                "content_block_start",
                _dumps({"type": "content_block_start", "index": 0, "content_block": block}),
            )
        ],
        deltas=deltas,
        closing=[
            _sse("content_block_stop", '{"type":"content_block_stop","index":0}'),
            _sse("message_delta", _dumps(message_delta)),
            _sse("message_stop", '{"type":"message_stop"}'),
        ],
        error=_sse("error", _dumps(anthropic_error("overloaded_error", "Overloaded"))),
    )


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


# ---------------------------------------------------------------- OpenAI


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
        body = _dumps({**envelope, "choices": [choice]})
        return f"data: {body[:-1]}{usage_field}}}\n\n".encode()

    # The deltas are many (benchmarks stream thousands): format them from a template.
    head = "data: " + _dumps(envelope)[:-1] + ',"choices":[{"index":0,"delta":'
    tail = ',"logprobs":null,"finish_reason":null}]' + usage_field + "}\n\n"
    opening: list[bytes] = []
    if reply.tool_call is None:
        first = chunk({"role": "assistant", "content": "", "refusal": None})
        deltas = [
            (head + '{"content":' + _json_text(piece) + "}" + tail).encode()
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
                + _dumps(piece)
                + "}}]}"
                + tail
            ).encode()
            for piece in reply.argument_deltas
        ]
        finish = "tool_calls"
    closing = [chunk({}, finish)]
    if include_usage:
        usage_chunk = {**envelope, "choices": [], "usage": _openai_usage(reply)}
        closing.append(f"data: {_dumps(usage_chunk)}\n\n".encode())
    closing.append(b"data: [DONE]\n\n")
    overloaded = openai_error("server_error", "The server is overloaded.", "overloaded")
    return StreamParts(
        preamble=[first],
        opening=opening,
        deltas=deltas,
        closing=closing,
        error=f"data: {_dumps(overloaded)}\n\n".encode(),
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


# ---------------------------------------------------------------- errors by kind

ErrorKind = Literal[
    "server", "overloaded", "rate_limit", "auth", "invalid_request", "not_found", "method"
]

_STATUS: Final[dict[str, int]] = {
    "server": 500,
    "overloaded": 529,
    "rate_limit": 429,
    "auth": 401,
    "invalid_request": 400,
    "not_found": 404,
    "method": 405,
}

_ANTHROPIC_TYPES: Final[dict[str, tuple[str, str]]] = {
    "server": ("api_error", "Internal server error"),
    "overloaded": ("overloaded_error", "Overloaded"),
    "rate_limit": ("rate_limit_error", "Number of requests has exceeded your rate limit."),
    "auth": ("authentication_error", "invalid x-api-key"),
    "invalid_request": ("invalid_request_error", "Invalid request."),
    "not_found": ("not_found_error", "Not found."),
    "method": ("invalid_request_error", "Method not allowed."),
}

_OPENAI_TYPES: Final[dict[str, tuple[str, str, str | None]]] = {
    "server": (
        "server_error",
        "The server had an error while processing your request. Sorry about that!",
        None,
    ),
    "overloaded": (
        "server_error",
        "The server is overloaded, please try again later.",
        "overloaded",
    ),
    "rate_limit": ("requests", "Rate limit reached for requests.", "rate_limit_exceeded"),
    "auth": ("invalid_request_error", "Incorrect API key provided.", "invalid_api_key"),
    "invalid_request": ("invalid_request_error", "Invalid request.", None),
    "not_found": ("invalid_request_error", "Unknown request URL.", "unknown_url"),
    "method": ("invalid_request_error", "Method not allowed.", None),
}


def error_reply(
    protocol: Protocol, kind: ErrorKind, message: str | None = None
) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of an error of `kind` in the protocol's format."""
    if protocol == "anthropic":
        error_type, default_message = _ANTHROPIC_TYPES[kind]
        return _STATUS[kind], anthropic_error(error_type, message or default_message)
    error_type, default_message, code = _OPENAI_TYPES[kind]
    return _STATUS[kind], openai_error(error_type, message or default_message, code)
