"""A TLS listener in front of a plain-HTTP fake provider: the provider as a company would run it,
with a certificate from a private CA, and optionally wanting a client certificate (mTLS).

The front terminates TLS and pipes the bytes, unchanged, to the fake's plain port, so the fake
keeps recording and misbehaving as it always does. A client certificate, when required, must be
signed by `client_ca`; a handshake without one fails before any byte reaches the fake
(`handshakes_failed` counts those).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from pathlib import Path
from types import TracebackType
from typing import Final, Self, cast
from urllib.parse import urlsplit, urlunsplit

from claudex.demo.pki import CertFiles

__all__ = ["TlsFront"]

_CHUNK: Final = 65536
_HANDSHAKE_S: Final = 10.0
_CLOSE_S: Final = 2.0


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until EOF, then half-close the other side (as a TCP relay should)."""
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
        else:  # TLS cannot half-close: the fake closed, so does the client's connection
            writer.close()
    except (ConnectionError, ssl.SSLError, RuntimeError):
        pass  # the other side went away: the relay ends with it


class TlsFront:
    """`https://host:port` in front of `target_url` (an http:// URL, e.g. a FakeProvider's
    base_url). `base_url` is the target's URL with the front's scheme, host and port."""

    def __init__(self, target_url: str, server_cert: CertFiles, *,
                 client_ca: Path | None = None, host: str = "127.0.0.1", port: int = 0,
                 url_host: str | None = None) -> None:
        target = urlsplit(target_url)
        if target.scheme != "http" or target.hostname is None or target.port is None:
            raise ValueError(f"target_url must be http://host:port..., not {target_url!r}")
        self._target = target
        self.host = host
        self._port = port
        self.url_host = url_host or host
        """The host name `base_url` uses (a name in the server certificate other than the
        listening address, e.g. "localhost" or one resolved only by a proxy)."""
        self.connections = 0
        """Connections whose TLS handshake succeeded (each one piped to the target)."""
        self.handshakes_failed = 0
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(server_cert.cert, server_cert.key)
        if client_ca is not None:
            self._context.verify_mode = ssl.CERT_REQUIRED
            self._context.load_verify_locations(cafile=str(client_ca))
        self._server: asyncio.Server | None = None
        self._relays: set[asyncio.Task[None]] = set()
        self._handshakes: set[asyncio.Task[None]] = set()
        self._transports: set[asyncio.Transport] = set()

    @property
    def port(self) -> int:
        return self._port

    @property
    def requires_client_cert(self) -> bool:
        return self._context.verify_mode == ssl.CERT_REQUIRED

    @property
    def base_url(self) -> str:
        host = f"[{self.url_host}]" if ":" in self.url_host else self.url_host
        return urlunsplit(("https", f"{host}:{self._port}", self._target.path, "", ""))

    async def start(self) -> None:
        if self._server is not None:
            return
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Accepted(self), self.host, self._port)
        self._port = int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for task in list(self._handshakes):
            task.cancel()
        # Relays end by their connections closing, not by cancellation (asyncio's stream
        # protocol reports a cancelled handler as an error).
        for transport in list(self._transports):
            transport.abort()
        pending = self._relays | self._handshakes
        if pending:
            _, late = await asyncio.wait(pending, timeout=_CLOSE_S)
            for task in late:
                task.cancel()
        await server.wait_closed()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, traceback: TracebackType | None) -> None:
        await self.close()

    def _accepted(self, transport: asyncio.Transport) -> None:
        task = asyncio.get_running_loop().create_task(self._handshake(transport))
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, transport: asyncio.Transport) -> None:
        # TLS is started here rather than by the server so that a failed handshake (no client
        # certificate, one from another CA, a client that does not trust ours) is counted;
        # asyncio's TLS server would only log it in debug mode.
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=_CHUNK)
        protocol = asyncio.StreamReaderProtocol(reader, self._relay)
        try:
            tls = await asyncio.wait_for(
                loop.start_tls(transport, protocol, self._context, server_side=True),
                _HANDSHAKE_S)
        except (ssl.SSLError, OSError, TimeoutError):
            self.handshakes_failed += 1
            transport.abort()
            return
        except asyncio.CancelledError:  # closing mid-handshake
            transport.abort()
            raise
        if tls is None:  # the client went away during the handshake
            transport.abort()
            return
        self.connections += 1
        protocol.connection_made(tls)  # calls _relay with the TLS streams

    async def _relay(self, client_reader: asyncio.StreamReader,
                     client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._relays.add(task)
        upstream_writer: asyncio.StreamWriter | None = None
        self._transports.add(client_writer.transport)  # type: ignore[arg-type]
        try:
            assert self._target.hostname is not None
            upstream_reader, upstream_writer = await asyncio.open_connection(
                self._target.hostname, self._target.port)
            self._transports.add(upstream_writer.transport)  # type: ignore[arg-type]
            to_upstream = asyncio.ensure_future(_pipe(client_reader, upstream_writer))
            try:
                # When the fake's side ends (it went down, or closed after its answer) the
                # client's connection closes too: TLS cannot half-close, and a client left
                # waiting on a pooled connection would wait out its read timeout.
                await _pipe(upstream_reader, client_writer)
            finally:
                to_upstream.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await to_upstream
        except OSError:
            pass  # the fake is down: the client sees its connection closed, as from a dead server
        finally:
            self._relays.discard(task)
            for writer in (client_writer, upstream_writer):
                if writer is not None:
                    self._transports.discard(writer.transport)
                    writer.close()


class _Accepted(asyncio.Protocol):
    """A new plain connection: reading stops at once (the ClientHello must reach the TLS
    layer, not a buffer), then the front starts TLS on it."""

    def __init__(self, front: TlsFront) -> None:
        self._front = front

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport, though not always an asyncio.Transport subclass: uvloop's are not
        # (the console runs the demo world on the engine's uvloop thread).
        stream = cast(asyncio.Transport, transport)
        stream.pause_reading()
        self._front._accepted(stream)
