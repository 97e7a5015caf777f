"""What the fakes remember about each request, so tests can assert what a client sent."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# One masking rule everywhere: what a fake recorded is shown as claudex shows a client's headers
# (engine/masking/header_policy.py: values off its allow-list masked, `sk-…abcd`).
from claudex.engine.masking.header_policy import shown_headers
from claudex.engine.masking.secrets import mask_secret

__all__ = ["RecordedRequest", "mask_secret", "masked_headers", "parse_json_body",
           "presented_tokens"]


def masked_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """A copy of `headers` as claudex shows headers: values off the allow-list masked."""
    return dict(shown_headers(headers))


def presented_tokens(headers: Mapping[str, str]) -> tuple[str, ...]:
    """The credentials a request carries: its x-api-key and its bearer token, if any."""
    tokens: list[str] = []
    api_key = headers.get("x-api-key")
    if api_key:
        tokens.append(api_key)
    authorization = headers.get("authorization", "")
    scheme, _, credential = authorization.partition(" ")
    if scheme.lower() == "bearer" and credential.strip():
        tokens.append(credential.strip())
    return tuple(tokens)


@dataclass(slots=True)
class RecordedRequest:
    """One request as received, and the status it was answered with. `headers` has lowercased
    names and real values (tests compare them); `repr` masks credentials so a failing assertion
    does not print a secret."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any
    """The parsed JSON body, or None (no body, or not JSON)."""
    time: float
    """`time.monotonic()` when the request arrived."""
    query: str = ""
    """The query string as received (`beta=true`), without the `?`."""
    status: int | None = None
    """The status answered (a stream's is sent first); None while the answer is being made, or
    when the connection was dropped without one. Set by the fake that recorded the request."""

    def __repr__(self) -> str:
        return (
            f"RecordedRequest(method={self.method!r}, path={self.path!r}, "
            f"headers={masked_headers(self.headers)!r}, json={self.json!r}, time={self.time!r})"
        )

    def summary(self) -> dict[str, Any]:
        """A JSON-friendly view, headers as claudex shows them (credentials masked)."""
        return {
            "method": self.method,
            "path": self.path,
            "headers": masked_headers(self.headers),
            "json": self.json,
            "time": self.time,
            "status": self.status,
        }


def parse_json_body(raw: bytes) -> Any:
    """The JSON value of a request body, or None when it is empty or not JSON."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None
