"""The one list of what translation leaves out (claudex.providers.translate.drops): every name a
translator gives is a row of its direction's table, or the client's own key for something no
table can know."""

from __future__ import annotations

import copy
from typing import Any, get_args

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claudex.providers.translate import anthropic_to_openai_request, openai_to_anthropic_request
from claudex.providers.translate.drops import (
    ANTHROPIC_TO_OPENAI,
    CHAT_TO_RESPONSES,
    OPENAI_TO_ANTHROPIC,
    RESPONSES_TO_OTHERS,
    UNKNOWN_NAME_LIMIT,
    DropName,
    listed,
)
from claudex.providers.validation import check_top_level
from claudex.providers.validation_problems import InvalidRequest


def test_the_tables_and_the_type_of_names_agree() -> None:
    assert set(get_args(DropName)) == (set(ANTHROPIC_TO_OPENAI) | set(OPENAI_TO_ANTHROPIC)
                                       | set(CHAT_TO_RESPONSES) | set(RESPONSES_TO_OTHERS))
    for table in (ANTHROPIC_TO_OPENAI, OPENAI_TO_ANTHROPIC, CHAT_TO_RESPONSES,
                  RESPONSES_TO_OTHERS):
        for name, why in table.items():
            assert " " not in name and len(name) <= 24, name   # short, log-friendly
            assert why.strip(), name


def test_every_anthropic_only_thing_is_named_from_the_table() -> None:
    body = {
        "model": "claude-opus-5-5", "max_tokens": 10,
        "top_k": 5, "service_tier": "auto", "container": "c_1", "inference_geo": "eu",
        "mcp_servers": [{"type": "url", "url": "https://mcp.example.com", "name": "m"}],
        "context_management": {"edits": [{"type": "clear_thinking_20251015"}]},
        "output_config": {"effort": "high", "format": {"type": "json_schema", "schema": {}}},
        "thinking": {"type": "enabled", "budget_tokens": 2000},
        "metadata": {"user_id": "u", "trace": "t"},
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}},
                   {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}}],
        "tools": [{"type": "web_search_20250305", "name": "web_search"},
                  {"name": "f", "input_schema": {"type": "object"}, "defer_loading": True,
                   "input_examples": [{}]}],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "q", "citations": [{"type": "char_location"}]},
                {"type": "image", "source": {"type": "file", "file_id": "file_1"}},
                {"type": "document", "source": {"type": "url", "url": "https://x/a.pdf"}},
                {"type": "search_result", "source": "s", "title": "t", "content": []}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "t", "signature": "sig"},
                {"type": "redacted_thinking", "data": "d"},
                {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}},
                {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": []},
                {"type": "text", "text": "a"},
                {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [
                    {"type": "text", "text": "r"},
                    {"type": "document", "source": {"type": "text", "data": "d"}}]}]},
        ],
    }
    dropped = anthropic_to_openai_request(body, model=None, max_tokens_cap=None).dropped
    assert set(dropped) == {
        "cache_control", "system.non_text", "citations", "image_source", "document_source",
        "content.search_result", "thinking", "redacted_thinking", "server_tool_blocks",
        "tool_result.non_text", "metadata.user_id", "metadata", "output_config.effort",
        "output_config.format", "server_tools", "defer_loading", "tools.input_examples",
        "top_k", "service_tier", "container", "mcp_servers", "context_management",
        "inference_geo"}
    unknown = {"content.search_result", "tools.input_examples", "inference_geo"}
    assert {n for n in dropped if not listed(n)} == unknown
    assert all(n in ANTHROPIC_TO_OPENAI for n in set(dropped) - unknown)


