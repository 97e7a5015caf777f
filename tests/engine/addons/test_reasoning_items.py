"""A Responses model's reasoning kept per provider: pairing with function calls, putting it
back in front of them, asking for it only where the model reasons, and the bounded memory."""

from __future__ import annotations

from typing import Any

import pytest

from claudex.engine.addons.reasoning_memory import ReasoningMemory, carry_reasoning, remember_output
from claudex.providers.translate.reasoning_items import (
    ReasoningCollector,
    put_back,
    reasoning_pairs,
    wants_reasoning,
)

R1 = {"type": "reasoning", "id": "rs_1", "status": "completed", "summary": [],
      "encrypted_content": "enc-1"}
CALL = {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}


def test_reasoning_pairs_with_the_call_after_it_without_id_or_status() -> None:
    output = [R1, {"type": "message", "role": "assistant", "content": []}, CALL,
              {"type": "reasoning", "id": "rs_2", "summary": []}]  # no content: not carried
    assert reasoning_pairs(output) == [("call_1", ({"type": "reasoning", "summary": [],
                                                    "encrypted_content": "enc-1"},))]
    collector = ReasoningCollector()
    collector.add({"type": "function_call", "call_id": "call_0"})  # nothing before it
    assert collector.pairs == []


def test_put_back_goes_before_the_assistant_message_of_that_turn() -> None:
    items: list[Any] = [
        {"type": "message", "role": "user", "content": []},
        {"type": "message", "role": "assistant", "content": []},
        dict(CALL),
        {"type": "function_call_output", "call_id": "call_1", "output": "x"},
        {"type": "function_call", "call_id": "call_unknown"},
    ]
    carried = ({"type": "reasoning", "encrypted_content": "enc-1"},)
    assert put_back(items, {"call_1": carried}.get) == 1
    assert [i.get("type") for i in items] == ["message", "reasoning", "message",
                                              "function_call", "function_call_output",
                                              "function_call"]


@pytest.mark.parametrize(("model", "chatgpt", "body", "expected"), [
    ("gpt-5-codex", False, {}, True),
    ("o3-mini", False, {}, True),
    ("gpt-4o", False, {}, False),
    ("gpt-4o", False, {"reasoning": {"effort": "low"}}, True),
    ("anything", True, {}, True),
])
def test_encrypted_reasoning_is_asked_for_where_the_model_reasons(
    model: str, chatgpt: bool, body: dict[str, Any], expected: bool
) -> None:
    assert wants_reasoning(model, chatgpt=chatgpt, body=body) is expected


def test_memory_is_per_provider_and_bounded() -> None:
    memory = ReasoningMemory(capacity=2)
    remember_output(memory, "a", [R1, CALL])
    body: dict[str, Any] = {"model": "gpt-5", "input": [dict(CALL)]}
    assert carry_reasoning(body, memory, "b", model="gpt-5", chatgpt=False) == 0
    assert body["include"] == ["reasoning.encrypted_content"]
    assert carry_reasoning(body, memory, "a", model="gpt-5", chatgpt=False) == 1
    assert body["input"][0]["encrypted_content"] == "enc-1"
    memory.remember("a", "x", ())
    memory.remember("a", "y", ())
    assert len(memory) == 2 and memory.recall("a", "call_1") is None
    plain: dict[str, Any] = {"model": "gpt-4o", "input": [dict(CALL)]}
    assert carry_reasoning(plain, memory, "a", model="gpt-4o", chatgpt=False) == 0
    assert "include" not in plain
