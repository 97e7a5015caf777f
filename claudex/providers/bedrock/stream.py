"""Bedrock's response stream and Anthropic SSE, each made from the other.

Bedrock wraps every Anthropic stream event in one `chunk` frame (`:event-type` chunk,
`:content-type` application/json, `:message-type` event) whose payload is
`{"bytes": base64(the event's JSON), "p": "abcd…"}`: `p` is padding of varying length, letters
of the alphabet in order, that Bedrock adds so a frame's size does not tell its text (seen in
captured frames; clients ignore it). anthropic-sdk-python's `lib/bedrock/_stream_decoder.py`
turns each chunk back into an SSE event named by the event's `type`. A failure inside the
stream is a frame with `:message-type` exception and `:exception-type` the event stream
member's name (`modelStreamErrorException`, `throttlingException`, ...: botocore's model,
`ResponseStream`), payload `{"message": ...}`.

`EventStreamToSse` is the reading side (claudex forwarding a Bedrock answer to an Anthropic
client); `SseToEventStream` the writing side (claudex answering a client in Bedrock mode).
"""

from __future__ import annotations

import base64
import json
from typing import Any, Final

from claudex.providers import fastjson
from claudex.providers.bedrock.errors import (
    BedrockError,
    BedrockFailure,
    describe,
    parse_exception,
)
from claudex.providers.bedrock.eventstream import (
    EventStreamError,
    Frame,
    FrameDecoder,
    encode_frame,
)
from claudex.providers.sse import split_events

__all__ = [
    "EVENTSTREAM_CONTENT_TYPE",
    "EventStreamToSse",
    "SseToEventStream",
    "anthropic_error_type",
    "chunk_frame",
    "exception_frame",
    "sse_event",
]

EVENTSTREAM_CONTENT_TYPE: Final = "application/vnd.amazon.eventstream"
_ALPHABET: Final = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_CHUNK_HEADERS: Final = ((":event-type", "chunk"), (":content-type", "application/json"),
                         (":message-type", "event"))
_TYPE_PREFIXES: Final = (b'{"type":"', b'{"type": "')  # compact, and as `json.dumps` writes

# An Anthropic error event's type for a Bedrock failure, and the exception a client in Bedrock
# mode gets for an Anthropic error event.
_ANTHROPIC_TYPE: Final[dict[BedrockFailure, str]] = {
    BedrockFailure.RATE_LIMITED: "rate_limit_error",
    BedrockFailure.QUOTA: "rate_limit_error",
    BedrockFailure.AUTH: "permission_error",
    BedrockFailure.CLIENT: "invalid_request_error",
    BedrockFailure.DROP_FIELD: "invalid_request_error",
    BedrockFailure.DROP_BETAS: "invalid_request_error",
    BedrockFailure.MODEL_UNAVAILABLE: "not_found_error",
}
_EXCEPTION_FOR: Final[dict[str, str]] = {
    "rate_limit_error": "throttlingException",
    "overloaded_error": "serviceUnavailableException",
    "invalid_request_error": "validationException",
    "api_error": "internalServerException",
}


def anthropic_error_type(error: BedrockError) -> str:
    """The Anthropic error type a client is told for a Bedrock failure."""
    if error.failure is BedrockFailure.SERVER:
        unavailable = error.error_type == "ServiceUnavailableException"
        return "overloaded_error" if unavailable else "api_error"
    return _ANTHROPIC_TYPE[error.failure]


