"""Each proxy failure row, from the exception aiohttp / aiohttp-socks really raise against a
real socket on 127.0.0.1, to the ProxyFailure (engine/network/failures.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import aiohttp_socks
import pytest
from python_socks import ProxyType

from claudex.engine.network.failures import ProxyFailure, ProxyKind, proxy_failure
from claudex.engine.network.routes import Hop
from tests.engine.network.local_proxies import (
    ConnectProxy,
    closed_port,
    private_ca,
    silent_listener,
    socks5_replying,
)

TARGET = "https://api.example.test/v1/messages"  # never reached: the proxy fails first
WALL = 1_800_000_000.0
TIMEOUT = aiohttp.ClientTimeout(total=None, connect=1.0, sock_connect=1.0)


def http_hop(port: int, host: str = "127.0.0.1") -> Hop:
    return Hop("corp", f"http://{host}:{port}", "http")


async def raised_via_http(hop: Hop, target: str = TARGET) -> BaseException:
    async with aiohttp.ClientSession() as session:
        with pytest.raises(Exception) as caught:
            async with session.get(target, proxy=hop.url, timeout=TIMEOUT):
                pass
    return caught.value


async def raised_via_socks(port: int, **kw: object) -> BaseException:
    connector = aiohttp_socks.ProxyConnector(proxy_type=ProxyType.SOCKS5, host="127.0.0.1",
                                             port=port, **kw)  # type: ignore[arg-type]
    async with aiohttp.ClientSession(connector=connector) as session:
        with pytest.raises(Exception) as caught:
            async with session.get(TARGET, timeout=TIMEOUT):
                pass
    return caught.value


async def test_a_closed_port_is_refused() -> None:
    hop = http_hop(closed_port())
    exc = await raised_via_http(hop)
    assert isinstance(exc, aiohttp.ClientProxyConnectionError)
    assert proxy_failure(exc, hop, WALL) == ProxyFailure(ProxyKind.REFUSED, "connection refused")


async def test_a_proxy_host_that_does_not_resolve_is_unresolvable() -> None:
    hop = http_hop(3128, host="proxy.nowhere.invalid")
    exc = await raised_via_http(hop)
    assert isinstance(exc, aiohttp.ClientConnectorDNSError)  # not a proxy error class
    failure = proxy_failure(exc, hop, WALL)
    assert failure is not None and failure.kind is ProxyKind.UNRESOLVABLE


async def test_a_proxy_that_never_answers_is_a_connect_timeout() -> None:
    async with silent_listener() as port:
        hop = http_hop(port)
        exc = await raised_via_http(hop)
    assert isinstance(exc, aiohttp.ConnectionTimeoutError)
    failure = proxy_failure(exc, hop, WALL)
    assert failure is not None and failure.kind is ProxyKind.CONNECT_TIMEOUT


@pytest.mark.parametrize(("status", "kind"), [
    (407, ProxyKind.AUTH_FAILED), (401, ProxyKind.AUTH_FAILED), (403, ProxyKind.REJECTED),
    (429, ProxyKind.RATE_LIMITED), (502, ProxyKind.BAD_GATEWAY), (503, ProxyKind.BAD_GATEWAY),
    (504, ProxyKind.BAD_GATEWAY)])
async def test_the_connect_answer_says_which(status: int, kind: ProxyKind) -> None:
    proxy = await ConnectProxy(status, {"Retry-After": "7"}).start()
    try:
        hop = http_hop(proxy.port)
        exc = await raised_via_http(hop)
    finally:
        await proxy.close()
    assert isinstance(exc, aiohttp.ClientHttpProxyError) and exc.status == status
    failure = proxy_failure(exc, hop, WALL)
    assert failure is not None and failure.kind is kind and failure.status == status
    assert failure.retry_after == (7.0 if status == 429 else None)


async def test_a_429_with_an_http_date_retry_after() -> None:
    proxy = await ConnectProxy(429, {"Retry-After": "Fri, 15 Jan 2027 08:00:30 GMT"}).start()
    try:
        hop = http_hop(proxy.port)
        exc = await raised_via_http(hop)
    finally:
        await proxy.close()
    wall = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC
    failure = proxy_failure(exc, hop, wall)
    assert failure is not None and failure.retry_after == 30.0


async def test_socks_refused_unresolvable_and_timeout() -> None:
    hop = Hop("s", "socks5://127.0.0.1:1", "socks5")
    refused = await raised_via_socks(closed_port())
    assert isinstance(refused, aiohttp_socks.ProxyConnectionError)
    assert not isinstance(refused, aiohttp.ClientError)  # why it needs its own mapping
    assert proxy_failure(refused, hop, WALL) == ProxyFailure(ProxyKind.REFUSED,
                                                             "connection refused")
    connector = aiohttp_socks.ProxyConnector(proxy_type=ProxyType.SOCKS5,
                                             host="proxy.nowhere.invalid", port=1080)
    async with aiohttp.ClientSession(connector=connector) as session:
        with pytest.raises(Exception) as caught:
            await session.get(TARGET, timeout=TIMEOUT)
    failure = proxy_failure(caught.value, hop, WALL)
    assert failure is not None and failure.kind is ProxyKind.UNRESOLVABLE
    async with silent_listener() as port:
        hung = await raised_via_socks(port)
    failure = proxy_failure(hung, hop, WALL)
    assert failure is not None and failure.kind is ProxyKind.CONNECT_TIMEOUT


async def test_socks_auth_refused_and_connect_refused_by_rule() -> None:
    hop = Hop("s", "socks5://127.0.0.1:1", "socks5", "alice", "pw")
    async with socks5_replying(0, auth_ok=False) as port:
        exc = await raised_via_socks(port, username="alice", password="wrong")
    assert isinstance(exc, aiohttp_socks.ProxyError)
    failure = proxy_failure(exc, hop, WALL)
    assert failure is not None and failure.kind is ProxyKind.AUTH_FAILED
    async with socks5_replying(2) as port:  # "connection not allowed by ruleset"
        exc = await raised_via_socks(port, rdns=True)
    failure = proxy_failure(exc, hop, WALL)
    assert failure is not None and failure.kind is ProxyKind.REJECTED
    assert "not allowed" in failure.words


async def test_an_intercepting_proxys_certificate_is_untrusted(tmp_path: Path) -> None:
    _ca, server_tls = private_ca(tmp_path, "Zscaler Root CA")

    async def quiet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    provider = await asyncio.start_server(quiet, "127.0.0.1", 0, ssl=server_tls)
    proxy = await ConnectProxy().start()
    try:
        hop = http_hop(proxy.port)
        port = provider.sockets[0].getsockname()[1]
        exc = await raised_via_http(hop, f"https://127.0.0.1:{port}/v1/messages")
    finally:
        await proxy.close()
        provider.close()
    assert isinstance(exc, aiohttp.ClientConnectorCertificateError)
    failure = proxy_failure(exc, hop, WALL)
    assert failure is not None and failure.kind is ProxyKind.UNTRUSTED
    assert failure.words.startswith("certificate not trusted: ")
    assert failure.words.endswith(" — set ca_bundle")


async def test_the_providers_own_failures_are_not_the_proxys() -> None:
    hop = http_hop(3128)
    assert proxy_failure(aiohttp.ServerDisconnectedError(), hop, WALL) is None
    assert proxy_failure(aiohttp.ClientPayloadError("cut"), hop, WALL) is None
    assert proxy_failure(TimeoutError(), hop, WALL) is None  # a read timeout


def test_a_claudex_without_socks_or_an_untrusted_certificate_loads_neither_library() -> None:
    """aiohttp-socks, python-socks and cryptography are imported only when a SOCKS hop or an
    untrusted certificate needs them: a plain `claudex serve` process stays ~9 MB lighter
    (46.8 MB after importing the server, against 55.3 MB when failures.py imported them)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import claudex.server.serve, claudex.engine.engine\n"
        "from claudex.engine.network.failures import beyond_proxy, proxy_failure\n"
        "from claudex.engine.network.routes import Hop\n"
        "hop = Hop('corp', 'http://127.0.0.1:1', 'http')\n"
        "assert proxy_failure(ValueError('x'), hop, 0.0) is None\n"
        "assert beyond_proxy(ValueError('x')) is None\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules}\n"
        "                & {'aiohttp_socks', 'python_socks', 'cryptography'})\n"
        "assert not loaded, loaded\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
