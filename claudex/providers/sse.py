"""Watch an upstream SSE stream for the commit point without re-encoding it.

Before the commit point the watcher parses whole events (they are few: `message_start`, `ping`).
After it the proxy only forwards bytes; `TailScanner` then looks for an in-band error or the
terminal event with a cheap substring search, keeping a short carry-over so a marker split across
chunks is still found.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Generator
from dataclasses import dataclass
from enum import Enum
from typing import Any

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class StreamSignal(Enum):
    NONE = "none"          # nothing decisive yet: keep buffering
    CONTENT = "content"    # first content event: commit
    ERROR = "error"        # an error event arrived before content


@dataclass(frozen=True)
class SseEvent:
    event: str | None
    data: str


def _parse_event(raw: bytes) -> SseEvent | None:
    name: str | None = None
    data_lines: list[str] = []
    # Only CR, LF and CRLF end SSE lines (str.splitlines would also split at U+2028 etc.).
    for line in _LINE_BREAK.split(raw.decode("utf-8", "replace")):
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data_lines.append(line[5:].lstrip(" "))
    if name is None and not data_lines:
        return None  # a comment or keep-alive
    return SseEvent(name, "\n".join(data_lines))


def iter_events(buffer: bytearray) -> Generator[SseEvent, None, None]:
    """Yield the complete events at the front of `buffer`, removing what was consumed when the
    caller stops (early or at the end); a partial event stays for the next chunk. Linear in the
    buffer: each boundary search is bounded by the next LF-LF boundary."""
    offset = 0
    try:
        while True:
            # Events end at a blank line; accept \n\n and \r\n\r\n.
            idx_n = buffer.find(b"\n\n", offset)
            limit = idx_n + 2 if idx_n >= 0 else len(buffer)
            idx_r = buffer.find(b"\r\n\r\n", offset, limit)
            if idx_r >= 0 and (idx_n < 0 or idx_r < idx_n):
                raw, next_offset = bytes(buffer[offset:idx_r]), idx_r + 4
            elif idx_n >= 0:
                raw, next_offset = bytes(buffer[offset:idx_n]), idx_n + 2
            else:
                return
            offset = next_offset
            event = _parse_event(raw)
            if event is not None:
                yield event
    finally:
        del buffer[:offset]


def split_events(buffer: bytearray) -> list[SseEvent]:
    """Remove every complete event from `buffer` and return them parsed (partial tail stays)."""
    return list(iter_events(buffer))


def _json(data: str) -> dict[str, Any] | None:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: nested past json's recursion limit
        return None
    return value if isinstance(value, dict) else None


def _message(value: object) -> str:
    # Only text is a message: str() of any other JSON value can be huge, or recurse too deeply
    # for a nested one (RecursionError).
    return value if isinstance(value, str) and value else "error event"


ANTHROPIC_CONTENT_EVENTS = frozenset({"content_block_start", "content_block_delta"})


def anthropic_signal(event: SseEvent) -> tuple[StreamSignal, str]:
    # The event line names the kind: the data is parsed only without one, or for an error's
    # message (every stream's message_start and first block were parsed for nothing).
    kind = event.event
    payload = None
    if kind is None:
        payload = _json(event.data) if event.data else None
        if payload is not None:
            kind = str(payload.get("type", ""))
    if kind in ANTHROPIC_CONTENT_EVENTS or kind == "message_stop":
        # message_stop before any block is a complete (empty) answer: commit to it as well.
        return StreamSignal.CONTENT, ""
    if kind == "error":
        if payload is None and event.data:
            payload = _json(event.data)
        err = (payload or {}).get("error", {})
        return StreamSignal.ERROR, _message(err.get("message") if isinstance(err, dict) else None)
    return StreamSignal.NONE, ""


def openai_signal(event: SseEvent) -> tuple[StreamSignal, str]:
    if event.data.strip() == "[DONE]":
        # A stream that ends before any content delivered nothing worth committing to, but it is
        # a complete answer (e.g. an empty completion): commit so the client sees it.
        return StreamSignal.CONTENT, ""
    payload = _json(event.data)
    if payload is None:
        return StreamSignal.NONE, ""
    if "error" in payload:
        err = payload["error"]
        return StreamSignal.ERROR, _message(err.get("message") if isinstance(err, dict) else err)
    choices = payload.get("choices")
    # Anything but an array (`"choices": 5`) has no choices; iterating it raised TypeError.
    for choice in choices if isinstance(choices, list) else ():
        if not isinstance(choice, dict):
            continue
        if choice.get("finish_reason"):
            return StreamSignal.CONTENT, ""
        delta = choice.get("delta") or {}
        if isinstance(delta, dict) and any(
            delta.get(k) for k in ("content", "tool_calls", "function_call", "refusal",
                                   "reasoning_content")
        ):
            return StreamSignal.CONTENT, ""
    return StreamSignal.NONE, ""


SignalFn = Callable[[SseEvent], tuple[StreamSignal, str]]


class CommitWatcher:
    """Feed upstream chunks until the first content event (commit) or an error event."""

    def __init__(self, signal: SignalFn) -> None:
        self._signal = signal
        self._buffer = bytearray()
        self.error_message = ""

    def feed(self, chunk: bytes) -> StreamSignal:
        self._buffer += chunk
        events = iter_events(self._buffer)
        try:
            # Stop at the first decisive event: after it the watcher is no longer consulted, and
            # parsing the rest of a 500-event burst would only delay the commit.
            for event in events:
                sig, message = self._signal(event)
                if sig is StreamSignal.ERROR:
                    self.error_message = message
                    return sig
                if sig is StreamSignal.CONTENT:
                    return sig
            return StreamSignal.NONE
        finally:
            events.close()


@functools.lru_cache(maxsize=16)
def _any_of(markers: tuple[bytes, ...]) -> re.Pattern[bytes]:
    return re.compile(b"|".join(re.escape(m) for m in markers))


@functools.lru_cache(maxsize=8)
def _tail_plan(error_markers: tuple[bytes, ...], end_markers: tuple[bytes, ...]) -> tuple[
        re.Pattern[bytes], re.Pattern[bytes], re.Pattern[bytes], tuple[bytes, ...]]:
    """A TailScanner's searches, built once per protocol rather than per stream: one regex per
    kind (a third of the time of testing each marker in turn), one for all (they all start with
    a line break, which the regex engine skips to fast) and the markers' rests."""
    markers = error_markers + end_markers
    if not all(m.startswith(b"\n") and b"\n" not in m[1:] for m in markers):
        raise ValueError("tail markers start at a line break and hold no other")
    return (_any_of(error_markers), _any_of(end_markers), _any_of(markers),
            tuple(m[1:] for m in markers))


