"""The TLS front of the demo (claude's fake over TLS behind the demo's proxy): when the fake
goes away under a kept-alive connection, the client's connection closes at once — TLS cannot
half-close, and a pooled connection left open made the next request wait out its read timeout
(10 s in `claudex demo --headless` after `down` on claude)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from claudex.demo.fake_provider import FakeProvider, start_fakes, stop_fakes
from claudex.demo.pki import new_authority
from claudex.demo.tls_front import TlsFront


@pytest.fixture
async def fronted(tmp_path: Path) -> AsyncIterator[tuple[FakeProvider, TlsFront, ssl.SSLContext]]:
    (fake,) = await start_fakes([("claude", "anthropic")])
    authority = new_authority(tmp_path)
    front = TlsFront(fake.base_url, authority.issue_server(tmp_path, "claude"))
    await front.start()
    trust = ssl.create_default_context(cafile=str(authority.cert_path))
    try:
        yield fake, front, trust
    finally:
        await front.close()
        await stop_fakes([fake])


async def test_a_fake_going_down_closes_the_clients_kept_alive_connection(
    fronted: tuple[FakeProvider, TlsFront, ssl.SSLContext],
) -> None:
    fake, front, trust = fronted
    reader, writer = await asyncio.open_connection("127.0.0.1", front.port, ssl=trust,
                                                   server_hostname="127.0.0.1")
    try:
        writer.write(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: k\r\n\r\n")
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 ")
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        await asyncio.wait_for(reader.readexactly(length), 5)
        assert front.connections == 1
        fake.set_fault("down")  # drops its connections: the front's to it among them
        # End of stream (or a reset), within moments: never a connection left hanging.
        try:
            rest = await asyncio.wait_for(reader.read(), 2)
        except ConnectionResetError:
            rest = b""
        assert rest == b""
    finally:
        writer.close()
