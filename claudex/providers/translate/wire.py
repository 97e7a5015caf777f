"""Server-sent events in and out of the stream translators.

In: upstream bytes arrive split anywhere (mid-line, mid-UTF-8 character, between the CR and LF
of a line end). `EventReader` decodes incrementally and splits lines only at CR, LF or CRLF as
the SSE format says — not at the other characters `str.splitlines` treats as line ends (U+2028
may appear raw inside JSON text) — and hands out whole events only.
Out: compact JSON, one event per `event:`/`data:` group, as both APIs send them; the few
characters some line splitters mistake for line ends are escaped.
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Any

from claudex.providers.sse import SseEvent

_LINE_END = re.compile(r"\r\n|\r|\n")


class EventReader:
    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""          # text after the last complete line end
        self._name: str | None = None
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[SseEvent]:
        return self._take(self._decoder.decode(chunk))

    def flush(self) -> list[SseEvent]:
        """At the end of the stream: an unterminated last line and event still count."""
        events = self._take(self._decoder.decode(b"", final=True) + "\n\n")
        self._pending = ""
        return events

    def discard(self) -> None:
        self._pending, self._name, self._data = "", None, []

    def _take(self, text: str) -> list[SseEvent]:
        buffer = self._pending + text
        events: list[SseEvent] = []
        start = 0
        # One regex search per line: looking for CR and LF separately rescanned the rest of
        # the buffer for each line, which made a chunk of many short lines quadratic.
        while (match := _LINE_END.search(buffer, start)) is not None:
            if match.group() == "\r" and match.end() == len(buffer):
                break  # a CR at the very end may be the first half of CRLF: wait
            event = self._line(buffer[start:match.start()])
            if event is not None:
                events.append(event)
            start = match.end()
        self._pending = buffer[start:]
        return events

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            if self._name is None and not self._data:
                return None
            event = SseEvent(self._name, "\n".join(self._data))
            self._name, self._data = None, []
            return event
        if line.startswith(":"):
            return None  # a comment, e.g. a keep-alive
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            self._name = value.strip()
        elif field == "data":
            self._data.append(value)
        return None


def parse_json_object(data: str) -> dict[str, Any] | None:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: nested a few thousand deep
        return None
    return value if isinstance(value, dict) else None


def as_object(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one (for optional nested objects)."""
    return value if isinstance(value, dict) else {}


_LINE_END_LOOKALIKES = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029",
                                      "\x85": "\\u0085"})


def _dumps(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False,
                      separators=(",", ":")).translate(_LINE_END_LOOKALIKES)


def sse_event(name: str, payload: dict[str, Any]) -> bytes:
    """An Anthropic-style event: `event: NAME` and its JSON data."""
    return f"event: {name}\ndata: {_dumps(payload)}\n\n".encode()


def sse_data(payload: dict[str, Any]) -> bytes:
    """An OpenAI-style event: a bare `data:` line."""
    return f"data: {_dumps(payload)}\n\n".encode()


SSE_DONE = b"data: [DONE]\n\n"
