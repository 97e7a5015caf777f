"""The OpenAI Chat Completions protocol: URLs, error bodies, stream markers."""

from __future__ import annotations

import json
from typing import Any

from claudex.providers.sse import TailScanner, openai_signal

signal = openai_signal


def chat_url(base_url: str) -> str:
    return f"{base_url.rstrip('/')}/chat/completions"


def models_url(base_url: str) -> str:
    return f"{base_url.rstrip('/')}/models"


def error_type_for(status: int) -> str:
    if status == 429:
        return "rate_limit_error"
    if status in (401, 403):
        return "authentication_error"
    if 400 <= status < 500:
        return "invalid_request_error"
    return "server_error"


def error_body(status: int, message: str, code: str | None = None, **extra: Any) -> bytes:
    error: dict[str, Any] = {
        "message": message,
        "type": error_type_for(status),
        "param": None,
        "code": code,
    }
    error.update(extra)
    return json.dumps({"error": error}).encode()


def sse_error(message: str, error_type: str = "server_error") -> bytes:
    payload = json.dumps({"error": {"message": message, "type": error_type, "code": None}})
    return f"data: {payload}\n\n".encode()


def tail_scanner() -> TailScanner:
    # Markers start at a line break so model text that mentions them cannot match.
    return TailScanner((b'\ndata: {"error"', b'\ndata: {"error":'), (b"\ndata: [DONE]",))


def error_message(body: bytes) -> str:
    try:
        value = json.loads(body)
        err = value.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
    except (ValueError, AttributeError):
        pass
    return body[:200].decode("utf-8", "replace").strip()
