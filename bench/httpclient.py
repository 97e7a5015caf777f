"""A raw, blocking HTTP/1.1 keep-alive client: the measuring end of the latency benchmarks.

It sends prebuilt request bytes and parses just enough of the answer (status, content-length or
chunked framing) to know where it ends, so its own cost is small and the same for every target.
`stream` also records when each server-sent event arrived.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field

_RECV = 262_144


class HttpError(Exception):
    """The server answered something this client cannot read, or closed the connection."""


def build_request(method: str, path: str, port: int, body: bytes = b"",
                  headers: dict[str, str] | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"host: 127.0.0.1:{port}"]
    if body or method == "POST":
        lines += ["content-type: application/json", f"content-length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@dataclass
class StreamTiming:
    status: int
    first_byte_ns: int
    """When the first bytes of the body arrived."""
    events: list[tuple[int, bytes]] = field(default_factory=list)
    """(arrival ns, event bytes) for every complete SSE event, in order."""
    done_ns: int = 0


class _Dechunker:
    """Incremental decoder of a chunked body; `feed` returns the payload bytes decoded so far."""

    def __init__(self) -> None:
        self.pending = b""
        self.remaining = -1  # bytes left in the current chunk; -1: expecting a size line
        self.done = False

    def feed(self, data: bytes) -> bytes:
        self.pending += data
        out: list[bytes] = []
        while not self.done:
            if self.remaining < 0:
                end = self.pending.find(b"\r\n")
                if end < 0:
                    break
                size = int(self.pending[:end].split(b";", 1)[0], 16)
                if size == 0:
                    # The last chunk: wait for the empty line that ends the (unused) trailers.
                    if len(self.pending) < end + 4:
                        break
                    self.pending = self.pending[end + 4:]
                    self.done = True
                    break
                self.pending = self.pending[end + 2:]
                self.remaining = size
            if len(self.pending) < self.remaining + 2:
                take = min(len(self.pending), self.remaining)
                out.append(self.pending[:take])
                self.pending = self.pending[take:]
                self.remaining -= take
                break
            out.append(self.pending[:self.remaining])
            self.pending = self.pending[self.remaining + 2:]
            self.remaining = -1
        return b"".join(out)


class Connection:
    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 30.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.last_headers: dict[bytes, bytes] = {}

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv(self) -> bytes:
        data = self.sock.recv(_RECV)
        if not data:
            raise HttpError("connection closed by the server")
        return data

    def _head(self) -> tuple[int, dict[bytes, bytes]]:
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            self.buf += self._recv()
        head, self.buf = self.buf[:end], self.buf[end + 4:]
        lines = head.split(b"\r\n")
        try:
            status = int(lines[0].split(b" ", 2)[1])
        except (IndexError, ValueError):
            raise HttpError(f"bad status line {lines[0]!r}") from None
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    def request(self, raw: bytes) -> tuple[int, bytes]:
        """Send one request and read its whole answer: (status, body)."""
        self.sock.sendall(raw)
        status, headers = self._head()
        self.last_headers = headers
        length = headers.get(b"content-length")
        if length is not None:
            size = int(length)
            while len(self.buf) < size:
                self.buf += self._recv()
            body, self.buf = self.buf[:size], self.buf[size:]
            return status, body
        if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            decoder = _Dechunker()
            parts = [decoder.feed(self.buf)]
            while not decoder.done:
                parts.append(decoder.feed(self._recv()))
            self.buf = decoder.pending
            return status, b"".join(parts)
        raise HttpError("answer without content-length or chunked framing")

    def stream(self, raw: bytes, sent_ns: int | None = None) -> StreamTiming:
        """Send a streaming request; time the first body bytes and every complete SSE event."""
        self.sock.sendall(raw)
        status, headers = self._head()
        self.last_headers = headers
        if headers.get(b"transfer-encoding", b"").lower() != b"chunked":
            raise HttpError(f"expected a chunked stream, got status {status}")
        decoder = _Dechunker()
        timing = StreamTiming(status, 0)
        text = b""
        data, now = self.buf, time.monotonic_ns()
        self.buf = b""
        while True:
            if data:
                if not timing.first_byte_ns:
                    timing.first_byte_ns = now
                text += decoder.feed(data)
                *complete, text = text.split(b"\n\n")
                timing.events.extend((now, event) for event in complete)
            if decoder.done:
                break
            data = self._recv()
            now = time.monotonic_ns()
        timing.done_ns = now
        self.buf = decoder.pending
        return timing
