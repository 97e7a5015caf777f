"""A listening socket that can be closed and reopened on the same port.

The "down" fault must look like a dead server: connects refused (not accepted and then dropped),
kept-alive connections gone, and the same port back when the fault ends so the proxy's
configuration keeps pointing at it. aiohttp's runners and sites do not reopen a port, so this
owns the socket and hands it to `loop.create_server` itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Container
from typing import Final

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

BACKLOG: Final = 1024
_REBIND_PATIENCE_S: Final = 5.0
_SHUTDOWN_TIMEOUT_S: Final = 1.0


class SwitchableListener:
    """Serves `server` on host:port; `set_open(False)` refuses connections until reopened."""

    def __init__(
        self, server: web.Server, host: str, port: int, busy: Container[RequestHandler]
    ) -> None:
        self.host = host
        self.port = port
        """The bound port (the free one picked at start when 0 was asked for)."""
        self._server = server
        self._busy = busy
        self._listener: asyncio.AbstractServer | None = None
        self._opening: asyncio.Task[None] | None = None
        self._want_open = False

    @property
    def listening(self) -> bool:
        return self._listener is not None

    async def start(self) -> None:
        sock = self._bind()
        loop = asyncio.get_running_loop()
        self._listener = await loop.create_server(self._server, sock=sock, backlog=BACKLOG)
        self._want_open = True

    def set_open(self, want_open: bool) -> None:
        """Open or close the listening socket now (call from the serving loop)."""
        self._want_open = want_open
        if want_open:
            if self._listener is None and self._opening is None:
                sock: socket.socket | None
                try:
                    # Bound and listening before this returns, so a connect right after a
                    # switch back to "ok" is queued by the kernel instead of refused.
                    sock = self._bind()
                except OSError:
                    sock = None
                self._opening = asyncio.get_running_loop().create_task(self._serve_on(sock))
            return
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        self.close_connections()

    async def close(self) -> None:
        """Stop listening and close every connection (in-flight handlers get a short grace)."""
        self._want_open = False
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._opening is not None:
            self._opening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._opening
        self._server.pre_shutdown()
        await self._server.shutdown(_SHUTDOWN_TIMEOUT_S)

    def _bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            # SO_REUSEADDR lets a reopen bind the same port despite connections in TIME_WAIT.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            sock.listen(BACKLOG)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self.port = sock.getsockname()[1]
        return sock

    async def _serve_on(self, sock: socket.socket | None) -> None:
        loop = asyncio.get_running_loop()
        try:
            deadline = loop.time() + _REBIND_PATIENCE_S
            while sock is None:
                # While we were closed a client socket may have been given our port as its
                # local port (rare); keep trying briefly.
                await asyncio.sleep(0.02)
                if not self._want_open:
                    return
                with contextlib.suppress(OSError):
                    sock = self._bind()
                if sock is None and loop.time() > deadline:
                    return
            if not self._want_open:
                sock.close()
                return
            server = await loop.create_server(self._server, sock=sock, backlog=BACKLOG)
            if self._want_open:
                self._listener = server
            else:
                server.close()
        finally:
            self._opening = None

    def close_connections(self) -> None:
        """Close idle kept-alive connections now; busy ones close after their response.

        (aiohttp's `close()` on an idle connection would leave it open but unserved, hence
        `force_close()` for those.)"""
        for connection in self._server.connections:
            if connection in self._busy:
                connection.close()
            else:
                connection.force_close()
