"""Request shapes like current Claude Code's, translated both ways (issue 10).

The shapes follow what Claude Code 2.1.332 sends (adaptive thinking, context_management,
output_config, a device/session JSON in metadata.user_id, cache-marked system blocks, a tool with
defer_loading, system turns inside messages); the texts are our own.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from claudex.providers.translate import anthropic_to_openai_request, openai_to_anthropic_request
from claudex.providers.translate.drops import listed

DEVICE_ID = "5f" * 32
SESSION_ID = "0b9a3c1e-7d2f-4e8a-9c61-2f4d8e1a7b30"
EPHEMERAL = {"type": "ephemeral"}


def _tool(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": f"The {name} tool.",
            "input_schema": {"type": "object", "properties": {"arg": {"type": "string"}}},
            **extra}


TOOL_NAMES = ("Agent", "Bash", "Edit", "Glob", "Grep", "Read", "Skill", "TodoWrite",
              "WebSearch", "Write", "NotebookEdit")


def claude_code_request(*, stream: bool, history: bool = False) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>Skills are listed below.</system-reminder>"},
            {"type": "text", "text": "say hi"}]},
        {"role": "system", "content": [
            {"type": "text", "text": "# Environment\nWorking directory: /tmp/project",
             "cache_control": EPHEMERAL}]},
    ]
    if history:  # a tool loop that went on: thinking, a tool call, its result, a reminder
        messages += [
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "", "signature": "EqQBCkYIBxgCKkB" + "x" * 40},
                {"type": "text", "text": "Listing files."},
                {"type": "tool_use", "id": "toolu_01", "name": "Bash",
                 "input": {"arg": "ls"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": "proof.txt",
                 "cache_control": EPHEMERAL}]},
            {"role": "system", "content": "Reminder: keep the todo list current."},
        ]
    return {
        "model": "claude-opus-5-5",
        "max_tokens": 128000,
        "stream": stream,
        "thinking": {"type": "adaptive", "display": "omitted"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "medium"},
        "metadata": {"user_id": json.dumps({"device_id": DEVICE_ID, "account_uuid": "",
                                            "session_id": SESSION_ID})},
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332;"},
            {"type": "text", "text": "You are a coding agent.", "cache_control": EPHEMERAL},
            {"type": "text", "text": "Be careful with files.", "cache_control": EPHEMERAL},
        ],
        "tools": [*(_tool(n) for n in TOOL_NAMES), _tool("WebFetch", defer_loading=True)],
        "messages": messages,
    }


EXPECTED_DROPS = {"cache_control", "thinking", "context_management", "output_config.effort",
                  "metadata.user_id", "defer_loading"}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_claude_code_request_to_openai(stream: bool) -> None:
    translated = anthropic_to_openai_request(claude_code_request(stream=stream),
                                             model="grok-4", max_tokens_cap=8192)
    body = translated.body
    expected_keys = {"model", "messages", "max_tokens", "stream", "tools"}
    assert set(body) == expected_keys | ({"stream_options"} if stream else set())
    assert body["stream"] is stream and body["max_tokens"] == 8192
    assert body["messages"] == [
        {"role": "system", "content": "x-anthropic-billing-header: cc_version=2.1.332;\n\n"
                                      "You are a coding agent.\n\nBe careful with files."},
        {"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>Skills are listed below.</system-reminder>"},
            {"type": "text", "text": "say hi"}]},
        {"role": "system", "content": "# Environment\nWorking directory: /tmp/project"},
    ]
    names = [t["function"]["name"] for t in body["tools"]]
    assert names == [*TOOL_NAMES, "WebFetch"]   # the deferred tool is offered like the rest
    assert "defer_loading" not in json.dumps(body["tools"])
    assert set(translated.dropped) == EXPECTED_DROPS
    assert all(listed(name) for name in translated.dropped)
    # Claude Code's ids never reach the third-party provider.
    wire = json.dumps(body)
    assert DEVICE_ID not in wire and SESSION_ID not in wire and "user" not in body


def test_claude_code_tool_loop_to_openai_keeps_the_loop_and_the_reminders_in_place() -> None:
    translated = anthropic_to_openai_request(claude_code_request(stream=True, history=True),
                                             model="grok-4", max_tokens_cap=None)
    messages = translated.body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "system", "assistant", "tool",
                                             "system"]
    assert messages[3]["content"] == "Listing files."
    assert messages[3]["tool_calls"][0]["id"] == "toolu_01"
    assert messages[4] == {"role": "tool", "tool_call_id": "toolu_01", "content": "proof.txt"}
    assert messages[5] == {"role": "system", "content": "Reminder: keep the todo list current."}
    assert set(translated.dropped) == EXPECTED_DROPS


def test_claude_code_request_there_and_back_keeps_the_conversation() -> None:
    # Anthropic -> an OpenAI backup -> (as an OpenAI client would send it) Anthropic again.
    there = anthropic_to_openai_request(claude_code_request(stream=True, history=True),
                                        model="grok-4", max_tokens_cap=None)
    back = openai_to_anthropic_request(there.body, model="claude-opus-5-5", max_tokens_cap=None)
    body = back.body
    assert body["system"] == ("x-anthropic-billing-header: cc_version=2.1.332;\n\n"
                              "You are a coding agent.\n\nBe careful with files.")
    assert [m["role"] for m in body["messages"]] == ["user", "system", "assistant", "user",
                                                     "system"]
    assert body["messages"][3]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_01", "content": "proof.txt"}]
    assert "metadata" not in body and back.dropped == ()


def test_an_openai_agent_request_to_anthropic() -> None:
    # What an OpenAI-protocol agent sends: a developer message mid-conversation, reasoning
    # effort, a user id, tools and a tool loop.
    call = {"id": "call_1", "type": "function",
            "function": {"name": "shell", "arguments": '{"cmd": "ls"}'}}
    body = {
        "model": "gpt-5", "stream": True, "stream_options": {"include_usage": True},
        "reasoning_effort": "medium", "user": "team-42", "store": False, "seed": 7,
        "max_completion_tokens": 4000,
        "tools": [{"type": "function", "function": {"name": "shell", "parameters": {
            "type": "object", "properties": {"cmd": {"type": "string"}}}}}],
        "messages": [
            {"role": "developer", "content": "You are a coding agent."},
            {"role": "user", "content": "list files"},
            {"role": "developer", "content": "The sandbox is read-only."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
        ],
    }
    translated = openai_to_anthropic_request(body, model="claude-opus-5-5", max_tokens_cap=None)
    out = translated.body
    assert out["system"] == "You are a coding agent."
    assert out["messages"] == [
        {"role": "user", "content": "list files"},
        {"role": "system", "content": "The sandbox is read-only."},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_1", "name": "shell", "input": {"cmd": "ls"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "a.txt"}]},
    ]
    assert out["metadata"] == {"user_id": "team-42"} and out["max_tokens"] == 4000
    assert out["stream"] is True
    assert set(translated.dropped) == {"reasoning_effort", "seed"}
    assert all(listed(name) for name in translated.dropped)
