"""Responses API requests (`POST /v1/responses`, Codex CLI, `client.responses`) for a Chat
Completions or an Anthropic Messages upstream.

A Responses request becomes a Chat Completions request first; an Anthropic upstream then gets
that one through the Chat -> Anthropic translator, so both targets share one reading of the
Responses API and the Anthropic side keeps every rule the real-clients work settled (system
turns in place, thinking rules, tool-name limits). What each step leaves out is named: this
step's names are the RESPONSES_TO_OTHERS table of `drops`, the second step's its own table.

Parameters:
  Responses                          Chat Completions
  instructions                       leading system message
  input (a string)                   one user message
  developer / system messages        system messages, in place
  user / assistant messages          the same, input_text/output_text -> text,
                                     input_image -> image_url, input_file (file_data) -> file
  function_call (+ namespace)        assistant tool_calls (`responses_client_tools` flattens
  custom_tool_call, local_shell_call   namespaces and maps custom/local_shell tools)
  function_call_output (...output)   tool messages (text; other parts dropped)
  reasoning items                    dropped: encrypted for the provider that produced them
  max_output_tokens                  max_tokens
  temperature, top_p, user,          the same
  safety_identifier, tool_choice,
  parallel_tool_calls, stream        (+ stream_options.include_usage)
  text.format                        response_format (json_schema / json_object)
`previous_response_id` and `conversation` point at history stored at OpenAI, which claudex
does not keep: such a request is refused with a 400 rather than answered without its context.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from claudex.providers.translate.drops import RESPONSES_TO_OTHERS, Drops
from claudex.providers.translate.requests import openai_to_anthropic_request
from claudex.providers.translate.responses import anthropic_to_openai_response
from claudex.providers.translate.responses_client_answers import chat_to_responses_answer
from claudex.providers.translate.responses_client_stream import (
    AnthropicToResponsesStream,
    ChatToResponsesStream,
)
from claudex.providers.translate.responses_client_tools import (
    CUSTOM_INPUT,
    ResponsesTools,
    ToolOrigin,
    local_shell_arguments,
    responses_tool_choice_to_openai,
    responses_tools_to_openai,
)
from claudex.providers.translate.tools import ToolNameMap
from claudex.providers.validation_problems import fail
from claudex.providers.validation_responses import check_responses_contents

Target = Literal["openai", "anthropic"]
ResponsesStream = ChatToResponsesStream | AnthropicToResponsesStream


@dataclass(frozen=True)
class ResponsesRequest:
    """The upstream body, what was left out, and what turns the answer back."""

    body: dict[str, Any]
    dropped: tuple[str, ...]
    tools: ResponsesTools
    # The Chat -> Anthropic step's own tool names (Anthropic targets only).
    upstream_names: ToolNameMap | None
    request: dict[str, Any]  # the client's body: the answer echoes its settings

    def answer(self, body: dict[str, Any], *, model: str | None) -> dict[str, Any]:
        """The upstream's JSON answer as a Responses `response` object."""
        if self.upstream_names is not None:
            body = anthropic_to_openai_response(body, tool_names=self.upstream_names,
                                                fallback_model=model)
        return chat_to_responses_answer(body, request=self.request, tools=self.tools,
                                        fallback_model=model)

    def stream(self, *, model: str | None) -> ResponsesStream:
        """The state machine turning the upstream's stream into Responses events."""
        if self.upstream_names is not None:
            return AnthropicToResponsesStream(tools=self.tools,
                                              upstream_names=self.upstream_names,
                                              request=self.request, model=model)
        return ChatToResponsesStream(tools=self.tools, request=self.request, model=model)


# Anthropic requires max_tokens; a Responses client that sets no `max_output_tokens` (Codex CLI
# never does) expects "as much as the model gives", and an agent's turn cut at the Chat
# translator's 4,096 ends as `incomplete`, which Codex CLI treats as a failed turn. A model
# with a lower limit says so in a 400 and claudex retries once at it, remembering it.
ANTHROPIC_DEFAULT_OUTPUT = 32_000

# Fields that point at state stored at OpenAI: nothing can answer them without it.
STATEFUL_FIELDS = ("previous_response_id", "conversation")
_HANDLED = frozenset({
    "model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "user",
    "safety_identifier", "tools", "tool_choice", "parallel_tool_calls", "stream", "text",
    "stream_options",
})
# Values that ask for nothing beyond what claudex does anyway.
_NO_OPS: dict[str, Any] = {"store": False, "background": False, "truncation": "disabled",
                           "include": []}


