"""Conversation turns: Anthropic `messages` (+ `system`) <-> OpenAI `messages`.

Shapes that differ:
- Anthropic `system` (top level) <-> the leading OpenAI `system`/`developer` messages.
- Anthropic `{"role": "system"}` turns inside `messages` <-> OpenAI system/developer messages
  after the first other message: kept in place where the target takes them
  (`claudex.providers.translate.system_turns` says where that is, and what moves otherwise).
- An Anthropic user turn holding `tool_result` blocks becomes one OpenAI `role: "tool"` message
  per result (ids kept), followed by a user message with the turn's other content. The other way,
  consecutive tool messages and the user message right after them form one Anthropic user turn.
- Assistant `tool_use` blocks <-> `tool_calls` (arguments as a JSON string); assistant text blocks
  join into one string (OpenAI has no interleaving of text and calls).
- `is_error` on a tool result has no OpenAI field: the text is prefixed with TOOL_ERROR_PREFIX,
  and that prefix is recognised on the way back.
- Images inside a tool result cannot ride in an OpenAI tool message (text only): they follow in
  the next user message, introduced by a line naming the tool call.
- `thinking`/`redacted_thinking` blocks are dropped: their signatures only mean something to
  Anthropic, and an OpenAI model cannot take them.
What is dropped is named from the tables in `claudex.providers.translate.drops`.
"""

from __future__ import annotations

import json
from typing import Any

from claudex.providers.translate.content import (
    image_block_to_openai,
    note_block_extras,
    note_unconverted_block,
    parts_to_anthropic,
    text_of_parts,
    user_block_to_openai,
)
from claudex.providers.translate.drops import Drops
from claudex.providers.translate.responses import arguments_object
from claudex.providers.translate.system_turns import TEXT_JOINER, anthropic_system_text
from claudex.providers.translate.tools import ToolNameMap

TOOL_ERROR_PREFIX = "[tool error] "


# -- Anthropic -> OpenAI ---------------------------------------------------------------------

def anthropic_system_to_openai(system: Any, drops: Drops) -> list[dict[str, Any]]:
    """The top-level system prompt, or a system turn, as one OpenAI system message (or none,
    when it holds no text): several are legal in OpenAI's API, but not every compatible server
    accepts a run of them."""
    text = anthropic_system_text(system, drops)
    return [{"role": "system", "content": text}] if text else []


def anthropic_messages_to_openai(messages: list[Any], names: ToolNameMap,
                                 drops: Drops) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, dict):
            drops.add("malformed")
            continue
        role, content = message.get("role"), message.get("content")
        if role == "assistant":
            out.append(_assistant_to_openai(content, names, drops))
        elif role == "user":
            out.extend(_user_to_openai(content, drops))
        elif role == "system":
            out.extend(anthropic_system_to_openai(content, drops))
        else:
            drops.add("unknown_role")
    return out


def _user_to_openai(content: Any, drops: Drops) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    if not isinstance(content, list):
        drops.add("malformed")
        return []
    tool_messages: list[dict[str, Any]] = []
    tool_images: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            message, images = _tool_result_to_openai(block, drops)
            tool_messages.append(message)
            tool_images.extend(images)
            continue
        part = user_block_to_openai(block, drops)
        if part is not None:
            parts.append(part)
    out = tool_messages
    parts = tool_images + parts
    if parts:
        single_text = len(parts) == 1 and parts[0]["type"] == "text"
        out.append({"role": "user", "content": parts[0]["text"] if single_text else parts})
    return out


