"""System turns inside the conversation (issue 10): kept in place both ways, moved only where the
target API would refuse them there, counted by the local token estimate, accepted by validation.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claudex.providers.translate import (
    anthropic_to_openai_request,
    estimate_input_tokens,
    openai_to_anthropic_request,
)
from claudex.providers.translate.system_turns import supports_system_turns
from claudex.providers.validation_messages import check_anthropic_contents
from claudex.providers.validation_problems import InvalidRequest
from tests.providers.test_translate_requests import openai_requests

TAKES_TURNS = "claude-opus-4-8"     # a model that takes system turns inside messages
NO_TURNS = "claude-sonnet-4-6"      # one that answers 400 "role 'system' is not supported"


def a2o(body: dict[str, Any]) -> dict[str, Any]:
    return anthropic_to_openai_request(body, model="gpt-x", max_tokens_cap=None).body


def o2a(messages: list[dict[str, Any]], model: str = TAKES_TURNS) -> dict[str, Any]:
    body = {"model": "gpt-x", "messages": messages}
    return openai_to_anthropic_request(body, model=model, max_tokens_cap=None).body


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


# -- Anthropic -> OpenAI -----------------------------------------------------------------------

def test_the_issues_repro_becomes_user_then_system_in_place() -> None:
    body = {"model": "claude-sonnet-4-6", "max_tokens": 100,
            "messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": "ctx"}]}
    translated = anthropic_to_openai_request(body, model="gpt-x", max_tokens_cap=None)
    assert translated.body["messages"] == [{"role": "user", "content": "hi"},
                                           {"role": "system", "content": "ctx"}]
    assert translated.dropped == ()


def test_a_system_turn_of_text_blocks_is_joined_and_its_cache_marks_named() -> None:
    body = {"model": "c", "max_tokens": 10, "system": "top", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "system", "content": [
            {"type": "text", "text": "# Environment", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "cwd: /work"}]},
        {"role": "assistant", "content": "ok"}]}
    translated = anthropic_to_openai_request(body, model=None, max_tokens_cap=None)
    assert translated.body["messages"] == [
        {"role": "system", "content": "top"},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "# Environment\n\ncwd: /work"},
        {"role": "assistant", "content": "ok"}]
    assert translated.dropped == ("cache_control",)


def test_non_text_blocks_of_a_system_turn_are_named_and_an_empty_turn_vanishes() -> None:
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    body = {"model": "c", "max_tokens": 10, "messages": [
        {"role": "user", "content": "hi"}, {"role": "system", "content": [image]},
        {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"},
        {"role": "system", "content": ""}]}
    translated = anthropic_to_openai_request(body, model=None, max_tokens_cap=None)
    assert roles(translated.body["messages"]) == ["user", "assistant", "user"]
    assert translated.dropped == ("system.non_text",)


def test_a_system_turn_between_tool_use_and_its_results_follows_the_tool_messages() -> None:
    # OpenAI refuses anything between an assistant's tool_calls and their tool messages.
    body = {"model": "c", "max_tokens": 10, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "ls", "input": {}},
            {"type": "tool_use", "id": "t2", "name": "ls", "input": {}}]},
        {"role": "system", "content": "reminder"},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "a"},
            {"type": "tool_result", "tool_use_id": "t2", "content": "b"},
            {"type": "text", "text": "and?"}]}]}
    messages = a2o(body)["messages"]
    assert [(m["role"], m.get("tool_call_id") or m.get("content")) for m in messages] == [
        ("user", "go"), ("assistant", None), ("tool", "t1"), ("tool", "t2"),
        ("system", "reminder"), ("user", "and?")]


def test_adjacent_system_messages_become_one() -> None:
    body = {"model": "c", "max_tokens": 10, "system": "top", "messages": [
        {"role": "system", "content": "first"},   # ahead of everything: joins the prompt
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "a"}, {"role": "system", "content": "b"}]}
    assert a2o(body)["messages"] == [{"role": "system", "content": "top\n\nfirst"},
                                     {"role": "user", "content": "hi"},
                                     {"role": "system", "content": "a\n\nb"}]


# -- OpenAI -> Anthropic -----------------------------------------------------------------------

def test_later_system_and_developer_messages_become_system_turns_in_place() -> None:
    body = o2a([{"role": "system", "content": "lead"},
                {"role": "developer", "content": [{"type": "text", "text": "also lead"}]},
                {"role": "user", "content": "hi"},
                {"role": "system", "content": "mid"},
                {"role": "assistant", "content": "hello"},
                {"role": "user", "content": "again"},
                {"role": "developer", "content": [{"type": "text", "text": "last"}]}])
    assert body["system"] == [{"type": "text", "text": "lead"},
                              {"type": "text", "text": "also lead"}]
    assert body["messages"] == [
        {"role": "user", "content": "hi"}, {"role": "system", "content": "mid"},
        {"role": "assistant", "content": "hello"}, {"role": "user", "content": "again"},
        {"role": "system", "content": "last"}]


def test_a_model_without_system_turns_gets_them_in_the_top_level_system_in_order() -> None:
    body = o2a([{"role": "system", "content": "lead"}, {"role": "user", "content": "hi"},
                {"role": "system", "content": "mid"}, {"role": "assistant", "content": "hello"},
                {"role": "user", "content": "again"}, {"role": "system", "content": "last"}],
               model=NO_TURNS)
    assert body["system"] == [{"type": "text", "text": t} for t in ("lead", "mid", "last")]
    assert roles(body["messages"]) == ["user", "assistant", "user"]


def test_a_system_message_waits_for_a_place_anthropic_takes() -> None:
    # After an assistant turn: it goes in after the next user turn, just before the answer.
    body = o2a([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                {"role": "system", "content": "s1"}, {"role": "system", "content": "s2"},
                {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}])
    assert body["messages"] == [
        {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
        {"role": "system", "content": [{"type": "text", "text": "s1"},
                                       {"type": "text", "text": "s2"}]},
        {"role": "assistant", "content": "d"}]
    assert "system" not in body
    # Last, after an assistant turn, it has no place: the top-level system takes it.
    body = o2a([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                {"role": "system", "content": "late"}])
    assert body["system"] == "late" and roles(body["messages"]) == ["user", "assistant"]


def test_tool_results_still_lead_the_turn_after_the_tool_use() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    body = o2a([{"role": "user", "content": "go"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "files"},
                {"role": "system", "content": "careful"},
                {"role": "user", "content": "next"},
                {"role": "assistant", "content": "done"}])
    assert body["messages"] == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "c1", "name": "ls", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "files"},
            {"type": "text", "text": "next"}]},
        {"role": "system", "content": "careful"},
        {"role": "assistant", "content": "done"}]


@pytest.mark.parametrize(("model", "takes"), [
    ("claude-opus-4-8", True), ("claude-opus-4-8-20260528", True), ("claude-opus-4.8", True),
    ("claude-opus-4-10", True), ("claude-opus-5-5", True), ("claude-fable-5", True),
    ("claude-mythos-5", True), ("us.anthropic.claude-opus-4-8-v1:0", True),
    ("CLAUDE-OPUS-5", True),
    ("claude-opus-4-7", False), ("claude-opus-4-1-20250805", False),
    ("claude-opus-4-20250514", False), ("claude-sonnet-4-6", False), ("claude-sonnet-5", False),
    ("claude-haiku-4-5", False), ("claude-3-5-sonnet-20241022", False), ("deepseek-chat", False),
    ("gpt-4o", False), ("", False), (None, False),
])
def test_which_models_take_system_turns(model: Any, takes: bool) -> None:
    assert supports_system_turns(model) is takes


def _anthropic_rules_broken(body: dict[str, Any]) -> list[str]:
    """Anthropic's placement rules for system turns, and the tool_result rule."""
    problems: list[str] = []
    messages = body["messages"]
    for index, message in enumerate(messages):
        before = messages[index - 1] if index else None
        after = messages[index + 1] if index + 1 < len(messages) else None
        if message["role"] == "system":
            if before is None or before["role"] != "user":
                problems.append(f"{index}: system turn not after a user turn")
            if after is not None and after["role"] != "assistant":
                problems.append(f"{index}: system turn followed by {after['role']}")
        calls = [b["id"] for b in message["content"] if b.get("type") == "tool_use"] \
            if message["role"] == "assistant" and isinstance(message["content"], list) else []
        if calls and after is not None:
            leading = [b.get("tool_use_id") for b in after["content"][:len(calls)]] \
                if isinstance(after["content"], list) else []
            if after["role"] != "user" or leading != calls:
                problems.append(f"{index}: tool_use not answered by the next turn")
    return problems


