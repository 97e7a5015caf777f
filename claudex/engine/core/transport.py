"""The seam between the failover logic and the wire: one aiohttp connection pool per provider.

aiohttp is used on the forwarding hot path because httpx's default pool collapses under
concurrency (DESIGN.md, data plane). Tests and benchmarks may substitute any object with the
same `send` signature.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import aiohttp


class UpstreamResponse(Protocol):
    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def raw_headers(self) -> Sequence[tuple[bytes, bytes]]: ...

    async def read(self) -> bytes: ...

    def chunks(self) -> AsyncIterator[bytes]: ...

    def close(self) -> None: ...


class Transport(Protocol):
    async def send(
        self,
        provider: str,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        *,
        connect_timeout: float,
        read_timeout: float | None,  # None: no socket read timeout (streams keep their own)
    ) -> UpstreamResponse: ...

    async def close(self) -> None: ...


@dataclass
class _AiohttpResponse:
    _resp: aiohttp.ClientResponse

    @property
    def status(self) -> int:
        return self._resp.status

    @property
    def headers(self) -> Mapping[str, str]:
        return self._resp.headers

    @property
    def raw_headers(self) -> Sequence[tuple[bytes, bytes]]:
        return self._resp.raw_headers

    async def read(self) -> bytes:
        try:
            return await self._resp.read()
        finally:
            self._resp.release()

    def chunks(self) -> AsyncIterator[bytes]:
        # iter_any yields whatever arrived, so SSE events reach the client as soon as they land.
        # Its own iterator, not wrapped in a generator: one frame less per chunk.
        return self._resp.content.iter_any()

    def close(self) -> None:
        self._resp.close()


class AiohttpTransport:
    """One `ClientSession` per provider so a slow or hung provider cannot starve the others'
    connection pools, and a provider can be dropped on reload without touching the rest."""

    def __init__(self, limit_per_provider: int = 0) -> None:
        # 0: unbounded. claudex bounds requests in flight itself (engine/core/gate.py,
        # `max_connections`), so aiohttp's pool never makes a request wait, and a wait can
        # never be mistaken for a connect timeout.
        self._limit = limit_per_provider
        self._sessions: dict[str, aiohttp.ClientSession] = {}
        self._timeouts: dict[tuple[float, float | None], aiohttp.ClientTimeout] = {}

    def _session(self, provider: str) -> aiohttp.ClientSession:
        session = self._sessions.get(provider)
        if session is None or session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._limit, ttl_dns_cache=300
            )
            # No `skip_auto_headers`: every request claudex sends names its own User-Agent
            # (engine/core/addressing.py `upstream_headers`), so aiohttp never adds its own,
            # and a skip list sends aiohttp down its slow path on every request (a sorted
            # CIMultiDict of the names to skip, a copy of the headers extended with it: ~2 %
            # of `claudex serve`'s CPU under load, py-spy).
            session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=True,
                timeout=aiohttp.ClientTimeout(total=None),
            )
            self._sessions[provider] = session
        return session

    async def send(
        self,
        provider: str,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        *,
        connect_timeout: float,
        read_timeout: float | None,
    ) -> UpstreamResponse:
        key = (connect_timeout, read_timeout)
        timeout = self._timeouts.get(key)
        if timeout is None:  # a handful of distinct values: build each once, not per request
            timeout = aiohttp.ClientTimeout(
                total=None, sock_connect=connect_timeout, connect=connect_timeout,
                sock_read=read_timeout,
            )
            self._timeouts[key] = timeout
        resp = await self._session(provider).request(
            method, url, data=body, headers=headers, timeout=timeout, allow_redirects=False
        )
        return _AiohttpResponse(resp)

    async def drop(self, provider: str) -> None:
        session = self._sessions.pop(provider, None)
        if session is not None:
            await session.close()

    async def close(self) -> None:
        sessions, self._sessions = self._sessions, {}
        for session in sessions.values():
            await session.close()
