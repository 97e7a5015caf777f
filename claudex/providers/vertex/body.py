"""The request body Vertex AI takes for Claude, from the Anthropic one, and back.

As anthropic-sdk-python's `lib/vertex/_client.py` (`_prepare_options`) rewrites it: a message's
`model` leaves the body (the path says it), `stream` stays, `anthropic_version` is
`vertex-2023-10-16` unless the body has one; betas stay in the `anthropic-beta` header. A token
count keeps its `model` (Google's count-tokens page: "The request body must contain the model
ID of the model for which to count tokens") and gets the same `anthropic_version`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["ANTHROPIC_VERSION", "anthropic_body", "count_tokens_body", "vertex_body"]

ANTHROPIC_VERSION: Final = "vertex-2023-10-16"


def vertex_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """A new body for rawPredict / streamRawPredict; the client's `body` is not changed."""
    rewritten = {key: value for key, value in body.items() if key != "model"}
    rewritten.setdefault("anthropic_version", ANTHROPIC_VERSION)
    return rewritten


def count_tokens_body(body: Mapping[str, Any]) -> dict[str, Any]:
    rewritten = dict(body)
    rewritten.setdefault("anthropic_version", ANTHROPIC_VERSION)
    return rewritten


def anthropic_body(body: Mapping[str, Any], *, model: str) -> dict[str, Any]:
    """An Anthropic Messages body from a rawPredict request's (the model from its path)."""
    rewritten = {key: value for key, value in body.items() if key != "anthropic_version"}
    rewritten["model"] = model
    return rewritten
