"""The project's own fault proxy: an HTTP proxy on 127.0.0.1 whose failures switch at run time.

What a corporate proxy does to claudex, on demand: it tunnels `CONNECT host:port` and forwards
plain absolute-URI requests (`GET http://host:port/path`) like any forward proxy, and, by mode,

    ok             tunnels and forwards
    down           listener closed and every connection dropped: connects are refused; back on
                   the same port when the mode changes
    rate_limited   429 with Retry-After
    forbidden      403
    bad_gateway    502 (or 503/504: `set_mode("bad_gateway", status=503)`)
    hang           accepts, reads the request and never answers (a proxy that times out)

With `username`/`password`, a request without the right `Proxy-Authorization: Basic` is answered
407 with `Proxy-Authenticate`, whatever the mode. `connects` counts CONNECTs by the mode that
answered them ("unauthorized" for a 407); `forwards` the same for plain requests.

Used by the tests (the failure rows tinyproxy cannot produce) and by `claudex demo`. It never
logs or keeps the credentials it is sent.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hmac
import socket
from collections import Counter
from types import TracebackType
from typing import Final, Literal, Self, get_args
from urllib.parse import urlsplit

__all__ = ["FakeProxy", "ProxyMode"]

ProxyMode = Literal["ok", "down", "rate_limited", "forbidden", "bad_gateway", "hang"]
PROXY_MODES: Final[tuple[str, ...]] = get_args(ProxyMode)

_CHUNK: Final = 65536
_REBIND_PATIENCE_S: Final = 5.0
_CLOSE_S: Final = 2.0
_REASONS: Final = {200: "Connection established", 400: "Bad Request", 403: "Forbidden",
                   407: "Proxy Authentication Required", 429: "Too Many Requests",
                   502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}
_BAD_GATEWAY_STATUSES: Final = (502, 503, 504)


class _BadRequest(Exception):
    pass


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until EOF, then half-close the other side."""
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, RuntimeError):
        pass  # one side went away: the relay ends with it


