"""Chat Completions and Anthropic answers as a Responses API `response` object, for a Responses
client (an Anthropic answer goes through its Chat form first, like the request went).

Kept: the upstream's id (prefixed `resp_` when it is not one already), the model that answered,
text (one `message` item), tool calls as the items the client's tools expect
(`responses_client_tools`), status (`incomplete` with its reason for a length or content-filter
stop), usage. Reasoning from another provider is left out: it is encrypted for, or meaningful
to, the provider that produced it, and a Responses client would send it back.
The request's own settings (tools, tool_choice, parallel_tool_calls, ...) are echoed as the
Responses API does.
"""

from __future__ import annotations

import time
from typing import Any

from claudex.providers.translate.responses import synthetic_id
from claudex.providers.translate.responses_client_tools import ResponsesTools
from claudex.providers.translate.wire import as_object

_ECHOED = ("instructions", "max_output_tokens", "temperature", "top_p", "previous_response_id",
           "reasoning", "text", "truncation", "user", "metadata", "prompt_cache_key",
           "safety_identifier", "store", "service_tier")
_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def _str(value: Any) -> str | None:
    """A non-empty string, or None: a broken upstream's number or list is not passed on."""
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def responses_usage(usage: Any) -> dict[str, Any]:
    """Chat Completions usage -> Responses usage."""
    usage = usage if isinstance(usage, dict) else {}
    prompt, completion = _int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens"))
    prompt_details = usage.get("prompt_tokens_details")
    completion_details = usage.get("completion_tokens_details")
    prompt_details = prompt_details if isinstance(prompt_details, dict) else {}
    cached = _int(prompt_details.get("cached_tokens"))
    written = _int(prompt_details.get("cache_write_tokens"))  # OpenRouter's, as reasons.py says
    reasoning = _int(completion_details.get("reasoning_tokens")) \
        if isinstance(completion_details, dict) else 0
    input_details: dict[str, int] = {"cached_tokens": cached}
    if written:
        input_details["cache_write_tokens"] = written
    return {"input_tokens": prompt, "input_tokens_details": input_details,
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": prompt + completion}


def response_id(upstream_id: Any, *seed: object) -> str:
    if isinstance(upstream_id, str) and upstream_id:
        return upstream_id if upstream_id.startswith("resp_") else f"resp_{upstream_id}"
    return synthetic_id("resp_", *seed)


def response_envelope(request: dict[str, Any], *, rid: str, model: str, created: int,
                      status: str) -> dict[str, Any]:
    """A `response` object with no output yet (`response.created` carries one like it)."""
    out: dict[str, Any] = {
        "id": rid, "object": "response", "created_at": created, "status": status,
        "error": None, "incomplete_details": None, "model": model, "output": [],
        "parallel_tool_calls": request.get("parallel_tool_calls", True) is not False,
        "tool_choice": request.get("tool_choice") or "auto",
        "tools": request.get("tools") if isinstance(request.get("tools"), list) else [],
        "usage": None,
    }
    for key in _ECHOED:
        out[key] = request.get(key)
    return out


def finish_status(finish_reason: Any) -> tuple[str, dict[str, Any] | None]:
    reason = _INCOMPLETE.get(str(finish_reason))
    return ("incomplete", {"reason": reason}) if reason else ("completed", None)


def message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {"type": "message", "id": item_id, "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [],
                         "logprobs": []}]}


def chat_to_responses_answer(body: dict[str, Any], *, request: dict[str, Any],
                             tools: ResponsesTools, fallback_model: str | None) -> dict[str, Any]:
    """A chat.completion body -> a Responses `response` object."""
    choices = body.get("choices")
    choice = as_object(choices[0]) if isinstance(choices, list) and choices else {}
    message = as_object(choice.get("message"))
    created = _int(body.get("created")) or int(time.time())
    model = _str(body.get("model")) or fallback_model or "unknown"
    rid = response_id(body.get("id"), created, model)
    status, incomplete = finish_status(choice.get("finish_reason"))
    out = response_envelope(request, rid=rid, model=model, created=created, status=status)
    out["incomplete_details"] = incomplete
    output: list[dict[str, Any]] = []
    content = message.get("content")
    if isinstance(content, list):
        text = "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    else:
        text = content if isinstance(content, str) else ""
    refusal = message.get("refusal")
    if text:
        output.append(message_item(f"msg_{rid[5:]}", text))
    if isinstance(refusal, str) and refusal:
        output.append({"type": "message", "id": f"msg_{rid[5:]}_refusal", "status": "completed",
                       "role": "assistant",
                       "content": [{"type": "refusal", "refusal": refusal}]})
    calls = message.get("tool_calls")
    for number, call in enumerate(calls if isinstance(calls, list) else ()):
        if not isinstance(call, dict):
            continue
        function = as_object(call.get("function"))
        arguments = function.get("arguments")
        call_id = _str(call.get("id")) or f"call_{rid[5:]}_{number}"
        output.append(tools.call_item(str(function.get("name") or ""), call_id,
                                      arguments if isinstance(arguments, str) else "{}",
                                      f"fc_{call_id}"))
    out["output"] = output
    out["usage"] = responses_usage(body.get("usage"))
    return out
