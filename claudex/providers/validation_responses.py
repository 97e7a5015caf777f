"""Responses API request checks (`POST /v1/responses`), at the two depths of
`claudex.providers.validation`: the top-level fields every request gets checked at the edge,
and the input items and tools walked only when claudex translates the request for a Chat
Completions or Anthropic upstream. A request passed through to a Responses provider is left
for that provider to judge past the top level. Messages follow OpenAI's wording, as the
Responses API's own errors do.
"""

from __future__ import annotations

from typing import Any

from claudex.providers.validation_problems import (
    PathPart,
    fail,
    optional_fields,
    require_object,
    required_field,
)

_OPTIONAL = (
    ("stream", "boolean"), ("temperature", "number"), ("top_p", "number"), ("tools", "list"),
    ("user", "string"), ("safety_identifier", "string"), ("parallel_tool_calls", "boolean"),
    ("store", "boolean"), ("include", "list"), ("reasoning", "object"), ("text", "object"),
    ("metadata", "object"), ("previous_response_id", "string"),
    ("prompt_cache_key", "string"), ("client_metadata", "object"),
)
_ROLES = ("user", "assistant", "system", "developer")
_CALL_TYPES = ("function_call", "custom_tool_call")
_OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")


def _list_or_empty(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def check_responses_top_level(body: dict[str, Any]) -> None:
    """The fields the proxy reads. Raises InvalidRequest."""
    required_field(body, "model", "string")
    optional_fields(body, _OPTIONAL)
    value = body.get("input")
    if value is not None and not isinstance(value, str | list):
        raise fail(("input",), "type", "string_or_list", value)
    value = body.get("instructions")
    if value is not None and not isinstance(value, str | list):
        raise fail(("instructions",), "type", "string_or_list", value)
    value = body.get("max_output_tokens")
    if value is not None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise fail(("max_output_tokens",), "type", "integer", value)
        if value < 1:
            raise fail(("max_output_tokens",), "minimum", got=value)
    choice = body.get("tool_choice")
    if choice is not None and not isinstance(choice, dict | str):
        raise fail(("tool_choice",), "type", "object", choice)


def _content(content: Any, path: tuple[PathPart, ...]) -> None:
    for number, part in enumerate(_list_or_empty(content)):
        part_path = (*path, "content", number)
        part = require_object(part, part_path)
        kind = required_field(part, "type", "string", part_path)
        if kind in ("input_text", "output_text"):
            required_field(part, "text", "string", part_path)
        elif kind == "input_image":
            optional_fields(part, (("image_url", "string"), ("detail", "string")), part_path)


def _item(item: Any, path: tuple[PathPart, ...]) -> None:
    item = require_object(item, path)
    kind = item.get("type", "message")
    if not isinstance(kind, str):
        raise fail((*path, "type"), "type", "string", kind)
    if kind == "message":
        role = required_field(item, "role", "string", path)
        if role not in _ROLES:
            raise fail((*path, "role"), "value", got=role, allowed=_ROLES)
        content = required_field(item, "content", "string_or_list", path)
        _content(content, path)
    elif kind in _CALL_TYPES:
        required_field(item, "call_id", "string", path)
        required_field(item, "name", "string", path)
        field = "arguments" if kind == "function_call" else "input"
        optional_fields(item, ((field, "string"),), path)
        optional_fields(item, (("namespace", "string"),), path)
    elif kind in _OUTPUT_TYPES:
        required_field(item, "call_id", "string", path)
        output = required_field(item, "output", "string_or_list", path)
        for number, part in enumerate(_list_or_empty(output)):
            require_object(part, (*path, "output", number))


def _tool(tool: Any, path: tuple[PathPart, ...]) -> None:
    tool = require_object(tool, path)
    kind = required_field(tool, "type", "string", path)
    if kind in ("function", "custom"):
        required_field(tool, "name", "string", path)
        optional_fields(tool, (("description", "string"), ("parameters", "object")), path)
    elif kind == "namespace":
        required_field(tool, "name", "string", path)
        members = required_field(tool, "tools", "list", path)
        for number, member in enumerate(members):
            _tool(member, (*path, "tools", number))


def check_responses_contents(body: dict[str, Any]) -> None:
    """Every input item, content part and tool the translator reads. A translated request
    needs its conversation in `input` (claudex keeps none). Raises InvalidRequest."""
    items = body.get("input")
    if items is None or items == [] or items == "":
        if body.get("previous_response_id") is None and body.get("conversation") is None:
            raise fail(("input",), "missing")
    for index, item in enumerate(_list_or_empty(items)):
        _item(item, ("input", index))
    instructions = body.get("instructions")
    for index, item in enumerate(_list_or_empty(instructions)):
        _item(item, ("instructions", index))
    for index, tool in enumerate(_list_or_empty(body.get("tools"))):
        _tool(tool, ("tools", index))
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        required_field(choice, "type", "string", ("tool_choice",))