def refuse_stateful(body: dict[str, Any]) -> None:
    for key in STATEFUL_FIELDS:
        if body.get(key) is not None:
            raise fail((key,), "stateful", got=body[key])


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _parts_text(content: Any, drops: Drops) -> str:
    """A system or developer message's text (non-text parts are named)."""
    if isinstance(content, str):
        return content
    texts = []
    for part in content if isinstance(content, list) else ():
        if isinstance(part, dict) and part.get("type") in ("input_text", "output_text", "text"):
            texts.append(_text(part.get("text")))
        else:
            drops.add("system.non_text")
    return "\n\n".join(t for t in texts if t)


def _user_parts(content: Any, drops: Drops) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    out: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else ():
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text"):
            out.append({"type": "text", "text": _text(part.get("text"))})
        elif kind == "input_image":
            url = part.get("image_url")
            if isinstance(url, str) and url:
                image: dict[str, Any] = {"url": url}
                if part.get("detail") not in (None, "auto"):
                    image["detail"] = part["detail"]
                out.append({"type": "image_url", "image_url": image})
            else:
                drops.add("image_source")  # a file id: it lives in OpenAI's file store
        elif kind == "input_file":
            data = part.get("file_data")
            if isinstance(data, str) and data:
                file: dict[str, Any] = {"file_data": data}
                if isinstance(part.get("filename"), str):
                    file["filename"] = part["filename"]
                out.append({"type": "file", "file": file})
            else:
                drops.add("file")
        elif isinstance(kind, str):
            drops.unknown(f"content.{kind}")
        else:
            drops.add("malformed")
    return out


def _assistant_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for part in content if isinstance(content, list) else ():
        if isinstance(part, dict):
            texts.append(_text(part.get("text") if part.get("type") != "refusal"
                               else part.get("refusal")))
    return "".join(texts)


def _tool_output(output: Any, drops: Drops) -> str:
    if isinstance(output, str):
        return output
    texts = []
    for part in output if isinstance(output, list) else ():
        if isinstance(part, dict) and part.get("type") in ("input_text", "output_text"):
            texts.append(_text(part.get("text")))
        else:
            drops.add("tool_output.non_text")
    return "\n".join(texts)


class _Conversation:
    """Input items -> Chat messages; consecutive calls join one assistant message."""

    def __init__(self, tools: ResponsesTools, drops: Drops) -> None:
        self.messages: list[dict[str, Any]] = []
        self._tools = tools
        self._drops = drops

    def item(self, item: dict[str, Any]) -> None:
        kind = item.get("type", "message")
        if kind == "message":
            self._message(item)
        elif kind == "function_call":
            namespace = item.get("namespace")
            namespace = namespace if isinstance(namespace, str) else None
            name = _text(item.get("name"))
            origin = ToolOrigin(self._tools.kind_of_name(name, namespace), name, namespace)
            self._call(item, self._tools.flat(origin), _text(item.get("arguments")) or "{}")
        elif kind == "custom_tool_call":
            name = _text(item.get("name"))
            arguments = json.dumps({CUSTOM_INPUT: _text(item.get("input"))},
                                   ensure_ascii=False)
            self._call(item, self._tools.flat(ToolOrigin("custom", name)), arguments)
        elif kind == "local_shell_call":
            self._call(item, self._tools.flat(ToolOrigin("local_shell", "local_shell")),
                       local_shell_arguments(item.get("action")))
        elif kind in ("function_call_output", "custom_tool_call_output",
                      "local_shell_call_output"):
            call_id = item.get("call_id") or item.get("id")
            self.messages.append({"role": "tool", "tool_call_id": _text(call_id),
                                  "content": _tool_output(item.get("output"), self._drops)})
        elif kind == "reasoning":
            self._drops.add("reasoning_items")
        elif kind == "item_reference":
            self._drops.add("item_reference")
        elif isinstance(kind, str) and kind.endswith(("_call", "_call_output")):
            self._drops.add("hosted_tool_calls")  # web_search_call, file_search_call, ...
        elif isinstance(kind, str):
            self._drops.unknown(f"input.{kind}")
        else:
            self._drops.add("malformed")

    def _message(self, item: dict[str, Any]) -> None:
        role, content = item.get("role"), item.get("content")
        if role in ("system", "developer"):
            self.messages.append({"role": "system",
                                  "content": _parts_text(content, self._drops)})
        elif role == "assistant":
            self.messages.append({"role": "assistant", "content": _assistant_text(content)})
        elif role == "user":
            self.messages.append({"role": "user",
                                  "content": _user_parts(content, self._drops)})
        else:
            self._drops.add("unknown_role")

    def _call(self, item: dict[str, Any], name: str, arguments: str) -> None:
        call = {"id": _text(item.get("call_id") or item.get("id")), "type": "function",
                "function": {"name": name, "arguments": arguments}}
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == "assistant":
            last.setdefault("tool_calls", []).append(call)
            if not last.get("content"):
                last["content"] = None
        else:
            self.messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _text_format(text: Any, drops: Drops) -> dict[str, Any] | None:
    if not isinstance(text, dict):
        return None
    if text.get("verbosity") not in (None, "medium"):
        drops.add("verbosity")
    fmt = text.get("format")
    if not isinstance(fmt, dict) or fmt.get("type") in (None, "text"):
        return None
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    if fmt.get("type") == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description")
                  if fmt.get(k) is not None}
        return {"type": "json_schema", "json_schema": schema}
    drops.add("text.format")
    return None


