"""Translation to and from a Responses upstream: requests from Anthropic and Chat clients, JSON
answers, event streams (both client protocols), and the ChatGPT backend's rules."""

from __future__ import annotations

import json
from typing import Any

import pytest

from claudex.config.model import Profile
from claudex.engine.core.exchange import Exchange
from claudex.engine.core.request import ProxyRequest
from claudex.providers.sse import CommitWatcher, StreamSignal, anthropic_signal, openai_signal
from claudex.providers.translate.from_responses import (
    ResponsesToAnthropicStream,
    ResponsesToChatStream,
    StreamFailed,
    collect_stream,
    responses_to_anthropic_response,
    responses_to_chat_response,
)
from claudex.providers.translate.to_responses import (
    anthropic_to_responses_request,
    chat_to_responses_request,
)
from claudex.providers.translate.tools import ToolNameMap
from claudex.providers.validation_problems import InvalidRequest

LONG_TOOL = "mcp__a_very_long_server_name__" + "x" * 60

ANTHROPIC_BODY: dict[str, Any] = {
    "model": "claude-sonnet-4-5", "max_tokens": 300, "system": "Be brief.",
    "temperature": 0.5, "stop_sequences": ["END"],
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "Look:"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "iVBORw0KGgo="}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hm", "signature": "sig"},
            {"type": "text", "text": "Two calls."},
            {"type": "tool_use", "id": "toolu_1", "name": LONG_TOOL, "input": {"q": 1}},
            {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"cmd": "ls"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "one"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": [
                {"type": "text", "text": "two"}]}]},
        {"role": "system", "content": "Mind the tests."},
        {"role": "user", "content": "Go on."},
    ],
    "tools": [{"name": LONG_TOOL, "description": "d", "input_schema": {"type": "object"}},
              {"name": "Bash", "input_schema": {"type": "object",
                                                "properties": {"cmd": {"type": "string"}}}}],
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
}


