"""Vertex AI's errors for Claude, read (`parse_error`) and written (`error_response`).

Google's APIs answer `{"error": {"code": 429, "message": "...", "status": "RESOURCE_EXHAUSTED",
"details": [...]}}`, and for the Claude routes sometimes the same object inside a JSON array
(`[{"error": {...}}]`: seen from streamRawPredict, cline/cline#651, yym68686/uni-api#41);
`Content-Type: application/json; charset=UTF-8`. What the model itself refuses comes through in
Anthropic's own shape (`{"type": "error", "error": {"type": ..., "message": ...}}`), which is
read too.

For claudex (`VertexFailure`, the issue's failure table): RESOURCE_EXHAUSTED 429 ("Quota
exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model ...") is a rate
limit; UNAVAILABLE 503, INTERNAL 500, DEADLINE_EXCEEDED 504 fail over; UNAUTHENTICATED 401 means
the access token was refused: mint a new one and retry once; PERMISSION_DENIED 403 is auth;
FAILED_PRECONDITION 400 ("Project `p` is not allowed to use Publisher Model `…`": the model is
not enabled for the project) and NOT_FOUND 404 mean the profile's model is not there: fail over
and say so; INVALID_ARGUMENT and other 4xx are the client's request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

__all__ = ["CODE_BY_STATUS", "VertexError", "VertexFailure", "error_response", "parse_error"]


class VertexFailure(StrEnum):
    RATE_LIMITED = "rate_limited"
    SERVER = "server"
    TOKEN_REJECTED = "token_rejected"
    """401 UNAUTHENTICATED: the access token was refused (expired, revoked): mint again and
    retry once."""
    AUTH = "auth"
    """403 PERMISSION_DENIED: the credentials lack the permission."""
    MODEL_UNAVAILABLE = "model_unavailable"
    """The model is not enabled for the project (400 FAILED_PRECONDITION) or not there (404)."""
    CLIENT = "client"


CODE_BY_STATUS: Final[dict[str, int]] = {
    # google.rpc.Code's HTTP mapping (Google's API design guide, "Errors").
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "ABORTED": 409,
    "ALREADY_EXISTS": 409,
    "RESOURCE_EXHAUSTED": 429,
    "CANCELLED": 499,
    "DATA_LOSS": 500,
    "UNKNOWN": 500,
    "INTERNAL": 500,
    "NOT_IMPLEMENTED": 501,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}
_FAILURE_BY_STATUS: Final[dict[str, VertexFailure]] = {
    "RESOURCE_EXHAUSTED": VertexFailure.RATE_LIMITED,
    "UNAVAILABLE": VertexFailure.SERVER,
    "INTERNAL": VertexFailure.SERVER,
    "UNKNOWN": VertexFailure.SERVER,
    "DATA_LOSS": VertexFailure.SERVER,
    "DEADLINE_EXCEEDED": VertexFailure.SERVER,
    "UNAUTHENTICATED": VertexFailure.TOKEN_REJECTED,
    "PERMISSION_DENIED": VertexFailure.AUTH,
    "FAILED_PRECONDITION": VertexFailure.MODEL_UNAVAILABLE,
    "NOT_FOUND": VertexFailure.MODEL_UNAVAILABLE,
}
_FAILURE_BY_ANTHROPIC_TYPE: Final[dict[str, VertexFailure]] = {
    "rate_limit_error": VertexFailure.RATE_LIMITED,
    "overloaded_error": VertexFailure.SERVER,
    "api_error": VertexFailure.SERVER,
    "authentication_error": VertexFailure.TOKEN_REJECTED,
    "permission_error": VertexFailure.AUTH,
    "not_found_error": VertexFailure.MODEL_UNAVAILABLE,
}


@dataclass(frozen=True, slots=True)
class VertexError:
    failure: VertexFailure
    status: str
    """Google's status name (`RESOURCE_EXHAUSTED`), or the Anthropic error type when the
    model answered in Anthropic's shape; "" when neither was given."""
    code: int
    """The HTTP status the answer came with."""
    message: str
    reason: str = ""
    """The first `google.rpc.ErrorInfo` reason in `details` (`ACCESS_TOKEN_EXPIRED`), if any."""
    anthropic: bool = False
    """The body was Anthropic's error shape (the model's own refusal)."""


def _google_error(value: Any) -> dict[str, Any] | None:
    if isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, dict) and isinstance(value.get("error"), dict):
        error: dict[str, Any] = value["error"]
        return error
    return None


def _reason(details: Any) -> str:
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, dict) and isinstance(detail.get("reason"), str):
            return str(detail["reason"])
    return ""


def _failure_by_code(code: int) -> VertexFailure:
    if code == 429:
        return VertexFailure.RATE_LIMITED
    if code == 401:
        return VertexFailure.TOKEN_REJECTED
    if code == 403:
        return VertexFailure.AUTH
    if code >= 500:
        return VertexFailure.SERVER
    return VertexFailure.CLIENT


def _text(mapping: dict[str, Any], key: str) -> str:
    value = mapping.get(key)
    return value if isinstance(value, str) else ""


def parse_error(code: int, body: bytes) -> VertexError:
    """Read an error response (Google's object or array, or Anthropic's shape)."""
    try:
        value: Any = json.loads(body)
    except (ValueError, RecursionError):
        text = body.decode("utf-8", "replace").strip()[:1000]
        return VertexError(_failure_by_code(code), "", code, text)
    if isinstance(value, dict) and value.get("type") == "error":
        inner = value.get("error")
        inner = inner if isinstance(inner, dict) else {}
        kind, message = _text(inner, "type"), _text(inner, "message")
        failure = _FAILURE_BY_ANTHROPIC_TYPE.get(kind, _failure_by_code(code))
        return VertexError(failure, kind, code, message, anthropic=True)
    error = _google_error(value)
    if error is None:
        return VertexError(_failure_by_code(code), "", code, "")
    status, message = _text(error, "status"), _text(error, "message")
    failure = _FAILURE_BY_STATUS.get(status, _failure_by_code(code))
    return VertexError(failure, status, code, message, _reason(error.get("details")))


def error_response(status: str, message: str, *, in_array: bool = False,
                   details: list[dict[str, Any]] | None = None,
                   ) -> tuple[int, dict[str, str], bytes]:
    """(HTTP status, headers, body) of a Google API error; `in_array` wraps it as the Claude
    routes sometimes do."""
    code = CODE_BY_STATUS.get(status, 500)
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = details
    value: Any = [{"error": error}] if in_array else {"error": error}
    headers = {"Content-Type": "application/json; charset=UTF-8"}
    return code, headers, json.dumps(value).encode()
