"""The seam between the failover logic and the wire: one aiohttp connection pool per provider.

aiohttp is used on the forwarding hot path because httpx's default pool collapses under
concurrency (DESIGN.md, data plane). Tests and benchmarks may substitute any object with the
same `send` signature.
"""

from __future__ import annotations

import base64
import ssl as ssl_mod
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import aiohttp

if TYPE_CHECKING:
    from claudex.engine.network.routes import Hop


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
    """`via` and `ssl` (issue 36) are passed only for a route that is not plain direct, so a
    transport that never sees a proxied profile (the tests' fakes) need not take them."""

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
        via: Hop | None = None,  # the upstream proxy to go through; None: direct
        ssl: ssl_mod.SSLContext | None = None,  # None: aiohttp's default verification
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
        # Through an upstream proxy: one pool per (provider, hop), so a proxy's connections
        # never mix with another route's (issue 36).
        self._proxied: dict[tuple[str, str], tuple[Hop, aiohttp.ClientSession]] = {}
        self._retired: list[aiohttp.ClientSession] = []
        self._auth_headers: dict[Hop, dict[str, str]] = {}
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

    def _proxy_headers(self, hop: Hop) -> dict[str, str]:
        """`Proxy-Authorization: Basic ...` for the hop's user (made once per hop; never
        logged: a secret)."""
        headers = self._auth_headers.get(hop)
        if headers is None:
            token = base64.b64encode(f"{hop.username}:{hop.password or ''}".encode()).decode()
            headers = self._auth_headers[hop] = {"Proxy-Authorization": f"Basic {token}"}
        return headers

    def _proxied_session(self, provider: str, hop: Hop, url: str) -> aiohttp.ClientSession:
        key = (provider, hop.name)
        known = self._proxied.get(key)
        if known is not None and known[0] == hop and not known[1].closed:
            return known[1]
        if known is not None:
            session = known[1]
            if not session.closed:
                # the hop's URL or credentials changed on a reload: a new pool from here on;
                # the old one is left to requests in flight (closed at `close()`)
                self._retired.append(session)
        connector: aiohttp.BaseConnector
        if hop.scheme in ("socks5", "socks5h"):
            from aiohttp_socks import ProxyConnector, ProxyType

            host, _, port = hop.where.rpartition(":")
            # socks5h: the proxy resolves the provider's name (rdns); socks5: we do.
            connector = ProxyConnector(
                proxy_type=ProxyType.SOCKS5, host=host.strip("[]"), port=int(port),
                username=hop.username, password=hop.password,
                rdns=hop.scheme == "socks5h", limit=self._limit, ttl_dns_cache=300)
        else:
            # A plain-http provider through an HTTP proxy: one connection per request. tinyproxy
            # 1.11 closes the client's connection after every forwarded answer while answering
            # HTTP/1.1 without `Connection: close`, so a pooled connection reused at that moment
            # fails writing the body (aiohttp: "Can not write request body"); curl sees the same
            # close. An https provider goes through a CONNECT tunnel, kept in the pool.
            connector = aiohttp.TCPConnector(limit=self._limit, ttl_dns_cache=300,
                                             force_close=url.startswith("http:"))
        session = aiohttp.ClientSession(connector=connector, auto_decompress=True,
                                        timeout=aiohttp.ClientTimeout(total=None))
        self._proxied[key] = (hop, session)
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
        via: Hop | None = None,
        ssl: ssl_mod.SSLContext | None = None,
    ) -> UpstreamResponse:
        key = (connect_timeout, read_timeout)
        timeout = self._timeouts.get(key)
        if timeout is None:  # a handful of distinct values: build each once, not per request
            timeout = aiohttp.ClientTimeout(
                total=None, sock_connect=connect_timeout, connect=connect_timeout,
                sock_read=read_timeout,
            )
            self._timeouts[key] = timeout
        if via is None and ssl is None:  # the usual request: exactly as before routes
            resp = await self._session(provider).request(
                method, url, data=body, headers=headers, timeout=timeout,
                allow_redirects=False
            )
            return _AiohttpResponse(resp)
        extra: dict[str, Any] = {}
        if ssl is not None:
            extra["ssl"] = ssl
        if via is None:
            session = self._session(provider)
        else:
            session = self._proxied_session(provider, via, url)
            if via.scheme in ("http", "https"):
                # Never a silent bypass: the proxy is named on every request, and a failure to
                # reach it raises (engine/network/failures.py), it is never retried direct.
                extra["proxy"] = via.url
                if via.username is not None:
                    if url.startswith("https:"):  # on the CONNECT only, never in the tunnel
                        extra["proxy_headers"] = self._proxy_headers(via)
                    else:  # a plain-http provider: the proxy reads the request itself
                        headers = {**headers, **self._proxy_headers(via)}
        resp = await session.request(method, url, data=body, headers=headers, timeout=timeout,
                                     allow_redirects=False, **extra)
        return _AiohttpResponse(resp)

    async def drop(self, provider: str) -> None:
        session = self._sessions.pop(provider, None)
        if session is not None:
            await session.close()
        for key in [k for k in self._proxied if k[0] == provider]:
            await self._proxied.pop(key)[1].close()

    async def close(self) -> None:
        sessions, self._sessions = self._sessions, {}
        proxied, self._proxied = self._proxied, {}
        retired, self._retired = self._retired, []
        for session in [*sessions.values(), *(s for _, s in proxied.values()), *retired]:
            await session.close()