@st.composite
def openai_with_system_anywhere(draw: st.DrawFn) -> dict[str, Any]:
    body = draw(openai_requests())
    messages = body["messages"]
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.integers(0, len(messages)))
        role = draw(st.sampled_from(["system", "developer"]))
        messages.insert(where, {"role": role, "content": draw(st.text(min_size=1, max_size=9))})
    return body


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(openai_with_system_anywhere())
def test_system_messages_anywhere_make_a_valid_anthropic_conversation(
    body: dict[str, Any]
) -> None:
    translated = openai_to_anthropic_request(body, model=TAKES_TURNS, max_tokens_cap=None)
    assert _anthropic_rules_broken(translated.body) == []
    system_text = [m["content"] for m in body["messages"] if m["role"] in ("system", "developer")]
    kept: list[str] = []
    top = translated.body.get("system", [])
    kept += [top] if isinstance(top, str) else [b["text"] for b in top]
    for message in translated.body["messages"]:
        if message["role"] == "system":
            content = message["content"]
            kept += [content] if isinstance(content, str) else [b["text"] for b in content]
    assert sorted(kept) == sorted(system_text)  # moved at most, never lost


def _openai_rules_broken(messages: list[dict[str, Any]]) -> list[str]:
    problems = []
    for index, message in enumerate(messages):
        if message["role"] == "assistant" and message.get("tool_calls"):
            ids = [c["id"] for c in message["tool_calls"]]
            following = messages[index + 1:index + 1 + len(ids)]
            if [m.get("tool_call_id") for m in following] != ids:
                problems.append(f"{index}: tool_calls not followed by their tool messages")
    return problems


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 6), min_size=1, max_size=3), st.integers(1, 3))
def test_system_turns_anywhere_keep_tool_messages_right_after_their_calls(
    positions: list[int], calls: int
) -> None:
    ids = [f"t{i}" for i in range(calls)]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": i, "name": "ls", "input": {}} for i in ids]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": i, "content": "r"} for i in ids]},
        {"role": "assistant", "content": "ok"},
    ]
    for number, where in enumerate(positions):
        messages.insert(min(where, len(messages)), {"role": "system", "content": f"s{number}"})
    out = a2o({"model": "c", "max_tokens": 10, "messages": messages})["messages"]
    assert _openai_rules_broken(out) == []
    texts = "\n\n".join(m["content"] for m in out if m["role"] == "system")
    assert sorted(texts.split("\n\n")) == sorted(f"s{n}" for n in range(len(positions)))


