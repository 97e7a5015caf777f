"""Response, error and model-list translation: golden pairs, stop reasons, SDK acceptance.

Golden files: tests/golden/translate/{a2o,o2a}_response_*.json (regenerate with
CLAUDEX_REGEN_GOLDEN=1 and review the diff).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from claudex.providers.translate import (
    ToolNameMap,
    anthropic_models_to_openai,
    anthropic_to_openai_response,
    models_list,
    openai_models_to_anthropic,
    openai_to_anthropic_response,
    translate_error,
)
from tests.paths import GOLDEN

REGEN = os.environ.get("CLAUDEX_REGEN_GOLDEN") == "1"
RESPONSE_CASES = sorted(GOLDEN.glob("*_response_*.json"))


def check_golden(path: Path, actual: Any) -> None:
    case = json.loads(path.read_text())
    if REGEN:
        case["expected"] = actual
        path.write_text(json.dumps(case, indent=2, ensure_ascii=False) + "\n")
        return
    assert case["expected"] is not None, f"{path.name}: no expected value; regenerate and review"
    assert actual == case["expected"], case["description"]


def _names(options: dict[str, Any]) -> ToolNameMap:
    spec = options.get("shorten") or {"limit": 64, "names": []}
    names = ToolNameMap(spec["limit"])
    for name in spec["names"]:
        names.shorten(name)
    return names


def _translate(case: dict[str, Any]) -> dict[str, Any]:
    options = case["options"]
    if case["kind"] == "openai_to_anthropic_response":
        return openai_to_anthropic_response(case["input"], tool_names=_names(options),
                                            fallback_model=options.get("fallback_model"))
    return anthropic_to_openai_response(case["input"], tool_names=_names(options),
                                        fallback_model=options.get("fallback_model"),
                                        created=options.get("created"))


def test_golden_response_cases_exist() -> None:
    kinds = {json.loads(p.read_text())["kind"] for p in RESPONSE_CASES}
    assert kinds == {"anthropic_to_openai_response", "openai_to_anthropic_response"}


@pytest.mark.parametrize("path", RESPONSE_CASES, ids=lambda p: p.stem)
def test_golden_response(path: Path) -> None:
    check_golden(path, _translate(json.loads(path.read_text())))


@pytest.mark.parametrize("path", RESPONSE_CASES, ids=lambda p: p.stem)
def test_official_sdk_types_accept_translated_responses(path: Path) -> None:
    case = json.loads(path.read_text())
    result = _translate(case)
    if case["kind"] == "openai_to_anthropic_response":
        message = anthropic.types.Message.model_validate(result)
        assert message.stop_reason == result["stop_reason"]
    else:
        completion = openai.types.chat.ChatCompletion.model_validate(result)
        assert completion.choices[0].finish_reason == result["choices"][0]["finish_reason"]


# -- stop reasons --------------------------------------------------------------------------------

def _openai_body(finish_reason: str | None, *, tool_call: bool = False) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": "x"}
    if tool_call:
        message["tool_calls"] = [{"id": "call_1", "type": "function",
                                  "function": {"name": "f", "arguments": "{}"}}]
    return {"id": "c", "model": "m", "choices": [{"index": 0, "message": message,
                                                  "finish_reason": finish_reason}]}


@pytest.mark.parametrize(("finish_reason", "tool_call", "expected"), [
    ("stop", False, "end_turn"),
    ("length", False, "max_tokens"),
    ("tool_calls", True, "tool_use"),
    ("stop", True, "tool_use"),            # a tool call never ends with end_turn
    (None, True, "tool_use"),
    ("function_call", True, "tool_use"),
    ("tool_calls", False, "end_turn"),     # no call to answer: the turn is over
    ("content_filter", False, "refusal"),
    ("length", True, "max_tokens"),        # truncated mid-call: the client must know
    (None, False, "end_turn"),
])
def test_finish_reason_to_stop_reason(finish_reason: str | None, tool_call: bool,
                                      expected: str) -> None:
    result = openai_to_anthropic_response(_openai_body(finish_reason, tool_call=tool_call),
                                          tool_names=ToolNameMap(), fallback_model=None)
    assert result["stop_reason"] == expected


@pytest.mark.parametrize(("stop_reason", "tool_use", "expected"), [
    ("end_turn", False, "stop"),
    ("stop_sequence", False, "stop"),
    ("max_tokens", False, "length"),
    ("tool_use", True, "tool_calls"),
    ("refusal", False, "content_filter"),
    ("pause_turn", False, "stop"),
    ("model_context_window_exceeded", False, "length"),
    (None, False, "stop"),
])
def test_stop_reason_to_finish_reason(stop_reason: str | None, tool_use: bool,
                                      expected: str) -> None:
    content: list[dict[str, Any]] = [{"type": "text", "text": "x"}]
    if tool_use:
        content.append({"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}})
    body = {"id": "msg_1", "model": "claude", "content": content, "stop_reason": stop_reason,
            "usage": {"input_tokens": 1, "output_tokens": 1}}
    result = anthropic_to_openai_response(body, tool_names=ToolNameMap(), fallback_model=None,
                                          created=0)
    assert result["choices"][0]["finish_reason"] == expected


def test_response_without_model_or_usage_uses_fallbacks() -> None:
    result = openai_to_anthropic_response({"choices": []}, tool_names=ToolNameMap(),
                                          fallback_model="grok-3")
    assert result["model"] == "grok-3"
    assert result["content"] == [] and result["stop_reason"] == "end_turn"
    assert result["usage"] == {"input_tokens": 0, "output_tokens": 0}
    assert result["id"].startswith("msg_")
    anthropic.types.Message.model_validate(result)


def test_malformed_tool_arguments_become_an_empty_input() -> None:
    body = _openai_body("tool_calls", tool_call=True)
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = '{"a": '
    result = openai_to_anthropic_response(body, tool_names=ToolNameMap(), fallback_model=None)
    assert result["content"][-1]["input"] == {}
    assert result["stop_reason"] == "tool_use"


# -- errors --------------------------------------------------------------------------------------

def test_anthropic_overloaded_becomes_openai_503_with_message_kept() -> None:
    body = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    status, out = translate_error(529, body, source="anthropic", target="openai")
    assert status == 503
    error = json.loads(out)["error"]
    assert error["message"] == "Overloaded"
    assert error["code"] == "overloaded_error"
    assert error["type"] == "server_error"


@pytest.mark.parametrize(("status", "anthropic_type", "openai_type"), [
    (400, "invalid_request_error", "invalid_request_error"),
    (401, "authentication_error", "authentication_error"),
    (429, "rate_limit_error", "rate_limit_error"),
    (500, "api_error", "server_error"),
])
def test_anthropic_errors_keep_status_for_openai_clients(status: int, anthropic_type: str,
                                                          openai_type: str) -> None:
    body = json.dumps({"type": "error", "error": {"type": anthropic_type,
                                                  "message": "why"}}).encode()
    out_status, out = translate_error(status, body, source="anthropic", target="openai")
    assert out_status == status
    assert json.loads(out)["error"] == {"message": "why", "type": openai_type, "param": None,
                                        "code": anthropic_type}


@pytest.mark.parametrize(("status", "expected_type"), [
    (400, "invalid_request_error"), (401, "authentication_error"), (404, "not_found_error"),
    (429, "rate_limit_error"), (500, "api_error"), (503, "api_error"),
])
def test_openai_errors_become_anthropic_errors(status: int, expected_type: str) -> None:
    body = json.dumps({"error": {"message": "Rate limit reached for gpt-4o", "type": "requests",
                                 "param": None, "code": "rate_limit_exceeded"}}).encode()
    out_status, out = translate_error(status, body, source="openai", target="anthropic")
    assert out_status == status
    assert json.loads(out) == {"type": "error", "error": {
        "type": expected_type, "message": "Rate limit reached for gpt-4o"}}


def test_non_json_error_body_keeps_its_text() -> None:
    status, out = translate_error(502, b"<html>Bad Gateway</html>", source="openai",
                                  target="anthropic")
    assert status == 502
    assert json.loads(out)["error"]["message"] == "<html>Bad Gateway</html>"
    _, empty = translate_error(500, b"", source="anthropic", target="openai")
    assert json.loads(empty)["error"]["message"]


def test_same_protocol_error_passes_unchanged() -> None:
    body = b'{"error":{"message":"nope"}}'
    assert translate_error(418, body, source="openai", target="openai") == (418, body)


def test_translated_errors_are_what_the_sdks_raise_on() -> None:
    _, out = translate_error(429, b'{"error":{"message":"slow down","type":"tokens"}}',
                             source="openai", target="anthropic")
    anthropic.types.ErrorResponse.model_validate(json.loads(out))


# -- model lists ---------------------------------------------------------------------------------

def test_models_list_in_either_shape() -> None:
    openai_list = models_list(["grok-3", "deepseek-chat", "grok-3"], protocol="openai")
    assert [m["id"] for m in openai_list["data"]] == ["grok-3", "deepseek-chat"]
    for item in openai_list["data"]:
        openai.types.Model.model_validate(item)
    anthropic_list = models_list(["grok-3"], protocol="anthropic")
    assert anthropic_list["first_id"] == anthropic_list["last_id"] == "grok-3"
    for item in anthropic_list["data"]:
        anthropic.types.ModelInfo.model_validate(item)


def test_model_lists_convert_both_ways() -> None:
    upstream_openai = {"object": "list", "data": [
        {"id": "gpt-4o", "object": "model", "created": 1715367049, "owned_by": "system"}]}
    as_anthropic = openai_models_to_anthropic(upstream_openai)
    assert as_anthropic["data"][0]["created_at"] == "2024-05-10T18:50:49Z"
    anthropic.types.ModelInfo.model_validate(as_anthropic["data"][0])
    upstream_anthropic = {"data": [{"type": "model", "id": "claude-sonnet-4-5-20250929",
                                    "display_name": "Claude Sonnet 4.5",
                                    "created_at": "2025-09-29T00:00:00Z"}],
                          "has_more": False, "first_id": "x", "last_id": "x"}
    as_openai = anthropic_models_to_openai(upstream_anthropic)
    assert as_openai["data"] == [{"id": "claude-sonnet-4-5-20250929", "object": "model",
                                  "created": 1759104000, "owned_by": "anthropic"}]
