"""Request bodies: Anthropic Messages <-> OpenAI Chat Completions.

Pure functions. What the target cannot take is left out and named in `Translated.dropped`
with the short names of the tables in `claudex.providers.translate.drops` (which also list
every field each direction drops, and why); nothing is silently altered. Values that change
nothing (`n: 1`, `thinking: {"type": "disabled"}`, a null field) are left out without a name.

Parameters:
  Anthropic                        OpenAI
  system                           leading system message
  {"role": "system"} turns         system messages in place (`system_turns`: where they may go)
  max_tokens (required)            max_tokens (or max_completion_tokens: `max_tokens_field`)
  temperature, top_p               temperature, top_p (an OpenAI temperature above 1 is dropped:
                                   Anthropic's range ends at 1)
  stop_sequences                   stop (string or list)
  metadata.user_id  <-             user (or safety_identifier when there is no user)
  tools / tool_choice              tools / tool_choice, parallel_tool_calls
  stream                           stream (+ stream_options.include_usage for OpenAI targets)
`metadata.user_id` goes one way only. An OpenAI client sets `user` for exactly what Anthropic's
field is for (an opaque id of its end user, for abuse monitoring), so it is kept. Claude Code,
the usual Anthropic client, puts a JSON of its device and session ids there, meant for
Anthropic: it is not handed to a third-party provider as `user`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

from claudex.providers.translate.drops import (
    ANTHROPIC_TO_OPENAI,
    OPENAI_TO_ANTHROPIC,
    DropName,
    Drops,
)
from claudex.providers.translate.messages import (
    anthropic_messages_to_openai,
    anthropic_system_to_openai,
    openai_messages_to_anthropic,
)
from claudex.providers.translate.system_turns import (
    place_anthropic_system_turns,
    settle_openai_system_messages,
)
from claudex.providers.translate.tools import (
    ANTHROPIC_NAME_LIMIT,
    OPENAI_NAME_LIMIT,
    ToolNameMap,
    anthropic_tool_choice_to_openai,
    anthropic_tools_to_openai,
    openai_tool_choice_to_anthropic,
    openai_tools_to_anthropic,
)
from claudex.providers.validation_messages import check_anthropic_contents, check_openai_contents

DEFAULT_MAX_TOKENS = 4096
ANTHROPIC_MAX_TEMPERATURE = 1.0


@dataclass(frozen=True)
class Translated:
    """A translated request body, what was left out, and how tool names were shortened."""

    body: dict[str, Any]
    dropped: tuple[str, ...]
    tool_names: ToolNameMap


def include_usage_requested(openai_body: dict[str, Any]) -> bool:
    """Whether an OpenAI client asked for the final usage chunk of a stream."""
    options = openai_body.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def _capped(value: int, cap: int | None) -> int:
    return min(value, cap) if cap is not None else value


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


# -- Anthropic -> OpenAI ---------------------------------------------------------------------

_ANTHROPIC_HANDLED = frozenset({
    "model", "messages", "system", "max_tokens", "temperature", "top_p", "stop_sequences",
    "stream", "metadata", "output_config", "tools", "tool_choice",
})
_OUTPUT_CONFIG_DROPS: dict[str, DropName] = {
    "effort": "output_config.effort", "format": "output_config.format",
}


def anthropic_to_openai_request(
    body: dict[str, Any],
    *,
    model: str | None,
    max_tokens_cap: int | None,
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
) -> Translated:
    """`max_tokens_field`: OpenAI's own reasoning models take only `max_completion_tokens`;
    most compatible servers know only `max_tokens`, hence the default.
    Raises InvalidRequest when the body is malformed (`claudex.providers.validation`)."""
    check_anthropic_contents(body)
    names = ToolNameMap(OPENAI_NAME_LIMIT)
    drops = Drops()
    out: dict[str, Any] = {"model": model if model is not None else body.get("model")}
    messages = anthropic_system_to_openai(body.get("system"), drops)
    messages += anthropic_messages_to_openai(list(body.get("messages") or ()), names, drops)
    out["messages"] = settle_openai_system_messages(messages)

    max_tokens = body.get("max_tokens")
    if _is_int(max_tokens):
        out[max_tokens_field] = _capped(max_tokens, max_tokens_cap)
    elif max_tokens_cap is not None:
        out[max_tokens_field] = max_tokens_cap
    for key in ("temperature", "top_p"):
        if _is_number(body.get(key)):
            out[key] = body[key]
    stops = [s for s in body.get("stop_sequences") or () if isinstance(s, str)]
    if stops:
        out["stop"] = stops
    if "stream" in body:
        out["stream"] = bool(body["stream"])
        if out["stream"]:
            # Without it an OpenAI stream carries no token counts at all.
            out["stream_options"] = {"include_usage": True}
    metadata = body.get("metadata")
    if isinstance(metadata, dict):
        for key, value in metadata.items():
            if value is not None:
                drops.add("metadata.user_id" if key == "user_id" else "metadata")
    output_config = body.get("output_config")
    if isinstance(output_config, dict):
        for key, value in output_config.items():
            if value is not None:
                drops.add(_OUTPUT_CONFIG_DROPS.get(key, "output_config"))
    elif output_config is not None:
        drops.add("output_config")

    tools = anthropic_tools_to_openai(list(body.get("tools") or ()), names, drops)
    if tools:
        out["tools"] = tools
    choice = body.get("tool_choice")
    if choice is not None:
        if tools:
            converted, parallel = anthropic_tool_choice_to_openai(choice, names, drops)
            if converted is not None:
                out["tool_choice"] = converted
            if parallel is not None:
                out["parallel_tool_calls"] = parallel
        elif choice not in ("none", "auto", {"type": "none"}, {"type": "auto"}):
            drops.add("tool_choice")  # OpenAI refuses a tool_choice without tools

    for key, value in body.items():
        if key in _ANTHROPIC_HANDLED or value is None:
            continue
        if key == "thinking" and isinstance(value, dict) and value.get("type") == "disabled":
            continue
        drops.field(key, ANTHROPIC_TO_OPENAI)
    return Translated(out, drops.as_tuple(), names)


# -- OpenAI -> Anthropic ---------------------------------------------------------------------

_OPENAI_HANDLED = frozenset({
    "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop",
    "stream", "stream_options", "user", "safety_identifier", "tools", "tool_choice",
    "parallel_tool_calls",
})
# Values that ask for nothing beyond the default: leaving them out changes nothing.
_OPENAI_NO_OPS: dict[str, Any] = {
    "n": 1, "logprobs": False, "presence_penalty": 0, "frequency_penalty": 0, "store": False,
}


def openai_to_anthropic_request(
    body: dict[str, Any],
    *,
    model: str | None,
    max_tokens_cap: int | None,
) -> Translated:
    """Raises InvalidRequest when the body is malformed (`claudex.providers.validation`)."""
    check_openai_contents(body)
    names = ToolNameMap(ANTHROPIC_NAME_LIMIT)
    drops = Drops()
    system, messages = openai_messages_to_anthropic(list(body.get("messages") or ()), names,
                                                    drops)
    out: dict[str, Any] = {"model": model if model is not None else body.get("model")}
    system, messages = place_anthropic_system_turns(system, messages, out["model"])
    if len(system) == 1:
        out["system"] = system[0]["text"]
    elif system:
        out["system"] = system
    out["messages"] = messages

    requested = body.get("max_completion_tokens")
    if not _is_int(requested):
        requested = body.get("max_tokens")
    if _is_int(requested):
        out["max_tokens"] = _capped(requested, max_tokens_cap)
    else:
        # Anthropic requires max_tokens; OpenAI's default is "as much as fits".
        out["max_tokens"] = max_tokens_cap if max_tokens_cap is not None else DEFAULT_MAX_TOKENS
    temperature = body.get("temperature")
    if _is_number(temperature):
        if temperature <= ANTHROPIC_MAX_TEMPERATURE:
            out["temperature"] = temperature
        else:
            drops.add("temperature")
    if _is_number(body.get("top_p")):
        out["top_p"] = body["top_p"]
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else [s for s in stop or () if isinstance(s, str)]
    if stops:
        out["stop_sequences"] = stops
    if "stream" in body:
        out["stream"] = bool(body["stream"])  # stream_options is honoured by the stream side
    user = body.get("user") or body.get("safety_identifier")
    if isinstance(user, str) and user:
        out["metadata"] = {"user_id": user}
    if body.get("user") and body.get("safety_identifier"):
        drops.add("safety_identifier")

    tools = openai_tools_to_anthropic(list(body.get("tools") or ()), names, drops)
    if tools:
        out["tools"] = tools
        choice = openai_tool_choice_to_anthropic(body.get("tool_choice"),
                                                 body.get("parallel_tool_calls"), names, drops)
        if choice is not None:
            out["tool_choice"] = choice
    elif body.get("tool_choice") not in (None, "none", "auto"):
        drops.add("tool_choice")  # Anthropic refuses a tool_choice without tools

    for key, value in body.items():
        if key in _OPENAI_HANDLED or value is None:
            continue
        if key in _OPENAI_NO_OPS and value == _OPENAI_NO_OPS[key]:
            continue
        drops.field(key, OPENAI_TO_ANTHROPIC)
    return Translated(out, drops.as_tuple(), names)
