"""The Responses-API side of a fake provider (`FakeProvider(name, "responses")`).

A request to `POST /v1/responses` is read into the Chat Completions form the rest of the fakes
plan their answers from (`as_chat_request`: instructions, messages, `function_call` and
`function_call_output` items, flat function tools), so the knobs and the scripted tool loops of
`claudex.demo.fake_replies` work here too; the answer is written as a response object or its
event stream (`claudex.demo.replies_responses`).

`ChatGPTRules` switches on what the ChatGPT (Codex subscription) backend enforces, each check
answering as that backend does (`{"detail": "..."}`): a Bearer token and a `chatgpt-account-id`
header (401 without), a top-level `instructions` string (400 "Instructions are required"
without: the backend's best-known refusal), an `input` list, `store: false` and
`stream: true` (400 otherwise), and no
`max_output_tokens`, `temperature` or `top_p` (400 "Unsupported parameter").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ChatGPTRules", "as_chat_request", "chatgpt_refusal", "foreign_reasoning",
           "reasoning_for"]

ENCRYPTED_REASONING = "reasoning.encrypted_content"


def reasoning_for(provider: str, body: Any, reply_id: str) -> dict[str, Any] | None:
    """The reasoning item an answer starts with when the request asks for encrypted
    reasoning; its content is this fake's own ("enc:NAME:ID"), as a real provider's is bound
    to the provider that made it."""
    include = body.get("include") if isinstance(body, dict) else None
    if not isinstance(include, list) or ENCRYPTED_REASONING not in include:
        return None
    return {"type": "reasoning", "id": "rs_" + reply_id, "summary": [],
            "encrypted_content": f"enc:{provider}:{reply_id}"}


def foreign_reasoning(provider: str, body: Any) -> str | None:
    """Why reasoning items in the input cannot be used here (None: they can, or there are
    none): another provider's encrypted content, or an id without the content, which names
    nothing when the provider stores nothing."""
    items = body.get("input") if isinstance(body, dict) else None
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict) or item.get("type") != "reasoning":
            continue
        # An id alone names a stored item; with its encrypted content inline the item is
        # whole, which is how Codex CLI 0.171.0 sends them back (id included) with store false.
        if "id" in item and body.get("store") is False and not item.get("encrypted_content"):
            return (f"Item with id '{item['id']}' not found. Items are not persisted when "
                    "`store` is set to false.")
        content = item.get("encrypted_content")
        if not isinstance(content, str) or not content.startswith(f"enc:{provider}:"):
            return "The encrypted content could not be verified: reasoning from elsewhere."
    return None


@dataclass
class ChatGPTRules:
    """The ChatGPT backend's constraints, each switchable."""

    account_id: str | None = "acct-fake"
    """The `chatgpt-account-id` a request must carry (None: any, but one is required)."""
    require_instructions: bool = True
    require_input_list: bool = True
    require_store_false: bool = True
    require_stream: bool = True
    refused_parameters: tuple[str, ...] = ("max_output_tokens", "temperature", "top_p")


def chatgpt_refusal(rules: ChatGPTRules, headers: dict[str, str],
                    body: Any) -> tuple[int, dict[str, Any]] | None:
    """(status, body) of the backend's refusal of this request, or None when it passes."""
    authorization = headers.get("authorization", "")
    if not authorization.lower().startswith("bearer "):
        return 401, {"detail": "Could not parse your authentication token. Please try signing "
                               "in again."}
    account = headers.get("chatgpt-account-id")
    if not account or (rules.account_id is not None and account != rules.account_id):
        return 401, {"detail": "Missing or unknown chatgpt-account-id."}
    if not isinstance(body, dict):
        return 400, {"detail": "The request body must be a JSON object."}
    # Refused before anything else in the body (pwnkit PR 330: the backend "rejects it
    # before looking at `input`"); an empty string passes (icebear0828/codex-proxy PR 112).
    if rules.require_instructions and not isinstance(body.get("instructions"), str):
        return 400, {"detail": "Instructions are required"}
    # cubezhao/ai-tools-mng issue 79: a string `input`, which the platform API takes.
    if rules.require_input_list and not isinstance(body.get("input"), list):
        return 400, {"detail": "Input must be a list"}
    if rules.require_store_false and body.get("store") is not False:
        return 400, {"detail": "Store must be set to false"}
    if rules.require_stream and body.get("stream") is not True:
        return 400, {"detail": "Stream must be set to true"}
    for key in rules.refused_parameters:
        if key in body:
            return 400, {"detail": f"Unsupported parameter: {key}"}
    return None


def _text(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else ():
        if not isinstance(part, dict):
            continue
        if part.get("type") in ("input_text", "output_text") and isinstance(part.get("text"),
                                                                            str):
            parts.append({"type": "text", "text": part["text"]})
        elif part.get("type") == "input_image":
            parts.append({"type": "image_url", "image_url": {"url": part.get("image_url")}})
    return parts


def as_chat_request(body: Any) -> Any:
    """The Chat Completions form of a Responses request, for planning the answer; a body that
    is no JSON object (or lacks `input`) is passed on as it is for the planner to refuse."""
    if not isinstance(body, dict) or not isinstance(body.get("input"), list | str):
        return body
    messages: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str):
        messages.append({"role": "system", "content": body["instructions"]})
    items = body["input"]
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for item in items:
        if not isinstance(item, dict):
            messages.append({"role": "user", "content": 5})  # refused by the planner
            continue
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            messages.append({"role": "system" if role == "developer" else role,
                             "content": _text(item.get("content"))})
        elif kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")}}
            if messages and messages[-1]["role"] == "assistant" and "tool_calls" in messages[-1]:
                messages[-1]["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"),
                             "content": output if isinstance(output, str) else ""})
        # reasoning and other item types carry nothing the fake answers from
    chat: dict[str, Any] = {"model": body.get("model"), "messages": messages,
                            "stream": body.get("stream")}
    tools = body.get("tools")
    if isinstance(tools, list):
        chat["tools"] = [{"type": "function", "function": {
            "name": t.get("name"), "parameters": t.get("parameters")}}
            for t in tools if isinstance(t, dict) and t.get("type") == "function"]
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function":
        chat["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    elif isinstance(choice, str):
        chat["tool_choice"] = choice
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    return chat
