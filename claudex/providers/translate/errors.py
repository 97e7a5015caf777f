"""Upstream errors re-expressed in the client's protocol.

Bodies: Anthropic `{"type":"error","error":{"type","message"}}` <-> OpenAI
`{"error":{"message","type","param","code"}}`. The message is kept word for word; the error
type is the client protocol's type for the status, and an OpenAI client also gets the
Anthropic type as `code` (e.g. "overloaded_error") since it says more than the status.

Statuses are kept, with one exception: Anthropic's 529 ("overloaded") is not an HTTP status
OpenAI clients know, so they get 503 Service Unavailable, which every HTTP client treats as
"try again later" (both official SDKs retry it, as they do 529).

In a stream an error arrives without a status; `stream_error_*` derive one from the error type
so that the same table applies.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from claudex.providers import anthropic, openai
from claudex.providers.translate.wire import sse_data, sse_event

# A Responses client's error bodies have Chat Completions' shape; a Responses upstream's may
# also be the ChatGPT backend's `{"detail": "..."}` (`claudex.providers.responses`).
Protocol = Literal["anthropic", "openai", "responses"]

ANTHROPIC_OVERLOADED = 529
OPENAI_OVERLOADED = 503

# Anthropic error type -> the status Anthropic sends it with.
_ANTHROPIC_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
# OpenAI error type or code -> status.
_OPENAI_TYPE_STATUS = {
    "invalid_request_error": 400,
    "invalid_api_key": 401,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "model_not_found": 404,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "requests": 429,
    "tokens": 429,
    "server_error": 500,
    "api_error": 500,
    "service_unavailable": 503,
    "overloaded": 529,
    "overloaded_error": 529,
}


def _fields_of(value: Any) -> tuple[str | None, str | None, str | None]:
    """(message, type, code) from either protocol's parsed error body."""
    if not isinstance(value, dict):
        return None, None, None
    err = value.get("error")
    if isinstance(err, dict):
        message, kind, code = err.get("message"), err.get("type"), err.get("code")
        return (str(message) if message else None, str(kind) if kind else None,
                str(code) if code else None)
    if isinstance(err, str) and err:
        return err, None, None
    detail = value.get("detail")
    if isinstance(detail, str) and detail:
        return detail, None, None
    message = value.get("message")
    return (message if isinstance(message, str) and message else None), None, None


def _error_fields(body: bytes) -> tuple[str, str | None, str | None]:
    """Like `_fields_of`, from raw bytes; the message falls back to the body's text."""
    try:
        value = json.loads(body)
    except ValueError:
        value = None
    message, kind, code = _fields_of(value)
    return message or _fallback_text(body), kind, code


def _fallback_text(body: bytes) -> str:
    text = body[:300].decode("utf-8", "replace").strip()
    return text or "upstream error with an empty body"


def translate_error(status: int, body: bytes, *, source: Protocol,
                    target: Protocol) -> tuple[int, bytes]:
    """An upstream error response (`source` protocol) as the client (`target`) expects it."""
    if source == target:
        return status, body
    message, kind, _code = _error_fields(body)
    if target != "anthropic":
        status = OPENAI_OVERLOADED if status == ANTHROPIC_OVERLOADED else status
        return status, openai.error_body(status, message, code=kind)
    return status, anthropic.error_body(status, message)


# -- in-stream errors ------------------------------------------------------------------------

def _payload_error(payload: dict[str, Any]) -> tuple[str, str | None, str | None]:
    message, kind, code = _fields_of(payload)
    return message or "upstream error", kind, code


def anthropic_stream_error_to_openai(payload: dict[str, Any]) -> bytes:
    """An Anthropic `event: error` payload as an OpenAI stream error line."""
    message, kind, _ = _payload_error(payload)
    status = _ANTHROPIC_TYPE_STATUS.get(kind or "", 500)
    status = OPENAI_OVERLOADED if status == ANTHROPIC_OVERLOADED else status
    error = {"message": message, "type": openai.error_type_for(status), "param": None,
             "code": kind}
    return sse_data({"error": error})


def openai_stream_error_to_anthropic(payload: dict[str, Any]) -> bytes:
    """An OpenAI in-stream error object as an Anthropic `event: error`."""
    message, kind, code = _payload_error(payload)
    status = _OPENAI_TYPE_STATUS.get(code or "", _OPENAI_TYPE_STATUS.get(kind or "", 500))
    error = {"type": anthropic.error_type_for(status), "message": message}
    return sse_event("error", {"type": "error", "error": error})


def stream_error_message(payload: dict[str, Any]) -> str:
    return _payload_error(payload)[0]
