"""What both stream translators share: bytes in through an `EventReader`, client-protocol bytes
out, and the finished / error / closed bookkeeping that ends the output exactly once."""

from __future__ import annotations

from claudex.providers.sse import SseEvent
from claudex.providers.translate.wire import EventReader


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
        return self._handle(self._reader.flush()) + self._close()

    def _handle(self, events: list[SseEvent]) -> bytes:
        out = bytearray()
        for event in events:
            out += self._on_event(event)
            if self._closed or self._error is not None:
                self._reader.discard()
                break
        return bytes(out)

    def _on_event(self, event: SseEvent) -> bytes:
        raise NotImplementedError

    def _close(self) -> bytes:
        """End the client stream (idempotent: nothing once closed)."""
        raise NotImplementedError
