"""Garbage in the Responses client direction: any node of a rich Responses request replaced
by any JSON value is translated or refused as InvalidRequest (a 400), never a crash; and any
upstream answer or stream event, however broken, is translated without raising."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claudex.providers.translate.responses_client import responses_request
from claudex.providers.translate.responses_client_answers import chat_to_responses_answer
from claudex.providers.validation import check_top_level
from claudex.providers.validation_problems import InvalidRequest

RICH: dict[str, Any] = {
    "model": "gpt-5", "instructions": "Be brief.", "stream": True, "store": False,
    "max_output_tokens": 100, "temperature": 0.2, "parallel_tool_calls": True,
    "tool_choice": {"type": "function", "name": "exec_command"},
    "text": {"format": {"type": "json_schema", "name": "x", "schema": {}}, "verbosity": "low"},
    "tools": [
        {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
        {"type": "namespace", "name": "ns", "description": "d",
         "tools": [{"type": "function", "name": "f"}, {"type": "custom", "name": "c"}]},
        {"type": "custom", "name": "apply_patch"}, {"type": "local_shell"},
        {"type": "web_search"},
    ],
    "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text",
                                                              "text": "rules"}]},
        {"role": "user", "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBO", "detail": "low"},
            {"type": "input_file", "file_data": "data:application/pdf;base64,JVBE",
             "filename": "a.pdf"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text",
                                                              "text": "ok"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "namespace": "ns",
         "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1",
         "output": [{"type": "input_text", "text": "done"}]},
        {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "x"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "ok"},
        {"type": "local_shell_call", "call_id": "c3", "action": {"command": ["ls"]}},
        {"type": "local_shell_call_output", "id": "c3", "output": "a"},
    ],
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=6)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += _paths(value, (*prefix, index))
    return out


PATHS = _paths(RICH)


def test_the_rich_body_translates_for_both_targets() -> None:
    for target in ("openai", "anthropic"):
        plan = responses_request(RICH, target=target, model="m",  # type: ignore[arg-type]
                                 max_tokens_cap=None)
        assert plan.body["messages"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PATHS), json_values, st.sampled_from(["openai", "anthropic"]))
def test_any_node_replaced_is_translated_or_refused(path: tuple[Any, ...], value: Any,
                                                    target: str) -> None:
    body = copy.deepcopy(RICH)
    node: Any = body
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    try:
        check_top_level("responses", "responses", body)  # as the proxy does, at the edge
        plan = responses_request(body, target=target, model="m",  # type: ignore[arg-type]
                                 max_tokens_cap=None)
    except InvalidRequest as exc:
        assert exc.problem.openai_message()
        return
    json.dumps(plan.body)


@settings(max_examples=200, deadline=None)
@given(json_values, st.sampled_from(["openai", "anthropic"]))
def test_any_upstream_answer_or_event_is_translated(value: Any, target: str) -> None:
    plan = responses_request({"model": "m", "input": "x", "tools": RICH["tools"]},
                             target=target, model="m", max_tokens_cap=None)  # type: ignore[arg-type]
    # The Chat -> Responses step (an Anthropic answer reaches it through its Chat form).
    body = value if isinstance(value, dict) else {"choices": [{"message": value}],
                                                  "model": value, "usage": value}
    json.dumps(chat_to_responses_answer(body, request=RICH, tools=plan.tools,
                                        fallback_model="m"))
    codec = plan.stream(model="m")
    for data in (json.dumps({"choices": [{"delta": value}]}), json.dumps(value),
                 json.dumps({"choices": [{"delta": {"tool_calls": [value]}}]}),
                 json.dumps({"type": "content_block_start", "index": 0,
                             "content_block": value})):
        codec.feed(f"event: content_block_start\ndata: {data}\n\n".encode())
    codec.finish()