# -- local token estimate, validation ------------------------------------------------------------

def test_token_estimate_counts_system_turns() -> None:
    base = {"messages": [{"role": "user", "content": "hi"}]}
    with_turn = {"messages": [{"role": "user", "content": "hi"},
                              {"role": "system", "content": "ctx " * 100}]}
    with_blocks = {"messages": [{"role": "user", "content": "hi"},
                                {"role": "system", "content": [{"type": "text",
                                                                "text": "ctx " * 100}]}]}
    assert estimate_input_tokens(with_turn) >= estimate_input_tokens(base) + 100
    assert estimate_input_tokens(with_blocks) == estimate_input_tokens(with_turn)


def test_validation_takes_system_turns_and_names_all_three_roles_otherwise() -> None:
    check_anthropic_contents({"messages": [{"role": "user", "content": "hi"},
                                           {"role": "system", "content": "ctx"}]})
    check_anthropic_contents({"messages": [{"role": "system", "content": [
        {"type": "text", "text": "first"}]}]})
    with pytest.raises(InvalidRequest) as refused:
        check_anthropic_contents({"messages": [{"role": "wizard", "content": "x"}]})
    assert str(refused.value) == \
        "messages.0.role: Input should be 'user', 'assistant' or 'system'"
    with pytest.raises(InvalidRequest) as refused:
        check_anthropic_contents({"messages": [{"role": "system", "content": 5}]})
    assert str(refused.value) == "messages.0.content: Input should be a valid string or a list"
