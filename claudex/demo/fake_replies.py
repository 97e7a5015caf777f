"""Bodies the fake providers answer with, in the Anthropic Messages and OpenAI Chat formats.

Pure functions: a request body in, JSON values or SSE bytes out. The shapes follow the public API
references closely enough that the official `anthropic` and `openai` SDKs parse them.

What the reply says: "Hello from NAME (model MODEL)." so a test can see which provider answered.
Two knobs in the last user message change it:
    "events:N"   the answer has N words, streamed as N text deltas (benchmarks of long streams)
    "use tool"   when the request offers tools, answer with a call of the first tool (or of the
                 tool named right after: "use tool get_weather"); a forced tool_choice does too
A conversation whose first user message carries `claudex-e2e:TOKEN` follows the script written
there instead (`claudex.demo.scripted`: Claude Code's real tool loop, end to end).

The wire formats are `claudex.demo.replies_anthropic` and `claudex.demo.replies_openai` (their
builders stay importable from here), over the `Reply` of `claudex.demo.replies_common`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final, Literal, TypeGuard

from claudex.demo import scripted, thinking_rules
from claudex.demo.replies_anthropic import (
    anthropic_error,
    anthropic_message,
    anthropic_models,
    anthropic_stream,
)
from claudex.demo.replies_common import Reply, StreamParts, ToolCall, dumps, dumps_bytes
from claudex.demo.replies_openai import (
    openai_completion,
    openai_error,
    openai_models,
    openai_stream,
)

__all__ = [
    "MAX_EVENTS",
    "BadRequest",
    "ErrorKind",
    "Protocol",
    "Reply",
    "StreamParts",
    "ToolCall",
    "anthropic_error",
    "anthropic_message",
    "anthropic_models",
    "anthropic_stream",
    "dumps_bytes",
    "error_reply",
    "example_value",
    "openai_completion",
    "openai_error",
    "openai_models",
    "openai_stream",
    "plan_reply",
]

# "responses": errors have Chat Completions' shape; its bodies are `replies_responses`.
Protocol = Literal["anthropic", "openai", "responses"]

MAX_EVENTS: Final = 100_000
_EVENTS_KNOB = re.compile(r"\bevents:(\d{1,9})\b")  # more digits than that: not a knob
_TOOL_KNOB = re.compile(r"\buse tool\b(?:\s+([A-Za-z0-9_.-]+))?", re.IGNORECASE)


class BadRequest(Exception):
    """The request body is not one the real API would accept; answered as `kind` says (400
    unless the request names a model the provider does not serve: 404)."""

    def __init__(self, message: str, kind: ErrorKind = "invalid_request") -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind


# ---------------------------------------------------------------- reading the request


def plan_reply(
    protocol: Protocol,
    provider: str,
    body: Any,
    body_size: int,
    reply_id: str,
    *,
    needs_max_tokens: bool = True,
    served_models: Sequence[str] | None = None,
    max_output_tokens: int | None = None,
    signing_key: bytes | None = None,
    context_window: int | None = None,
    context_sized: bool = True,
) -> Reply:
    """Decide the answer to a messages / chat request, or raise BadRequest.

    `served_models` (None: any name) is what the provider serves: an OpenAI-protocol provider
    refuses every other name, an Anthropic one any other that is not a `claude-` name (404).
    `max_output_tokens` (None: MAX_OUTPUT_TOKENS) is the model's output limit, refused in the
    protocol's real wording (Anthropic's, or DeepSeek's range for an OpenAI provider).
    `signing_key` (Anthropic only; None: off) applies Anthropic's thinking rules
    (`claudex.demo.thinking_rules`): thinking answers signed with it, foreign blocks refused.
    `context_window` (None: unlimited) refuses a longer prompt (a quarter of the body's bytes,
    the fakes' token count) in the protocol's real wording."""
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("model: Field required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages: Field required and must be a non-empty list")
    if protocol == "anthropic" and needs_max_tokens:
        max_tokens = body.get("max_tokens")
        if not _is_integer(max_tokens) or max_tokens < 1:
            raise BadRequest("max_tokens: Field required and must be a positive integer")
    _check_shape(protocol, body)
    _check_model(protocol, model, served_models)
    _check_max_tokens(protocol, body, max_output_tokens)
    if context_window is not None:
        _check_context(protocol, body, max(1, body_size // 4), context_window, context_sized)
    key = signing_key if protocol == "anthropic" else None  # Anthropic's thinking rules
    if key is not None and (refused := thinking_rules.refusal(body, key)) is not None:
        raise BadRequest(refused)
    prompt = _last_user_text(messages[-1])
    step = scripted.next_step("anthropic" if protocol == "anthropic" else "openai", body,
                                reply_id)  # a claudex-e2e script, if any
    tool_call = _tool_call(protocol, body, prompt, reply_id) if step is None else step.tool_call
    words: tuple[str, ...] = ()
    if tool_call is None:
        words = _words(provider, model, prompt) if step is None else step.words
    reply = Reply(
        id=reply_id,
        model=model,
        words=words,
        tool_call=tool_call,
        input_tokens=max(1, body_size // 4),
        thinking=None if key is None else thinking_rules.thinking_block(body, key, provider,
                                                                        prompt),
    )
    _check_encodable(reply)
    return reply


# ---------------------------------------------------------------- what the real APIs refuse

MAX_OUTPUT_TOKENS: Final = 128_000
"""The fakes' model limit: a larger max_tokens is refused, as the real APIs refuse one over
the model's own limit."""

_ROLES: Final[dict[str, tuple[str, ...]]] = {
    "anthropic": ("user", "assistant", "system"),
    "openai": ("system", "developer", "user", "assistant", "tool", "function"),
}


def _is_integer(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _where(protocol: Protocol, *path: str | int) -> str:
    """`messages.0.role` (Anthropic) or `messages[0].role` (OpenAI)."""
    if protocol == "anthropic":
        return ".".join(str(p) for p in path)
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def _check_shape(protocol: Protocol, body: dict[str, Any]) -> None:
    """The structure both APIs validate before anything else: roles, content, block and
    part types, tools, stream and token limits. Raises BadRequest with the field's path."""
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise BadRequest(f"{_where(protocol, 'stream')}: Input should be a valid boolean")
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        if value is None:
            continue
        if not _is_integer(value) or value < 1:
            raise BadRequest(f"{key}: Input should be a positive integer")
    for index, message in enumerate(body["messages"]):
        if not isinstance(message, dict):
            raise BadRequest(f"{_where(protocol, 'messages', index)}: Input should be an object")
        role = message.get("role")
        if role not in _ROLES[protocol]:
            allowed = ", ".join(_ROLES[protocol])
            raise BadRequest(f"{_where(protocol, 'messages', index, 'role')}: "
                             f"Input should be one of {allowed}")
        content = message.get("content")
        optional = protocol == "openai" and role in ("assistant", "function")
        if content is None and optional:
            continue
        if not isinstance(content, str | list):
            raise BadRequest(f"{_where(protocol, 'messages', index, 'content')}: "
                             "Input should be a string or a list of content blocks")
        for number, block in enumerate(content if isinstance(content, list) else ()):
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                raise BadRequest(f"{_where(protocol, 'messages', index, 'content', number)}: "
                                 "Input should be an object with a string 'type'")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadRequest(f"{_where(protocol, 'tools')}: Input should be a valid list")
    for index, tool in enumerate(tools or ()):
        if not isinstance(tool, dict):
            raise BadRequest(f"{_where(protocol, 'tools', index)}: Input should be an object")
    if protocol == "anthropic":
        system = body.get("system")
        if system is not None and not isinstance(system, str | list):
            raise BadRequest("system: Input should be a valid string or a list of text blocks")


def _check_model(protocol: Protocol, model: str, served: Sequence[str] | None) -> None:
    """A real provider answers 404 for a model it does not serve. Anthropic serves every
    `claude-` name here (Claude Code asks for new ones: claude-opus-5-5, haiku models)."""
    if served is None or model in served:
        return
    _require_utf8(model)  # a broken name is bad JSON (400) before it is an unknown model
    if protocol == "anthropic":
        if not model.startswith("claude-"):
            raise BadRequest(f"model: {model}", "model_not_found")
        return
    raise BadRequest(f"The model `{model}` does not exist or you do not have access to it.",
                     "model_not_found")


def _check_max_tokens(protocol: Protocol, body: dict[str, Any], limit: int | None) -> None:
    """A max_tokens over the model's output limit is a 400, worded as each API words it."""
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        if value is None or value <= (limit or MAX_OUTPUT_TOKENS):
            continue
        if limit is not None and protocol == "openai":
            # DeepSeek's words, for max_completion_tokens too.
            raise BadRequest(f"Invalid max_tokens value, the valid range of max_tokens is "
                             f"[1, {limit}]", "max_tokens_range")
        raise BadRequest(f"{key}: {value} > {limit or MAX_OUTPUT_TOKENS}, which is the maximum "
                         f"allowed number of output tokens for {body.get('model')}")


def _check_context(protocol: Protocol, body: dict[str, Any], prompt: int, window: int,
                   sized: bool = True) -> None:
    """A prompt over the model's context window is a 400, worded as each API words it (the
    wordings and their sources: `claudex.providers.context_limits`). OpenAI counts the
    completion asked for into the window (The-Vibe-Company/quivr#505); Anthropic words the
    prompt alone ("prompt is too long: 200082 tokens > 200000 maximum", anthropics/claude-code
    #7866)."""
    if protocol == "anthropic":
        if prompt > window:
            raise BadRequest(f"prompt is too long: {prompt} tokens > {window} maximum",
                             "context_length")
        return
    if not sized and prompt > window:
        # Groq's refusal: the code says it, the message gives no size
        # (thepersonalaicompany/amurex-backend#51, letta-ai/letta#1963).
        raise BadRequest("Please reduce the length of the messages or completion.",
                         "context_length")
    if prompt > window:
        raise BadRequest(f"This model's maximum context length is {window} tokens. However, "
                         f"your messages resulted in {prompt} tokens. Please reduce the "
                         f"length of the messages.", "context_length")
    asked = next((v for k in ("max_completion_tokens", "max_tokens")
                  if _is_integer(v := body.get(k))), 0)
    if asked and prompt + asked > window:
        raise BadRequest(f"This model's maximum context length is {window} tokens. However, "
                         f"you requested {prompt + asked} tokens ({prompt} in the messages, "
                         f"{asked} in the completion). Please reduce the length of the "
                         f"messages or completion.", "context_length")


def _check_encodable(reply: Reply) -> None:
    """Strings the reply echoes from the request must have a UTF-8 form: a lone surrogate
    escape (`\\ud800`) parses in Python but not in the real APIs' JSON readers."""
    echoed = [reply.model]
    if reply.tool_call is not None:
        echoed += [reply.tool_call.name, reply.tool_call.arguments]
    for text in echoed:
        _require_utf8(text)


def _require_utf8(text: str) -> None:
    try:
        text.encode()
    except UnicodeEncodeError:
        raise BadRequest("The request body is not valid JSON: no low surrogate in string") \
            from None


def _last_user_text(message: Any) -> str:
    """The text of the conversation's final message when the user wrote it, else ""."""
    if not isinstance(message, dict) or message.get("role") != "user":
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        )
    return ""


def _words(provider: str, model: str, prompt: str) -> tuple[str, ...]:
    base = f"Hello from {provider} (model {model}).".split(" ")
    match = _EVENTS_KNOB.search(prompt)
    if match is None:
        return tuple(base)
    count = min(max(int(match.group(1)), 1), MAX_EVENTS)
    return tuple(base[index % len(base)] for index in range(count))


def _tool_call(
    protocol: Protocol, body: dict[str, Any], prompt: str, reply_id: str
) -> ToolCall | None:
    tools = _offered_tools(protocol, body.get("tools"))
    if not tools:
        return None
    forced = _forced_tool(protocol, body.get("tool_choice"))
    asked = _TOOL_KNOB.search(prompt)
    if forced is None and asked is None:
        return None
    wanted = forced if isinstance(forced, str) else (asked.group(1) if asked else None)
    name, schema = next(((n, s) for n, s in tools if n == wanted), tools[0])
    prefix = "toolu_01" if protocol == "anthropic" else "call_"
    return ToolCall(id=prefix + reply_id, name=name, arguments=dumps(example_value(schema)))


def _offered_tools(protocol: Protocol, tools: Any) -> list[tuple[str, Any]]:
    offered: list[tuple[str, Any]] = []
    if not isinstance(tools, list):
        return offered
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if protocol == "openai":
            tool = tool.get("function")
            if not isinstance(tool, dict):
                continue
        name = tool.get("name")
        if isinstance(name, str):
            offered.append(
                (name, tool.get("input_schema" if protocol == "anthropic" else "parameters"))
            )
    return offered


def _forced_tool(protocol: Protocol, choice: Any) -> str | bool | None:
    """A tool name when one is forced, True when any tool is required, else None."""
    if choice in ("required", "any"):
        return True
    if not isinstance(choice, dict):
        return None
    if protocol == "anthropic":
        if choice.get("type") == "any":
            return True
        if choice.get("type") == "tool" and isinstance(choice.get("name"), str):
            return str(choice["name"])
        return None
    function = choice.get("function")
    if choice.get("type") == "function" and isinstance(function, dict):
        name = function.get("name")
        return name if isinstance(name, str) else True
    return None


def example_value(schema: Any, depth: int = 0) -> Any:
    """A small value that satisfies a simple JSON schema (required properties, enums, types)."""
    if not isinstance(schema, dict) or depth > 6:
        return {} if depth == 0 else "example"
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or (kind is None and "properties" in schema) or depth == 0:
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return {}
        required = schema.get("required")
        names = required if isinstance(required, list) else list(properties)
        return {
            name: example_value(properties.get(name), depth + 1)
            for name in names
            if isinstance(name, str)
        }
    simple: dict[str, Any] = {"integer": 1, "number": 1, "boolean": True, "array": [], "null": None}
    return simple.get(str(kind), "example")


# ---------------------------------------------------------------- errors by kind

ErrorKind = Literal[
    "server", "overloaded", "rate_limit", "auth", "invalid_request", "not_found", "method",
    "model_not_found", "max_tokens_range", "context_length",
]

_STATUS: Final[dict[str, int]] = {
    "server": 500,
    "overloaded": 529,
    "rate_limit": 429,
    "auth": 401,
    "invalid_request": 400,
    "not_found": 404,
    "method": 405,
    "model_not_found": 404,
    "max_tokens_range": 400,
    "context_length": 400,
}

_ANTHROPIC_TYPES: Final[dict[str, tuple[str, str]]] = {
    "server": ("api_error", "Internal server error"),
    "overloaded": ("overloaded_error", "Overloaded"),
    "rate_limit": ("rate_limit_error", "Number of requests has exceeded your rate limit."),
    "auth": ("authentication_error", "invalid x-api-key"),
    "invalid_request": ("invalid_request_error", "Invalid request."),
    "not_found": ("not_found_error", "Not found."),
    "method": ("invalid_request_error", "Method not allowed."),
    "model_not_found": ("not_found_error", "model: unknown"),
    "max_tokens_range": ("invalid_request_error", "max_tokens: over the model's limit"),
    "context_length": ("invalid_request_error", "prompt is too long"),
}

_OPENAI_TYPES: Final[dict[str, tuple[str, str, str | None]]] = {
    "server": (
        "server_error",
        "The server had an error while processing your request. Sorry about that!",
        None,
    ),
    "overloaded": (
        "server_error",
        "The server is overloaded, please try again later.",
        "overloaded",
    ),
    "rate_limit": ("requests", "Rate limit reached for requests.", "rate_limit_exceeded"),
    "auth": ("invalid_request_error", "Incorrect API key provided.", "invalid_api_key"),
    "invalid_request": ("invalid_request_error", "Invalid request.", None),
    "not_found": ("invalid_request_error", "Unknown request URL.", "unknown_url"),
    "method": ("invalid_request_error", "Method not allowed.", None),
    "model_not_found": (
        "invalid_request_error",
        "The model does not exist or you do not have access to it.",
        "model_not_found",
    ),
    # DeepSeek's answer to a max_tokens over its range: the code repeats the type.
    "max_tokens_range": (
        "invalid_request_error",
        "Invalid max_tokens value, the valid range of max_tokens is [1, 8192]",
        "invalid_request_error",
    ),
    # OpenAI's code for a prompt over the window (crewAIInc/crewAI-examples#121).
    "context_length": ("invalid_request_error", "Please reduce the length of the messages.",
                       "context_length_exceeded"),
}


def error_reply(
    protocol: Protocol, kind: ErrorKind, message: str | None = None
) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of an error of `kind` in the protocol's format."""
    if protocol == "anthropic":
        error_type, default_message = _ANTHROPIC_TYPES[kind]
        return _STATUS[kind], anthropic_error(error_type, message or default_message)
    error_type, default_message, code = _OPENAI_TYPES[kind]
    return _STATUS[kind], openai_error(error_type, message or default_message, code)
