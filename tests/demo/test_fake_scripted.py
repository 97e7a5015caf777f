"""Scripted fake replies (claudex.demo.scripted): the tool loop `make e2e` drives Claude Code
through, in both protocols, continued by whichever provider gets the conversation."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from claudex.demo.fake_provider import FakeProvider
from claudex.demo.scripted import next_step, script_prompt

TOKEN = "tok123"
PROMPT = script_prompt(TOKEN, [("Write", "/tmp/scratch/proof.txt"),
                               ("Bash", "curl -s http://127.0.0.1:1/_fake/state")])
SCHEMA = {"type": "object", "properties": {"x": {"type": "string"}}}
ANTHROPIC_TOOLS = [{"name": name, "description": name, "input_schema": SCHEMA}
                   for name in ("Bash", "Read", "Write")]
OPENAI_TOOLS = [{"type": "function", "function": {"name": t["name"], "parameters": SCHEMA}}
                for t in ANTHROPIC_TOOLS]


def anthropic_conversation(results: int, *, error: bool = False) -> dict[str, Any]:
    """Claude Code's shape: a reminder block before the prompt, a system turn, tool rounds."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>x</system-reminder>"},
            {"type": "text", "text": PROMPT}]},
        {"role": "system", "content": "mid-conversation context"},
    ]
    for index in range(results):
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{index}", "name": "Write", "input": {}}]})
        last = index == results - 1
        content = "<tool_use_error>denied</tool_use_error>" if error and last else "ok"
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{index}", "content": content}]})
    return {"model": "claude-opus-5-5", "max_tokens": 1000, "messages": messages,
            "tools": ANTHROPIC_TOOLS}


def openai_conversation(results: int, model: str = "o-chat") -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "sys"},
                                      {"role": "user", "content": PROMPT}]
    for index in range(results):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{index}", "type": "function",
             "function": {"name": "Write", "arguments": "{}"}}]})
        messages.append({"role": "tool", "tool_call_id": f"call_{index}", "content": "ok"})
    return {"model": model, "messages": messages, "tools": OPENAI_TOOLS}


@pytest.mark.parametrize("protocol", ["anthropic", "openai"])
def test_the_step_is_the_number_of_tool_results(protocol: str) -> None:
    build = anthropic_conversation if protocol == "anthropic" else openai_conversation
    first = next_step(protocol, build(0), "r1")  # type: ignore[arg-type]
    assert first is not None and first.tool_call is not None
    assert first.tool_call.name == "Write"
    assert json.loads(first.tool_call.arguments) == {"file_path": "/tmp/scratch/proof.txt",
                                                     "content": TOKEN}
    assert first.tool_call.id == ("toolu_01r1" if protocol == "anthropic" else "call_r1")
    second = next_step(protocol, build(1), "r2")  # type: ignore[arg-type]
    assert second is not None and second.tool_call is not None
    assert second.tool_call.name == "Bash"
    assert json.loads(second.tool_call.arguments)["command"] == \
        "curl -s http://127.0.0.1:1/_fake/state"
    last = next_step(protocol, build(2), "r3")  # type: ignore[arg-type]
    assert last is not None and last.tool_call is None and last.words == ("done", TOKEN)


def test_a_failed_tool_result_stops_the_script_and_says_so() -> None:
    step = next_step("anthropic", anthropic_conversation(1, error=True), "r")
    assert step is not None and step.tool_call is None
    assert " ".join(step.words).startswith("script stopped: step 1 failed:")


def test_a_missing_tool_is_named_and_no_script_without_marker_or_tools() -> None:
    body = anthropic_conversation(0)
    body["tools"] = [t for t in ANTHROPIC_TOOLS if t["name"] != "Write"]
    step = next_step("anthropic", body, "r")
    assert step is not None and step.tool_call is None
    assert " ".join(step.words) == \
        "script error: the request offers no Write tool; it offers Bash, Read."
    del body["tools"]
    assert next_step("anthropic", body, "r") is None  # a side request: the ordinary answer
    plain = {"model": "m", "messages": [{"role": "user", "content": "hello"}],
             "tools": ANTHROPIC_TOOLS}
    assert next_step("anthropic", plain, "r") is None


def test_script_prompt_refuses_what_it_cannot_write() -> None:
    with pytest.raises(ValueError):
        script_prompt("t", [("Read", "/x")])
    with pytest.raises(ValueError):
        script_prompt("t", [("Bash", "echo a\necho b")])


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=5.0) as client:
        yield client


async def test_a_fake_answers_the_script_in_its_protocol_streamed_too(
    http: httpx.AsyncClient,
) -> None:
    async with FakeProvider("a", "anthropic") as a, FakeProvider("o", "openai") as o:
        answer = await http.post(f"{a.base_url}/v1/messages", json=anthropic_conversation(0))
        assert answer.status_code == 200
        block = answer.json()["content"][-1]
        assert block["type"] == "tool_use" and block["name"] == "Write"
        assert block["input"] == {"file_path": "/tmp/scratch/proof.txt", "content": TOKEN}
        assert answer.json()["stop_reason"] == "tool_use"

        body = {**openai_conversation(2), "stream": True}
        async with http.stream("POST", f"{o.base_url}/chat/completions", json=body) as stream:
            text = "".join([line async for line in stream.aiter_lines()])
        assert '"content":"done"' in text and f'"content":" {TOKEN}"' in text

        chat = await http.post(f"{o.base_url}/chat/completions", json=openai_conversation(1))
        call = chat.json()["choices"][0]["message"]["tool_calls"][0]
        assert call["function"]["name"] == "Bash"
        unknown = await http.post(f"{o.base_url}/chat/completions",
                                  json=openai_conversation(1, model="claude-opus-5-5"))
        assert unknown.status_code == 404
        # What each fake answered is recorded with the request, and readable from outside.
        recorded = await http.get(f"{o.base_url.removesuffix('/v1')}/_fake/requests")
        assert [r["status"] for r in recorded.json()["requests"]] == [200, 200, 404]
        assert [r.status for r in a.requests] == [200]


def test_codex_cli_shell_and_its_environment_message_first() -> None:
    # Codex CLI puts its environment context in a user message before the prompt, and its
    # shell is exec_command taking `cmd`.
    body = {"messages": [
        {"role": "system", "content": "You are Codex."},
        {"role": "user", "content": "<environment_context>cwd</environment_context>"},
        {"role": "user", "content": script_prompt("cdx", [("Bash", "echo hi")])}],
        "tools": [{"type": "function", "function": {"name": "exec_command"}}]}
    step = next_step("openai", body, "r1")
    assert step is not None and step.tool_call is not None
    assert step.tool_call.name == "exec_command"
    assert json.loads(step.tool_call.arguments) == {"cmd": "echo hi"}