def _answer(status: int, headers: dict[str, str] | None = None) -> bytes:
    body = f"{status} {_REASONS.get(status, 'Error')} (claudex fake proxy)\n".encode()
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
             "Content-Type: text/plain", f"Content-Length: {len(body)}", "Connection: close",
             *(f"{name}: {value}" for name, value in (headers or {}).items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _host_port(authority: str, default_port: int) -> tuple[str, int]:
    parsed = urlsplit(f"//{authority}")
    if not parsed.hostname:
        raise _BadRequest(authority)
    try:
        return parsed.hostname, parsed.port or default_port
    except ValueError as exc:  # a port that is not a number
        raise _BadRequest(authority) from exc


class FakeProxy:
    """An HTTP proxy on `host:port` (port 0 picks a free one at start)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *,
                 username: str | None = None, password: str | None = None,
                 retry_after: float | str = 1) -> None:
        if (username is None) != (password is None):
            raise ValueError("give both username and password, or neither")
        self.host = host
        self._port = port
        self._expected_auth: bytes | None = (
            base64.b64encode(f"{username}:{password}".encode()) if username is not None
            else None)
        self.username = username
        self.mode: ProxyMode = "ok"
        self.retry_after: str = str(retry_after)
        """Retry-After of a 429 (seconds or an HTTP date)."""
        self.bad_gateway_status = 502
        self.connects: Counter[str] = Counter()
        """CONNECTs by the mode that answered them ("unauthorized": a 407)."""
        self.forwards: Counter[str] = Counter()
        """Plain (absolute-URI) requests, the same way."""
        self._server: asyncio.Server | None = None
        self._opening: asyncio.Task[None] | None = None
        self._mode_changed = asyncio.Event()
        self._handlers: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._started = False

    # ------------------------------------------------------------ public surface

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        """`http://host:port`, without credentials."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self._port}"

    @property
    def listening(self) -> bool:
        return self._server is not None

    def set_mode(self, mode: ProxyMode, *, retry_after: float | str | None = None,
                 status: int | None = None) -> None:
        """Switch to `mode` now (call from the loop the proxy runs on). `retry_after` for
        rate_limited, `status` (502, 503 or 504) for bad_gateway."""
        if mode not in PROXY_MODES:
            raise ValueError(f"mode must be one of {', '.join(PROXY_MODES)}, not {mode!r}")
        if status is not None:
            if status not in _BAD_GATEWAY_STATUSES:
                raise ValueError(f"bad_gateway status must be 502, 503 or 504, not {status}")
            self.bad_gateway_status = status
        if retry_after is not None:
            self.retry_after = str(retry_after)
        self.mode = mode
        self._mode_changed.set()
        self._mode_changed = asyncio.Event()
        if self._started:
            self._sync_listener()

    def drop_connections(self) -> None:
        """Drop every open connection and tunnel now, as a proxy restarting would: a client's
        pooled tunnel is gone, so its next request CONNECTs again and meets the current mode
        (the demo's 429 key shows at once, not when the pool lets a tunnel go)."""
        self._drop_connections()

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._server = await self._listen(self._bind())

    async def close(self) -> None:
        """Stop listening and drop every connection."""
        self._started = False
        if self._opening is not None:
            self._opening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._opening
        server, self._server = self._server, None
        if server is not None:
            server.close()
        self._drop_connections()
        self._mode_changed.set()  # hung requests end
        # Handlers end by their connections closing, not by cancellation (asyncio's stream
        # protocol reports a cancelled handler as an error).
        if self._handlers:
            _, late = await asyncio.wait(list(self._handlers), timeout=_CLOSE_S)
            for task in late:
                task.cancel()
        if server is not None:
            await server.wait_closed()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, traceback: TracebackType | None) -> None:
        await self.close()

    # ------------------------------------------------------------ the listener

    def _bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            # SO_REUSEADDR: coming back up binds the same port despite connections in TIME_WAIT.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self._port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._port = int(sock.getsockname()[1])
        return sock

    async def _listen(self, sock: socket.socket) -> asyncio.Server:
        return await asyncio.start_server(self._handle, sock=sock)

    def _sync_listener(self) -> None:
        if self.mode == "down":
            if self._server is not None:
                self._server.close()
                self._server = None
            self._drop_connections()
        elif self._server is None and self._opening is None:
            sock: socket.socket | None
            try:
                # Bound and listening before set_mode returns: a connect right after coming
                # back up is queued by the kernel, not refused.
                sock = self._bind()
            except OSError:
                sock = None
            self._opening = asyncio.get_running_loop().create_task(self._reopen(sock))

    async def _reopen(self, sock: socket.socket | None) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _REBIND_PATIENCE_S
        try:
            while sock is None:
                # While down, a client socket may have been given our port as its local port.
                await asyncio.sleep(0.02)
                if self.mode == "down" or loop.time() > deadline:
                    return
                with contextlib.suppress(OSError):
                    sock = self._bind()
            if self.mode == "down" or not self._started:
                sock.close()
                return
            self._server = await self._listen(sock)
        finally:
            self._opening = None

    def _drop_connections(self) -> None:
        for writer in list(self._writers):
            transport = writer.transport
            if isinstance(transport, asyncio.Transport):
                transport.abort()  # a dead proxy: no goodbye
            else:
                writer.close()
        self._writers.clear()

    # ------------------------------------------------------------ one connection

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._writers.add(writer)
        try:
            await self._serve(reader, writer)
        except (_BadRequest, asyncio.LimitOverrunError, asyncio.IncompleteReadError):
            with contextlib.suppress(ConnectionError, RuntimeError):
                writer.write(_answer(400))
        except (ConnectionError, RuntimeError):
            pass
        finally:
            self._handlers.discard(task)
            self._writers.discard(writer)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # A head longer than the reader's limit (64 KiB) raises LimitOverrunError: a 400.
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, version = request_line.split(" ")
        except ValueError as exc:
            raise _BadRequest(request_line) from exc
        headers = [line for line in header_lines if line]
        connect = method.upper() == "CONNECT"
        counter = self.connects if connect else self.forwards
        if not self._authorized(headers):
            counter["unauthorized"] += 1
            writer.write(_answer(407, {"Proxy-Authenticate": 'Basic realm="claudex-fake-proxy"'}))
            return
        mode = self.mode
        counter[mode] += 1
        if mode != "ok":
            await self._misbehave(mode, writer)
        elif connect:
            await self._tunnel(target, reader, writer)
        else:
            await self._forward(method, target, version, headers, reader, writer)

    async def _upstream(self, host: str, port: int, writer: asyncio.StreamWriter
                        ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """A connection to the target, dropped with the others when the proxy goes down;
        None (and a 502 to the client, as a real proxy answers) when it cannot be reached."""
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.write(_answer(502))
            return None
        self._writers.add(up_writer)
        return up_reader, up_writer

    def _done_with(self, up_writer: asyncio.StreamWriter) -> None:
        self._writers.discard(up_writer)
        up_writer.close()

    def _authorized(self, headers: list[str]) -> bool:
        if self._expected_auth is None:
            return True
        for line in headers:
            name, _, value = line.partition(":")
            if name.strip().lower() != "proxy-authorization":
                continue
            scheme, _, credentials = value.strip().partition(" ")
            if scheme.lower() != "basic":
                return False
            try:
                sent = base64.b64encode(base64.b64decode(credentials.strip(), validate=True))
            except (binascii.Error, ValueError):
                return False
            return hmac.compare_digest(sent, self._expected_auth)
        return False

    async def _misbehave(self, mode: ProxyMode, writer: asyncio.StreamWriter) -> None:
        if mode == "hang":
            # Never answer; end when the mode changes or the proxy closes (the handler is
            # cancelled then).
            await self._mode_changed.wait()
            return
        if mode == "rate_limited":
            writer.write(_answer(429, {"Retry-After": self.retry_after}))
        elif mode == "forbidden":
            writer.write(_answer(403))
        else:
            writer.write(_answer(self.bad_gateway_status))
        await writer.drain()

    async def _tunnel(self, target: str, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        host, port = _host_port(target, 443)
        upstream = await self._upstream(host, port, writer)
        if upstream is None:
            return
        up_reader, up_writer = upstream
        try:
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            self._done_with(up_writer)

    async def _forward(self, method: str, target: str, version: str, headers: list[str],
                       reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        url = urlsplit(target)
        if url.scheme != "http" or not url.netloc:
            raise _BadRequest(target)  # origin-form or https: not a forward-proxy request
        host, port = _host_port(url.netloc, 80)
        upstream = await self._upstream(host, port, writer)
        if upstream is None:
            return
        up_reader, up_writer = upstream
        # One request per connection: the upstream is told to close after its answer and the
        # client is told the same, so no answer needs parsing beyond its head.
        kept = [line for line in headers if line.partition(":")[0].strip().lower() not in
                ("proxy-authorization", "proxy-connection", "connection", "keep-alive")]
        path = url.path or "/"
        if url.query:
            path += "?" + url.query
        up_writer.write(("\r\n".join([f"{method} {path} {version}", *kept, "Connection: close"])
                         + "\r\n\r\n").encode("latin-1"))
        sending = asyncio.ensure_future(_pipe(reader, up_writer))
        try:
            answer_head = await up_reader.readuntil(b"\r\n\r\n")
            status_line, *answer_lines = answer_head.decode("latin-1").split("\r\n")
            answer_kept = [line for line in answer_lines if line and
                           line.partition(":")[0].strip().lower() not in
                           ("connection", "keep-alive")]
            writer.write(("\r\n".join([status_line, *answer_kept, "Connection: close"])
                          + "\r\n\r\n").encode("latin-1"))
            await _pipe(up_reader, writer)
        except asyncio.IncompleteReadError:
            writer.write(_answer(502))  # the upstream closed without answering
        finally:
            sending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sending
            self._done_with(up_writer)