def test_anthropic_request_becomes_instructions_items_and_flat_tools() -> None:
    translated = anthropic_to_responses_request(ANTHROPIC_BODY, model="gpt-5",
                                                max_tokens_cap=None)
    body = translated.body
    short = translated.tool_names.shorten(LONG_TOOL)
    assert len(short) <= 64 and translated.tool_names.restore(short) == LONG_TOOL
    assert body["instructions"] == "Be brief."
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "Look:"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=",
             "detail": "auto"}]},
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "Two calls."}]},
        {"type": "function_call", "call_id": "toolu_1", "name": short,
         "arguments": '{"q": 1}'},
        {"type": "function_call", "call_id": "toolu_2", "name": "Bash",
         "arguments": '{"cmd": "ls"}'},
        {"type": "function_call_output", "call_id": "toolu_1", "output": "one"},
        {"type": "function_call_output", "call_id": "toolu_2", "output": "two"},
        {"type": "message", "role": "developer", "content": [
            {"type": "input_text", "text": "Mind the tests."}]},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "Go on."}]},
    ]
    assert body["tools"] == [
        {"type": "function", "name": short, "description": "d",
         "parameters": {"type": "object"}, "strict": False},
        {"type": "function", "name": "Bash", "strict": False,
         "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]
    assert (body["tool_choice"], body["parallel_tool_calls"]) == ("auto", False)
    assert (body["max_output_tokens"], body["temperature"]) == (300, 0.5)
    assert body["store"] is False and body["stream"] is False
    assert "include" not in body and "stop" not in body
    # Thinking never goes to another provider; stop sequences have no Responses form.
    assert translated.dropped == ("thinking", "stop")


def test_chatgpt_backend_rules() -> None:
    translated = anthropic_to_responses_request(ANTHROPIC_BODY, model="gpt-5-codex",
                                                max_tokens_cap=None, chatgpt=True)
    body = translated.body
    # The backend refuses a request without `instructions` (400 "Instructions are required"):
    # the system prompt goes there, as on the platform API; later system turns stay in place.
    assert body["instructions"] == "Be brief."
    assert body["input"][0]["role"] == "user"
    assert {"type": "message", "role": "developer", "content": [
        {"type": "input_text", "text": "Mind the tests."}]} in body["input"]
    assert body["stream"] is True and body["store"] is False
    assert not {"max_output_tokens", "temperature", "top_p"} & set(body)
    assert set(translated.dropped) == {"thinking", "stop", "max_tokens", "temperature"}


def test_at_the_chatgpt_backend_instructions_are_there_even_without_a_system_prompt() -> None:
    body = {"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]}
    out = chat_to_responses_request(body, model="gpt-5", max_tokens_cap=None, chatgpt=True).body
    assert out["instructions"] == ""
    out = chat_to_responses_request(body, model="gpt-5", max_tokens_cap=None).body
    assert "instructions" not in out  # the platform API takes a request without
    chat = {"model": "gpt-5", "messages": [
        {"role": "system", "content": "sys"}, {"role": "developer", "content": "dev"},
        {"role": "user", "content": "hi"}, {"role": "system", "content": "later"}]}
    out = chat_to_responses_request(chat, model="gpt-5", max_tokens_cap=None, chatgpt=True).body
    assert out["instructions"] == "sys\n\ndev"
    assert [item["role"] for item in out["input"]] == ["user", "developer"]


def test_chat_request_keeps_call_ids_and_translates_options() -> None:
    body = {
        "model": "gpt-5", "max_completion_tokens": 900, "stream": True,
        "stream_options": {"include_usage": True}, "reasoning_effort": "low",
        "response_format": {"type": "json_schema",
                            "json_schema": {"name": "out", "schema": {"type": "object"}}},
        "n": 1, "seed": 7, "store": True, "user": "u-1",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "developer", "content": "dev"},
            {"role": "user", "content": [{"type": "text", "text": "hi"},
                                         {"type": "image_url", "image_url": {
                                             "url": "https://x/y.png", "detail": "low"}}]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_9", "type": "function",
                 "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_9", "content": "done"},
        ],
        "tools": [{"type": "function", "function": {"name": "f", "strict": True,
                                                    "parameters": {"type": "object"}}}],
        "tool_choice": {"type": "function", "function": {"name": "f"}},
    }
    translated = chat_to_responses_request(body, model="gpt-5", max_tokens_cap=500)
    out = translated.body
    assert out["instructions"] == "sys\n\ndev"
    assert out["input"][0]["content"][1] == {"type": "input_image",
                                             "image_url": "https://x/y.png", "detail": "low"}
    assert out["input"][1:] == [
        {"type": "function_call", "call_id": "call_9", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_9", "output": "done"}]
    assert out["tools"][0]["strict"] is True
    assert out["tool_choice"] == {"type": "function", "name": "f"}
    assert out["max_output_tokens"] == 500  # the learned cap wins
    assert out["reasoning"] == {"effort": "low"}
    assert out["text"] == {"format": {"type": "json_schema", "name": "out",
                                      "schema": {"type": "object"}}}
    assert out["user"] == "u-1" and out["store"] is False and out["stream"] is True
    assert translated.dropped == ("store", "seed")


def test_malformed_chat_request_is_refused_before_translation() -> None:
    with pytest.raises(InvalidRequest):
        chat_to_responses_request({"model": "m", "messages": [{"role": "user", "content": 5}]},
                                  model="m", max_tokens_cap=None)


RESPONSE: dict[str, Any] = {
    "id": "resp_1", "object": "response", "created_at": 1700000000, "model": "gpt-5",
    "status": "completed",
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
        {"type": "message", "id": "msg_1", "role": "assistant", "content": [
            {"type": "output_text", "text": "Calling.", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
         "arguments": '{"a":1}'},
    ],
    "usage": {"input_tokens": 50, "input_tokens_details": {"cached_tokens": 20},
              "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 3},
              "total_tokens": 57},
}


def test_answer_to_chat_and_anthropic() -> None:
    names = ToolNameMap()
    short = names.shorten(LONG_TOOL)
    response = json.loads(json.dumps(RESPONSE))
    response["output"][2]["name"] = short
    chat = responses_to_chat_response(response, tool_names=names, fallback_model=None)
    assert chat["choices"][0] == {"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "Calling.", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": LONG_TOOL, "arguments": '{"a":1}'}}]}}
    assert chat["usage"] == {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57,
                             "prompt_tokens_details": {"cached_tokens": 20},
                             "completion_tokens_details": {"reasoning_tokens": 3}}
    anthropic = responses_to_anthropic_response(response, tool_names=names,
                                                fallback_model=None)
    assert anthropic["content"] == [
        {"type": "text", "text": "Calling."},
        {"type": "tool_use", "id": "call_1", "name": LONG_TOOL, "input": {"a": 1}}]
    assert anthropic["stop_reason"] == "tool_use"
    assert anthropic["usage"] == {"input_tokens": 30, "output_tokens": 7,
                                  "cache_read_input_tokens": 20}


