"""Responses client translation, pure parts: request bodies, answers and event streams."""

from __future__ import annotations

import json
from typing import Any

import pytest

from claudex.providers.translate import drops as drop_tables
from claudex.providers.translate.responses_client import responses_request
from claudex.providers.translate.responses_client_reasoning import (
    ReasoningTap,
    without_foreign_reasoning,
)
from claudex.providers.validation_problems import InvalidRequest

SHELL = {"type": "function", "name": "exec_command", "description": "Run a command.",
         "strict": False, "parameters": {"type": "object",
                                         "properties": {"cmd": {"type": "string"}}}}
AGENTS = {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.",
          "tools": [{"type": "function", "name": "spawn_agent", "parameters": None}]}
PATCH = {"type": "custom", "name": "apply_patch", "description": "Patch files.",
         "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}}

# What Codex CLI 0.171.0 sends on its second turn (trimmed).
CODEX_TURN_2: dict[str, Any] = {
    "model": "gpt-5.1-codex", "stream": True, "store": False, "tool_choice": "auto",
    "parallel_tool_calls": True, "reasoning": {"summary": "auto"},
    "include": ["reasoning.encrypted_content"], "prompt_cache_key": "sess-1",
    "client_metadata": {"session_id": "sess-1"},
    "tools": [SHELL, AGENTS, {"type": "web_search", "external_web_access": False}],
    "input": [
        {"type": "message", "id": "msg_1", "role": "developer",
         "content": [{"type": "input_text", "text": "You are Codex."}]},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "make the proof file"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command",
         "arguments": "{\"cmd\": \"touch proof\"}", "status": "completed"},
        {"type": "function_call_output", "call_id": "call_1", "output": "exit 0"},
    ],
}


def test_codex_turn_to_chat_completions() -> None:
    plan = responses_request(CODEX_TURN_2, target="openai", model="grok-3", max_tokens_cap=None)
    assert plan.body == {
        "model": "grok-3",
        "messages": [
            {"role": "system", "content": "You are Codex."},
            {"role": "user", "content": [{"type": "text", "text": "make the proof file"}]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "exec_command", "arguments": "{\"cmd\": \"touch proof\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "exit 0"},
        ],
        "parallel_tool_calls": True,
        "tools": [
            {"type": "function", "function": {"name": "exec_command",
                                              "description": "Run a command.",
                                              "parameters": SHELL["parameters"]}},
            {"type": "function", "function": {"name": "multi_agent_v1__spawn_agent",
                                              "parameters": {"type": "object",
                                                             "properties": {}}}},
        ],
        "tool_choice": "auto", "stream": True, "stream_options": {"include_usage": True},
    }
    assert plan.dropped == ("web_search", "reasoning_items", "reasoning", "include",
                            "prompt_cache_key", "client_metadata")
    assert all(drop_tables.listed(name) for name in plan.dropped)


def test_codex_turn_to_anthropic() -> None:
    plan = responses_request(CODEX_TURN_2, target="anthropic", model="claude-sonnet-4-5",
                             max_tokens_cap=2000)
    body = plan.body
    assert body["system"] == "You are Codex."
    assert body["max_tokens"] == 2000
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "exec_command",
         "input": {"cmd": "touch proof"}}]
    assert body["messages"][2]["content"][0]["tool_use_id"] == "call_1"
    assert "reasoning_items" in plan.dropped and "web_search" in plan.dropped
    uncapped = responses_request(CODEX_TURN_2, target="anthropic", model="claude-sonnet-4-5",
                                 max_tokens_cap=None)
    assert uncapped.body["max_tokens"] == 32_000  # Codex sets no max_output_tokens
    asked = responses_request({**CODEX_TURN_2, "max_output_tokens": 500}, target="anthropic",
                              model="claude-sonnet-4-5", max_tokens_cap=None)
    assert asked.body["max_tokens"] == 500


@pytest.mark.parametrize("key", ["previous_response_id", "conversation"])
def test_stored_history_is_refused(key: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        responses_request({"model": "m", "input": "more", key: "resp_1"}, target="openai",
                          model=None, max_tokens_cap=None)
    assert caught.value.problem.openai_param == key
    assert "no conversation history" in caught.value.problem.openai_message()


def test_custom_and_local_shell_tools_round_trip() -> None:
    body = {"model": "m", "tools": [PATCH, {"type": "local_shell"}], "input": [
        {"role": "user", "content": "fix it"},
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** x"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"},
        {"type": "local_shell_call", "id": "ls1", "call_id": "c2", "status": "completed",
         "action": {"type": "exec", "command": ["ls"], "env": {}}},
        {"type": "local_shell_call_output", "id": "c2", "output": "a b"},
    ]}
    plan = responses_request(body, target="openai", model=None, max_tokens_cap=None)
    calls = plan.body["messages"][1]["tool_calls"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"input": "*** x"}
    assert plan.body["messages"][3]["tool_calls"][0]["function"] == {
        "name": "local_shell", "arguments": "{\"command\": [\"ls\"]}"}
    assert plan.body["messages"][4] == {"role": "tool", "tool_call_id": "c2", "content": "a b"}
    assert "custom_tool_format" in plan.dropped
    answer = plan.answer({"id": "chatcmpl-9", "model": "m", "choices": [{
        "index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "tool_calls": [
                {"id": "c3", "type": "function", "function": {
                    "name": "apply_patch", "arguments": "{\"input\": \"*** y\"}"}},
                {"id": "c4", "type": "function", "function": {
                    "name": "local_shell", "arguments": "{\"command\": [\"pwd\"]}"}}]}}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3}}, model="m")
    assert answer["output"] == [
        {"type": "custom_tool_call", "id": "fc_c3", "call_id": "c3", "name": "apply_patch",
         "input": "*** y", "status": "completed"},
        {"type": "local_shell_call", "id": "fc_c4", "call_id": "c4", "status": "completed",
         "action": {"type": "exec", "env": {}, "command": ["pwd"]}},
    ]
    assert answer["usage"]["total_tokens"] == 10 and answer["id"] == "resp_chatcmpl-9"