def _tool_result_to_openai(
    block: dict[str, Any], drops: Drops
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    note_block_extras(block, drops)
    call_id = str(block.get("tool_use_id", ""))
    content = block.get("content")
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for item in content:
            if not isinstance(item, dict):
                continue
            note_block_extras(item, drops)
            if item.get("type") == "text":
                texts.append(str(item.get("text", "")))
            elif item.get("type") == "image":
                image = image_block_to_openai(item, drops)
                if image is not None:
                    images.append(image)
            else:
                drops.add("tool_result.non_text")
    text = TEXT_JOINER.join(texts)
    if block.get("is_error"):
        text = TOOL_ERROR_PREFIX + text
    message = {"role": "tool", "tool_call_id": call_id, "content": text}
    if images:
        images.insert(0, {"type": "text", "text": f"Image output of tool call {call_id}:"})
    return message, images


def _assistant_to_openai(content: Any, names: ToolNameMap, drops: Drops) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        note_block_extras(block, drops)
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            calls.append({
                "id": str(block.get("id", "")),
                "type": "function",
                "function": {
                    "name": names.shorten(str(block.get("name", ""))),
                    "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False),
                },
            })
        else:
            note_unconverted_block(kind, drops)  # thinking, redacted_thinking, server tools
    message: dict[str, Any] = {
        "role": "assistant",
        # OpenAI wants null content beside tool calls; some servers reject an empty string there.
        "content": TEXT_JOINER.join(texts) if texts else (None if calls else ""),
    }
    if calls:
        message["tool_calls"] = calls
    return message


# -- OpenAI -> Anthropic ---------------------------------------------------------------------

def openai_messages_to_anthropic(
    messages: list[Any], names: ToolNameMap, drops: Drops
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Returns (leading system blocks, messages with the later system messages in place)."""
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    tool_turn: list[dict[str, Any]] | None = None  # the open user turn collecting tool results
    leading = True  # no message but system/developer ones yet
    for message in messages:
        if not isinstance(message, dict):
            drops.add("malformed")
            continue
        role, content = message.get("role"), message.get("content")
        if message.get("name"):
            drops.add("name")
        if role in ("system", "developer"):
            text = text_of_parts(content)
            if text and leading:
                system.append({"type": "text", "text": text})
            elif text:
                # In place for now; `place_anthropic_system_turns` settles where it may stay.
                # An open tool turn stays open: the results must still lead the next turn.
                out.append({"role": "system", "content": text})
            continue
        leading = False
        if role == "tool":
            if tool_turn is None:
                tool_turn = []
                out.append({"role": "user", "content": tool_turn})
            tool_turn.append(_tool_message_to_anthropic(message))
            continue
        if role == "user":
            blocks = parts_to_anthropic(content, drops)
            if tool_turn is not None:
                tool_turn.extend(blocks)  # tool results must lead the turn; the text follows
                tool_turn = None
            elif isinstance(content, str):
                out.append({"role": "user", "content": content})
            elif blocks:
                out.append({"role": "user", "content": blocks})
            else:
                drops.add("empty_turn")
            continue
        tool_turn = None
        if role == "assistant":
            assistant = _assistant_to_anthropic(message, names, drops)
            if assistant is not None:
                out.append(assistant)
        else:
            drops.add("function_messages" if role == "function" else "unknown_role")
    return system, out


def _tool_message_to_anthropic(message: dict[str, Any]) -> dict[str, Any]:
    text = text_of_parts(message.get("content"))
    block: dict[str, Any] = {"type": "tool_result",
                             "tool_use_id": str(message.get("tool_call_id", ""))}
    if text.startswith(TOOL_ERROR_PREFIX):
        text = text[len(TOOL_ERROR_PREFIX):]
        block["is_error"] = True
    if text:
        block["content"] = text
    return block


def _assistant_to_anthropic(message: dict[str, Any], names: ToolNameMap,
                            drops: Drops) -> dict[str, Any] | None:
    content = message.get("content")
    blocks = parts_to_anthropic(content, drops)
    if isinstance(message.get("refusal"), str) and message["refusal"]:
        blocks.append({"type": "text", "text": message["refusal"]})
    for call in message.get("tool_calls") or ():
        if not isinstance(call, dict) or call.get("type", "function") != "function":
            drops.add("non_function_tool_calls")
            continue
        function = call.get("function") or {}
        blocks.append({
            "type": "tool_use",
            "id": str(call.get("id", "")),
            "name": names.shorten(str(function.get("name", ""))),
            "input": _arguments_object(function.get("arguments"), drops),
        })
    if message.get("function_call"):
        drops.add("function_call")
    if message.get("audio"):
        drops.add("audio")
    if message.get("reasoning_content"):
        drops.add("reasoning_content")
    if not blocks:
        # Anthropic rejects an empty assistant turn; this one said nothing worth keeping.
        drops.add("empty_turn")
        return None
    if isinstance(content, str) and len(blocks) == 1 and blocks[0].get("text") == content:
        return {"role": "assistant", "content": content}
    return {"role": "assistant", "content": blocks}


def _arguments_object(arguments: Any, drops: Drops) -> dict[str, Any]:
    value = arguments_object(arguments)
    if value is None:
        drops.add("tool_call_arguments")
        return {}
    return value
