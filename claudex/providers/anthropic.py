"""The Anthropic Messages protocol: URLs, headers, error bodies, stream markers."""

from __future__ import annotations

import json
from typing import Any

from claudex.providers.sse import TailScanner, anthropic_signal

signal = anthropic_signal
DEFAULT_VERSION = "2023-06-01"
FORWARDED_CLIENT_HEADERS = ("anthropic-version", "anthropic-beta")


def messages_url(base_url: str, count_tokens: bool = False) -> str:
    base = base_url.rstrip("/")
    return f"{base}/v1/messages/count_tokens" if count_tokens else f"{base}/v1/messages"


def models_url(base_url: str) -> str:
    return f"{base_url.rstrip('/')}/v1/models"


def error_type_for(status: int) -> str:
    return {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        529: "overloaded_error",
    }.get(status, "api_error")


def error_body(status: int, message: str, **extra: Any) -> bytes:
    error: dict[str, Any] = {"type": error_type_for(status), "message": message}
    error.update(extra)
    return json.dumps({"type": "error", "error": error}).encode()


def sse_error(message: str, error_type: str = "api_error") -> bytes:
    payload = json.dumps({"type": "error", "error": {"type": error_type, "message": message}})
    return f"event: error\ndata: {payload}\n\n".encode()


def tail_scanner() -> TailScanner:
    # Markers start at a line break: inside JSON text a newline is escaped, so model output that
    # merely mentions "event: error" cannot match.
    return TailScanner((b"\nevent: error", b'\ndata: {"type":"error"', b'\ndata: {"type": "error"'),
                       (b"\nevent: message_stop", b'\ndata: {"type":"message_stop"'))


def error_message(body: bytes) -> str:
    """The upstream's own error message, for attempt records (never the whole body)."""
    try:
        value = json.loads(body)
        err = value.get("error", {})
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
    except (ValueError, AttributeError):
        pass
    return body[:200].decode("utf-8", "replace").strip()