def test_namespace_call_restored_in_the_answer() -> None:
    plan = responses_request({"model": "m", "input": "x", "tools": [AGENTS]},
                             target="openai", model=None, max_tokens_cap=None)
    answer = plan.answer({"choices": [{"finish_reason": "length", "message": {
        "content": "partial", "tool_calls": [{"id": "c1", "function": {
            "name": "multi_agent_v1__spawn_agent", "arguments": "{}"}}]}}]}, model="m")
    assert answer["status"] == "incomplete"
    assert answer["incomplete_details"] == {"reason": "max_output_tokens"}
    assert answer["output"][0]["content"][0]["text"] == "partial"
    call = answer["output"][1]
    assert (call["name"], call["namespace"]) == ("spawn_agent", "multi_agent_v1")


def _events(raw: bytes) -> list[dict[str, Any]]:
    out = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        name, data = block.split("\n", 1)
        payload = json.loads(data.removeprefix("data: "))
        assert name == f"event: {payload['type']}"
        out.append(payload)
    return out


def _chunk(delta: dict[str, Any] | None = None, finish: str | None = None,
           **extra: Any) -> bytes:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return f"data: {json.dumps({'id': 'cc1', 'model': 'up', 'choices': choices, **extra})}\n\n" \
        .encode()


def test_chat_stream_becomes_responses_events_in_the_sdk_order() -> None:
    plan = responses_request({"model": "m", "input": "x", "stream": True, "tools": [SHELL]},
                             target="openai", model="m", max_tokens_cap=None)
    codec = plan.stream(model="m")
    raw = b"".join([
        codec.feed(_chunk({"role": "assistant", "content": ""})),
        codec.feed(_chunk({"content": "Hel"})),
        codec.feed(_chunk({"content": "lo"})[:20]), codec.feed(_chunk({"content": "lo"})[20:]),
        codec.feed(_chunk({"tool_calls": [{"index": 0, "id": "call_9", "type": "function",
                                           "function": {"name": "exec_command",
                                                        "arguments": ""}}]})),
        codec.feed(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]})),
        codec.feed(_chunk({}, "tool_calls")),
        codec.feed(_chunk(None, usage={"prompt_tokens": 4, "completion_tokens": 2})),
        codec.feed(b"data: [DONE]\n\n"),
    ])
    events = _events(raw)
    assert [e["type"] for e in events] == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[6]["text"] == "Hello"
    assert events[9]["output_index"] == 1 and events[9]["item"]["call_id"] == "call_9"
    done = events[-1]["response"]
    assert [item["type"] for item in done["output"]] == ["message", "function_call"]
    assert done["usage"]["input_tokens"] == 4 and done["status"] == "completed"
    assert codec.finished and codec.error is None and codec.finish() == b""


def test_anthropic_stream_error_becomes_response_failed() -> None:
    plan = responses_request({"model": "m", "input": "x", "stream": True},
                             target="anthropic", model="claude-x", max_tokens_cap=None)
    codec = plan.stream(model="claude-x")
    start = {"type": "message_start", "message": {"id": "msg_1", "model": "claude-x",
                                                  "usage": {"input_tokens": 3}}}
    raw = codec.feed(f"event: message_start\ndata: {json.dumps(start)}\n\n".encode())
    raw += codec.feed(b'event: content_block_start\ndata: {"type":"content_block_start",'
                      b'"index":0,"content_block":{"type":"text","text":""}}\n\n'
                      b'event: content_block_delta\ndata: {"type":"content_block_delta",'
                      b'"index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n')
    raw += codec.feed(b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
                      b'"message":"Overloaded"}}\n\n')
    events = _events(raw)
    assert [e["type"] for e in events][-1] == "response.failed"
    assert events[-1]["response"]["error"]["message"] == "Overloaded"
    assert codec.error == "Overloaded" and not codec.finished


def test_reasoning_tap_finds_encrypted_items_split_anywhere() -> None:
    item = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc-a"}
    stream = (b'event: response.output_item.added\ndata: {"type":"response.output_item.added",'
              b'"item":{"type":"reasoning","encrypted_content":null}}\n\n'
              + f"event: response.output_item.done\ndata: {json.dumps({'type': 'response.output_item.done', 'item': item})}\n\n".encode())  # noqa: E501
    found: list[str] = []
    tap = ReasoningTap(found.append)
    for start in range(0, len(stream), 7):
        tap(stream[start:start + 7])
    assert found == ["enc-a"]
    body = {"model": "m", "input": [{"role": "user", "content": "x"}, item,
                                    {**item, "encrypted_content": "enc-b"},
                                    {**item, "encrypted_content": "enc-unknown"}]}
    producers = {"enc-a": "a", "enc-b": "b"}
    kept = without_foreign_reasoning(body, "b", producers.get)
    assert kept is not None
    assert [i.get("encrypted_content") for i in kept["input"]] == [None, "enc-b", "enc-unknown"]
    assert without_foreign_reasoning({"model": "m", "input": [item]}, "a", producers.get) is None
