"""The soak's oracle for Responses API clients (`soak.protocol_check_responses`): it accepts
what claudex's translators send and fails on what a client could not use."""

from __future__ import annotations

import json

import pytest

from claudex.providers.translate.responses_client import responses_request
from soak.checks import judge
from soak.traffic import Exchange, RequestSpec
from tests.harnesses.test_soak import ANTHROPIC_STREAM


def _translated_stream() -> bytes:
    plan = responses_request({"model": "m", "input": "x", "stream": True},
                             target="anthropic", model="claude-x", max_tokens_cap=None)
    codec = plan.stream(model="claude-x")
    return codec.feed(ANTHROPIC_STREAM) + codec.finish()


def _exchange(stream: bool, status: int, body: bytes,
              headers: dict[str, str] | None = None) -> Exchange:
    spec = RequestSpec(9, "responses", "alpha", stream)
    base = {"x-claudex-provider": "alpha", "x-claudex-attempts": "alpha:200",
            "content-type": "text/event-stream" if stream else "application/json"}
    return Exchange(spec, started=100.0, ended=100.1, headers_at=100.05, status=status,
                    headers={**base, **(headers or {})}, body=body)


def test_a_translated_stream_is_ok_and_a_cut_one_is_malformed() -> None:
    raw = _translated_stream()
    assert judge(_exchange(True, 200, raw), 10).outcome == "ok"
    cut = raw[: raw.index(b"event: response.completed")]
    verdict = judge(_exchange(True, 200, cut), 10)
    assert verdict.outcome == "malformed" and "response.completed" in verdict.detail
    reordered = raw.replace(b'"sequence_number":0', b'"sequence_number":1', 1)
    assert judge(_exchange(True, 200, reordered), 10).outcome == "malformed"


def test_a_stream_ending_in_response_failed_is_a_stream_error() -> None:
    raw = _translated_stream()
    cut = raw[: raw.index(b"event: response.output_text.done")]
    sequence = cut.count(b"\n\n")
    failed = {"type": "response.failed", "sequence_number": sequence,
              "response": {"id": "resp_1", "status": "failed",
                           "error": {"code": "server_error", "message": "lost"}}}
    tail = f"event: response.failed\ndata: {json.dumps(failed)}\n\n".encode()
    assert judge(_exchange(True, 200, cut + tail), 10).outcome == "stream_error"
    assert judge(_exchange(True, 200, cut + tail + tail), 10).outcome == "malformed"


@pytest.mark.parametrize(("body", "outcome"), [
    ({"object": "response", "id": "resp_1", "status": "completed", "usage": {},
      "output": [{"type": "message", "content": []}]}, "ok"),
    ({"object": "response", "id": "resp_1", "status": "in_progress", "usage": {},
      "output": [{"type": "message"}]}, "malformed"),
    ({"object": "chat.completion", "choices": []}, "malformed"),
])
def test_a_response_object_must_be_complete(body: object, outcome: str) -> None:
    assert judge(_exchange(False, 200, json.dumps(body).encode()), 10).outcome == outcome


def test_errors_have_the_openai_shape() -> None:
    body = {"error": {"message": "all failed", "type": "api_error"}}
    assert judge(_exchange(False, 502, json.dumps(body).encode()), 10).outcome == "error"
    anthropic_shape = {"type": "error", "error": {"type": "api_error", "message": ""}}
    assert judge(_exchange(False, 502, json.dumps(anthropic_shape).encode()),
                 10).outcome == "malformed"
