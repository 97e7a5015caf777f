"""Bedrock's URL, body, stream conversion and errors, against the SDK's rules and botocore's
own event stream parser."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.eventstream import EventStream, EventStreamBuffer
from botocore.exceptions import EventStreamError as BotocoreEventStreamError
from botocore.loaders import Loader
from botocore.model import ServiceModel
from botocore.parsers import EventStreamJSONParser

from claudex.providers.bedrock import (
    BedrockFailure,
    EventStreamError,
    EventStreamToSse,
    SseToEventStream,
    anthropic_body,
    bedrock_body,
    betas_from_header,
    chunk_frame,
    default_base_url,
    exception_frame,
    invoke_url,
    parse_error,
    parse_exception,
    parse_invoke_path,
    without_betas,
    without_fields,
)
from claudex.providers.sse import split_events

SSE = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"m"}}\n\n'
       b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
       b'"delta":{"type":"text_delta","text":"hi"}}\n\n'
       b'event: message_stop\ndata: {"type":"message_stop"}\n\n')


class _Raw:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self) -> Any:
        yield from (self._data[i:i + 7] for i in range(0, len(self._data), 7))


def _botocore_events(data: bytes) -> list[dict[str, Any]]:
    """What boto3's invoke_model_with_response_stream yields for these bytes."""
    model = ServiceModel(Loader().load_service_model("bedrock-runtime", "service-2"))
    shape = model.shape_for("ResponseStream")
    return list(EventStream(_Raw(data), shape, EventStreamJSONParser(),
                            "InvokeModelWithResponseStream"))


def test_urls_as_the_sdk_builds_them() -> None:
    base = default_base_url("eu-west-1")
    assert base == "https://bedrock-runtime.eu-west-1.amazonaws.com"
    model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    assert invoke_url(base + "/", model, stream=False) == f"{base}/model/{model}/invoke"
    arn = "arn:aws:bedrock:eu-west-1:123456789012:application-inference-profile/abc"
    assert invoke_url(base, arn, stream=True) == (
        f"{base}/model/arn:aws:bedrock:eu-west-1:123456789012:application-inference-profile%2Fabc"
        "/invoke-with-response-stream")


@pytest.mark.parametrize("path", [
    "/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke",
    "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke",  # boto3's encoding
])
def test_a_server_reads_the_model_from_either_encoding(path: str) -> None:
    route = parse_invoke_path(path)
    assert route is not None and not route.stream
    assert route.model_id == "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    assert parse_invoke_path("/v1/messages") is None


def test_the_body_loses_model_and_stream_and_gains_version_and_betas() -> None:
    client = {"model": "m", "stream": True, "max_tokens": 5, "messages": []}
    body = bedrock_body(client, betas=betas_from_header("a-1, b-2,"))
    assert body == {"max_tokens": 5, "messages": [], "anthropic_version": "bedrock-2023-05-31",
                    "anthropic_beta": ["a-1", "b-2"]}
    assert "model" in client  # the client's body is left as it was
    kept = bedrock_body({"anthropic_version": "x", "anthropic_beta": ["own"]}, betas=["h"])
    assert kept == {"anthropic_version": "x", "anthropic_beta": ["own"]}  # as the SDK: body wins
    back, betas = anthropic_body(body, model="m", stream=True)
    assert back == {"max_tokens": 5, "messages": [], "model": "m", "stream": True}
    assert betas == ["a-1", "b-2"]


def test_the_retry_bodies_drop_what_bedrock_named() -> None:
    body = {"context_management": {}, "messages": [{"content": [{"type": "text", "x": 1}]}],
            "anthropic_beta": ["a", "b"]}
    assert without_fields(body, [("context_management",)]) == {
        "messages": body["messages"], "anthropic_beta": ["a", "b"]}
    nested = without_fields(body, [("messages", 0, "content", 0, "x")])
    assert nested is not None and nested["messages"][0]["content"][0] == {"type": "text"}
    assert body["messages"][0]["content"][0]["x"] == 1  # a deep copy where it changed
    assert without_fields(body, [("tools", 0, "custom", "defer_loading")]) is None
    assert without_betas(body, ["a"])["anthropic_beta"] == ["b"]
    assert "anthropic_beta" not in without_betas(body)


def test_sse_becomes_chunk_frames_that_boto3_reads_and_back() -> None:
    frames = SseToEventStream(padding=True).feed(SSE)
    events = _botocore_events(frames)
    assert [json.loads(e["chunk"]["bytes"])["type"] for e in events] == [
        "message_start", "content_block_delta", "message_stop"]
    back = EventStreamToSse()
    sse = b"".join(back.feed(frames[i:i + 5]) for i in range(0, len(frames), 5))
    back.finish()
    assert [(e.event, json.loads(e.data)) for e in split_events(bytearray(sse))] == [
        (e.event, json.loads(e.data)) for e in split_events(bytearray(SSE))]
    assert back.error is None


def test_an_sse_error_becomes_the_exception_frame_boto3_raises() -> None:
    error = (b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
             b'"message":"Overloaded"}}\n\n')
    with pytest.raises(BotocoreEventStreamError) as raised:
        _botocore_events(SseToEventStream().feed(SSE[:80] + error))
    assert raised.value.response["Error"] == {"Code": "serviceUnavailableException",
                                              "Message": "Overloaded"}


