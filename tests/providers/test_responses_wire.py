"""The Responses wire module: URLs, the three error shapes, the commit rule and the tail scan."""

from __future__ import annotations

import json

import pytest

from claudex.providers import responses
from claudex.providers.sse import CommitWatcher, SseEvent, StreamSignal


def _event(kind: str, **payload: object) -> SseEvent:
    return SseEvent(kind, json.dumps({"type": kind, **payload}))


def test_urls_append_to_a_versioned_base() -> None:
    assert responses.responses_url("https://chatgpt.com/backend-api/codex/") == (
        "https://chatgpt.com/backend-api/codex/responses")
    assert responses.models_url("https://api.openai.com/v1") == "https://api.openai.com/v1/models"


@pytest.mark.parametrize(("body", "message"), [
    (b'{"error":{"message":"bad model","type":"invalid_request_error"}}', "bad model"),
    (b'{"detail":"Store must be set to false"}', "Store must be set to false"),
    (b'{"detail":{"message":"nested","code":"x"}}', "nested"),
    (b"<html>gateway</html>", "<html>gateway</html>"),
])
def test_error_message_reads_every_shape(body: bytes, message: str) -> None:
    assert responses.error_message(body) == message


def test_error_fields_of_stream_events() -> None:
    failed = {"type": "response.failed",
              "response": {"error": {"code": "server_error", "message": "boom"}}}
    assert responses.error_fields(failed) == ("boom", "server_error")
    assert responses.error_fields({"type": "error", "code": "rate_limit_exceeded",
                                   "message": "slow down"}) == ("slow down",
                                                                "rate_limit_exceeded")
    assert responses.error_fields({"type": "response.failed"}) == ("response failed", None)


@pytest.mark.parametrize(("event", "expected"), [
    (_event("response.created", response={}), StreamSignal.NONE),
    (_event("response.in_progress", response={}), StreamSignal.NONE),
    (_event("response.output_item.added", item={"type": "reasoning"}), StreamSignal.NONE),
    (_event("response.output_item.added", item={"type": "message"}), StreamSignal.NONE),
    (_event("response.reasoning_summary_text.delta", delta="hm"), StreamSignal.NONE),
    (_event("response.output_text.delta", delta="Hi"), StreamSignal.CONTENT),
    (_event("response.output_item.added", item={"type": "function_call"}), StreamSignal.CONTENT),
    (_event("response.completed", response={}), StreamSignal.CONTENT),
    (_event("response.failed", response={"error": {"message": "x"}}), StreamSignal.ERROR),
    (_event("error", message="y"), StreamSignal.ERROR),
    # The type alone, without an `event:` line, is enough.
    (SseEvent(None, '{"type":"response.output_text.delta","delta":"a"}'), StreamSignal.CONTENT),
])
def test_commit_signal(event: SseEvent, expected: StreamSignal) -> None:
    assert responses.signal(event)[0] is expected


def test_commit_watcher_holds_until_text_and_reports_errors() -> None:
    watcher = CommitWatcher(responses.signal)
    assert watcher.feed(b'event: response.created\ndata: {"type":"response.created"}\n\n') is (
        StreamSignal.NONE)
    assert watcher.feed(b'event: response.output_text.delta\ndata: {"type":"response.output'
                        b'_text.delta","delta":"x"}\n\n') is StreamSignal.CONTENT
    failing = CommitWatcher(responses.signal)
    assert failing.feed(b'event: error\ndata: {"type":"error","message":"quota"}\n\n') is (
        StreamSignal.ERROR)
    assert failing.error_message == "quota"


def test_tail_scanner_finds_end_and_error_split_across_chunks() -> None:
    scanner = responses.tail_scanner()
    scanner.feed(b'data: {"delta":"event: error in text"}\n\nevent: response.comp')
    assert not scanner.saw_end and not scanner.saw_error
    scanner.feed(b'leted\ndata: {}\n\n')
    assert scanner.saw_end and not scanner.saw_error
    broken = responses.tail_scanner()
    broken.feed(b'x\n\nevent: response.fai')
    broken.feed(b'led\ndata: {}\n\n')
    assert broken.saw_error


def test_sse_error_is_an_error_event_with_a_sequence_number() -> None:
    raw = responses.sse_error("gone", sequence_number=7)
    assert raw.startswith(b"event: error\ndata: ")
    payload = json.loads(raw.split(b"data: ", 1)[1])
    assert payload == {"type": "error", "code": "server_error", "message": "gone",
                       "param": None, "sequence_number": 7}
