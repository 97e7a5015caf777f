"""A Responses API client's tools as the flat functions a Chat Completions or Anthropic upstream
takes, and back.

The Responses API has kinds of tool the other two lack: a `namespace` holding more functions
(Codex CLI's `multi_agent_v1`), free-form `custom` tools whose call carries one string of input
(older Codex CLI's `apply_patch`), and `local_shell` (older Codex CLI's shell). Each becomes one
function; `ResponsesTools` remembers what every flat name stood for, so a call in the answer
comes back as the item the client offered: a `function_call` with its `namespace`, a
`custom_tool_call` with its `input`, a `local_shell_call` with its `action`. The same mapping
applies to the calls in the conversation history, so history and tool list agree.
Hosted tools (`web_search`, `file_search`, `code_interpreter`, ...) run inside OpenAI: they are
left out and named.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from claudex.providers.translate.drops import Drops
from claudex.providers.translate.tools import OPENAI_NAME_LIMIT, ToolNameMap

ToolKind = Literal["function", "custom", "local_shell"]
LOCAL_SHELL = "local_shell"
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
# A custom tool's free-form text travels as this one string argument.
CUSTOM_INPUT = "input"
_CUSTOM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {CUSTOM_INPUT: {"type": "string", "description": "The tool's free-form input."}},
    "required": [CUSTOM_INPUT],
}
_LOCAL_SHELL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "array", "items": {"type": "string"},
                    "description": "The command and its arguments, e.g. [\"bash\", \"-lc\", "
                                   "\"ls\"]."},
        "working_directory": {"type": "string"},
        "timeout_ms": {"type": "integer"},
    },
    "required": ["command"],
}
_LOCAL_SHELL_DESCRIPTION = "Run a command in the user's local shell."


@dataclass(frozen=True)
class ToolOrigin:
    kind: ToolKind
    name: str
    namespace: str | None = None


def _joined(namespace: str, name: str) -> str:
    return f"{namespace}{'' if namespace.endswith('_') else '__'}{name}"


class ResponsesTools:
    """Flat upstream function names <-> the client's tools."""

    def __init__(self, limit: int = OPENAI_NAME_LIMIT) -> None:
        self.names = ToolNameMap(limit)
        self._origins: dict[str, ToolOrigin] = {}

    def flat(self, origin: ToolOrigin) -> str:
        joined = origin.name if origin.namespace is None else _joined(origin.namespace,
                                                                       origin.name)
        short = self.names.shorten(joined)
        # A tool list entry decides the kind; a history item only fills a gap.
        self._origins.setdefault(short, origin)
        return short

    def origin(self, flat_name: str) -> ToolOrigin:
        found = self._origins.get(flat_name)
        return found if found is not None else ToolOrigin("function", flat_name)

    def kind_of_name(self, name: str, namespace: str | None = None) -> ToolKind:
        """The kind a name in the history had in the tool list (a function if unlisted)."""
        joined = name if namespace is None else _joined(namespace, name)
        return self.origin(self.names.shorten(joined)).kind

    def call_item(self, flat_name: str, call_id: str, arguments: str,
                  item_id: str, status: str = "completed") -> dict[str, Any]:
        """An upstream function call as the output item the client's tool expects."""
        origin = self.origin(flat_name)
        if origin.kind == "custom":
            return {"type": "custom_tool_call", "id": item_id, "call_id": call_id,
                    "name": origin.name, "input": custom_input(arguments), "status": status}
        if origin.kind == "local_shell":
            return {"type": "local_shell_call", "id": item_id, "call_id": call_id,
                    "action": local_shell_action(arguments), "status": status}
        item: dict[str, Any] = {"type": "function_call", "id": item_id, "call_id": call_id,
                                "name": origin.name, "arguments": arguments, "status": status}
        if origin.namespace is not None:
            item["namespace"] = origin.namespace
        return item


