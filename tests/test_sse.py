"""Commit detection on upstream SSE streams, split at any byte."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from claudex.providers import anthropic, openai
from claudex.providers.sse import CommitWatcher, StreamSignal


def event(name: str, data: dict[str, object]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


ANTHROPIC_PREAMBLE = (event("message_start", {"type": "message_start", "message": {}})
                      + event("ping", {"type": "ping"}))
ANTHROPIC_CONTENT = event("content_block_start", {"type": "content_block_start", "index": 0,
                                                  "content_block": {"type": "text", "text": ""}})
ANTHROPIC_ERROR = event("error", {"type": "error", "error": {"type": "overloaded_error",
                                                              "message": "Overloaded"}})


def feed_split(watcher: CommitWatcher, data: bytes, cuts: list[int]) -> StreamSignal:
    points = sorted({c % (len(data) + 1) for c in cuts})
    last = 0
    for point in [*points, len(data)]:
        signal = watcher.feed(data[last:point])
        last = point
        if signal is not StreamSignal.NONE:
            return signal
    return StreamSignal.NONE


@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=8))
def test_anthropic_commit_is_the_first_content_event(cuts: list[int]) -> None:
    w = CommitWatcher(anthropic.signal)
    assert feed_split(w, ANTHROPIC_PREAMBLE, cuts) is StreamSignal.NONE
    assert feed_split(w, ANTHROPIC_CONTENT, cuts) is StreamSignal.CONTENT


@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=8))
def test_anthropic_error_before_content_is_seen(cuts: list[int]) -> None:
    w = CommitWatcher(anthropic.signal)
    assert feed_split(w, ANTHROPIC_PREAMBLE + ANTHROPIC_ERROR, cuts) is StreamSignal.ERROR
    assert w.error_message == "Overloaded"


def test_openai_role_only_chunk_is_not_content() -> None:
    w = CommitWatcher(openai.signal)
    role = {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    text = {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]}
    assert w.feed(f"data: {json.dumps(role)}\n\n".encode()) is StreamSignal.NONE
    assert w.feed(f"data: {json.dumps(text)}\r\n\r\n".encode()) is StreamSignal.CONTENT


def test_openai_error_chunk() -> None:
    w = CommitWatcher(openai.signal)
    assert w.feed(b'data: {"error": {"message": "boom"}}\n\n') is StreamSignal.ERROR
    assert w.error_message == "boom"


def test_tail_scanner_finds_markers_split_across_chunks() -> None:
    scanner = anthropic.tail_scanner()
    stream = (ANTHROPIC_CONTENT + event("message_stop", {"type": "message_stop"}))
    for i in range(len(stream)):
        scanner.feed(stream[i:i + 1])
    assert scanner.saw_end and not scanner.saw_error


def test_tail_scanner_ignores_markers_inside_text() -> None:
    scanner = anthropic.tail_scanner()
    delta = event("content_block_delta", {"type": "content_block_delta", "index": 0,
                  "delta": {"type": "text_delta", "text": "\nevent: error\nevent: message_stop"}})
    scanner.feed(delta)
    assert not scanner.saw_error and not scanner.saw_end


def test_unicode_line_separator_inside_json_does_not_cut_the_event() -> None:
    w = CommitWatcher(anthropic.signal)
    text = "a\u2028b"
    data = {"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": text}}
    raw = ("event: content_block_delta\ndata: " + json.dumps(data, ensure_ascii=False)
           + "\n\n").encode()
    assert w.feed(raw) is StreamSignal.CONTENT


def test_split_events_keeps_partial_tail_and_handles_crlf() -> None:
    from claudex.providers.sse import split_events

    buffer = bytearray(b"event: a\r\ndata: 1\r\n\r\n"
                       b"event: b\ndata: 2\n\n: keep-alive\n\nevent: c\nda")
    events = split_events(buffer)
    assert [(e.event, e.data) for e in events] == [("a", "1"), ("b", "2")]
    assert bytes(buffer) == b"event: c\nda"
