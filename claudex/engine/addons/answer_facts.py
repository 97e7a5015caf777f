"""The model that answered and why it stopped, read from an answer's text when a trace asks.

Read at a request's end, only with traces on, from the text the client got (the client's
protocol): a non-streamed body, or a stream's first and last usage lines, which the usage scanner
keeps (core/usage.py) — Anthropic's `message_start` (with the model) and `message_delta` (with
`stop_reason`), a Chat stream's usage chunk (the model; its `finish_reason` is in an earlier chunk,
not kept, unless the provider sends both in one), Responses' `response.completed` (the model and
its status, or `incomplete_details.reason`).

A key found by text cannot be inside a JSON string (quotes are escaped there); the model is the
first `"model"` (every protocol puts the answer's own model before its content), the reasons
every `finish_reason` (one per choice) or Anthropic's `stop_reason`.
"""

from __future__ import annotations

import re
from typing import Final

_MODEL: Final = re.compile(r'"model"\s*:\s*"([^"\\]{1,200})"')
_FINISH: Final = re.compile(r'"(?:finish_reason|stop_reason)"\s*:\s*"([^"\\]{1,60})"')
_INCOMPLETE: Final = re.compile(r'"incomplete_details"\s*:\s*\{\s*"reason"\s*:\s*"([^"\\]{1,60})"')
_STATUS: Final = re.compile(r'"status"\s*:\s*"([^"\\]{1,60})"')
MAX_REASONS: Final = 16


def answer_facts(*texts: str | None) -> tuple[str | None, tuple[str, ...]]:
    """(response model, finish reasons) from the texts, in order; (None, ()) when unsaid."""
    model: str | None = None
    reasons: list[str] = []
    responses_status: str | None = None
    for text in texts:
        if not text:
            continue
        if model is None and (found := _MODEL.search(text)) is not None:
            model = found.group(1)
        said = _FINISH.findall(text)
        if said:
            reasons = said[:MAX_REASONS]
        elif (incomplete := _INCOMPLETE.search(text)) is not None:
            responses_status = incomplete.group(1)
        elif '"response' in text and (status := _STATUS.search(text)) is not None:
            responses_status = status.group(1)
    if not reasons and responses_status is not None:
        reasons = [responses_status]
    return model, tuple(reasons)