def test_incomplete_answer_is_a_length_stop() -> None:
    response = {"id": "r", "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
                "output": [{"type": "message", "content": [{"type": "output_text",
                                                            "text": "cut"}]}]}
    assert responses_to_anthropic_response(response, tool_names=ToolNameMap(),
                                           fallback_model="m")["stop_reason"] == "max_tokens"


def _sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


STREAM = _sse(
    {"type": "response.created", "response": {"id": "resp_1", "model": "gpt-5",
                                              "created_at": 1700000000, "output": []}},
    {"type": "response.in_progress", "response": {"id": "resp_1"}},
    {"type": "response.output_item.added", "output_index": 0,
     "item": {"type": "reasoning", "id": "rs_1"}},
    {"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "delta": "think"},
    {"type": "response.output_item.added", "output_index": 1,
     "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}},
    {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1,
     "delta": "Hel"},
    {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1,
     "delta": "lo"},
    {"type": "response.output_item.added", "output_index": 2,
     "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
              "arguments": ""}},
    {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 2,
     "delta": '{"a":'},
    {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 2,
     "delta": "1}"},
    {"type": "response.output_item.done", "output_index": 2,
     "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
              "arguments": '{"a":1}'}},
    {"type": "response.output_item.added", "output_index": 3,
     "item": {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "g",
              "arguments": ""}},
    {"type": "response.output_item.done", "output_index": 3,
     "item": {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "g",
              "arguments": '{"b":2}'}},
    {"type": "response.completed", "response": {**RESPONSE, "output": []}},
)


def _chunks(raw: bytes) -> list[Any]:
    return [json.loads(line[6:]) if line != "data: [DONE]" else "[DONE]"
            for line in raw.decode().split("\n") if line.startswith("data: ")]


def _feed_bytewise(codec: Any, raw: bytes) -> bytes:
    out = b"".join(codec.feed(raw[i:i + 7]) for i in range(0, len(raw), 7))
    return out + codec.finish()


def test_stream_to_chat_chunks() -> None:
    codec = ResponsesToChatStream(tool_names=ToolNameMap(), model="m", include_usage=True)
    out = _feed_bytewise(codec, STREAM)
    assert codec.finished and codec.error is None
    chunks = _chunks(out)
    deltas = [c["choices"][0]["delta"] for c in chunks[:-2]]
    assert deltas[0] == {"role": "assistant", "content": "Hel"}
    assert deltas[1] == {"content": "lo"}
    assert deltas[2]["tool_calls"][0] == {"index": 0, "id": "call_1", "type": "function",
                                          "function": {"name": "f", "arguments": ""}}
    assert "".join(d["tool_calls"][0]["function"]["arguments"] for d in deltas[2:5]) == (
        '{"a":1}')
    # A call whose arguments arrive only whole, in output_item.done, is not lost.
    assert deltas[5]["tool_calls"][0]["index"] == 1
    assert deltas[6]["tool_calls"][0]["function"]["arguments"] == '{"b":2}'
    assert chunks[-3]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-2]["usage"]["prompt_tokens"] == 50 and chunks[-1] == "[DONE]"
    assert all(c["id"] == "resp_1" for c in chunks[:-1])


def test_stream_to_anthropic_events() -> None:
    codec = ResponsesToAnthropicStream(tool_names=ToolNameMap(), model="m")
    out = _feed_bytewise(codec, STREAM)
    assert codec.finished and codec.error is None
    kinds = [line[7:] for line in out.decode().split("\n") if line.startswith("event: ")]
    assert kinds == ["message_start",
                     "content_block_start", "content_block_delta", "content_block_delta",
                     "content_block_stop",
                     "content_block_start", "content_block_delta", "content_block_delta",
                     "content_block_stop",
                     "content_block_start", "content_block_delta", "content_block_stop",
                     "message_delta", "message_stop"]
    assert b'"stop_reason":"tool_use"' in out and b'"thinking"' not in out


def test_commit_waits_for_text_not_for_created_or_reasoning() -> None:
    head, _, _ = STREAM.partition(b"event: response.output_text.delta")
    for codec, signal in ((ResponsesToAnthropicStream(tool_names=ToolNameMap(), model="m"),
                           anthropic_signal),
                          (ResponsesToChatStream(tool_names=ToolNameMap(), model="m",
                                                 include_usage=False), openai_signal)):
        watcher = CommitWatcher(signal)
        assert watcher.feed(codec.feed(head)) is StreamSignal.NONE
        first = b"event: response.output_text.delta\ndata: " + json.dumps(
            {"type": "response.output_text.delta", "delta": "x"}).encode() + b"\n\n"
        assert watcher.feed(codec.feed(first)) is StreamSignal.CONTENT


