"""Stop reasons and token usage, shared by the response and stream translators.

finish_reason (OpenAI) -> stop_reason (Anthropic):
  stop            end_turn   (OpenAI does not say whether a stop sequence ended it, so
                              `stop_sequence` is never reported; a message with tool calls
                              gets tool_use instead, since some servers say "stop" there)
  length          max_tokens
  tool_calls,     tool_use   (only when tool calls are present; else end_turn)
  function_call
  content_filter  refusal    (the output was withheld by a policy filter, as with Claude's
                              classifier refusals; a message with a `refusal` text also gets it)
stop_reason -> finish_reason:
  end_turn, stop_sequence, pause_turn -> stop;  max_tokens,
  model_context_window_exceeded -> length;  tool_use -> tool_calls;  refusal -> content_filter

Usage: OpenAI's prompt_tokens includes cached tokens, Anthropic's input_tokens does not:
  input_tokens = prompt_tokens - cached_tokens - cache_write_tokens,
  cache_read_input_tokens = cached_tokens, cache_creation_input_tokens = cache_write_tokens, and
  back prompt_tokens = input_tokens + cache_read_input_tokens + cache_creation_input_tokens.
OpenAI has no field for tokens written to a cache; `prompt_tokens_details.cache_write_tokens` is
OpenRouter's (its usage-accounting docs), which gateways in front of Claude use: claudex sets it
too, so a client (and claudex's own token count) still sees what a cache write cost.
"""

from __future__ import annotations

from typing import Any


def anthropic_stop_reason(finish_reason: Any, *, has_tool_calls: bool,
                          refused: bool = False) -> str:
    if finish_reason == "length":
        return "max_tokens"
    if finish_reason == "content_filter":
        return "refusal"
    if has_tool_calls:
        return "tool_use"
    if refused:
        return "refusal"
    return "end_turn"


_FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


def openai_finish_reason(stop_reason: Any, *, has_tool_calls: bool) -> str:
    reason = _FINISH_REASONS.get(str(stop_reason), "stop")
    if reason == "tool_calls" and not has_tool_calls:
        return "stop"
    if reason == "stop" and has_tool_calls:
        return "tool_calls"
    return reason


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def anthropic_usage(usage: Any) -> dict[str, int]:
    """OpenAI usage -> Anthropic usage (missing numbers count as 0)."""
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    cached, written = _int(details.get("cached_tokens")), _int(details.get("cache_write_tokens"))
    prompt = _int(usage.get("prompt_tokens"))
    out = {"input_tokens": max(0, prompt - cached - written),
           "output_tokens": _int(usage.get("completion_tokens"))}
    if cached:
        out["cache_read_input_tokens"] = cached
    if written:
        out["cache_creation_input_tokens"] = written
    return out


def openai_usage(usage: Any) -> dict[str, Any]:
    """Anthropic usage -> OpenAI usage."""
    usage = usage if isinstance(usage, dict) else {}
    cached = _int(usage.get("cache_read_input_tokens"))
    written = _int(usage.get("cache_creation_input_tokens"))
    prompt = _int(usage.get("input_tokens")) + cached + written
    completion = _int(usage.get("output_tokens"))
    out: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                           "total_tokens": prompt + completion}
    if cached or written:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
        if written:
            out["prompt_tokens_details"]["cache_write_tokens"] = written
    return out
