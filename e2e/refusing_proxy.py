"""An HTTP(S) proxy on 127.0.0.1 that refuses everything and records what was attempted.

Claude Code runs with `HTTPS_PROXY`/`HTTP_PROXY` pointing here, so any connection it tries to
make to the outside (telemetry, updates, error reports, a model API other than claudex) shows
up as a refused `CONNECT host:port` (or an absolute-URL request) instead of leaving the
machine. Each attempt is answered `403 Forbidden` and the connection closed.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Final

_MAX_HEAD: Final = 64 * 1024
_REFUSAL: Final = (b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 33\r\n"
                   b"Connection: close\r\n\r\nclaudex e2e: no traffic leaves.\r\n")


@dataclass(frozen=True)
class Attempt:
    method: str
    target: str
    """`host:port` for CONNECT, the absolute URL otherwise."""
    user_agent: str
    time: float

    @property
    def host(self) -> str:
        target = self.target.split("://", 1)[-1]
        return target.split("/", 1)[0].rsplit(":", 1)[0]


class RefusingProxy:
    """`with RefusingProxy() as proxy:` ... `proxy.url`, `proxy.attempts`."""

    def __init__(self) -> None:
        self.attempts: list[Attempt] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                outer._refuse(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="e2e-refusing-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def since(self, start: int) -> list[Attempt]:
        with self._lock:
            return self.attempts[start:]

    def __enter__(self) -> RefusingProxy:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def _refuse(self, sock: socket.socket) -> None:
        sock.settimeout(10)
        head = b""
        try:
            while b"\r\n\r\n" not in head and len(head) < _MAX_HEAD:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                head += chunk
        except OSError:
            pass
        lines = head.split(b"\r\n")
        request_line = lines[0].decode("latin-1").split(" ")
        if len(request_line) >= 2:
            agent = next((line.split(b":", 1)[1].strip().decode("latin-1") for line in lines[1:]
                          if line.lower().startswith(b"user-agent:")), "")
            with self._lock:
                self.attempts.append(Attempt(request_line[0], request_line[1], agent,
                                             time.time()))
        try:
            sock.sendall(_REFUSAL)
        except OSError:
            pass
