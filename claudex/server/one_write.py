"""A whole answer leaves in one write: its head and its body together.

uvicorn writes an answer's status line and headers (`http.response.start`) to the socket at
once, and its body (`http.response.body`) with a second write: two system calls, and on
loopback two segments, so the client wakes twice for every answer. claudex's front sends a whole
answer's two messages back to back (server/proxy_asgi.py, no await between them that waits), so
this protocol holds a response head until the next write of the same connection — the body,
sent with it in one vectored write — or until the event loop's next turn, whichever is first:
a stream's head still leaves as soon as the relay waits for its first chunk, and nothing is
ever held past the task that wrote it.

The transport uvicorn's protocol gets is a thin stand-in for the real one (every other method
and attribute passes through), installed in `connection_made`.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

# A body this large goes in a write of its own after the head: joining them would copy it
# (asyncio's writelines on Python 3.11 joins its buffers; uvloop's does not).
_JOIN_UNDER: Final = 64 * 1024
_HEAD_END: Final = b"\r\n\r\n"


class OneWriteTransport:
    """Holds a response head back until the connection's next write or the loop's next turn."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if len(data) < _JOIN_UNDER:
                self._transport.writelines((held, data))
            else:
                self._transport.write(held)
                self._transport.write(data)
            return
        if isinstance(data, bytes) and data.startswith(b"HTTP/") and data.endswith(_HEAD_END):
            self._held = data  # a response head (uvicorn writes it whole, alone)
            self._loop.call_soon(self.flush)
            return
        self._transport.write(data)

    def flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held)

    def writelines(self, data: Any) -> None:
        self.flush()
        self._transport.writelines(data)

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def get_write_buffer_size(self) -> int:
        held = self._held
        return self._transport.get_write_buffer_size() + (0 if held is None else len(held))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class OneWriteHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol whose whole answers leave in one write."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(
            OneWriteTransport(transport, self.loop))  # type: ignore[arg-type]
