"""Run the app under uvicorn, on a socket we bind ourselves so callers learn the real port
(tests bind port 0) before the first request."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

import uvicorn

from claudex.server.security import ASGIApp


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP spelled out: asyncio sets TCP_NODELAY on accepted connections only when the
    # listening socket says it is TCP, and without it Nagle + delayed ACK add ~40 ms per answer.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


class _Server(uvicorn.Server):
    """uvicorn re-raises SIGINT/SIGTERM after a graceful shutdown, so the process would die
    "by signal"; for claudex a graceful stop is a normal exit (status 0).

    `on_shutdown` runs as the shutdown begins, before uvicorn waits for open responses to
    finish: the app ends the ones that never would (its event streams)."""

    handle_signals = True  # False when hosted in-process (tests, console): the host owns signals
    on_shutdown: Callable[[], None] | None = None

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.on_shutdown is not None:
            self.on_shutdown()
        await super().shutdown(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if not self.handle_signals:
            yield
            return
        with super().capture_signals():
            try:
                yield
            finally:
                self._captured_signals.clear()


def make_server(app: ASGIApp, *, loop: str = "asyncio", graceful_seconds: int = 30,
                log_level: str = "warning",
                on_shutdown: Callable[[], None] | None = None) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        loop=loop,
        http="httptools",
        # No route of claudex is a WebSocket: "auto" would import a WebSocket implementation
        # (~1 MB of memory) to answer upgrades nothing serves.
        ws="none",
        lifespan="on",
        log_config=None,
        log_level=log_level,
        access_log=False,
        server_header=False,
        date_header=False,
        timeout_graceful_shutdown=graceful_seconds,
        timeout_keep_alive=75,
        proxy_headers=False,  # a local proxy has no trusted front proxy to read X-Forwarded-* from
    )
    server = _Server(config)
    server.on_shutdown = on_shutdown
    return server


@dataclass
class RunningServer:
    server: uvicorn.Server
    task: asyncio.Task[None]
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def stop(self) -> None:
        self.server.should_exit = True
        await self.task


async def start_in_background(app: ASGIApp, host: str = "127.0.0.1", port: int = 0,
                              graceful_seconds: int = 5,
                              on_shutdown: Callable[[], None] | None = None) -> RunningServer:
    """Start uvicorn inside the running loop (tests, demo, console) and wait until it serves."""
    sock = bind_socket(host, port)
    server = make_server(app, graceful_seconds=graceful_seconds, on_shutdown=on_shutdown)
    if isinstance(server, _Server):
        server.handle_signals = False
    server.config.setup_event_loop = lambda: None  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve(sockets=[sock]), name="claudex-uvicorn")
    while not server.started:
        if task.done():
            task.result()  # raises the startup error
        await asyncio.sleep(0.005)
    return RunningServer(server, task, host, sock.getsockname()[1])


@contextlib.asynccontextmanager
async def serving(
    app: ASGIApp, host: str = "127.0.0.1", port: int = 0,
    on_shutdown: Callable[[], None] | None = None,
) -> AsyncIterator[RunningServer]:
    running = await start_in_background(app, host, port, on_shutdown=on_shutdown)
    try:
        yield running
    finally:
        await running.stop()
