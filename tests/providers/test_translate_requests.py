"""Request translation: golden pairs, round trips that keep meaning, tool names, limits.

Golden files live in tests/golden/translate/{a2o,o2a}_request_*.json. After an intended change,
regenerate them with `CLAUDEX_REGEN_GOLDEN=1 pytest tests/test_translate_*.py` and review the
diff like code.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claudex.providers.translate import (
    DEFAULT_MAX_TOKENS,
    ToolNameMap,
    Translated,
    anthropic_to_openai_request,
    estimate_input_tokens,
    include_usage_requested,
    openai_to_anthropic_request,
)
from claudex.providers.translate.tokens import IMAGE_TOKENS
from tests.paths import GOLDEN

REGEN = os.environ.get("CLAUDEX_REGEN_GOLDEN") == "1"
LONG_NAME = "mcp__github_enterprise_server__list_pull_request_review_comments_for_repository"


def check_golden(path: Path, actual: Any) -> None:
    case = json.loads(path.read_text())
    if REGEN:
        case["expected"] = actual
        path.write_text(json.dumps(case, indent=2, ensure_ascii=False) + "\n")
        return
    assert case["expected"] is not None, f"{path.name}: no expected value; regenerate and review"
    assert actual == case["expected"], case["description"]


def _result(translated: Translated) -> dict[str, Any]:
    return {"body": translated.body, "dropped": list(translated.dropped),
            "renamed": dict(translated.tool_names)}


REQUEST_CASES = sorted(GOLDEN.glob("*_request_*.json"))


def test_golden_request_cases_exist() -> None:
    kinds = {json.loads(p.read_text())["kind"] for p in REQUEST_CASES}
    assert kinds == {"anthropic_to_openai_request", "openai_to_anthropic_request"}
    assert len(REQUEST_CASES) >= 16


@pytest.mark.parametrize("path", REQUEST_CASES, ids=lambda p: p.stem)
def test_golden_request(path: Path) -> None:
    case = json.loads(path.read_text())
    translate = {"anthropic_to_openai_request": anthropic_to_openai_request,
                 "openai_to_anthropic_request": openai_to_anthropic_request}[case["kind"]]
    options = case["options"]
    translated = translate(case["input"], model=options.get("model"),
                           max_tokens_cap=options.get("max_tokens_cap"))
    check_golden(path, _result(translated))


# -- tool names ----------------------------------------------------------------------------------

_OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def test_valid_tool_names_are_kept() -> None:
    names = ToolNameMap()
    assert names.shorten("get_weather") == "get_weather"
    assert names.shorten("a" * 64) == "a" * 64
    assert len(names) == 0
    assert names.restore("get_weather") == "get_weather"


def test_long_tool_name_is_shortened_reversibly_and_deterministically() -> None:
    first, second = ToolNameMap(), ToolNameMap()
    short = first.shorten(LONG_NAME)
    assert _OPENAI_NAME.match(short)
    assert short == second.shorten(LONG_NAME)   # the same in every request
    assert short.startswith("mcp__github_enterprise_server__")   # still readable
    assert first.restore(short) == LONG_NAME
    assert first.shorten(LONG_NAME) == short and len(first) == 1


def test_tool_name_with_invalid_characters_is_sanitised() -> None:
    names = ToolNameMap()
    short = names.shorten("files.read file")
    assert _OPENAI_NAME.match(short)
    assert names.restore(short) == "files.read file"


def test_anthropic_limit_keeps_names_up_to_128() -> None:
    names = ToolNameMap(128)
    assert names.shorten("x" * 100) == "x" * 100
    assert len(names.shorten("x" * 129)) == 128


@given(st.lists(st.text(min_size=1, max_size=150), min_size=1, max_size=8, unique=True))
def test_shortened_names_are_valid_distinct_and_restorable(originals: list[str]) -> None:
    names = ToolNameMap()
    shorts = [names.shorten(name) for name in originals]
    assert all(_OPENAI_NAME.match(s) for s in shorts)
    assert len(set(shorts)) == len(shorts)
    assert [names.restore(s) for s in shorts] == originals


def test_tool_names_in_history_tools_and_choice_agree() -> None:
    body = {"model": "m", "max_tokens": 10,
            "tools": [{"name": LONG_NAME, "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "tool", "name": LONG_NAME},
            "messages": [{"role": "user", "content": "go"},
                         {"role": "assistant", "content": [
                             {"type": "tool_use", "id": "toolu_1", "name": LONG_NAME,
                              "input": {}}]},
                         {"role": "user", "content": [
                             {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}]}
    out = anthropic_to_openai_request(body, model=None, max_tokens_cap=None).body
    short = out["tools"][0]["function"]["name"]
    assert out["tool_choice"] == {"type": "function", "function": {"name": short}}
    assert out["messages"][1]["tool_calls"][0]["function"]["name"] == short


# -- limits and dropped fields -------------------------------------------------------------------

def _a(**fields: Any) -> dict[str, Any]:
    return {"model": "claude", "max_tokens": 100,
            "messages": [{"role": "user", "content": "hi"}], **fields}


def _o(**fields: Any) -> dict[str, Any]:
    return {"model": "gpt", "messages": [{"role": "user", "content": "hi"}], **fields}


def test_max_tokens_capped_by_profile_both_ways() -> None:
    assert anthropic_to_openai_request(_a(max_tokens=9000), model=None,
                                       max_tokens_cap=4000).body["max_tokens"] == 4000
    assert anthropic_to_openai_request(_a(max_tokens=900), model=None,
                                       max_tokens_cap=4000).body["max_tokens"] == 900
    assert openai_to_anthropic_request(_o(max_completion_tokens=9000), model=None,
                                       max_tokens_cap=4000).body["max_tokens"] == 4000


def test_anthropic_target_gets_a_default_max_tokens() -> None:
    assert openai_to_anthropic_request(_o(), model=None, max_tokens_cap=None) \
        .body["max_tokens"] == DEFAULT_MAX_TOKENS
    assert openai_to_anthropic_request(_o(), model=None, max_tokens_cap=2048) \
        .body["max_tokens"] == 2048
    # max_completion_tokens is the newer name and wins over max_tokens.
    assert openai_to_anthropic_request(_o(max_tokens=5, max_completion_tokens=7), model=None,
                                       max_tokens_cap=None).body["max_tokens"] == 7


def test_max_tokens_field_for_openai_reasoning_models() -> None:
    body = anthropic_to_openai_request(_a(), model="o3", max_tokens_cap=None,
                                       max_tokens_field="max_completion_tokens").body
    assert body["max_completion_tokens"] == 100 and "max_tokens" not in body


def test_model_none_keeps_the_clients_model() -> None:
    assert anthropic_to_openai_request(_a(), model=None, max_tokens_cap=None).body["model"] \
        == "claude"
    assert openai_to_anthropic_request(_o(), model="claude-x", max_tokens_cap=None) \
        .body["model"] == "claude-x"


def test_stream_usage_requested_from_openai_targets_only_when_streaming() -> None:
    streaming = anthropic_to_openai_request(_a(stream=True), model=None, max_tokens_cap=None)
    assert streaming.body["stream_options"] == {"include_usage": True}
    plain = anthropic_to_openai_request(_a(stream=False), model=None, max_tokens_cap=None)
    assert plain.body["stream"] is False and "stream_options" not in plain.body
    assert include_usage_requested(_o(stream=True, stream_options={"include_usage": True}))
    assert not include_usage_requested(_o(stream=True))


def test_temperature_above_anthropic_range_is_dropped_not_clamped() -> None:
    translated = openai_to_anthropic_request(_o(temperature=1.5), model=None,
                                             max_tokens_cap=None)
    assert "temperature" not in translated.body
    assert any(d.startswith("temperature") for d in translated.dropped)
    kept = openai_to_anthropic_request(_o(temperature=1), model=None, max_tokens_cap=None)
    assert kept.body["temperature"] == 1 and kept.dropped == ()


def test_unknown_and_target_less_fields_are_listed() -> None:
    a = anthropic_to_openai_request(_a(top_k=5, container="c1", future_field={"x": 1}),
                                    model=None, max_tokens_cap=None)
    assert set(a.dropped) == {"top_k", "container", "future_field"}
    o = openai_to_anthropic_request(_o(seed=1, logit_bias={"50256": -100}, n=3),
                                    model=None, max_tokens_cap=None)
    assert set(o.dropped) == {"seed", "logit_bias", "n"}


def test_no_op_values_are_not_listed() -> None:
    a = anthropic_to_openai_request(_a(thinking={"type": "disabled"}, top_k=None),
                                    model=None, max_tokens_cap=None)
    assert a.dropped == ()
    o = openai_to_anthropic_request(_o(n=1, logprobs=False, presence_penalty=0, seed=None),
                                    model=None, max_tokens_cap=None)
    assert o.dropped == ()


def test_tool_choice_without_tools_is_dropped() -> None:
    only_server_tool = _a(tools=[{"type": "web_search_20250305", "name": "web_search"}],
                          tool_choice={"type": "any"})
    translated = anthropic_to_openai_request(only_server_tool, model=None, max_tokens_cap=None)
    assert "tools" not in translated.body and "tool_choice" not in translated.body
    assert set(translated.dropped) == {"server_tools", "tool_choice"}
    o = openai_to_anthropic_request(_o(tool_choice="required"), model=None, max_tokens_cap=None)
    assert "tool_choice" not in o.body and o.dropped == ("tool_choice",)


def test_parallel_tool_calls_false_without_tool_choice() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    body = openai_to_anthropic_request(_o(tools=tools, parallel_tool_calls=False), model=None,
                                       max_tokens_cap=None).body
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


def test_missing_parameters_schema_becomes_an_empty_object_schema() -> None:
    tools = [{"type": "function", "function": {"name": "now"}}]
    body = openai_to_anthropic_request(_o(tools=tools), model=None, max_tokens_cap=None).body
    assert body["tools"] == [{"name": "now", "input_schema": {"type": "object",
                                                              "properties": {}}}]


def test_malformed_tool_arguments_are_listed() -> None:
    body = _o(messages=[
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"}])
    translated = openai_to_anthropic_request(body, model=None, max_tokens_cap=None)
    assert translated.body["messages"][1]["content"][0]["input"] == {}
    assert "tool_call_arguments" in translated.dropped


def test_empty_assistant_turn_is_dropped_and_listed() -> None:
    body = _o(messages=[{"role": "user", "content": "a"}, {"role": "assistant", "content": ""},
                        {"role": "user", "content": "b"}])
    translated = openai_to_anthropic_request(body, model=None, max_tokens_cap=None)
    assert [m["role"] for m in translated.body["messages"]] == ["user", "user"]
    assert "empty_turn" in translated.dropped


# -- round trips keep meaning --------------------------------------------------------------------

_texts = st.text(min_size=1, max_size=20).filter(lambda s: not s.startswith("[tool error]"))
_json_scalars = st.none() | st.booleans() | st.integers(-1000, 1000) | \
    st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=10)
_json_values = st.recursive(_json_scalars, lambda inner: st.lists(inner, max_size=3) |
                            st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)
_inputs = st.dictionaries(st.text(max_size=8), _json_values, max_size=4)
_schemas = st.fixed_dictionaries(
    {"type": st.just("object"),
     "properties": st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True),
                                   st.sampled_from([{"type": "string"}, {"type": "integer"}]),
                                   max_size=3)})
# Anthropic allows 128 characters, OpenAI 64: make sure long names turn up often.
_anthropic_names = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_-]{0,20}", fullmatch=True) | \
    st.from_regex(r"[a-zA-Z][a-zA-Z0-9_-]{64,127}", fullmatch=True)
_openai_names = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_-]{0,63}", fullmatch=True)
_images = st.sampled_from([
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}},
    {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}},
])


_system_turns = st.builds(lambda c: {"role": "system", "content": c}, _texts | st.lists(
    st.builds(lambda t: {"type": "text", "text": t}, _texts), min_size=1, max_size=2))


@st.composite
def anthropic_requests(draw: st.DrawFn) -> dict[str, Any]:
    tools = draw(st.lists(
        st.builds(lambda name, desc, schema: {"name": name, "description": desc,
                                              "input_schema": schema},
                  _anthropic_names, _texts, _schemas),
        max_size=3, unique_by=lambda t: t["name"]))
    names = [t["name"] for t in tools]
    messages: list[dict[str, Any]] = []
    pending: list[str] = []
    for turn in range(draw(st.integers(1, 3))):
        blocks: list[dict[str, Any]] = []
        for call_id in pending:
            content = draw(st.one_of(_texts, st.lists(
                st.builds(lambda t: {"type": "text", "text": t}, _texts), min_size=1,
                max_size=2)))
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id,
                                      "content": content}
            if draw(st.booleans()):
                result["is_error"] = True
            blocks.append(result)
        extras = draw(st.lists(st.builds(lambda t: {"type": "text", "text": t}, _texts) | _images,
                               min_size=0 if pending else 1, max_size=3))
        blocks += extras
        if len(blocks) == 1 and blocks[0]["type"] == "text" and draw(st.booleans()):
            messages.append({"role": "user", "content": blocks[0]["text"]})
        else:
            messages.append({"role": "user", "content": blocks})
        # Where Claude Code puts system turns, and Anthropic takes them: after a user turn.
        system_turn = draw(st.none() | _system_turns)
        if system_turn is not None:
            messages.append(system_turn)
        texts = draw(st.lists(_texts, max_size=2))
        calls = [{"type": "tool_use", "id": f"toolu_{turn}_{i}", "name": name, "input": args}
                 for i, (name, args) in enumerate(draw(st.lists(
                     st.tuples(st.sampled_from(names), _inputs), max_size=2)) if names else [])]
        assistant = [{"type": "text", "text": t} for t in texts] + calls
        if not assistant:
            assistant = [{"type": "text", "text": "ok"}]
        messages.append({"role": "assistant", "content": assistant})
        pending = [c["id"] for c in calls]
    if pending:
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": i, "content": "done"} for i in pending]})
        system_turn = draw(st.none() | _system_turns)
        if system_turn is not None:
            messages.append(system_turn)  # the last message, as in Claude Code's requests
    # A model that takes system turns, so that they come back where they were.
    body: dict[str, Any] = {"model": "claude-opus-4-8", "messages": messages,
                            "max_tokens": draw(st.integers(1, 100_000))}
    system = draw(st.none() | _texts | st.lists(
        st.builds(lambda t: {"type": "text", "text": t}, _texts), min_size=1, max_size=3))
    if system is not None:
        body["system"] = system
    if tools:
        body["tools"] = tools
        choice = draw(st.none() | st.sampled_from(["auto", "any", "tool", "none"]))
        if choice is not None:
            body["tool_choice"] = {"type": choice}
            if choice == "tool":
                body["tool_choice"]["name"] = draw(st.sampled_from(names))
            if choice != "none" and draw(st.booleans()):
                body["tool_choice"]["disable_parallel_tool_use"] = True
    optional = {
        "temperature": st.floats(0, 1),
        "top_p": st.floats(0, 1),
        "stop_sequences": st.lists(_texts, min_size=1, max_size=3),
        "metadata": st.builds(lambda u: {"user_id": u}, _texts),
        "stream": st.booleans(),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            body[key] = draw(strategy)
    return body


def _joined(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n\n".join(b["text"] for b in content or () if b.get("type") == "text")


def anthropic_meaning(body: dict[str, Any], names: ToolNameMap | None = None) -> dict[str, Any]:
    """What a request says, ignoring representation choices (string vs one text block, where
    adjacent user turns split, how assistant text blocks are cut)."""
    restore = names.restore if names is not None else (lambda n: n)
    turns: list[tuple[str, list[Any]]] = []
    for message in body["messages"]:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        items: list[Any] = []
        if message["role"] == "system":
            items = [("text", _joined(blocks))]
        elif message["role"] == "assistant":
            text = _joined(blocks)
            items = [("text", text)] if text else []
            items += [("tool_use", b["id"], restore(b["name"]), b["input"])
                      for b in blocks if b["type"] == "tool_use"]
        else:
            for b in blocks:
                if b["type"] == "text":
                    items.append(("text", b["text"]))
                elif b["type"] == "image":
                    items.append(("image", json.dumps(b["source"], sort_keys=True)))
                elif b["type"] == "tool_result":
                    items.append(("tool_result", b["tool_use_id"], _joined(b.get("content", "")),
                                  bool(b.get("is_error"))))
        if turns and turns[-1][0] == "user" == message["role"]:
            turns[-1][1].extend(items)
        else:
            turns.append((message["role"], items))
    choice = body.get("tool_choice")
    return {
        "model": body["model"],
        "system": _joined(body.get("system", "")),
        "turns": turns,
        "tools": [(restore(t["name"]), t.get("description"), t["input_schema"])
                  for t in body.get("tools", ())],
        "tool_choice": None if choice is None else (
            choice["type"], restore(choice.get("name", "")),
            bool(choice.get("disable_parallel_tool_use"))),
        "limits": {k: body.get(k) for k in ("max_tokens", "temperature", "top_p",
                                            "stop_sequences", "stream")},
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(anthropic_requests())
def test_anthropic_request_round_trip_keeps_meaning(body: dict[str, Any]) -> None:
    there = anthropic_to_openai_request(body, model=None, max_tokens_cap=None)
    back = openai_to_anthropic_request(there.body, model=None, max_tokens_cap=None)
    # Claude Code's device/session id stays with Anthropic; nothing else is left out.
    assert there.dropped == (("metadata.user_id",) if "metadata" in body else ())
    assert "user" not in there.body and back.dropped == ()
    assert all(_OPENAI_NAME.match(t["function"]["name"]) for t in there.body.get("tools", ()))
    assert anthropic_meaning(back.body, there.tool_names) == anthropic_meaning(body)


@st.composite
def openai_requests(draw: st.DrawFn) -> dict[str, Any]:
    def function_tool(name: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {"type": "function", "function": {"name": name, "parameters": schema}}

    tools = draw(st.lists(st.builds(function_tool, _openai_names, _schemas), max_size=3,
                          unique_by=lambda t: t["function"]["name"]))
    names = [t["function"]["name"] for t in tools]
    messages: list[dict[str, Any]] = [
        {"role": role, "content": text}
        for role, text in draw(st.lists(st.tuples(st.sampled_from(["system", "developer"]),
                                                  _texts), max_size=2))]
    for turn in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            messages.append({"role": "user", "content": draw(_texts)})
        else:
            parts = draw(st.lists(
                st.builds(lambda t: {"type": "text", "text": t}, _texts) | st.sampled_from([
                    {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4A"}},
                    {"type": "image_url", "image_url": {"url": "https://example.com/b.png"}}]),
                min_size=1, max_size=3))
            messages.append({"role": "user", "content": parts})
        mid = draw(st.none() | st.tuples(st.sampled_from(["system", "developer"]), _texts))
        if mid is not None:  # after a user message, where an Anthropic system turn may stand
            messages.append({"role": mid[0], "content": mid[1]})
        calls = [{"id": f"call_{turn}_{i}", "type": "function",
                  "function": {"name": name, "arguments": json.dumps(args)}}
                 for i, (name, args) in enumerate(draw(st.lists(
                     st.tuples(st.sampled_from(names), _inputs), max_size=2)) if names else [])]
        content = draw(st.none() | _texts) if calls else draw(_texts)
        assistant: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            assistant["tool_calls"] = calls
        messages.append(assistant)
        for call in calls:
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": draw(st.text(max_size=20))})
    body: dict[str, Any] = {"model": "gpt-x", "messages": messages}
    if tools:
        body["tools"] = tools
        choice = draw(st.none() | st.sampled_from(["auto", "required", "none", "function"]))
        if choice == "function":
            body["tool_choice"] = {"type": "function",
                                   "function": {"name": draw(st.sampled_from(names))}}
        elif choice is not None:
            body["tool_choice"] = choice
        if draw(st.booleans()):
            body["parallel_tool_calls"] = draw(st.booleans())
    optional = {
        "max_tokens": st.integers(1, 100_000),
        "max_completion_tokens": st.integers(1, 100_000),
        "temperature": st.floats(0, 1),
        "top_p": st.floats(0, 1),
        "stop": _texts | st.lists(_texts, min_size=1, max_size=3),
        "user": _texts,
        "stream": st.booleans(),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            body[key] = draw(strategy)
    return body


def _parts(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [("text", content)]
    return [("text", p["text"]) if p["type"] == "text" else ("image", p["image_url"]["url"])
            for p in content]


def openai_meaning(body: dict[str, Any], names: ToolNameMap | None = None) -> dict[str, Any]:
    """Leading system/developer messages are the system prompt; later ones are turns in place
    (one turn for a run of them)."""
    restore = names.restore if names is not None else (lambda n: n)
    system: list[str] = []
    turns: list[Any] = []
    for message in body["messages"]:
        role = message["role"]
        if role in ("system", "developer") and not turns:
            system.append(message["content"])
        elif role in ("system", "developer"):
            if turns[-1][0] == "system":
                turns[-1] = ("system", turns[-1][1] + "\n\n" + message["content"])
            else:
                turns.append(("system", message["content"]))
        elif role == "user":
            turns.append(("user", _parts(message["content"])))
        elif role == "assistant":
            calls = [(c["id"], restore(c["function"]["name"]),
                      json.loads(c["function"]["arguments"]))
                     for c in message.get("tool_calls", ())]
            turns.append(("assistant", message.get("content") or "", calls))
        else:
            turns.append(("tool", message["tool_call_id"], message["content"]))
    tools = [(restore(t["function"]["name"]), t["function"]["parameters"])
             for t in body.get("tools", ())]
    choice = body.get("tool_choice", "auto" if tools else None)
    if isinstance(choice, dict):
        choice = ("function", restore(choice["function"]["name"]))
    stop = body.get("stop")
    return {
        "model": body["model"],
        "system": "\n\n".join(system),
        "turns": turns,
        "tools": tools,
        "tool_choice": choice,
        "serial_tools": bool(tools) and choice != "none" and
        body.get("parallel_tool_calls") is False,
        "max_tokens": body.get("max_completion_tokens", body.get("max_tokens",
                                                                  DEFAULT_MAX_TOKENS)),
        "limits": {k: body.get(k) for k in ("temperature", "top_p", "stream")},
        "stop": [stop] if isinstance(stop, str) else stop,
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(openai_requests())
def test_openai_request_round_trip_keeps_meaning(body: dict[str, Any]) -> None:
    # To a model that takes system turns, so that the later system messages stay in place.
    there = openai_to_anthropic_request(body, model="claude-opus-4-8", max_tokens_cap=None)
    back = anthropic_to_openai_request(there.body, model=body["model"], max_tokens_cap=None)
    assert there.dropped == ()
    # `user` becomes metadata.user_id, which does not come back (it would leave Anthropic).
    assert back.dropped == (("metadata.user_id",) if "user" in body else ())
    assert openai_meaning(back.body, there.tool_names) == openai_meaning(body)


# -- local token estimate ------------------------------------------------------------------------

def test_token_estimate_grows_with_content_and_counts_images() -> None:
    small = {"messages": [{"role": "user", "content": "hello"}]}
    large = {"messages": [{"role": "user", "content": "hello " * 400}]}
    assert 1 <= estimate_input_tokens(small) < estimate_input_tokens(large)
    assert 550 <= estimate_input_tokens(large) <= 650   # ~2,400 ASCII characters / 4
    with_image = {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "hello"},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/x.png"}}]}]}
    assert estimate_input_tokens(with_image) >= estimate_input_tokens(small) + IMAGE_TOKENS - 1


def test_token_estimate_counts_system_tools_and_tool_traffic() -> None:
    base = {"messages": [{"role": "user", "content": "hi"}]}
    richer = {**base, "system": "s" * 400,
              "tools": [{"name": "t", "input_schema": {"type": "object",
                                                       "properties": {"q": {"type": "string"}}}}]}
    assert estimate_input_tokens(richer) > estimate_input_tokens(base) + 100
    cjk = {"messages": [{"role": "user", "content": "漢字" * 100}]}
    ascii_same_length = {"messages": [{"role": "user", "content": "ab" * 100}]}
    assert estimate_input_tokens(cjk) > 3 * estimate_input_tokens(ascii_same_length)
    assert estimate_input_tokens({}) == 1
