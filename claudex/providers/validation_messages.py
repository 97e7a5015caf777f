"""Deep request checks: every message, content block, tool and tool call — the shape the
translators walk. Run only where claudex reads the conversation itself (translation, local token
estimates); see `claudex.providers.validation` for why, and for the top-level checks every request
gets.
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

# "system": Anthropic's mid-conversation system turns. Where one may stand (and which models
# take one) is for the target to settle: an OpenAI provider takes it anywhere, and the
# translator moves it where an Anthropic model takes it (`translate.system_turns`).
_ANTHROPIC_ROLES = ("user", "assistant", "system")


def check_anthropic_contents(body: dict[str, Any]) -> None:
    """Every message, block, tool and tool choice of an Anthropic request that the translator
    reads (top-level types are `check_top_level`'s). Raises InvalidRequest."""
    system = body.get("system")
    if isinstance(system, list):
        for index, block in enumerate(system):
            _anthropic_block(block, ("system", index))
    messages = body.get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else ()):
        path: tuple[PathPart, ...] = ("messages", index)
        message = require_object(message, path)
        _role(message, path, _ANTHROPIC_ROLES)
        content = required_field(message, "content", "string_or_list", path)
        if isinstance(content, list):
            for number, block in enumerate(content):
                _anthropic_block(block, (*path, "content", number))
    for index, tool in enumerate(_list_or_empty(body.get("tools"))):
        path = ("tools", index)
        tool = require_object(tool, path)
        kind = tool.get("type")
        if kind is not None and not isinstance(kind, str):
            raise fail((*path, "type"), "type", "string", kind)
        if kind in (None, "custom"):
            required_field(tool, "name", "string", path)
            optional_fields(tool, (("description", "string"), ("input_schema", "object")), path)
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        kind = required_field(choice, "type", "string", ("tool_choice",))
        if kind == "tool":
            required_field(choice, "name", "string", ("tool_choice",))
    for index, stop in enumerate(_list_or_empty(body.get("stop_sequences"))):
        if not isinstance(stop, str):
            raise fail(("stop_sequences", index), "type", "string", stop)
    metadata = body.get("metadata")
    if isinstance(metadata, dict):
        optional_fields(metadata, (("user_id", "string"),), ("metadata",))


def _role(message: dict[str, Any], path: tuple[PathPart, ...], allowed: tuple[str, ...]) -> str:
    role: str = required_field(message, "role", "string", path)
    if role not in allowed:
        raise fail((*path, "role"), "value", got=role, allowed=allowed)
    return role


def _list_or_empty(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _anthropic_block(block: Any, path: tuple[PathPart, ...]) -> None:
    block = require_object(block, path)
    kind = required_field(block, "type", "string", path)
    if kind == "text":
        required_field(block, "text", "string", path)
    elif kind in ("image", "document"):
        source = required_field(block, "source", "object", path)
        source_path = (*path, "source")
        source_kind = required_field(source, "type", "string", source_path)
        if source_kind == "base64":
            required_field(source, "data", "string", source_path)
            optional_fields(source, (("media_type", "string"),), source_path)
        elif source_kind == "url":
            required_field(source, "url", "string", source_path)
        elif source_kind == "text":
            required_field(source, "data", "string", source_path)
        elif source_kind == "content":
            content = required_field(source, "content", "string_or_list", source_path)
            for number, inner in enumerate(_list_or_empty(content)):
                _anthropic_block(inner, (*source_path, "content", number))
        if kind == "document":
            optional_fields(block, (("title", "string"),), path)
    elif kind == "tool_use":
        required_field(block, "id", "string", path)
        required_field(block, "name", "string", path)
        optional_fields(block, (("input", "object"),), path)
    elif kind == "tool_result":
        required_field(block, "tool_use_id", "string", path)
        optional_fields(block, (("is_error", "boolean"), ("content", "string_or_list")), path)
        for number, inner in enumerate(_list_or_empty(block.get("content"))):
            _anthropic_block(inner, (*path, "content", number))


# -- OpenAI contents: when translating ---------------------------------------------------------

_OPENAI_ROLES = ("system", "assistant", "user", "function", "tool", "developer")
_CONTENT_REQUIRED = frozenset({"system", "developer", "user", "tool"})


def check_openai_contents(body: dict[str, Any]) -> None:
    """Every message, content part, tool call and tool of an OpenAI request that the translator
    reads (top-level types are `check_top_level`'s). Raises InvalidRequest."""
    messages = body.get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else ()):
        path: tuple[PathPart, ...] = ("messages", index)
        message = require_object(message, path)
        role = _role(message, path, _OPENAI_ROLES)
        if role in _CONTENT_REQUIRED:
            content = required_field(message, "content", "string_or_list", path)
        else:
            optional_fields(message, (("content", "string_or_list"),), path)
            content = message.get("content")
        for number, part in enumerate(_list_or_empty(content)):
            _openai_part(part, (*path, "content", number))
        optional_fields(message, (("name", "string"), ("refusal", "string")), path)
        if role == "tool":
            required_field(message, "tool_call_id", "string", path)
        elif role == "assistant":
            optional_fields(message, (("tool_calls", "list"),), path)
            for number, call in enumerate(_list_or_empty(message.get("tool_calls"))):
                _openai_tool_call(call, (*path, "tool_calls", number))
    for index, tool in enumerate(_list_or_empty(body.get("tools"))):
        path = ("tools", index)
        tool = require_object(tool, path)
        kind = tool.get("type", "function")
        if not isinstance(kind, str):
            raise fail((*path, "type"), "type", "string", kind)
        if kind == "function":
            function = required_field(tool, "function", "object", path)
            required_field(function, "name", "string", (*path, "function"))
            optional_fields(function, (("description", "string"), ("parameters", "object")),
                      (*path, "function"))
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        kind = required_field(choice, "type", "string", ("tool_choice",))
        if kind == "function":
            function = required_field(choice, "function", "object", ("tool_choice",))
            required_field(function, "name", "string", ("tool_choice", "function"))
    stop = body.get("stop")
    for index, item in enumerate(_list_or_empty(stop)):
        if not isinstance(item, str):
            raise fail(("stop", index), "type", "string", item)


def _openai_part(part: Any, path: tuple[PathPart, ...]) -> None:
    part = require_object(part, path)
    kind = required_field(part, "type", "string", path)
    if kind == "text":
        required_field(part, "text", "string", path)
    elif kind == "refusal":
        required_field(part, "refusal", "string", path)
    elif kind == "image_url":
        image = part.get("image_url")
        if isinstance(image, str):  # tolerated: the URL itself
            return
        image = required_field(part, "image_url", "object", path)
        required_field(image, "url", "string", (*path, "image_url"))
        optional_fields(image, (("detail", "string"),), (*path, "image_url"))
    elif kind == "file":
        file = required_field(part, "file", "object", path)
        optional_fields(file, (("file_data", "string"), ("file_id", "string"),
                         ("filename", "string")), (*path, "file"))


def _openai_tool_call(call: Any, path: tuple[PathPart, ...]) -> None:
    call = require_object(call, path)
    required_field(call, "id", "string", path)
    kind = call.get("type", "function")
    if not isinstance(kind, str):
        raise fail((*path, "type"), "type", "string", kind)
    if kind == "function":
        function = required_field(call, "function", "object", path)
        required_field(function, "name", "string", (*path, "function"))
        optional_fields(function, (("arguments", "string"),), (*path, "function"))


# -- answers -------------------------------------------------------------------------------------