@pytest.mark.parametrize("failure", [
    {"type": "response.failed", "response": {"error": {"code": "server_error",
                                                       "message": "overloaded"}}},
    {"type": "error", "code": "server_error", "message": "overloaded"},
])
def test_failed_stream_becomes_the_clients_error_event(failure: dict[str, Any]) -> None:
    raw = _sse({"type": "response.created", "response": {"id": "r"}},
               {"type": "response.output_text.delta", "delta": "par"}, failure)
    anthropic = ResponsesToAnthropicStream(tool_names=ToolNameMap(), model="m")
    out = anthropic.feed(raw)
    assert anthropic.error == "overloaded" and not anthropic.finished
    assert out.rstrip().split(b"\n")[-2] == b"event: error"
    chat = ResponsesToChatStream(tool_names=ToolNameMap(), model="m", include_usage=False)
    last = _chunks(chat.feed(raw))[-1]
    assert last["error"]["message"] == "overloaded" and chat.error == "overloaded"


def test_stream_cut_short_is_not_finished() -> None:
    codec = ResponsesToChatStream(tool_names=ToolNameMap(), model="m", include_usage=False)
    codec.feed(STREAM.partition(b"event: response.completed")[0])
    assert codec.finish() == b"" and not codec.finished


def test_collect_stream_rebuilds_the_response() -> None:
    final = collect_stream(STREAM)
    assert [item["type"] for item in final["output"]] == ["function_call", "function_call"]
    assert final["usage"]["input_tokens"] == 50
    with_output = collect_stream(_sse({"type": "response.completed", "response": RESPONSE}))
    assert with_output["output"] == RESPONSE["output"]
    with pytest.raises(StreamFailed, match="overloaded"):
        collect_stream(_sse({"type": "error", "message": "overloaded"}))
    with pytest.raises(ValueError, match=r"without response\.completed"):
        collect_stream(STREAM.partition(b"event: response.completed")[0])


def _chatgpt_exchange() -> Exchange:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64,
            "messages": [{"role": "user", "content": "hi"}]}
    req = ProxyRequest("anthropic", "messages", body, json.dumps(body).encode(), {})
    profile = Profile("codex", "OpenAIResponses", "https://chatgpt.com/backend-api/codex",
                      default_model="gpt-5-codex", auth_type="oauth", oauth_provider="codex")
    return Exchange(req, profile, addressed=True)


def test_the_chatgpt_backend_is_streamed_to_and_collected_for_a_json_client() -> None:
    exchange = _chatgpt_exchange()
    assert exchange.upstream_streams and exchange.url().endswith("/codex/responses")
    sent = json.loads(exchange.body())
    assert sent["stream"] is True and sent["include"] == ["reasoning.encrypted_content"]
    assert exchange.headers(None)["accept"] == "text/event-stream"
    collected = json.loads(exchange.answer(_sse({"type": "response.completed",
                                                 "response": RESPONSE})))
    assert collected["type"] == "message" and collected["stop_reason"] == "tool_use"
    # A backend that answers JSON after all is read as JSON.
    plain = json.loads(exchange.answer(json.dumps(RESPONSE).encode()))
    assert plain["content"] == collected["content"]
    with pytest.raises(StreamFailed):
        exchange.answer(_sse({"type": "response.failed",
                              "response": {"error": {"message": "usage limit"}}}))


def test_an_incomplete_stream_ends_as_a_max_tokens_stop() -> None:
    raw = _sse({"type": "response.created", "response": {"id": "r"}},
               {"type": "response.output_text.delta", "delta": "cut sh"},
               {"type": "response.incomplete", "response": {
                   "id": "r", "status": "incomplete",
                   "incomplete_details": {"reason": "max_output_tokens"},
                   "usage": {"input_tokens": 3, "output_tokens": 2}}})
    anthropic = ResponsesToAnthropicStream(tool_names=ToolNameMap(), model="m")
    out = anthropic.feed(raw) + anthropic.finish()
    assert anthropic.finished and b'"stop_reason":"max_tokens"' in out
    chat = ResponsesToChatStream(tool_names=ToolNameMap(), model="m", include_usage=False)
    chunks = _chunks(chat.feed(raw))
    assert chunks[-2]["choices"][0]["finish_reason"] == "length" and chunks[-1] == "[DONE]"
