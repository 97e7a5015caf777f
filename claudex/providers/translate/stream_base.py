"""What both stream translators share: bytes in through an `EventReader`, client-protocol bytes
out, and the finished / error / closed bookkeeping that ends the output exactly once."""

from __future__ import annotations

from typing import Any

from claudex.providers.sse import SseEvent
from claudex.providers.translate.wire import EventReader

NESTED_TOO_DEEPLY = "upstream sent an event nested too deeply to read"
# Token counts this large are no real usage. reasons.py adds and subtracts them, and a result
# past Python's 4300-digit int->str limit made json.dumps raise ValueError mid-stream.
_MAX_TOKEN_COUNT = 2**63


def _plausible(value: Any) -> bool:
    return not (isinstance(value, int) and abs(value) >= _MAX_TOKEN_COUNT)


def plausible_usage(usage: Any) -> Any:
    """`usage` without absurd integer counts, at the top level and one level down (where
    `prompt_tokens_details.cached_tokens` lives); anything that is not an object as it is."""
    if not isinstance(usage, dict):
        return usage
    cleaned: dict[str, Any] = {}
    for key, value in usage.items():
        if isinstance(value, dict):
            value = {inner: item for inner, item in value.items() if _plausible(item)}
        if _plausible(value):
            cleaned[key] = value
    return cleaned


class StreamTranslator:
    def __init__(self) -> None:
        self._reader = EventReader()
        self._finished = False
        self._closed = False
        self._error: str | None = None

    @property
    def finished(self) -> bool:
        """The upstream reached its own end (its terminal event or stop reason arrived)."""
        return self._finished

    @property
    def error(self) -> str | None:
        """The upstream's error message, once an in-stream error arrived."""
        return self._error

    def feed(self, chunk: bytes) -> bytes:
        if self._closed or self._error is not None:
            return b""
        return self._handle(self._reader.feed(chunk))

    def finish(self) -> bytes:
        if self._closed or self._error is not None:
            return b""
        out = self._handle(self._reader.flush())
        # An unterminated error event at the very end already ended the client stream; closing
        # it normally as well put a complete message after the error.
        return out if self._error is not None else out + self._close()

    def _handle(self, events: list[SseEvent]) -> bytes:
        out = bytearray()
        for event in events:
            try:
                out += self._on_event(event)
            except RecursionError:
                # JSON nested near or past the recursion limit fails in json.loads, or, when it
                # just parsed, in json.dumps or repr further down. Such an event cannot be
                # translated: end the stream with an error event the client understands.
                out += self._unreadable(NESTED_TOO_DEEPLY)
            if self._closed or self._error is not None:
                self._reader.discard()
                break
        return bytes(out)

    def _on_event(self, event: SseEvent) -> bytes:
        raise NotImplementedError

    def _unreadable(self, message: str) -> bytes:
        """Set `error` to `message` and return the client protocol's error event for it."""
        raise NotImplementedError

    def _close(self) -> bytes:
        """End the client stream (idempotent: nothing once closed)."""
        raise NotImplementedError
