"""Find the thinking signatures (and redacted_thinking data) in Anthropic answers as they pass.

A relayed stream goes to the client byte for byte; this scanner looks at the same bytes without
parsing them: per chunk, one search for the two markers every signature-carrying event has
(`"signature` — a thinking `content_block_start` and each `signature_delta` — and
`redacted_thinking`), and one search for the last event boundary. Only events that hold a
marker are parsed, so a long text stream costs two substring searches per chunk.

The real API sends a block's signature in one `signature_delta`; should it come in pieces,
the concatenation so far is reported after each piece (the last report is the whole).
"""

from __future__ import annotations

import json
from typing import Any, Final

from claudex.providers.sse import iter_events
from claudex.providers.thinking import signed_value, signed_values

_MARKERS: Final = (b'"signature', b"redacted_thinking")
_LONGEST: Final = max(len(m) for m in _MARKERS)
_NONE: Final[list[str]] = []  # returned for the usual chunk, and never changed by a caller


# `find`, not `in`: on Python 3.11 `sub in data` first tries `sub` as an integer (a byte value),
# which formats a TypeError and drops it before the substring search; `find` checks the type
# first. Twice an answer and twice a stream chunk: ~90 ns each (bench/served_instructions.py
# showed the two PyErr_Format a request).
def _marked(data: bytes) -> bool:
    # _MARKERS, unrolled
    return data.find(b'"signature') >= 0 or data.find(b"redacted_thinking") >= 0


def signatures_in_answer(payload: bytes) -> list[str]:
    """The signed values in a non-streamed Messages answer (parsed only when one may be in it)."""
    if not _marked(payload):
        return []
    try:
        body = json.loads(payload)
    except (ValueError, RecursionError):
        return []
    return list(signed_values(body.get("content"))) if isinstance(body, dict) else []


class SignatureScanner:
    """Feed a Messages SSE stream chunk by chunk; each `feed` returns the signed values whose
    events completed in that chunk."""

    def __init__(self) -> None:
        self._tail = b""           # bytes after the last complete event
        self._tail_marked = False  # ... and whether they hold a marker
        self._pieces: dict[Any, str] = {}  # signature so far, per block index

    def feed(self, chunk: bytes) -> list[str]:
        tail = self._tail
        if not tail and chunk.find(b'"signature') < 0 and chunk.find(b"redacted_thinking") < 0 \
                and chunk.endswith(b"\n\n"):
            return _NONE  # the usual chunk: whole events, none with a signature (_marked inlined)
        marked = self._tail_marked or _marked(chunk) or (
            bool(tail) and _marked(tail[-_LONGEST:] + chunk[:_LONGEST]))
        if not marked and chunk.endswith(b"\n\n"):
            self._tail = b""
            return []
        end = _last_boundary(chunk)
        if end < 0 and tail:
            # A blank line may straddle the chunks (only at this chunk's start, then).
            lead = tail[-3:]
            end = _last_boundary(lead + chunk[:3]) - len(lead)
        if end <= 0:
            self._tail = tail + chunk if tail else chunk
            self._tail_marked = marked
            return []
        rest = chunk[end:]
        self._tail, self._tail_marked = rest, _marked(rest)
        if not marked:
            return []
        return self._parse(bytearray(tail + chunk[:end]))

    def _parse(self, events: bytearray) -> list[str]:
        found: list[str] = []
        for event in iter_events(events):
            if '"signature' not in event.data and "redacted_thinking" not in event.data:
                continue
            try:
                payload = json.loads(event.data)
            except (ValueError, RecursionError):
                continue
            if isinstance(payload, dict):
                self._take(payload, found)
        return found

    def _take(self, payload: dict[str, Any], found: list[str]) -> None:
        kind = payload.get("type")
        if kind == "content_block_start":
            value = signed_value(payload.get("content_block"))
            if value is not None:
                found.append(value)
        elif kind == "content_block_delta":
            delta = payload.get("delta")
            if isinstance(delta, dict) and delta.get("type") == "signature_delta":
                piece = delta.get("signature")
                if isinstance(piece, str) and piece:
                    index = payload.get("index")
                    key = index if isinstance(index, int) else None
                    whole = self._pieces.get(key, "") + piece
                    self._pieces[key] = whole
                    found.append(whole)


def _last_boundary(chunk: bytes) -> int:
    """The offset just past the last blank line (an event's end) in `chunk`, or -1."""
    lf = chunk.rfind(b"\n\n")
    crlf = chunk.rfind(b"\r\n\r\n")
    return max(lf + 2 if lf >= 0 else -1, crlf + 4 if crlf >= 0 else -1)
