"""Tool definitions, tool choice and tool names across the two protocols.

Tool names: OpenAI accepts `^[a-zA-Z0-9_-]+$` up to 64 characters, Anthropic the same characters
up to 128 (Claude Code's MCP tools often pass 64). A name the target cannot take is shortened
deterministically — a readable prefix plus a short hash of the original — and recorded in a
`ToolNameMap`, so the names in the upstream's answer can be turned back into the client's.
The same original always yields the same short name, so tool calls in the conversation history
and the tool list agree even across requests.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from typing import Any

from claudex.providers.translate.drops import Drops

OPENAI_NAME_LIMIT = 64
ANTHROPIC_NAME_LIMIT = 128
_VALID_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")
_INVALID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
_HASH_LEN = 8


class ToolNameMap:
    """Shortens tool names the target cannot take, and restores them in the answer."""

    def __init__(self, max_length: int = OPENAI_NAME_LIMIT) -> None:
        if max_length < _HASH_LEN + 2:
            raise ValueError(f"max_length {max_length} leaves no room for the hash suffix")
        self.max_length = max_length
        self._original: dict[str, str] = {}  # short -> original

    def shorten(self, name: str) -> str:
        if len(name) <= self.max_length and _VALID_NAME.match(name):
            return name
        digest = hashlib.sha256(name.encode("utf-8")).hexdigest()
        hash_len = _HASH_LEN
        while True:
            stem = _INVALID_CHARS.sub("_", name)[: self.max_length - hash_len - 1]
            short = f"{stem}_{digest[:hash_len]}"
            known = self._original.get(short)
            if known is None or known == name:
                self._original[short] = name
                return short
            hash_len += 4  # two originals share a prefix and a hash prefix: lengthen the hash

    def restore(self, name: str) -> str:
        return self._original.get(name, name)

    def __len__(self) -> int:
        return len(self._original)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        """(short, original) pairs, for logging what was renamed."""
        return iter(self._original.items())

    def __repr__(self) -> str:
        return f"ToolNameMap(max_length={self.max_length}, renamed={len(self._original)})"


_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


# -- tool definitions --------------------------------------------------------------------------

def anthropic_tools_to_openai(tools: list[Any], names: ToolNameMap,
                              drops: Drops) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in tools:
        if not isinstance(tool, dict):
            drops.add("malformed")
            continue
        kind = tool.get("type")
        if kind not in (None, "custom"):
            # Server tools (web_search_*, bash_*, text_editor_*, computer_*, code_execution_*)
            # run inside Anthropic's API; an OpenAI target has nothing to run them with.
            drops.add("server_tools")
            continue
        function: dict[str, Any] = {"name": names.shorten(str(tool.get("name", "")))}
        if tool.get("description"):
            function["description"] = tool["description"]
        function["parameters"] = tool.get("input_schema") or dict(_EMPTY_SCHEMA)
        if tool.get("strict") is not None:
            function["strict"] = tool["strict"]
        for key, value in tool.items():
            if key in ("type", "name", "description", "input_schema", "strict") or value is None:
                continue
            if key == "cache_control":
                drops.add("cache_control")
            elif key == "defer_loading":
                # Claude Code marks tools it loads on demand (tool search); OpenAI has no such
                # thing, so the tool is offered like any other.
                if value is not False:
                    drops.add("defer_loading")
            else:
                drops.unknown(f"tools.{key}")
        out.append({"type": "function", "function": function})
    return out


def openai_tools_to_anthropic(tools: list[Any], names: ToolNameMap,
                              drops: Drops) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in tools:
        if not isinstance(tool, dict):
            drops.add("malformed")
            continue
        if tool.get("type", "function") != "function":
            drops.add("non_function_tools")
            continue
        function = tool.get("function") or {}
        converted: dict[str, Any] = {"name": names.shorten(str(function.get("name", "")))}
        if function.get("description"):
            converted["description"] = function["description"]
        converted["input_schema"] = function.get("parameters") or dict(_EMPTY_SCHEMA)
        if function.get("strict") is not None:
            converted["strict"] = function["strict"]
        out.append(converted)
    return out


# -- tool choice -------------------------------------------------------------------------------

def anthropic_tool_choice_to_openai(
    choice: Any, names: ToolNameMap, drops: Drops
) -> tuple[Any, bool | None]:
    """Returns (OpenAI tool_choice or None, parallel_tool_calls or None)."""
    if isinstance(choice, str):  # tolerated shorthand: "auto", "any", "none"
        choice = {"type": choice}
    if not isinstance(choice, dict):
        drops.add("tool_choice")
        return None, None
    kind = choice.get("type")
    parallel = False if choice.get("disable_parallel_tool_use") else None
    if kind == "auto":
        return "auto", parallel
    if kind == "any":
        return "required", parallel
    if kind == "none":
        return "none", None
    if kind == "tool" and choice.get("name"):
        name = names.shorten(str(choice["name"]))
        return {"type": "function", "function": {"name": name}}, parallel
    drops.add("tool_choice")
    return None, None


def openai_tool_choice_to_anthropic(
    choice: Any, parallel_tool_calls: Any, names: ToolNameMap, drops: Drops
) -> dict[str, Any] | None:
    converted: dict[str, Any] | None
    if choice is None:
        converted = None
    elif choice == "auto":
        converted = {"type": "auto"}
    elif choice == "required":
        converted = {"type": "any"}
    elif choice == "none":
        converted = {"type": "none"}
    elif isinstance(choice, dict) and choice.get("type") == "function" and \
            isinstance(choice.get("function"), dict) and choice["function"].get("name"):
        converted = {"type": "tool", "name": names.shorten(str(choice["function"]["name"]))}
    else:
        # e.g. {"type": "allowed_tools", ...}: Anthropic has no per-request subset of tools.
        drops.add("tool_choice")
        converted = None
    if parallel_tool_calls is False:
        if converted is None:
            converted = {"type": "auto"}
        if converted["type"] != "none":  # "none" takes no parallelism flag
            converted["disable_parallel_tool_use"] = True
    return converted