def chunk_frame(event_json: bytes, *, padding: int = 0) -> bytes:
    """One Anthropic event as Bedrock streams it; `padding` letters of `p` (0: none)."""
    payload: dict[str, str] = {"bytes": base64.b64encode(event_json).decode("ascii")}
    if padding > 0:
        payload["p"] = (_ALPHABET * (padding // len(_ALPHABET) + 1))[:padding]
    return encode_frame(_CHUNK_HEADERS, json.dumps(payload, separators=(",", ":")).encode())


def exception_frame(exception_type: str, message: str, **extra: Any) -> bytes:
    """A failure inside the stream; `exception_type` as the member is named
    (`modelStreamErrorException`; an UpperCamel name is lowered)."""
    name = exception_type[:1].lower() + exception_type[1:]
    headers = ((":exception-type", name), (":content-type", "application/json"),
               (":message-type", "exception"))
    return encode_frame(headers, json.dumps({"message": message, **extra}).encode())


def _event_type(event_json: bytes) -> str:
    for prefix in _TYPE_PREFIXES:  # the usual order: one slice, no parse
        if event_json.startswith(prefix):
            end = event_json.find(b'"', len(prefix))
            if end > 0:
                return event_json[len(prefix):end].decode("utf-8", "replace")
    try:
        value = fastjson.loads(event_json)
    except (ValueError, RecursionError):
        return "completion"
    kind = value.get("type") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) else "completion"


def sse_event(event_json: bytes) -> bytes:
    """`event: <type>` / `data: <json>` for one Anthropic event (named as the SDK names it)."""
    return b"event: " + _event_type(event_json).encode() + b"\ndata: " + event_json + b"\n\n"


def _error_sse(error_type: str, message: str) -> bytes:
    data = json.dumps({"type": "error", "error": {"type": error_type, "message": message}})
    return f"event: error\ndata: {data}\n\n".encode()


class EventStreamToSse:
    """Bedrock's eventstream bytes in, Anthropic SSE bytes out. An exception frame becomes
    an SSE `error` event (so the stream watcher sees the failure where it is: before the
    first content it fails over, after it the client gets it) and `error` describes it.
    Raises `EventStreamError` on a bad frame; call `finish` when the body ends."""

    def __init__(self) -> None:
        self._decoder = FrameDecoder()
        self.error: BedrockError | None = None
        """The first failure the stream carried (an exception or error frame)."""

    def feed(self, data: bytes) -> bytes:
        frames = self._decoder.feed(data)
        if not frames:
            return b""
        return b"".join(self._convert(frame) for frame in frames)

    def finish(self) -> None:
        self._decoder.finish()

    def _convert(self, frame: Frame) -> bytes:
        kind = frame.message_type
        if kind == "event":
            if frame.event_type != "chunk":
                return b""  # nothing else carries the answer (the SDK skips them too)
            return sse_event(_chunk_event(frame.payload))
        if kind == "exception":
            error = parse_exception(frame.exception_type, frame.payload)
        else:  # an `error` frame: its code and message are headers
            code = frame.headers.get(":error-code", "")
            message = frame.headers.get(":error-message", "")
            error = describe(code if isinstance(code, str) else "",
                             message if isinstance(message, str) else "", None)
        if self.error is None:
            self.error = error
        return _error_sse(anthropic_error_type(error), error.message or error.error_type)


def _chunk_event(payload: bytes) -> bytes:
    try:
        value = fastjson.loads(payload)
        return base64.b64decode(value["bytes"], validate=True)
    except (ValueError, KeyError, TypeError) as error:
        raise EventStreamError(f"a Bedrock chunk without base64 `bytes`: {error}") from None


class SseToEventStream:
    """Anthropic SSE bytes in, Bedrock eventstream bytes out: each event a chunk frame, an
    `error` event an exception frame (rate limits as throttlingException, overloaded as
    serviceUnavailableException, ...). `padding` adds Bedrock's `p` field."""

    def __init__(self, *, padding: bool = False) -> None:
        self._buffer = bytearray()
        self._padding = padding
        self._count = 0

    def feed(self, data: bytes) -> bytes:
        self._buffer += data
        return b"".join(self._frame(event.data) for event in split_events(self._buffer)
                        if event.data)

    def finish(self) -> bytes:
        """Whatever was left without its blank line, as a last event."""
        rest, self._buffer = self._buffer, bytearray()
        if not rest.strip():
            return b""
        return self.feed(bytes(rest) + b"\n\n")

    def _frame(self, data: str) -> bytes:
        raw = data.encode()
        if _event_type(raw) == "error":
            try:
                error = json.loads(raw).get("error", {})
            except (ValueError, AttributeError):
                error = {}
            kind = error.get("type") if isinstance(error, dict) else None
            message = error.get("message") if isinstance(error, dict) else None
            return exception_frame(
                _EXCEPTION_FOR.get(kind if isinstance(kind, str) else "",
                                   "modelStreamErrorException"),
                message if isinstance(message, str) else "The stream failed.")
        self._count += 1
        padding = 1 + (self._count * 7) % 40 if self._padding else 0
        return chunk_frame(raw, padding=padding)
