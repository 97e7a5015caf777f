"""Non-streaming response bodies: OpenAI chat.completion <-> Anthropic message.

Kept: the upstream's id (as is), the model that actually answered (the request's model only when
the upstream names none), text, tool calls with their ids and restored names, stop reason
(see `reasons`), token usage. Left out: reasoning text (DeepSeek-style `reasoning_content`, or
Anthropic `thinking` blocks): an Anthropic client would send a thinking block back without a
valid signature, which Anthropic rejects, and Chat Completions has no standard field for it;
server-tool blocks; logprobs; extra choices (only the first is used; `n > 1` is never requested).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import Any

from claudex.providers.translate.content import text_of_parts
from claudex.providers.translate.reasons import (
    anthropic_stop_reason,
    anthropic_usage,
    openai_finish_reason,
    openai_usage,
)
from claudex.providers.translate.tools import ToolNameMap

log = logging.getLogger("claudex.translate")

UNKNOWN_MODEL = "unknown"


def synthetic_id(prefix: str, *seed: object) -> str:
    """A stable stand-in id for upstreams that send none."""
    digest = hashlib.sha256(repr(seed).encode()).hexdigest()[:24]
    return f"{prefix}{digest}"


def arguments_object(arguments: Any) -> dict[str, Any] | None:
    """A tool call's arguments (a JSON string, or already an object) as the object Anthropic's
    `input` must be; None when they are not a JSON object."""
    if isinstance(arguments, dict):
        return arguments
    if not arguments:
        return {}
    try:
        value = json.loads(arguments)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def parse_arguments(arguments: Any, tool_name: str) -> dict[str, Any]:
    """Arguments from a model's answer; malformed ones become {}."""
    value = arguments_object(arguments)
    if value is None:
        # The model produced malformed arguments; the client's tool will report missing input
        # and the model can try again, which is what a bad call gets against Anthropic too.
        log.warning("tool call %s: arguments are not a JSON object; passing {}", tool_name)
        return {}
    return value


def _first_choice(body: dict[str, Any]) -> dict[str, Any]:
    choices = [c for c in body.get("choices") or () if isinstance(c, dict)]
    for choice in choices:
        if choice.get("index", 0) == 0:
            return choice
    return choices[0] if choices else {}


def openai_to_anthropic_response(body: dict[str, Any], *, tool_names: ToolNameMap,
                                 fallback_model: str | None) -> dict[str, Any]:
    choice = _first_choice(body)
    message = choice.get("message") or {}
    message_id = str(body.get("id") or synthetic_id("msg_", body.get("created"), message))
    content: list[dict[str, Any]] = []
    text = text_of_parts(message.get("content"))
    if text:
        content.append({"type": "text", "text": text})
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        content.append({"type": "text", "text": refusal})
    calls = list(message.get("tool_calls") or ())
    if isinstance(message.get("function_call"), dict):  # legacy single function call
        calls.append({"function": message["function_call"]})
    for position, call in enumerate(calls):
        if not isinstance(call, dict):
            continue
        function = call.get("function") or {}
        name = tool_names.restore(str(function.get("name", "")))
        content.append({
            "type": "tool_use",
            "id": str(call.get("id") or synthetic_id("toolu_", message_id, position)),
            "name": name,
            "input": parse_arguments(function.get("arguments"), name),
        })
    has_calls = any(block["type"] == "tool_use" for block in content)
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": body.get("model") or fallback_model or UNKNOWN_MODEL,
        "content": content,
        "stop_reason": anthropic_stop_reason(choice.get("finish_reason"),
                                             has_tool_calls=has_calls,
                                             refused=bool(refusal)),
        "stop_sequence": None,
        "usage": anthropic_usage(body.get("usage")),
    }


def anthropic_to_openai_response(body: dict[str, Any], *, tool_names: ToolNameMap,
                                 fallback_model: str | None,
                                 created: int | None = None) -> dict[str, Any]:
    """`created`: the chat.completion timestamp (Anthropic sends none); now by default."""
    text = ""
    previous: str | None = None
    calls: list[dict[str, Any]] = []
    for block in body.get("content") or ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            # Adjacent text blocks (e.g. split by citations) run on; text resumed after a tool
            # call starts a new paragraph.
            if text and previous != "text":
                text += "\n\n"
            text += str(block.get("text", ""))
        elif kind == "tool_use":
            calls.append({
                "id": str(block.get("id", "")),
                "type": "function",
                "function": {
                    "name": tool_names.restore(str(block.get("name", ""))),
                    "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False),
                },
            })
        previous = kind
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    elif message["content"] is None:
        message["content"] = ""
    return {
        "id": str(body.get("id") or synthetic_id("chatcmpl-", body.get("content"))),
        "object": "chat.completion",
        "created": created if created is not None else int(time.time()),
        "model": body.get("model") or fallback_model or UNKNOWN_MODEL,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": openai_finish_reason(body.get("stop_reason"),
                                                  has_tool_calls=bool(calls)),
        }],
        "usage": openai_usage(body.get("usage")),
    }
