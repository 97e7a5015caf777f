"""The stream codec: what turns a provider's stream bytes into the client's, as the committed
stream (`core/streaming.py`) drives it, and `Relay`, the codec for the same-protocol path.

Kept apart from `claudex.engine.core.exchange`, which picks a codec for each pair of protocols (the
translating ones live in `claudex.providers.translate`), because this is the one interface the
streaming loop depends on: it reads `feed`/`finish` and the two verdicts, and nothing else of
the exchange.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from claudex.providers.sse import TailScanner


class StreamCodec(Protocol):
    """Turns upstream stream bytes into client stream bytes."""

    def feed(self, chunk: bytes) -> bytes: ...

    def finish(self) -> bytes: ...

    @property
    def finished(self) -> bool: ...  # the upstream stream ended properly

    @property
    def error(self) -> str | None: ...  # an in-band upstream error passed to the client


class Relay:
    """Same protocol: bytes pass as they are; a tail scan notices the end or an error."""

    def __init__(self, scanner: TailScanner,
                 tap: Callable[[bytes], None] | None = None) -> None:
        self._scanner = scanner
        self._tap = tap  # sees the bytes too: remembers thinking signatures (cheaply)

    def feed(self, chunk: bytes) -> bytes:
        self._scanner.feed(chunk)
        if self._tap is not None:
            self._tap(chunk)
        return chunk

    def finish(self) -> bytes:
        return b""

    @property
    def finished(self) -> bool:
        return self._scanner.saw_end

    @property
    def error(self) -> str | None:
        return "upstream sent an error mid-stream" if self._scanner.saw_error else None