def responses_to_openai_body(body: dict[str, Any], *, model: str | None,
                             max_tokens_cap: int | None) -> tuple[dict[str, Any], Drops,
                                                                  ResponsesTools]:
    check_responses_contents(body)
    refuse_stateful(body)
    drops = Drops()
    tools = ResponsesTools()
    # Tools first: the history's calls take the kinds the tool list gives their names.
    converted_tools = responses_tools_to_openai(list(body.get("tools") or ()), tools, drops)
    conversation = _Conversation(tools, drops)
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        conversation.messages.append({"role": "system", "content": instructions})
    elif isinstance(instructions, list):
        for item in instructions:
            if isinstance(item, dict):
                conversation.item(item)
    items = body.get("input")
    if isinstance(items, str):
        conversation.messages.append({"role": "user", "content": items})
    else:
        for item in items if isinstance(items, list) else ():
            if isinstance(item, dict):
                conversation.item(item)
            else:
                drops.add("malformed")
    out: dict[str, Any] = {"model": model if model is not None else body.get("model"),
                           "messages": conversation.messages}
    requested = body.get("max_output_tokens")
    if isinstance(requested, int) and not isinstance(requested, bool):
        out["max_tokens"] = min(requested, max_tokens_cap) if max_tokens_cap else requested
    elif max_tokens_cap is not None:
        out["max_tokens"] = max_tokens_cap
    for key in ("temperature", "top_p", "user", "safety_identifier", "parallel_tool_calls"):
        if body.get(key) is not None:
            out[key] = body[key]
    if converted_tools:
        out["tools"] = converted_tools
        choice = responses_tool_choice_to_openai(body.get("tool_choice"), tools, drops)
        if choice is not None:
            out["tool_choice"] = choice
    else:
        out.pop("parallel_tool_calls", None)  # refused without tools by some servers
        if body.get("tool_choice") not in (None, "auto", "none"):
            drops.add("tool_choice")
    if body.get("stream") is True:
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}  # usage belongs in response.completed
    response_format = _text_format(body.get("text"), drops)
    if response_format is not None:
        out["response_format"] = response_format
    for key, value in body.items():
        if key in _HANDLED or value is None:
            continue
        if key in _NO_OPS and value == _NO_OPS[key]:
            continue
        drops.field(key, RESPONSES_TO_OTHERS)
    return out, drops, tools


def responses_request(body: dict[str, Any], *, target: Target, model: str | None,
                      max_tokens_cap: int | None) -> ResponsesRequest:
    """The body for a `target` upstream. Raises InvalidRequest for a malformed or stateful
    request (nothing is sent anywhere then)."""
    chat, drops, tools = responses_to_openai_body(body, model=model,
                                                  max_tokens_cap=max_tokens_cap)
    if target == "openai":
        return ResponsesRequest(chat, drops.as_tuple(), tools, None, body)
    if "max_tokens" not in chat:
        chat["max_tokens"] = ANTHROPIC_DEFAULT_OUTPUT
    anthropic = openai_to_anthropic_request(chat, model=chat["model"],
                                            max_tokens_cap=max_tokens_cap)
    dropped = drops.as_tuple() + tuple(n for n in anthropic.dropped if n not in drops.as_tuple())
    return ResponsesRequest(anthropic.body, dropped, tools, anthropic.tool_names, body)
