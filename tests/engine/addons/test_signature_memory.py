"""The bounded memory of who signed which thinking block, and the scanner that feeds it from
answers and relayed streams."""

from __future__ import annotations

import json
from typing import Any

import pytest

from claudex.engine.addons.signatures import SignatureMemory
from claudex.providers.signature_scan import SignatureScanner, signatures_in_answer


def test_remembers_the_signer() -> None:
    memory = SignatureMemory(capacity=4)
    memory.remember("a", "sig-1")
    memory.remember("b", "sig-2")
    assert memory.signer("sig-1") == "a"
    assert memory.signer("sig-2") == "b"
    assert memory.signer("sig-3") is None


def test_capacity_bounds_it_and_the_least_recently_used_goes() -> None:
    memory = SignatureMemory(capacity=3)
    for n in range(3):
        memory.remember("a", f"sig-{n}")
    assert memory.signer("sig-0") == "a"  # used: now the most recent
    memory.remember("b", "sig-3")
    assert len(memory) == 3
    assert memory.signer("sig-1") is None  # the least recently used was evicted
    assert [memory.signer(f"sig-{n}") for n in (0, 2, 3)] == ["a", "a", "b"]
    for n in range(100):
        memory.remember("c", f"more-{n}")
    assert len(memory) == 3


def test_it_knows_when_no_other_provider_signed_anything() -> None:
    memory = SignatureMemory(capacity=2)
    assert not memory.signed_by_others("a")
    memory.remember("a", "sig-1")
    assert not memory.signed_by_others("a")
    assert memory.signed_by_others("b")
    memory.remember("b", "sig-2")
    assert memory.signed_by_others("a")
    memory.remember("a", "sig-3")
    memory.remember("a", "sig-4")  # b's only entry is evicted
    assert not memory.signed_by_others("a")
    memory.remember("a", "sig-4")  # remembered again: counted once
    memory.remember("b", "sig-4")  # the same signature from another provider: the last wins
    assert memory.signer("sig-4") == "b"
    assert memory.signed_by_others("a") and memory.signed_by_others("b")


def test_a_capacity_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        SignatureMemory(capacity=0)


def answer(*blocks: dict[str, Any]) -> bytes:
    return json.dumps({"type": "message", "role": "assistant", "content": list(blocks)}).encode()


def test_signatures_in_an_answer() -> None:
    payload = answer({"type": "thinking", "thinking": "", "signature": "sig-1"},
                     {"type": "redacted_thinking", "data": "red-1"},
                     {"type": "text", "text": "hi"})
    assert signatures_in_answer(payload) == ["sig-1", "red-1"]
    assert signatures_in_answer(answer({"type": "text", "text": "no thinking"})) == []
    assert signatures_in_answer(b'{"signature": broken') == []
    assert signatures_in_answer(b'["signature"]') == []

    memory = SignatureMemory()
    memory.remember_answer("a", payload)
    assert memory.signer("red-1") == "a"


def sse(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


THINKING_STREAM = b"".join([
    sse("message_start", {"type": "message_start", "message": {"content": []}}),
    sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block":
        {"type": "thinking", "thinking": "", "signature": ""}}),
    sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
    sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                "delta": {"type": "signature_delta", "signature": "S" * 300}}),
    sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
    sse("content_block_start", {"type": "content_block_start", "index": 1, "content_block":
        {"type": "redacted_thinking", "data": "R" * 200}}),
    sse("content_block_stop", {"type": "content_block_stop", "index": 1}),
    sse("content_block_start", {"type": "content_block_start", "index": 2, "content_block":
        {"type": "text", "text": ""}}),
    *(sse("content_block_delta", {"type": "content_block_delta", "index": 2,
                                  "delta": {"type": "text_delta", "text": "a signature"}})
      for _ in range(20)),
    sse("message_stop", {"type": "message_stop"}),
])


@pytest.mark.parametrize("size", [1, 2, 7, 16, 64, 1000, len(THINKING_STREAM)])
def test_the_scanner_finds_signatures_however_the_stream_is_cut(size: int) -> None:
    scanner = SignatureScanner()
    found: list[str] = []
    for start in range(0, len(THINKING_STREAM), size):
        found += scanner.feed(THINKING_STREAM[start:start + size])
    assert found == ["S" * 300, "R" * 200]


def test_the_scanner_handles_crlf_and_a_signature_in_pieces() -> None:
    events = [
        sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                    "delta": {"type": "signature_delta", "signature": "ab"}}),
        sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                    "delta": {"type": "signature_delta", "signature": "cd"}}),
    ]
    scanner = SignatureScanner()
    found = scanner.feed(b"".join(events).replace(b"\n", b"\r\n"))
    assert found == ["ab", "abcd"]  # the last report is the whole signature


def test_a_stream_without_thinking_is_never_parsed() -> None:
    scanner = SignatureScanner()
    text = sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                       "delta": {"type": "text_delta", "text": "x" * 100}})
    for _ in range(50):
        assert scanner.feed(text) == []
    # Junk with the marker is parsed and ignored, not fatal.
    assert scanner.feed(b'data: {"signature\n\ndata: [1, "redacted_thinking"]\n\n') == []


def test_a_tap_records_what_a_provider_streamed() -> None:
    memory = SignatureMemory()
    tap = memory.tap("grok-anthropic")
    for start in range(0, len(THINKING_STREAM), 50):
        tap(THINKING_STREAM[start:start + 50])
    assert memory.signer("S" * 300) == "grok-anthropic"
    assert memory.signer("R" * 200) == "grok-anthropic"