def test_an_exception_frame_becomes_an_sse_error_event_and_is_described() -> None:
    converter = EventStreamToSse()
    first = chunk_frame(b'{"type":"message_start","message":{}}', padding=12)
    sse = converter.feed(first + exception_frame("modelStreamErrorException", "stream broke",
                                                 originalStatusCode=500))
    events = split_events(bytearray(sse))
    assert [e.event for e in events] == ["message_start", "error"]
    assert json.loads(events[1].data)["error"] == {"type": "api_error", "message": "stream broke"}
    assert converter.error is not None
    assert converter.error.failure is BedrockFailure.SERVER
    assert converter.error.error_type == "ModelStreamErrorException" and converter.error.in_stream
    throttled = EventStreamToSse()
    throttled.feed(exception_frame("ThrottlingException", "slow down"))
    assert throttled.error is not None and throttled.error.failure is BedrockFailure.RATE_LIMITED


def test_a_chunk_without_base64_bytes_is_a_clear_error() -> None:
    from claudex.providers.bedrock import encode_frame
    bad = encode_frame({":message-type": "event", ":event-type": "chunk"}, b'{"byte":"x"}')
    with pytest.raises(EventStreamError, match="without base64 `bytes`"):
        EventStreamToSse().feed(bad)


def _err(status: int, error_type: str, message: str, key: str = "message") -> Any:
    return parse_error(status, {"X-Amzn-ErrorType": error_type},
                       json.dumps({key: message}).encode())


@pytest.mark.parametrize(("status", "error_type", "failure"), [
    (429, "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/",
     BedrockFailure.RATE_LIMITED),
    (429, "ModelNotReadyException", BedrockFailure.RATE_LIMITED),
    (400, "ServiceQuotaExceededException", BedrockFailure.QUOTA),
    (503, "ServiceUnavailableException", BedrockFailure.SERVER),
    (500, "InternalServerException", BedrockFailure.SERVER),
    (408, "ModelTimeoutException", BedrockFailure.SERVER),
    (424, "ModelStreamErrorException", BedrockFailure.SERVER),
    (424, "ModelErrorException", BedrockFailure.SERVER),
    (403, "AccessDeniedException:http://internal.amazon.com/coral/com.amazon.coral.service/",
     BedrockFailure.AUTH),
    (403, "InvalidSignatureException", BedrockFailure.AUTH),
    (403, "UnrecognizedClientException", BedrockFailure.AUTH),
    (403, "ExpiredTokenException", BedrockFailure.AUTH),
    (404, "ResourceNotFoundException", BedrockFailure.MODEL_UNAVAILABLE),
    (400, "ValidationException", BedrockFailure.CLIENT),
    (400, "com.amazon.bedrock#ValidationException", BedrockFailure.CLIENT),
])
def test_every_error_row(status: int, error_type: str, failure: BedrockFailure) -> None:
    error = _err(status, error_type, "words")
    assert error.failure is failure
    assert ":" not in error.error_type and "#" not in error.error_type
    assert error.message == "words" and error.status == status


def test_the_auth_layers_capital_message_is_read() -> None:
    error = _err(403, "AccessDeniedException", "Authorization header is missing", "Message")
    assert error.message == "Authorization header is missing"


@pytest.mark.parametrize(("message", "fields"), [
    ("context_management: Extra inputs are not permitted", [("context_management",)]),
    ("The model returned the following errors: output_config: Extra inputs are not permitted",
     [("output_config",)]),
    ("messages.65.content.1.tool_use.text: Extra inputs are not permitted",
     [("messages", 65, "content", 1, "tool_use", "text")]),
    ("Malformed input request: #: extraneous key [stream] is not permitted, please reformat your "
     "input and try again.", [("stream",)]),
    ("Malformed input request: #/messages/0/content/0: extraneous key [type] is not permitted, "
     "reformat your input and try again.", [("messages", 0, "content", 0, "type")]),
    ("a: Extra inputs are not permitted, b: Extra inputs are not permitted", [("a",), ("b",)]),
])
def test_a_refused_field_is_named(message: str, fields: list[tuple[object, ...]]) -> None:
    error = _err(400, "ValidationException", message)
    assert error.failure is BedrockFailure.DROP_FIELD
    assert list(error.fields) == fields


@pytest.mark.parametrize("message", [
    "invalid beta flag", "The model returned the following errors: invalid beta flag"])
def test_an_invalid_beta_flag_asks_for_the_betas_to_go(message: str) -> None:
    assert _err(400, "ValidationException", message).failure is BedrockFailure.DROP_BETAS


@pytest.mark.parametrize("message", [
    "The provided model identifier is invalid.",
    "Invocation of model ID anthropic.claude-3-5-sonnet-20241022-v2:0 with on-demand throughput "
    "isn’t supported. Retry your request with the ID or ARN of an inference profile that contains "
    "this model.",
])
def test_an_unusable_model_is_the_profiles_not_the_clients(message: str) -> None:
    assert _err(400, "ValidationException", message).failure is BedrockFailure.MODEL_UNAVAILABLE


def test_errors_without_a_type_header_fall_back_to_the_status() -> None:
    assert parse_error(503, {}, b"<html>busy</html>").failure is BedrockFailure.SERVER
    assert parse_error(429, {}, b"").failure is BedrockFailure.RATE_LIMITED
    assert parse_exception("validationException", b'{"message":"invalid beta flag"}').failure \
        is BedrockFailure.DROP_BETAS


def test_a_stream_split_mid_event_converts_once_complete() -> None:
    converter = SseToEventStream()
    out = converter.feed(SSE[:30]) + converter.feed(SSE[30:]) + converter.finish()
    buffer = EventStreamBuffer()
    buffer.add_data(out)
    assert len(list(buffer)) == 3
