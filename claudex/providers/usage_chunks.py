"""Token usage for every Chat Completions stream, without showing a client what it did not ask for.

An OpenAI-compatible provider reports a stream's token counts only when asked
(`stream_options.include_usage`): then every chunk carries `"usage":null` and one last chunk,
with no choices, the usage. claudex asks for it on every streamed request to such a provider, so
the engine can count the tokens, and for a client that did not ask, `HiddenUsage` takes both out
again on the way to the client: it sees the stream it would have seen without claudex.

Whole events only: the bytes after the last event boundary wait for the rest of their event
(a client cannot use half an event anyway), and the rest passes as it came. A chunk without the
`"usage"` marker costs one `bytes.find`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Final

_MARKER: Final = b'"usage"'
_NULLS: Final = (b',"usage":null', b', "usage": null')
_OBJECTS: Final = (b'"usage":{', b'"usage": {')
_NO_CHOICES: Final = (b'"choices":[]', b'"choices": []')


def asked_for_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def _boundary(data: bytes) -> int:
    """Where the last complete event of `data` ends (0: none yet)."""
    lf = data.rfind(b"\n\n")
    crlf = data.rfind(b"\r\n\r\n")
    return max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0)


def _is_usage_only(event: bytes) -> bool:
    return any(m in event for m in _OBJECTS) and any(m in event for m in _NO_CHOICES)


class HiddenUsage:
    """Feed it a Chat stream's bytes; it returns them without the usage claudex asked for."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        data = self._pending + chunk if self._pending else chunk
        end = _boundary(data)
        self._pending = data[end:]
        return self._clean(data[:end])

    def finish(self) -> bytes:
        rest, self._pending = self._pending, b""
        return self._clean(rest)

    @staticmethod
    def _clean(data: bytes) -> bytes:
        # `find`, not `in`: on Python 3.11 `in` first tries the marker as a byte value and
        # formats a TypeError it drops (claudex/providers/signature_scan.py); once a chunk.
        if not data or data.find(_MARKER) < 0:
            return data
        for null in _NULLS:
            data = data.replace(null, b"")
        if not any(m in data for m in _OBJECTS):
            return data
        events = data.replace(b"\r\n", b"\n").split(b"\n\n")
        return b"".join(e + b"\n\n" for e in events if e and not _is_usage_only(e))


class WithoutUsage:
    """An answer stream with `HiddenUsage` applied; closing it closes the stream inside."""

    def __init__(self, inner: AsyncIterator[bytes]) -> None:
        self._inner = inner
        self._filter = HiddenUsage()
        self._ended = False

    def __aiter__(self) -> WithoutUsage:
        return self

    async def __anext__(self) -> bytes:
        while not self._ended:
            try:
                chunk = await self._inner.__anext__()
            except StopAsyncIteration:
                self._ended = True
                tail = self._filter.finish()
                if tail:
                    return tail
                break
            out = self._filter.feed(chunk)
            if out:
                return out
        raise StopAsyncIteration

    async def aclose(self) -> None:
        aclose = getattr(self._inner, "aclose", None)
        if aclose is not None:
            await aclose()
