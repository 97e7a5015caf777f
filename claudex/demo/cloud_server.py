"""What the cloud fakes (`fake_bedrock`, `fake_vertex`, `fake_google_token`) share: an aiohttp
server on 127.0.0.1 that records every request as the other fakes do (`RecordedRequest`), and
a fault that lasts for a number of requests or until changed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Final, Generic, TypeVar

from aiohttp import web

from claudex.demo.recording import RecordedRequest, parse_json_body

__all__ = ["CloudFault", "FakeCloudServer", "IncomingRequest"]

_SHUTDOWN_TIMEOUT_S: Final = 1.0

F = TypeVar("F", bound=str)


@dataclass(slots=True)
class CloudFault(Generic[F]):
    """The fault the next requests get: `mode` for `times` requests (None: until changed)."""

    mode: F
    times: int | None = None

    def take(self, ok: F) -> F:
        """The mode this request gets, counted against `times` (then back to `ok`)."""
        mode = self.mode
        if mode != ok and self.times is not None:
            self.times -= 1
            if self.times <= 0:
                self.mode, self.times = ok, None
        return mode


@dataclass(frozen=True, slots=True)
class IncomingRequest:
    """One request as a cloud fake sees it: the raw path (still percent-encoded, as a
    signature covers it), lowercased headers, the body's bytes and its JSON."""

    method: str
    raw_path: str
    query: str
    headers: Mapping[str, str]
    body: bytes
    json: object
    record: RecordedRequest | None


class FakeCloudServer:
    """Serves `answer` on `host:port` (port 0: a free one at start)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *,
                 max_recorded: int = 10_000) -> None:
        self.host = host
        self._port = port
        self.max_recorded = max_recorded
        self.requests: list[RecordedRequest] = []
        self.request_count = 0
        self._server: web.Server | None = None
        self._listener: asyncio.AbstractServer | None = None

    @property
    def port(self) -> int:
        return self._port

    @property
    def root_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self._port}"

    async def start(self) -> None:
        if self._server is not None:
            return
        loop = asyncio.get_running_loop()
        self._server = web.Server(self._handle, access_log=None)
        self._listener = await loop.create_server(self._server, self.host, self._port)
        self._port = self._listener.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._server is not None:
            self._server.pre_shutdown()
            await self._server.shutdown(_SHUTDOWN_TIMEOUT_S)
            self._server = None

    async def __aenter__(self) -> FakeCloudServer:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.stop()

    def reset_log(self) -> None:
        self.requests.clear()
        self.request_count = 0

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        raw = await request.read() if request.body_exists else b""
        headers: dict[str, str] = {}
        for name, value in request.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]},{value}" if key in headers else value
        body = parse_json_body(raw)
        self.request_count += 1
        record: RecordedRequest | None = None
        if self.max_recorded > 0:
            record = RecordedRequest(request.method, request.rel_url.path, headers, body,
                                     time.monotonic(), request.rel_url.raw_query_string)
            self.requests.append(record)
            if len(self.requests) > self.max_recorded:
                del self.requests[: len(self.requests) - self.max_recorded // 2]
        incoming = IncomingRequest(request.method, request.rel_url.raw_path,
                                   request.rel_url.raw_query_string, headers, raw, body, record)
        try:
            response = await self.answer(request, incoming)
        except ConnectionError:
            request.protocol.force_close()
            response = web.Response()
        if record is not None:
            record.status = response.status
        return response

    async def answer(self, request: web.BaseRequest,
                     incoming: IncomingRequest) -> web.StreamResponse:
        raise NotImplementedError
