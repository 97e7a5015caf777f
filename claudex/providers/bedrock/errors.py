"""Bedrock's errors, read (`parse_error`, `parse_exception`) and written (`error_response`).

On the wire (botocore's bedrock-runtime model, `botocore/data/bedrock-runtime/2023-09-30/
service-2.json`, and its rest-json reader, `botocore/parsers.py`): the status, a JSON body
`{"message": ...}` (AWS's own auth layer writes `{"Message": ...}`) and the type in
`X-Amzn-ErrorType`, which may carry a `:…` suffix (`ValidationException:http://internal.amazon.com/
coral/com.amazon.bedrock/`) and a `namespace#` prefix: both are cut, as botocore and Smithy's
protocol tests say. Inside a stream the same exceptions arrive as frames whose `:exception-type`
is the event stream member's name, lowerCamel (`modelStreamErrorException`).

What each means for claudex (`BedrockFailure`), from the model's statuses and the issue's failure
table: ThrottlingException 429 and ModelNotReadyException 429 are rate limits;
ServiceQuotaExceededException is a 400 that is a rate limit too (never the client's mistake);
InternalServerException 500, ServiceUnavailableException 503, ModelTimeoutException 408,
ModelStreamErrorException 424 and ModelErrorException 424 are the service's failures;
AccessDeniedException, InvalidSignatureException, UnrecognizedClientException,
ExpiredTokenException, MissingAuthenticationTokenException 403 and IncompleteSignature 400 are
auth; ValidationException 400 is the client's request — except where Bedrock refuses what the
Anthropic API accepts: `invalid beta flag` (Bedrock does not say which flag) and
`<field>: Extra inputs are not permitted` / `#/<pointer>: extraneous key [<name>] is not
permitted` (the field is named): drop it and retry once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

__all__ = [
    "STATUS_BY_TYPE",
    "BedrockError",
    "BedrockFailure",
    "FieldPath",
    "describe",
    "error_response",
    "error_type_of",
    "parse_error",
    "parse_exception",
]

FieldPath = tuple[str | int, ...]
"""A field's place in the request body: ("context_management",), ("messages", 0, "content")."""


class BedrockFailure(StrEnum):
    RATE_LIMITED = "rate_limited"
    """ThrottlingException, ModelNotReadyException (429): back off, retry, fail over."""
    QUOTA = "quota"
    """ServiceQuotaExceededException: a 400 that is a rate limit; fail over, never the
    client's mistake."""
    SERVER = "server"
    """InternalServerException 500, ServiceUnavailableException 503, ModelTimeoutException
    408, ModelStreamErrorException / ModelErrorException 424, any 5xx: fail over."""
    AUTH = "auth"
    """The credentials or the signature were refused (403, IncompleteSignature 400)."""
    MODEL_UNAVAILABLE = "model_unavailable"
    """The profile's model cannot be used here (ResourceNotFoundException 404, an invalid
    model identifier, on-demand throughput not supported): the profile's configuration, not
    the client's request; fail over and say so."""
    DROP_FIELD = "drop_field"
    """A ValidationException naming body fields Bedrock does not accept (`fields`): drop them,
    retry once, remember it for the profile."""
    DROP_BETAS = "drop_betas"
    """`invalid beta flag`: one of `anthropic_beta` is refused; Bedrock does not say which."""
    CLIENT = "client"
    """Any other ValidationException or 4xx: the client's request, answered as it is."""


STATUS_BY_TYPE: Final[dict[str, int]] = {
    # The model's error shapes (service-2.json `error.httpStatusCode`)...
    "AccessDeniedException": 403,
    "ConflictException": 400,
    "InternalServerException": 500,
    "ModelErrorException": 424,
    "ModelNotReadyException": 429,
    "ModelStreamErrorException": 424,
    "ModelTimeoutException": 408,
    "ResourceNotFoundException": 404,
    "ServiceQuotaExceededException": 400,
    "ServiceUnavailableException": 503,
    "ThrottlingException": 429,
    "ValidationException": 400,
    # ...and AWS's common ones, from its auth layer (AWS's common errors, Bedrock's
    # troubleshooting page).
    "ExpiredTokenException": 403,
    "IncompleteSignature": 400,
    "InvalidSignatureException": 403,
    "MissingAuthenticationTokenException": 403,
    "UnrecognizedClientException": 403,
}

_FAILURE_BY_TYPE: Final[dict[str, BedrockFailure]] = {
    "ThrottlingException": BedrockFailure.RATE_LIMITED,
    "ModelNotReadyException": BedrockFailure.RATE_LIMITED,
    "ServiceQuotaExceededException": BedrockFailure.QUOTA,
    "InternalServerException": BedrockFailure.SERVER,
    "ServiceUnavailableException": BedrockFailure.SERVER,
    "ModelTimeoutException": BedrockFailure.SERVER,
    "ModelStreamErrorException": BedrockFailure.SERVER,
    "ModelErrorException": BedrockFailure.SERVER,
    "AccessDeniedException": BedrockFailure.AUTH,
    "InvalidSignatureException": BedrockFailure.AUTH,
    "UnrecognizedClientException": BedrockFailure.AUTH,
    "ExpiredTokenException": BedrockFailure.AUTH,
    "MissingAuthenticationTokenException": BedrockFailure.AUTH,
    "IncompleteSignature": BedrockFailure.AUTH,
    "ResourceNotFoundException": BedrockFailure.MODEL_UNAVAILABLE,
}

