"""The portable-conversation rewrite (claudex.providers.thinking) and its model table, on
request shapes like Claude Code's: adaptive thinking with display omitted, context_management
clearing thinking, output_config effort, system turns inside messages, several tool loops."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from claudex.providers.thinking import make_portable
from claudex.providers.thinking_models import ThinkingOff, thinking_model

SIGNERS = {"sig-a1": "a", "sig-a2": "a", "sig-b1": "b", "sig-b2": "b", "red-b": "b"}


def signer(value: str) -> str | None:
    return SIGNERS.get(value)


def thinking(sig: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": "", "signature": sig}


def tool_use(n: int) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": {"command": "ls"}}


def tool_result(n: int) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "ok"}


def claude_code(messages: list[dict[str, Any]], model: str = "claude-opus-5-5",
                **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": 128000,
        "stream": True,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}},
                  {"name": "WebFetch", "input_schema": {"type": "object"},
                   "defer_loading": True}],
        "thinking": {"type": "adaptive", "display": "omitted"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "medium"},
        "messages": messages,
    }
    body.update(extra)
    return body


def two_loops(first: str, second: str) -> list[dict[str, Any]]:
    """A finished tool loop (signed by `first`), then one in progress (signed by `second`)."""
    return [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": [thinking(first), tool_use(1)]},
        {"role": "user", "content": [tool_result(1)]},
        {"role": "assistant", "content": [{"type": "text", "text": "Two files."}]},
        {"role": "system", "content": "The user switched to plan mode."},
        {"role": "user", "content": "now count the lines"},
        {"role": "assistant", "content": [thinking(second), {"type": "text", "text": "On it."},
                                          tool_use(2)]},
        {"role": "user", "content": [tool_result(2)]},
    ]


def test_a_conversation_signed_by_the_target_alone_is_left_alone() -> None:
    body = claude_code(two_loops("sig-a1", "sig-a2"))
    before = copy.deepcopy(body)
    assert make_portable(body, target="a", model=body["model"], signer=signer) is None
    assert body == before


def test_blocks_signed_by_another_provider_are_dropped_and_named() -> None:
    body = claude_code(two_loops("sig-a1", "sig-b1"), model="claude-opus-5-5")
    out = make_portable(body, target="a", model=body["model"], signer=signer)
    assert out is not None
    messages = out.body["messages"]
    assert messages[1]["content"][0] == thinking("sig-a1")          # a's own block stays
    assert [b["type"] for b in messages[6]["content"]] == ["text", "tool_use"]
    assert "dropped: thinking (signed by b)" in out.notes
    # Opus 5.5 cannot turn thinking off: the request keeps it, and the log says why.
    assert out.body["thinking"] == {"type": "adaptive", "display": "omitted"}
    assert any(n.startswith("thinking kept on: claude-opus-5-5") for n in out.notes)
    # The client's body is not modified, and untouched messages are shared, not copied.
    assert body["messages"][6]["content"][0] == thinking("sig-b1")
    assert messages[1] is body["messages"][1]


def test_unknown_signatures_are_kept() -> None:
    body = claude_code(two_loops("sig-from-before-a-restart", "sig-a2"))
    assert make_portable(body, target="a", model=body["model"], signer=signer) is None
    # ... whichever provider they go to.
    assert make_portable(body, target="b", model=body["model"], signer=signer) is not None


def test_redacted_thinking_is_bound_to_its_provider_too() -> None:
    messages = two_loops("sig-a1", "sig-a2")
    messages[6]["content"].insert(1, {"type": "redacted_thinking", "data": "red-b"})
    body = claude_code(messages)
    out = make_portable(body, target="a", model=body["model"], signer=signer)
    assert out is not None
    assert out.notes == ("dropped: redacted_thinking (signed by b)",)
    assert [b["type"] for b in out.body["messages"][6]["content"]] == \
        ["thinking", "text", "tool_use"]


def test_drops_are_counted_per_signer_and_kind() -> None:
    messages = two_loops("sig-b1", "sig-b2")
    messages[6]["content"].insert(1, {"type": "redacted_thinking", "data": "red-b"})
    body = claude_code(messages, model="claude-opus-5-5")
    out = make_portable(body, target="a", model=body["model"], signer=signer)
    assert out is not None
    assert out.notes[0] == "dropped: thinking x2, redacted_thinking (signed by b)"


def test_a_message_of_nothing_but_foreign_thinking_goes_entirely() -> None:
    messages = [
        {"role": "user", "content": "think"},
        {"role": "assistant", "content": [thinking("sig-b1")]},  # cut off at max_tokens
        {"role": "user", "content": "go on"},
    ]
    body = claude_code(messages)
    out = make_portable(body, target="a", model=body["model"], signer=signer)
    assert out is not None
    assert [m["role"] for m in out.body["messages"]] == ["user", "user"]


@pytest.mark.parametrize("model", ["claude-opus-4-6", "claude-sonnet-4-5-20250929",
                                   "claude-opus-4-8", "claude-haiku-4-5"])
def test_thinking_is_left_out_where_that_means_off(model: str) -> None:
    # The open tool loop's turn came from an OpenAI-protocol backup: no thinking block.
    messages = two_loops("sig-a1", "sig-a2")
    messages[6]["content"] = [{"type": "text", "text": "On it."}, tool_use(2)]
    body = claude_code(messages, model=model)
    out = make_portable(body, target="a", model=model, signer=signer)
    assert out is not None
    assert "thinking" not in out.body
    # clear_thinking needs thinking on; it was the only edit, so context_management goes.
    assert "context_management" not in out.body
    assert out.body["output_config"] == {"effort": "medium"}
    assert out.notes == ("thinking off: the history has no thinking block before the last tool "
                         "use",)
    assert out.body["messages"] is body["messages"]  # nothing dropped: history untouched


def test_a_dropped_block_in_the_open_loop_turns_thinking_off() -> None:
    body = claude_code(two_loops("sig-a1", "sig-b1"), model="claude-opus-4-6")
    out = make_portable(body, target="a", model="claude-opus-4-6", signer=signer)
    assert out is not None
    assert out.notes == ("dropped: thinking (signed by b)",
                         "thinking off: last tool-use turn served elsewhere")
    assert "thinking" not in out.body


def test_other_context_edits_stay() -> None:
    messages = two_loops("sig-a1", "sig-b1")
    edits = [{"type": "clear_tool_uses_20250919"},
             {"type": "clear_thinking_20251015", "keep": "all"}]
    body = claude_code(messages, model="claude-sonnet-4-6",
                       context_management={"edits": edits})
    out = make_portable(body, target="a", model="claude-sonnet-4-6", signer=signer)
    assert out is not None
    assert out.body["context_management"] == {"edits": [{"type": "clear_tool_uses_20250919"}]}


def test_opus_5_takes_disabled_and_only_at_effort_high_or_below() -> None:
    messages = two_loops("sig-a1", "sig-b1")
    body = claude_code(messages, model="claude-opus-5", output_config={"effort": "max"})
    out = make_portable(body, target="a", model="claude-opus-5", signer=signer)
    assert out is not None
    assert out.body["thinking"] == {"type": "disabled"}
    assert out.body["output_config"] == {"effort": "high"}
    assert "effort max -> high: thinking off needs it" in out.notes


def test_a_model_thinking_by_default_is_turned_off_even_when_the_request_is_silent() -> None:
    messages = two_loops("sig-a1", "sig-b1")
    body = claude_code(messages, model="claude-sonnet-5")
    del body["thinking"]
    out = make_portable(body, target="a", model="claude-sonnet-5", signer=signer)
    assert out is not None
    assert out.body["thinking"] == {"type": "disabled"}


def test_sonnet_5_5_uses_between_tools_instead_of_disabled() -> None:
    body = claude_code(two_loops("sig-a1", "sig-b1"), model="claude-sonnet-5-5")
    out = make_portable(body, target="a", model="claude-sonnet-5-5", signer=signer)
    assert out is not None
    assert out.body["thinking"] == {"type": "between_tools"}
    assert out.body["context_management"] == body["context_management"]


def test_only_the_final_tool_turn_needs_a_thinking_block() -> None:
    # The finished loop's turn has no thinking (another provider served it): that is fine.
    messages = two_loops("sig-b1", "sig-a2")
    body = claude_code(messages, model="claude-opus-4-6")
    out = make_portable(body, target="a", model="claude-opus-4-6", signer=signer)
    assert out is not None
    assert out.notes == ("dropped: thinking (signed by b)",)
    assert out.body["thinking"] == body["thinking"]


def test_no_tool_loop_in_progress_needs_nothing() -> None:
    messages = two_loops("sig-a1", "sig-a2")[:6]  # ends with the user's new question
    messages[1]["content"] = [tool_use(1)]          # an old loop without thinking
    body = claude_code(messages, model="claude-opus-4-6")
    assert make_portable(body, target="a", model="claude-opus-4-6", signer=signer) is None


def test_thinking_off_or_absent_on_an_off_by_default_model_needs_nothing() -> None:
    messages = two_loops("sig-a1", "sig-a2")
    messages[6]["content"] = [tool_use(2)]
    for thinking_value in ({"type": "disabled"}, None):
        body = claude_code(messages, model="claude-opus-4-6")
        if thinking_value is None:
            del body["thinking"]
        else:
            body["thinking"] = thinking_value
        assert make_portable(body, target="a", model="claude-opus-4-6", signer=signer) is None


def test_without_a_signer_nothing_is_looked_up() -> None:
    body = claude_code(two_loops("sig-b1", "sig-b2"))
    assert make_portable(body, target="a", model=body["model"], signer=None) is None


def test_malformed_conversations_are_left_to_the_provider() -> None:
    for messages in ("text", [None, 5, {"role": "assistant", "content": "x"},
                              {"role": "assistant", "content": [None, {"type": 3}]}]):
        body = {"model": "claude-opus-4-6", "messages": messages,
                "thinking": {"type": "enabled", "budget_tokens": 1024}}
        assert make_portable(body, target="a", model="claude-opus-4-6", signer=signer) is None


@pytest.mark.parametrize(("model", "default_on", "off"), [
    ("claude-opus-5-5", True, ThinkingOff.IMPOSSIBLE),
    ("claude-fable-5-1", True, ThinkingOff.IMPOSSIBLE),
    ("claude-mythos-preview", True, ThinkingOff.IMPOSSIBLE),
    ("claude-opus-5", True, ThinkingOff.DISABLED),
    ("claude-opus-5-20260301", True, ThinkingOff.DISABLED),
    ("claude-sonnet-5", True, ThinkingOff.DISABLED),
    ("claude-sonnet-5-5", True, ThinkingOff.BETWEEN_TOOLS),
    ("claude-opus-4-6", False, ThinkingOff.OMIT),
    ("anthropic.claude-opus-4-6-v1", False, ThinkingOff.OMIT),
    ("claude-opus-4-5-20251101", False, ThinkingOff.OMIT),
    ("claude-opus-4-20250514", False, ThinkingOff.OMIT),
    ("claude-3-7-sonnet-20250219", False, ThinkingOff.OMIT),
    # Not in the documentation's table: newer ones are left alone, older ones left out.
    ("claude-haiku-5-5", True, ThinkingOff.IMPOSSIBLE),
    ("claude-opus-6", True, ThinkingOff.IMPOSSIBLE),
    ("claude-sonnet-4-1", False, ThinkingOff.OMIT),
    # Anthropic-compatible third parties: an explicit "disabled".
    ("deepseek-chat", False, ThinkingOff.DISABLED),
    (None, False, ThinkingOff.DISABLED),
])
def test_the_model_table(model: str | None, default_on: bool, off: ThinkingOff) -> None:
    info = thinking_model(model)
    assert (info.default_on, info.off) == (default_on, off)