def _arguments_object(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def custom_input(arguments: str) -> str:
    value = _arguments_object(arguments).get(CUSTOM_INPUT)
    return value if isinstance(value, str) else ""


def local_shell_action(arguments: str) -> dict[str, Any]:
    args = _arguments_object(arguments)
    command = args.get("command")
    action: dict[str, Any] = {"type": "exec", "env": {},
                              "command": [str(c) for c in command]
                              if isinstance(command, list) else []}
    for key in ("working_directory", "timeout_ms"):
        if args.get(key) is not None:
            action[key] = args[key]
    return action


def local_shell_arguments(action: Any) -> str:
    """A `local_shell_call` action from the history as the function's arguments."""
    action = action if isinstance(action, dict) else {}
    args = {k: action[k] for k in ("command", "working_directory", "timeout_ms")
            if action.get(k) is not None}
    return json.dumps(args, ensure_ascii=False)


def _function(name: str, description: Any, parameters: Any,
              strict: Any = None) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name}
    if isinstance(description, str) and description:
        function["description"] = description
    function["parameters"] = parameters if isinstance(parameters, dict) else dict(_EMPTY_SCHEMA)
    if strict is True:  # false is the default everywhere: sending it changes nothing
        function["strict"] = True
    return {"type": "function", "function": function}


def _one(tool: dict[str, Any], namespace: str | None, tools: ResponsesTools,
         drops: Drops) -> dict[str, Any] | None:
    kind = tool.get("type")
    name = tool.get("name")
    if kind == "function" and isinstance(name, str):
        flat = tools.flat(ToolOrigin("function", name, namespace))
        return _function(flat, tool.get("description"), tool.get("parameters"),
                         tool.get("strict"))
    if kind == "custom" and isinstance(name, str):
        flat = tools.flat(ToolOrigin("custom", name, namespace))
        if tool.get("format") not in (None, {"type": "text"}):
            drops.add("custom_tool_format")  # a grammar: the function takes any string
        return _function(flat, tool.get("description"), dict(_CUSTOM_SCHEMA))
    if kind == LOCAL_SHELL and namespace is None:
        flat = tools.flat(ToolOrigin("local_shell", LOCAL_SHELL))
        return _function(flat, _LOCAL_SHELL_DESCRIPTION, dict(_LOCAL_SHELL_SCHEMA))
    if kind in ("web_search", "web_search_preview", "web_search_2025_08_26",
                "web_search_preview_2025_03_11"):
        drops.add("web_search")
    elif isinstance(kind, str):
        drops.add("hosted_tools")  # file_search, code_interpreter, image_generation, mcp, ...
    else:
        drops.add("malformed")
    return None


def responses_tools_to_openai(tools_in: list[Any], tools: ResponsesTools,
                              drops: Drops) -> list[dict[str, Any]]:
    """Chat Completions function tools for a Responses request's `tools`."""
    out: list[dict[str, Any]] = []
    for tool in tools_in:
        if not isinstance(tool, dict):
            drops.add("malformed")
            continue
        if tool.get("type") == "namespace" and isinstance(tool.get("name"), str):
            inner = tool.get("tools")
            for member in inner if isinstance(inner, list) else ():
                if isinstance(member, dict):
                    converted = _one(member, tool["name"], tools, drops)
                    if converted is not None:
                        out.append(converted)
            continue
        converted = _one(tool, None, tools, drops)
        if converted is not None:
            out.append(converted)
    return out


def responses_tool_choice_to_openai(choice: Any, tools: ResponsesTools,
                                    drops: Drops) -> Any:
    """Chat Completions `tool_choice`, or None to leave it out."""
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict):
        kind, name = choice.get("type"), choice.get("name")
        if kind in ("function", "custom") and isinstance(name, str):
            flat = tools.names.shorten(name)
            return {"type": "function", "function": {"name": flat}}
    if choice is not None:
        drops.add("tool_choice")  # allowed_tools, a hosted tool, mcp
    return None