# The model's own pydantic-style refusal, relayed by Bedrock ("The model returned the following
# errors: context_management: Extra inputs are not permitted"): the path before the colon.
_EXTRA_INPUT = re.compile(r"([A-Za-z_][\w.\-]*): Extra inputs are not permitted")
# Bedrock's JSON-schema refusal ("Malformed input request: #: extraneous key [foo] is not
# permitted, please reformat your input and try again."; "#/messages/0/content/0: extraneous key
# [type] is not permitted").
_EXTRANEOUS_KEY = re.compile(r"#(/[^:#\s]*)?: extraneous key \[([^\]]+)\] is not permitted")
_INVALID_BETA = re.compile(r"invalid beta flag", re.IGNORECASE)
# Messages saying the configured model id cannot be invoked (Bedrock's ValidationException
# words: "The provided model identifier is invalid.", "Invocation of model ID … with on-demand
# throughput isn't supported.").
_MODEL_UNUSABLE = re.compile(
    r"model identifier is invalid|with on-demand throughput isn.t supported", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class BedrockError:
    """One Bedrock error, read: what it is for claudex, in Bedrock's own words."""

    failure: BedrockFailure
    error_type: str
    """The exception's name, UpperCamel (`ThrottlingException`); "" when none was given."""
    message: str
    status: int | None
    """The HTTP status; None for an exception frame inside a 200 stream."""
    fields: tuple[FieldPath, ...] = ()
    """DROP_FIELD: the fields Bedrock named, each a path into the request body."""

    @property
    def in_stream(self) -> bool:
        return self.status is None


def error_type_of(raw: str) -> str:
    """`ThrottlingException` from `ThrottlingException:http://…`, `aws#ThrottlingException`
    or an event stream's `throttlingException`."""
    name = raw.strip().split(":", 1)[0].rsplit("#", 1)[-1]
    return name[:1].upper() + name[1:]


def _field_path(dotted: str) -> FieldPath:
    return tuple(int(part) if part.isdigit() else part for part in dotted.split(".") if part)


def _pointer_path(pointer: str | None, key: str) -> FieldPath:
    parts = [p for p in (pointer or "").split("/") if p]
    return (*(int(p) if p.isdigit() else p for p in parts), key)


def named_fields(message: str) -> tuple[FieldPath, ...]:
    """The body fields a validation message says are not accepted, in the order named."""
    found: list[FieldPath] = [_field_path(m.group(1)) for m in _EXTRA_INPUT.finditer(message)]
    found += [_pointer_path(m.group(1), m.group(2)) for m in _EXTRANEOUS_KEY.finditer(message)]
    unique: list[FieldPath] = []
    for path in found:
        if path not in unique:
            unique.append(path)
    return tuple(unique)


def describe(error_type: str, message: str, status: int | None) -> BedrockError:
    """Read one error from its parts (a response's, or an exception frame's)."""
    name = error_type_of(error_type) if error_type else ""
    failure = _FAILURE_BY_TYPE.get(name)
    fields: tuple[FieldPath, ...] = ()
    if failure is None:
        if name == "ValidationException" or (not name and status == 400):
            if _INVALID_BETA.search(message):
                failure = BedrockFailure.DROP_BETAS
            elif fields := named_fields(message):
                failure = BedrockFailure.DROP_FIELD
            elif _MODEL_UNUSABLE.search(message):
                failure = BedrockFailure.MODEL_UNAVAILABLE
            else:
                failure = BedrockFailure.CLIENT
        else:
            failure = _failure_by_status(status)
    return BedrockError(failure, name, message, status, fields)


def _failure_by_status(status: int | None) -> BedrockFailure:
    if status is None or status >= 500:
        return BedrockFailure.SERVER  # an unnamed failure inside a stream: the service's
    if status == 429:
        return BedrockFailure.RATE_LIMITED
    if status in (401, 403):
        return BedrockFailure.AUTH
    if status == 408 or status == 424:
        return BedrockFailure.SERVER
    return BedrockFailure.CLIENT


def _message_of(body: bytes) -> tuple[str, str]:
    """(message, type named in the body) from a JSON error body; the text itself otherwise."""
    try:
        value: Any = json.loads(body)
    except (ValueError, RecursionError):
        return body.decode("utf-8", "replace").strip()[:1000], ""
    if not isinstance(value, dict):
        return "", ""
    message = value.get("message", value.get("Message", ""))
    named = value.get("__type", value.get("code", value.get("Code", "")))
    return (message if isinstance(message, str) else "",
            named if isinstance(named, str) else "")


def parse_error(status: int, headers: Mapping[str, str], body: bytes) -> BedrockError:
    """Read an error response. `headers` may be any case (looked up case-insensitively)."""
    header = next((value for name, value in headers.items()
                   if name.lower() == "x-amzn-errortype"), "")
    message, named = _message_of(body)
    return describe(header or named, message, status)


def parse_exception(exception_type: str, payload: bytes) -> BedrockError:
    """Read an exception frame (`:message-type` exception) from a response stream."""
    message, _ = _message_of(payload)
    return describe(exception_type, message, None)


def error_response(error_type: str, message: str, *, key: str = "message",
                   service: str = "com.amazon.bedrock") -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of an error as Bedrock answers it: the model's status for the
    type, `X-Amzn-ErrorType` with its coral suffix, `{"message": ...}` (`key="Message"` for
    the auth layer's answers, `service="com.amazon.coral.service"` for its suffix)."""
    status = STATUS_BY_TYPE.get(error_type, 400)
    headers = {
        "Content-Type": "application/json",
        "x-amzn-ErrorType": f"{error_type}:http://internal.amazon.com/coral/{service}/",
    }
    return status, headers, json.dumps({key: message}).encode()