def test_every_openai_only_thing_is_named_from_the_table() -> None:
    body = {
        "model": "gpt-x", "n": 2, "logprobs": True, "top_logprobs": 3, "logit_bias": {"1": 1},
        "presence_penalty": 0.5, "frequency_penalty": 0.5, "seed": 1,
        "response_format": {"type": "json_object"}, "audio": {"voice": "alloy"},
        "modalities": ["text", "audio"], "prediction": {"type": "content", "content": "x"},
        "reasoning_effort": "low", "web_search_options": {}, "functions": [{"name": "f"}],
        "function_call": "auto", "store": True, "metadata": {"k": "v"}, "service_tier": "flex",
        "verbosity": "low", "prompt_cache_key": "k", "user": "u", "safety_identifier": "s",
        "temperature": 1.5, "future_knob": 1,
        "tools": [{"type": "custom", "custom": {"name": "c"}},
                  {"type": "function", "function": {"name": "f"}}],
        "tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}},
        "messages": [
            {"role": "user", "name": "ann", "content": [
                {"type": "text", "text": "q"},
                {"type": "image_url", "image_url": {"url": "data:image/png,abc"}},
                {"type": "image_url", "image_url": {"url": "https://x/a.png", "detail": "low"}},
                {"type": "file", "file": {"file_id": "file_1"}},
                {"type": "input_audio", "input_audio": {"data": "a", "format": "wav"}},
                {"type": "video_url", "video_url": {"url": "https://x/v.mp4"}}]},
            {"role": "assistant", "content": "a", "reasoning_content": "r",
             "audio": {"id": "audio_1"}, "function_call": {"name": "f", "arguments": "{}"},
             "tool_calls": [{"id": "c1", "type": "custom", "custom": {"name": "c"}},
                            {"id": "c2", "type": "function",
                             "function": {"name": "f", "arguments": "[1]"}}]},
            {"role": "tool", "tool_call_id": "c2", "content": "r"},
            {"role": "function", "name": "f", "content": "old"},
            {"role": "assistant", "content": ""},
        ],
    }
    dropped = openai_to_anthropic_request(body, model=None, max_tokens_cap=None).dropped
    assert set(dropped) == {
        "name", "image_url", "image_detail", "file", "input_audio", "content.video_url",
        "reasoning_content", "audio", "function_call", "non_function_tool_calls",
        "tool_call_arguments", "function_messages", "empty_turn", "temperature",
        "safety_identifier", "non_function_tools", "tool_choice", "n", "logprobs",
        "top_logprobs", "logit_bias", "presence_penalty", "frequency_penalty", "seed",
        "response_format", "modalities", "prediction", "reasoning_effort",
        "web_search_options", "functions", "store", "metadata", "service_tier", "verbosity",
        "prompt_cache_key", "future_knob"}
    unknown = {"content.video_url", "future_knob"}
    assert {n for n in dropped if not listed(n)} == unknown
    assert all(n in OPENAI_TO_ANTHROPIC for n in set(dropped) - unknown)


def test_a_clients_unknown_key_is_named_but_cut_short() -> None:
    body = {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}],
            "k" * 500: 1}
    dropped = anthropic_to_openai_request(body, model=None, max_tokens_cap=None).dropped
    assert dropped == ("k" * UNKNOWN_NAME_LIMIT,)


# Garbage in the places translators read: whatever validation lets through is translated, and
# every name given is a table row or the client's own key.
_kinds = st.sampled_from(["text", "image", "document", "tool_use", "tool_result", "thinking",
                          "redacted_thinking", "server_tool_use", "mcp_tool_result",
                          "image_url", "file", "input_audio", "refusal", "weird"])
_values = st.none() | st.booleans() | st.integers() | st.text(max_size=5) | st.just({}) | \
    st.just([])
_blocks = st.builds(lambda kind, extra: {"type": kind, **extra}, _kinds,
                    st.dictionaries(st.sampled_from(["text", "source", "id", "name", "input",
                                                     "cache_control", "citations", "content",
                                                     "tool_use_id", "image_url", "file",
                                                     "detail", "signature"]), _values,
                                    max_size=3))
_roles = st.sampled_from(["user", "assistant", "system", "tool", "developer", "function"])
_messages = st.lists(st.builds(lambda role, content: {"role": role, "content": content},
                               _roles, st.text(max_size=5) | st.lists(_blocks, max_size=3)),
                     min_size=1, max_size=4)


def _names_are_accounted_for(dropped: tuple[str, ...], body: dict[str, Any],
                             table: Any) -> None:
    for name in dropped:
        if name in table:
            continue
        assert name.startswith(("content.", "tools.")) or name in body, name


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_messages, st.dictionaries(st.text(max_size=6), _values, max_size=2))
def test_names_for_garbage_are_table_rows_or_client_keys(messages: list[Any],
                                                         extra: dict[str, Any]) -> None:
    anthropic = {**extra, "model": "m", "max_tokens": 5, "messages": copy.deepcopy(messages)}
    try:
        check_top_level("anthropic", "messages", anthropic)  # as the proxy's edge does
        dropped = anthropic_to_openai_request(anthropic, model=None, max_tokens_cap=None).dropped
    except InvalidRequest:
        pass
    else:
        _names_are_accounted_for(dropped, anthropic, ANTHROPIC_TO_OPENAI)
    openai = {**extra, "model": "m", "messages": copy.deepcopy(messages)}
    try:
        check_top_level("openai", "chat", openai)
        dropped = openai_to_anthropic_request(openai, model=None, max_tokens_cap=None).dropped
    except InvalidRequest:
        pass
    else:
        _names_are_accounted_for(dropped, openai, OPENAI_TO_ANTHROPIC)
