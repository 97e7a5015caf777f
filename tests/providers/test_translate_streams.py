"""Stream translation: recorded upstream streams fed whole and split at random byte positions
must give the same, well-formed client stream, which the official SDKs accept.

Recorded streams: tests/golden/translate/{o2a,a2o}_stream_*.json, `input` being the upstream's
raw SSE text and `expected` the client events (regenerate with CLAUDEX_REGEN_GOLDEN=1 and
review the diff).
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claudex.providers.sse import CommitWatcher, StreamSignal, anthropic_signal, openai_signal
from claudex.providers.translate import (
    AnthropicToOpenAIStream,
    OpenAIToAnthropicStream,
    ToolNameMap,
)
from soak.protocol_check import (
    anthropic_events,
    sse_events,
    validate_anthropic,
    validate_openai,
)
from tests.paths import GOLDEN

REGEN = os.environ.get("CLAUDEX_REGEN_GOLDEN") == "1"
STREAM_CASES = sorted(GOLDEN.glob("*_stream_*.json"))
O2A_CASES = [p for p in STREAM_CASES if p.name.startswith("o2a_")]
A2O_CASES = [p for p in STREAM_CASES if p.name.startswith("a2o_")]
Translator = OpenAIToAnthropicStream | AnthropicToOpenAIStream


def _load(path: Path) -> dict[str, Any]:
    case: dict[str, Any] = json.loads(path.read_text())
    return case


def _translator(case: dict[str, Any]) -> Translator:
    options = case["options"]
    if case["kind"] == "openai_to_anthropic_stream":
        return OpenAIToAnthropicStream(tool_names=ToolNameMap(), model=options.get("model"))
    return AnthropicToOpenAIStream(tool_names=ToolNameMap(128), model=options.get("model"),
                                   include_usage=options.get("include_usage", False),
                                   created=options.get("created"))


def _run(case: dict[str, Any], pieces: list[bytes]) -> bytes:
    translator = _translator(case)
    out = b"".join(translator.feed(piece) for piece in pieces)
    return out + translator.finish()


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


# The client-side oracle (parsing and validating what a client receives) is shared with the soak.


def _summarise(case: dict[str, Any], raw: bytes) -> Any:
    if case["kind"] == "openai_to_anthropic_stream":
        return validate_anthropic(anthropic_events(raw))
    summary = validate_openai(raw)
    for call in summary.tool_calls:
        assert isinstance(json.loads(call["arguments"]), dict)
    return summary


def _expected_form(case: dict[str, Any], raw: bytes) -> list[Any]:
    if case["kind"] == "openai_to_anthropic_stream":
        return list(anthropic_events(raw))
    return [data if data == "[DONE]" else json.loads(data) for _, data in sse_events(raw)]


# -- recorded streams ----------------------------------------------------------------------------

def test_recorded_streams_exist() -> None:
    assert len(O2A_CASES) >= 4 and len(A2O_CASES) >= 3


@pytest.mark.parametrize("path", STREAM_CASES, ids=lambda p: p.stem)
def test_golden_stream(path: Path) -> None:
    case = _load(path)
    raw = _run(case, [case["input"].encode()])
    _summarise(case, raw)
    actual = _expected_form(case, raw)
    if REGEN:
        case["expected"] = actual
        path.write_text(json.dumps(case, indent=2, ensure_ascii=False) + "\n")
        return
    assert case["expected"] is not None, f"{path.name}: no expected value; regenerate"
    assert actual == case["expected"], case["description"]


@pytest.mark.parametrize("path", STREAM_CASES, ids=lambda p: p.stem)
@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=100_000), max_size=40))
def test_stream_split_anywhere_gives_the_same_output(path: Path, cuts: list[int]) -> None:
    case = _load(path)
    data = case["input"].encode()
    whole = _run(case, [data])
    assert _run(case, _split(data, cuts)) == whole


@pytest.mark.parametrize("path", STREAM_CASES, ids=lambda p: p.stem)
def test_stream_byte_by_byte_and_with_crlf(path: Path) -> None:
    case = _load(path)
    data = case["input"].encode()
    whole = _run(case, [data])
    assert _run(case, [data[i:i + 1] for i in range(len(data))]) == whole
    crlf = case["input"].replace("\n", "\r\n").encode()
    assert _run(case, [crlf[i:i + 7] for i in range(0, len(crlf), 7)]) == whole


def test_openai_tool_stream_content() -> None:
    case = _load(GOLDEN / "o2a_stream_tool_calls.json")
    summary = validate_anthropic(anthropic_events(_run(case, [case["input"].encode()])))
    assert [(b["id"], b["name"], b["input"]) for b in summary.blocks] == [
        ("call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather", {"city": "Paris", "unit": "c"}),
        ("call_Qx", "get_time", {"tz": "Europe/Paris"})]
    assert summary.stop_reason == "tool_use"
    # Usage from the last, choice-less chunk; the 64 cached tokens are reported apart.
    assert summary.usage["output_tokens"] == 17
    assert summary.usage["input_tokens"] == 18
    assert summary.usage["cache_read_input_tokens"] == 64


def test_anthropic_tool_stream_content() -> None:
    case = _load(GOLDEN / "a2o_stream_tool_use.json")
    summary = validate_openai(_run(case, [case["input"].encode()]))
    assert summary.content == "Checking."
    assert [(c["id"], c["name"], json.loads(c["arguments"])) for c in summary.tool_calls] == [
        ("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather",
         {"city": "San Francisco, CA", "unit": "fahrenheit"}),
        ("toolu_02", "get_time", {"tz": "PST"})]
    assert summary.finish_reason == "tool_calls" and summary.usage is None


def test_anthropic_text_stream_reports_usage_when_asked() -> None:
    case = _load(GOLDEN / "a2o_stream_text.json")
    summary = validate_openai(_run(case, [case["input"].encode()]))
    assert summary.content == "Hello — ça va? 🙂"
    assert summary.usage == {"prompt_tokens": 1496, "completion_tokens": 15,
                             "total_tokens": 1511, "prompt_tokens_details": {"cached_tokens": 1024}}
    assert summary.model == "claude-sonnet-4-5-20250929"


@pytest.mark.parametrize("name", ["o2a_stream_error.json", "a2o_stream_error.json"])
def test_error_mid_stream_is_mapped_and_ends_the_stream(name: str) -> None:
    case = _load(GOLDEN / name)
    translator = _translator(case)
    out = translator.feed(case["input"].encode())
    assert translator.error
    assert translator.feed(b'data: {"choices":[]}\n\n') == b""
    assert translator.finish() == b""
    summary = _summarise(case, out)
    assert summary.error is not None
    if case["kind"] == "openai_to_anthropic_stream":
        assert summary.error == {"type": "api_error", "message": translator.error}
    else:
        assert summary.error["code"] == "overloaded_error"
        assert summary.error["message"] == "Overloaded"


# -- state machine details -----------------------------------------------------------------------

def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    payload = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    return f"data: {json.dumps(payload)}\n\n".encode()


def test_finish_is_idempotent_and_closes_an_empty_stream() -> None:
    stream = OpenAIToAnthropicStream(tool_names=ToolNameMap(), model="grok-3")
    first = stream.finish()
    summary = validate_anthropic(anthropic_events(first))
    assert summary.blocks == [] and summary.stop_reason == "end_turn"
    assert stream.finish() == b"" and stream.feed(_chunk({"content": "late"})) == b""
    other = AnthropicToOpenAIStream(tool_names=ToolNameMap(), model="claude")
    assert validate_openai(other.finish()).finish_reason == "stop"
    assert other.finish() == b""


def test_finished_reflects_the_upstream_end() -> None:
    stream = OpenAIToAnthropicStream(tool_names=ToolNameMap(), model="m")
    stream.feed(_chunk({"content": "hi"}))
    assert not stream.finished
    stream.feed(_chunk({}, "stop"))
    assert stream.finished
    back = AnthropicToOpenAIStream(tool_names=ToolNameMap(), model="m")
    back.feed(b'event: message_delta\ndata: {"type":"message_delta","delta":'
              b'{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}\n\n')
    assert back.finished


def test_unterminated_last_event_is_still_read_at_finish() -> None:
    stream = OpenAIToAnthropicStream(tool_names=ToolNameMap(), model="m", message_id="msg_x")
    out = stream.feed(_chunk({"content": "hi"}) + b"data: [DONE]")
    out += stream.finish()
    events = anthropic_events(out)
    assert events[0]["message"]["id"] == "msg_x"
    assert validate_anthropic(events).blocks[0]["text"] == "hi"


def test_tool_calls_keyed_by_id_without_index_and_name_after_arguments() -> None:
    stream = OpenAIToAnthropicStream(tool_names=ToolNameMap(), model="m")
    out = stream.feed(_chunk({"tool_calls": [{"id": "a", "function": {"name": "f",
                                                                       "arguments": "{}"}}]}))
    out += stream.feed(_chunk({"tool_calls": [{"id": "b", "function": {
        "name": "g", "arguments": "{\"x\":1}"}}]}))
    # A call whose name comes only after its first argument fragment.
    out += stream.feed(_chunk({"tool_calls": [{"index": 5, "id": "c",
                                               "function": {"arguments": "{\"y\""}}]}))
    out += stream.feed(_chunk({"tool_calls": [{"index": 5, "function": {"name": "h",
                                                                        "arguments": ":2}"}}]}))
    out += stream.feed(_chunk({}, "tool_calls")) + stream.finish()
    summary = validate_anthropic(anthropic_events(out))
    assert [(b["id"], b["name"], b["input"]) for b in summary.blocks] == [
        ("a", "f", {}), ("b", "g", {"x": 1}), ("c", "h", {"y": 2})]


def test_shortened_tool_names_are_restored_in_streams() -> None:
    names = ToolNameMap()
    long_name = "mcp__server__" + "x" * 80
    short = names.shorten(long_name)
    stream = OpenAIToAnthropicStream(tool_names=names, model="m")
    out = stream.feed(_chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                              "function": {"name": short, "arguments": ""}}]}))
    out += stream.finish()
    assert validate_anthropic(anthropic_events(out)).blocks[0]["name"] == long_name


def test_line_separator_characters_survive_intact() -> None:
    text = "a\u2028b\u2029c\x85d"
    stream = OpenAIToAnthropicStream(tool_names=ToolNameMap(), model="m")
    data = _chunk({"content": text}).decode().replace("\\u2028", "\u2028").encode()
    out = stream.feed(data) + stream.finish()
    assert validate_anthropic(anthropic_events(out)).blocks[0]["text"] == text


def test_translated_output_respects_the_commit_rule() -> None:
    """The role-only first chunk and message_start are not content; the first text is."""
    stream = OpenAIToAnthropicStream(tool_names=ToolNameMap(), model="m")
    watcher = CommitWatcher(anthropic_signal)
    assert watcher.feed(stream.feed(_chunk({"role": "assistant", "content": ""}))) \
        is StreamSignal.NONE
    assert watcher.feed(stream.feed(_chunk({"content": "Hi"}))) is StreamSignal.CONTENT
    back = AnthropicToOpenAIStream(tool_names=ToolNameMap(), model="m")
    watcher = CommitWatcher(openai_signal)
    start = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
             b'"model":"c","usage":{"input_tokens":3,"output_tokens":1}}}\n\n'
             b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
             b'"content_block":{"type":"text","text":""}}\n\n'
             b'event: ping\ndata: {"type":"ping"}\n\n')
    assert watcher.feed(back.feed(start)) is StreamSignal.NONE
    delta = (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
             b'"delta":{"type":"text_delta","text":"Hi"}}\n\n')
    assert watcher.feed(back.feed(delta)) is StreamSignal.CONTENT


def test_error_before_content_fails_over_not_commits() -> None:
    stream = OpenAIToAnthropicStream(tool_names=ToolNameMap(), model="m")
    out = stream.feed(b'data: {"error":{"message":"Rate limit","type":"rate_limit_exceeded"}}\n\n')
    assert CommitWatcher(anthropic_signal).feed(out) is StreamSignal.ERROR
    assert anthropic_events(out) == [{"type": "error", "error": {
        "type": "rate_limit_error", "message": "Rate limit"}}]


# -- the official SDKs read the translated streams -----------------------------------------------

def _sse_client_transport(body: bytes) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)
    return httpx.MockTransport(handler)


@pytest.mark.parametrize("path", [p for p in O2A_CASES if "error" not in p.name],
                         ids=lambda p: p.stem)
def test_anthropic_sdk_accumulates_translated_stream(path: Path) -> None:
    case = _load(path)
    raw = _run(case, [case["input"].encode()])
    expected = validate_anthropic(anthropic_events(raw))
    client = anthropic.Anthropic(api_key="test", base_url="http://127.0.0.1:9", max_retries=0,
                                 http_client=httpx.Client(transport=_sse_client_transport(raw)))
    with client.messages.stream(model="m", max_tokens=10,
                                messages=[{"role": "user", "content": "x"}]) as stream:
        message = stream.get_final_message()
    assert message.stop_reason == expected.stop_reason
    assert [b.model_dump(exclude_none=True) for b in message.content] == expected.blocks
    assert message.usage.output_tokens == expected.usage["output_tokens"]


def test_anthropic_sdk_raises_on_translated_error() -> None:
    case = _load(GOLDEN / "o2a_stream_error.json")
    raw = _run(case, [case["input"].encode()])
    client = anthropic.Anthropic(api_key="test", base_url="http://127.0.0.1:9", max_retries=0,
                                 http_client=httpx.Client(transport=_sse_client_transport(raw)))
    with pytest.raises(anthropic.APIError, match="server had an error"), \
            client.messages.stream(model="m", max_tokens=10,
                                   messages=[{"role": "user", "content": "x"}]) as stream:
        stream.get_final_message()


@pytest.mark.parametrize("path", [p for p in A2O_CASES if "error" not in p.name],
                         ids=lambda p: p.stem)
def test_openai_sdk_accumulates_translated_stream(path: Path) -> None:
    case = _load(path)
    raw = _run(case, [case["input"].encode()])
    expected = validate_openai(raw)
    client = openai.OpenAI(api_key="test", base_url="http://127.0.0.1:9/v1", max_retries=0,
                           http_client=httpx.Client(transport=_sse_client_transport(raw)))
    with client.chat.completions.stream(model="m",
                                        messages=[{"role": "user", "content": "x"}]) as stream:
        completion = stream.get_final_completion()
    choice = completion.choices[0]
    assert choice.finish_reason == expected.finish_reason
    assert (choice.message.content or "") == expected.content
    calls = [(c.id, c.function.name, json.loads(c.function.arguments))
             for c in choice.message.tool_calls or ()]
    assert calls == [(c["id"], c["name"], json.loads(c["arguments"]))
                     for c in expected.tool_calls]


def test_openai_sdk_raises_on_translated_error() -> None:
    case = _load(GOLDEN / "a2o_stream_error.json")
    raw = _run(case, [case["input"].encode()])
    client = openai.OpenAI(api_key="test", base_url="http://127.0.0.1:9/v1", max_retries=0,
                           http_client=httpx.Client(transport=_sse_client_transport(raw)))
    stream = client.chat.completions.create(model="m", stream=True,
                                            messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.APIError, match="Overloaded"):
        for _ in stream:
            pass


# -- generated streams ---------------------------------------------------------------------------

_words = st.text(min_size=1, max_size=12)
_args = st.dictionaries(st.text(max_size=6), st.integers() | st.text(max_size=8), max_size=3)


@st.composite
def message_parts(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """A reply as runs of text and tool calls: ("text", [pieces]) | ("tool", (id, name, args,
    fragments))."""
    parts: list[tuple[str, Any]] = []
    for position in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            parts.append(("text", draw(st.lists(_words, min_size=1, max_size=4))))
        else:
            encoded = json.dumps(draw(_args))
            cuts = sorted(draw(st.lists(st.integers(1, max(1, len(encoded) - 1)), max_size=4)))
            bounds = [0, *cuts, len(encoded)]
            fragments = [encoded[a:b] for a, b in itertools.pairwise(bounds) if b > a]
            parts.append(("tool", (f"call_{position}", f"tool_{position}", encoded, fragments)))
    return parts


def _openai_stream(parts: list[tuple[str, Any]], finish: str) -> bytes:
    out = _chunk({"role": "assistant", "content": ""})
    tool_index = 0
    for kind, value in parts:
        if kind == "text":
            out += b"".join(_chunk({"content": piece}) for piece in value)
            continue
        call_id, name, _, fragments = value
        out += _chunk({"tool_calls": [{"index": tool_index, "id": call_id, "type": "function",
                                       "function": {"name": name, "arguments": ""}}]})
        for fragment in fragments:
            out += _chunk({"tool_calls": [{"index": tool_index,
                                           "function": {"arguments": fragment}}]})
        tool_index += 1
    out += _chunk({}, finish)
    usage = {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}
    payload = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [], "usage": usage}
    return out + f"data: {json.dumps(payload)}\n\ndata: [DONE]\n\n".encode()


def _merged(parts: list[tuple[str, Any]]) -> list[Any]:
    """What a client should see: adjacent text runs form one block."""
    merged: list[Any] = []
    for kind, value in parts:
        if kind == "text":
            if merged and merged[-1][0] == "text":
                merged[-1] = ("text", merged[-1][1] + "".join(value))
            else:
                merged.append(("text", "".join(value)))
        else:
            merged.append(("tool", value[0], value[1], json.loads(value[2])))
    return merged


@settings(max_examples=80, deadline=None)
@given(parts=message_parts(), finish=st.sampled_from(["stop", "length", "tool_calls"]),
       cuts=st.lists(st.integers(0, 100_000), max_size=30))
def test_generated_openai_streams_translate_faithfully(parts: list[tuple[str, Any]],
                                                       finish: str, cuts: list[int]) -> None:
    data = _openai_stream(parts, finish)
    stream = OpenAIToAnthropicStream(tool_names=ToolNameMap(), model="m")
    out = b"".join(stream.feed(piece) for piece in _split(data, cuts)) + stream.finish()
    summary = validate_anthropic(anthropic_events(out))
    seen = [("text", b["text"]) if b["type"] == "text" else ("tool", b["id"], b["name"],
                                                             b["input"])
            for b in summary.blocks]
    assert seen == _merged(parts)
    has_tools = any(kind == "tool" for kind, _ in parts)
    expected_stop = "max_tokens" if finish == "length" else "tool_use" if has_tools \
        else "end_turn"
    assert summary.stop_reason == expected_stop
    assert summary.usage["output_tokens"] == 5


def _anthropic_stream(parts: list[tuple[str, Any]], stop_reason: str) -> bytes:
    def event(payload: dict[str, Any]) -> bytes:
        return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()

    out = event({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude",
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 9, "output_tokens": 1}}})
    for index, (kind, value) in enumerate(parts):
        if kind == "text":
            out += event({"type": "content_block_start", "index": index,
                          "content_block": {"type": "text", "text": ""}})
            out += b"".join(event({"type": "content_block_delta", "index": index,
                                   "delta": {"type": "text_delta", "text": piece}})
                            for piece in value)
        else:
            call_id, name, _, fragments = value
            out += event({"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": call_id, "name": name, "input": {}}})
            out += b"".join(event({"type": "content_block_delta", "index": index,
                                   "delta": {"type": "input_json_delta", "partial_json": f}})
                            for f in fragments)
        out += event({"type": "content_block_stop", "index": index})
        out += b'event: ping\ndata: {"type": "ping"}\n\n'
    out += event({"type": "message_delta", "delta": {"stop_reason": stop_reason,
                                                     "stop_sequence": None},
                  "usage": {"output_tokens": 6}})
    return out + event({"type": "message_stop"})


@settings(max_examples=80, deadline=None)
@given(parts=message_parts(), cuts=st.lists(st.integers(0, 100_000), max_size=30),
       include_usage=st.booleans())
def test_generated_anthropic_streams_translate_faithfully(parts: list[tuple[str, Any]],
                                                          cuts: list[int],
                                                          include_usage: bool) -> None:
    has_tools = any(kind == "tool" for kind, _ in parts)
    after_tool = False
    data = _anthropic_stream(parts, "tool_use" if has_tools else "end_turn")
    stream = AnthropicToOpenAIStream(tool_names=ToolNameMap(), model="m",
                                     include_usage=include_usage)
    out = b"".join(stream.feed(piece) for piece in _split(data, cuts)) + stream.finish()
    summary = validate_openai(out)
    calls = [("tool", c["id"], c["name"], json.loads(c["arguments"]))
             for c in summary.tool_calls]
    assert calls == [m for m in _merged(parts) if m[0] == "tool"]
    expected_text = ""
    for item in _merged(parts):
        if item[0] == "text":
            # Text resumed after a tool call starts a new paragraph.
            expected_text += ("\n\n" if expected_text and after_tool else "") + item[1]
        after_tool = item[0] == "tool"
    assert summary.content == expected_text
    assert summary.finish_reason == ("tool_calls" if has_tools else "stop")
    assert (summary.usage is not None) == include_usage
    if summary.usage is not None:
        assert summary.usage["prompt_tokens"] == 9 and summary.usage["completion_tokens"] == 6


def test_a_broken_upstreams_non_string_id_and_model_never_reach_the_client() -> None:
    to_openai = AnthropicToOpenAIStream(tool_names=ToolNameMap(128), model="m", created=1)
    anthropic_stream = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":5,"model":[1],'
        b'"usage":{"input_tokens":1}}}\n\nevent: content_block_start\ndata: {"type":'
        b'"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
        b'{"type":"text_delta","text":"hi"}}\n\nevent: content_block_stop\ndata: {"type":'
        b'"content_block_stop","index":0}\n\nevent: message_delta\ndata: {"type":'
        b'"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    raw = to_openai.feed(anthropic_stream) + to_openai.finish()
    assert validate_openai(raw).content == "hi"
    ids = {json.loads(d)["id"] for _, d in sse_events(raw) if d != "[DONE]"}
    assert len(ids) == 1 and all(isinstance(i, str) and i for i in ids)

    to_anthropic = OpenAIToAnthropicStream(tool_names=ToolNameMap(), model="asked-for")
    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": [1],
             "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"},
                          "finish_reason": None}]}
    end = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    raw = (to_anthropic.feed(f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(end)}\n\n"
                             "data: [DONE]\n\n".encode()) + to_anthropic.finish())
    events = anthropic_events(raw)
    validate_anthropic(events)
    assert events[0]["message"]["model"] == "asked-for"
