"""Commit detection on upstream SSE streams, split at any byte."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from claudex.providers import anthropic, openai, responses
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


_PIECES = [b"\n", b"\n\n", b"event: error", b"event: message_stop", b'data: {"type":"error"',
           b'data: {"type": "error"', b'data: {"type":"message_stop"',
           b"event: content_block_delta",
           b'data: {"type":"content_block_delta","delta":{"text":"hi"}}', b"data: [DONE]",
           b'data: {"error":', b"event: response.failed", b"x", b"\r\n", b"e", b"event: "]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=30), st.lists(st.integers(0, 400), max_size=8),
       st.sampled_from(["anthropic", "openai", "responses"]))
def test_tail_scanner_sees_a_marker_exactly_when_the_bytes_hold_one(
    pieces: list[bytes], cuts: list[int], protocol: str
) -> None:
    """However the stream is cut, the scanner's answer is the plain one: does the stream (after
    a line start) hold an error marker, an end marker. Its fast path for chunks that follow a
    line break must never change that answer."""
    module = {"anthropic": anthropic, "openai": openai, "responses": responses}[protocol]
    data = b"".join(pieces)
    scanner = module.tail_scanner()
    at = 0
    for cut in [*sorted(c for c in cuts if c < len(data)), len(data)]:
        scanner.feed(data[at:cut])
        at = max(at, cut)
    whole = b"\n" + data  # the stream's start counts as a line start
    assert scanner.saw_error == any(m in whole for m in scanner.error_markers)
    assert scanner.saw_end == any(m in whole for m in scanner.end_markers)


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
