"""Request bodies for a Responses upstream: OpenAI Chat Completions -> Responses, and Anthropic
Messages -> Responses by way of the Chat form (so Anthropic -> OpenAI's rules and drops apply
first, then this module's; both tables are in `drops`).

  Chat                               Responses
  leading system/developer messages  `instructions` (at the ChatGPT backend always present,
                                     "" without a system prompt: it refuses a request without
                                     it, 400 {"detail": "Instructions are required"})
  later system/developer messages    developer messages, in place
  user text / image_url / file       message with input_text / input_image / input_file
  assistant content                  message with output_text
  assistant tool_calls               function_call items (call_id kept)
  tool messages                      function_call_output items (call_id kept)
  max_tokens/max_completion_tokens   max_output_tokens (left out at the ChatGPT backend)
  tools, tool_choice                 flat function tools, {"type":"function","name"}
  parallel_tool_calls                parallel_tool_calls
  response_format                    text.format; verbosity -> text.verbosity
  reasoning_effort                   reasoning.effort
  stream                             stream (always true at the ChatGPT backend: the answer
                                     is collected for a client that did not stream)
Every request goes with `store: false`: claudex keeps no conversation state, so each request
carries the whole conversation, which is what the ChatGPT backend requires anyway.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from claudex.providers.translate.drops import CHAT_TO_RESPONSES, DropName, Drops
from claudex.providers.translate.requests import Translated, anthropic_to_openai_request
from claudex.providers.translate.tools import OPENAI_NAME_LIMIT, ToolNameMap
from claudex.providers.validation_messages import check_openai_contents

_HANDLED = frozenset({
    "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
    "stream", "stream_options", "tools", "tool_choice", "parallel_tool_calls",
    "response_format", "verbosity", "reasoning_effort", "store", "user", "safety_identifier",
    "metadata", "service_tier", "prompt_cache_key", "top_logprobs",
})
# Values that ask for nothing beyond the default: leaving them out changes nothing.
_NO_OPS: dict[str, Any] = {
    "n": 1, "logprobs": False, "presence_penalty": 0, "frequency_penalty": 0,
}
# Fields the ChatGPT backend refuses (the platform API takes them as they are), and the row
# of the drops table that names each.
_CHATGPT_REFUSED: dict[str, DropName] = {
    "user": "user", "safety_identifier": "user", "metadata": "metadata",
    "service_tier": "service_tier", "top_logprobs": "logprobs",
}


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _text_part(kind: str, text: str) -> dict[str, Any]:
    return {"type": kind, "text": text}


def _message(role: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": parts}


def _plain_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n\n".join(str(p.get("text", "")) for p in content
                       if isinstance(p, dict) and p.get("type") in ("text", "input_text")
                       and p.get("text"))


def _user_parts(content: Any, drops: Drops) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [_text_part("input_text", content)] if content else []
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else ():
        if not isinstance(part, dict):
            drops.add("malformed")
            continue
        kind = part.get("type")
        if kind == "text":
            if part.get("text"):
                parts.append(_text_part("input_text", str(part["text"])))
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str) or not url:
                drops.add("image_url")
                continue
            detail = image.get("detail") if isinstance(image, dict) else None
            parts.append({"type": "input_image", "image_url": url,
                          "detail": detail if isinstance(detail, str) else "auto"})
        elif kind == "file":
            file = part.get("file")
            file = file if isinstance(file, dict) else {}
            converted: dict[str, Any] = {"type": "input_file"}
            for key in ("file_data", "file_id", "filename"):
                if isinstance(file.get(key), str):
                    converted[key] = file[key]
            if "file_data" in converted or "file_id" in converted:
                parts.append(converted)
            else:
                drops.add("file")
        elif kind == "input_audio":
            drops.add("input_audio")
        else:
            drops.unknown(f"content.{kind}")
    return parts


def _assistant_items(message: dict[str, Any], names: ToolNameMap,
                     drops: Drops) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    text = _plain_text(message.get("content"))
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        text = f"{text}\n\n{refusal}" if text else refusal
    if text:
        items.append(_message("assistant", [_text_part("output_text", text)]))
    if message.get("reasoning_content"):
        drops.add("reasoning_content")
    if message.get("function_call") is not None:
        drops.add("function_call")
    if message.get("audio") is not None:
        drops.add("audio")
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        if not isinstance(call, dict):
            drops.add("malformed")
            continue
        function = call.get("function")
        if call.get("type", "function") != "function" or not isinstance(function, dict):
            drops.add("non_function_tool_calls")
            continue
        arguments = function.get("arguments")
        items.append({
            "type": "function_call",
            "call_id": str(call.get("id") or ""),
            "name": names.shorten(str(function.get("name", ""))),
            "arguments": arguments if isinstance(arguments, str) else "{}",
        })
    return items


def chat_messages_to_input(messages: list[Any], names: ToolNameMap, drops: Drops, *,
                           instructions_allowed: bool) -> tuple[str | None, list[Any]]:
    """(instructions, input items). The leading system and developer messages become
    `instructions` when allowed, else developer messages like every later one."""
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    leading = True
    for message in messages:
        if not isinstance(message, dict):
            drops.add("malformed")
            continue
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            text = _plain_text(content)
            if leading and instructions_allowed:
                if text:
                    instructions.append(text)
            elif text:
                items.append(_message("developer", [_text_part("input_text", text)]))
            continue
        leading = False
        if role == "user":
            parts = _user_parts(content, drops)
            if parts:
                items.append(_message("user", parts))
        elif role == "assistant":
            items += _assistant_items(message, names, drops)
        elif role == "tool":
            output = content if isinstance(content, str) else _plain_text(content)
            items.append({"type": "function_call_output",
                          "call_id": str(message.get("tool_call_id") or ""),
                          "output": output})
        elif role == "function":
            drops.add("function_messages")
        else:
            drops.add("unknown_role")
    return ("\n\n".join(instructions) or None), items


def _tools(tools: list[Any], names: ToolNameMap, drops: Drops) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in tools:
        if not isinstance(tool, dict):
            drops.add("malformed")
            continue
        function = tool.get("function")
        if tool.get("type", "function") != "function" or not isinstance(function, dict):
            drops.add("non_function_tools")
            continue
        converted: dict[str, Any] = {"type": "function",
                                     "name": names.shorten(str(function.get("name", "")))}
        if function.get("description"):
            converted["description"] = function["description"]
        converted["parameters"] = function.get("parameters") or {"type": "object",
                                                                 "properties": {}}
        # Responses defaults `strict` to true, which refuses most hand-written schemas.
        converted["strict"] = bool(function.get("strict", False))
        out.append(converted)
    return out


def _tool_choice(choice: Any, names: ToolNameMap, drops: Drops) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function":
        function = choice.get("function")
        if isinstance(function, dict) and function.get("name"):
            return {"type": "function", "name": names.shorten(str(function["name"]))}
    drops.add("tool_choice")
    return None


def _text_format(response_format: Any, drops: Drops) -> dict[str, Any] | None:
    if not isinstance(response_format, dict):
        drops.unknown("response_format")
        return None
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    schema = response_format.get("json_schema")
    if kind == "json_schema" and isinstance(schema, dict):
        return {"type": "json_schema", **schema}
    drops.unknown("response_format")
    return None


def chat_to_responses_request(body: dict[str, Any], *, model: str | None,
                              max_tokens_cap: int | None, chatgpt: bool = False,
                              names: ToolNameMap | None = None,
                              drops: Drops | None = None,
                              checked: bool = False) -> Translated:
    """`chatgpt`: the ChatGPT (Codex subscription) backend's rules — streaming always, no
    output cap, no sampling settings, `instructions` always (the system prompt, or "").
    Raises InvalidRequest when the body is malformed (`claudex.providers.validation`)."""
    if not checked:
        check_openai_contents(body)
    names = names if names is not None else ToolNameMap(OPENAI_NAME_LIMIT)
    drops = drops if drops is not None else Drops()
    out: dict[str, Any] = {"model": model if model is not None else body.get("model")}
    instructions, items = chat_messages_to_input(list(body.get("messages") or ()), names,
                                                 drops, instructions_allowed=True)
    if instructions is not None or chatgpt:
        # The ChatGPT backend refuses a request without it (openai/codex always sends it:
        # codex-rs/codex-api/src/requests/responses.rs; an empty one is accepted,
        # icebear0828/codex-proxy PR 112).
        out["instructions"] = instructions or ""
    out["input"] = items

    requested = body.get("max_completion_tokens")
    if not _is_int(requested):
        requested = body.get("max_tokens")
    if chatgpt:
        if _is_int(requested):
            drops.add("max_tokens")
    elif _is_int(requested):
        out["max_output_tokens"] = requested if max_tokens_cap is None else \
            min(requested, max_tokens_cap)
    elif max_tokens_cap is not None:
        out["max_output_tokens"] = max_tokens_cap
    for key in ("temperature", "top_p"):
        if _is_number(body.get(key)):
            if chatgpt:
                drops.add("temperature" if key == "temperature" else "top_p")
            else:
                out[key] = body[key]
    if body.get("stop"):
        drops.add("stop")
    out["stream"] = True if chatgpt else bool(body.get("stream"))
    if body.get("store") is True:
        drops.add("store")
    out["store"] = False

    tools = _tools(list(body.get("tools") or ()), names, drops)
    if tools:
        out["tools"] = tools
        choice = body.get("tool_choice")
        if choice is not None:
            converted = _tool_choice(choice, names, drops)
            if converted is not None:
                out["tool_choice"] = converted
        if isinstance(body.get("parallel_tool_calls"), bool):
            out["parallel_tool_calls"] = body["parallel_tool_calls"]
    elif body.get("tool_choice") not in (None, "none", "auto"):
        drops.add("tool_choice")

    text: dict[str, Any] = {}
    if body.get("response_format") is not None:
        fmt = _text_format(body["response_format"], drops)
        if fmt is not None:
            text["format"] = fmt
    if isinstance(body.get("verbosity"), str):
        text["verbosity"] = body["verbosity"]
    if text:
        out["text"] = text
    if isinstance(body.get("reasoning_effort"), str):
        out["reasoning"] = {"effort": body["reasoning_effort"]}
    if isinstance(body.get("prompt_cache_key"), str):
        out["prompt_cache_key"] = body["prompt_cache_key"]
    for key in _CHATGPT_REFUSED:
        value = body.get(key)
        if value is None:
            continue
        if chatgpt:
            drops.add(_CHATGPT_REFUSED[key])
        else:
            out[key] = value

    for key, value in body.items():
        if key in _HANDLED or value is None:
            continue
        if key in _NO_OPS and value == _NO_OPS[key]:
            continue
        drops.field(key, CHAT_TO_RESPONSES)
    return Translated(out, drops.as_tuple(), names)


def anthropic_to_responses_request(body: dict[str, Any], *, model: str | None,
                                   max_tokens_cap: int | None,
                                   chatgpt: bool = False) -> Translated:
    """Anthropic Messages -> Chat (its rules and drops) -> Responses."""
    chat = anthropic_to_openai_request(body, model=model, max_tokens_cap=max_tokens_cap)
    drops = Drops()
    for name in chat.dropped:
        drops.unknown(name)  # already table names (or client keys); kept as they are
    # The Chat form was built by claudex itself; `stream_options` it adds is implied.
    return chat_to_responses_request(chat.body, model=model, max_tokens_cap=max_tokens_cap,
                                     chatgpt=chatgpt, names=chat.tool_names, drops=drops,
                                     checked=True)