class TailScanner:
    """After commit: spot an in-band error and whether the stream finished properly.

    Every marker starts with a line break and has no other. So when the bytes so far end with a
    line break (nearly always: a chunk is usually whole events), a marker new in `chunk` is
    either inside it or starts at that break, its rest opening `chunk`: one search of the chunk
    for every marker and one `startswith` settle the usual chunk, without joining it to the
    carry. A hit is settled by the exact search of carry and chunk per kind."""

    CARRY = 40

    def __init__(self, error_markers: tuple[bytes, ...], end_markers: tuple[bytes, ...]) -> None:
        self.error_markers, self.end_markers = error_markers, end_markers
        self._errors, self._ends, self._any, self._rests = _tail_plan(error_markers, end_markers)
        self._carry = b"\n"  # the stream start counts as a line start
        self.saw_error = False
        self.saw_end = False

    def feed(self, chunk: bytes) -> None:
        carry = self._carry
        if carry.endswith(b"\n") and self._any.search(chunk) is None \
                and not chunk.startswith(self._rests):
            self._carry = chunk[-self.CARRY :] if len(chunk) >= self.CARRY \
                else (carry + chunk)[-self.CARRY :]
            return
        window = carry + chunk
        if not self.saw_error and self._errors.search(window) is not None:
            self.saw_error = True
        if not self.saw_end and self._ends.search(window) is not None:
            self.saw_end = True
        self._carry = window[-self.CARRY :]
