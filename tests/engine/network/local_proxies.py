"""Small proxies on 127.0.0.1 for the engine's proxy tests: an HTTP CONNECT proxy that tunnels
(or answers a fixed status), a SOCKS5 server that answers a fixed reply, a listener that never
answers, and a private CA with a certificate for 127.0.0.1 (the TLS-intercepting proxy's world).
The real tinyproxy/microsocks/mitmproxy fixtures are tests/proxy_servers.py (networld)."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


class ConnectProxy:
    """HTTP proxy: CONNECT tunnels to the target (or answers `status` with `headers`), and a
    plain-http request is forwarded (absolute-form URL). Counts CONNECTs and plain requests."""

    def __init__(self, status: int | None = None, headers: dict[str, str] | None = None,
                 auth: str | None = None) -> None:
        self.status, self.headers, self.auth = status, headers or {}, auth
        self.connects = 0
        self.forwarded = 0
        self.seen_auth: list[str | None] = []
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> ConnectProxy:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _answer(self, writer: asyncio.StreamWriter, status: int) -> None:
        extra = "".join(f"{k}: {v}\r\n" for k, v in self.headers.items())
        writer.write(f"HTTP/1.1 {status} X\r\n{extra}Content-Length: 0\r\n\r\n".encode())
        await writer.drain()
        writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        fields = {k.strip().lower(): v.strip() for k, _, v in
                  (line.partition(":") for line in lines[1:] if line)}
        self.seen_auth.append(fields.get("proxy-authorization"))
        if method == "CONNECT":
            self.connects += 1
        if self.auth is not None and fields.get("proxy-authorization") != self.auth:
            await self._answer(writer, 407)
            return
        if self.status is not None:
            await self._answer(writer, self.status)
            return
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            up_r, up_w = await asyncio.open_connection(host, int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await asyncio.gather(_pipe(reader, up_w), _pipe(up_r, writer))
            return
        # plain http: absolute-form target, forwarded as origin-form on a fresh connection
        self.forwarded += 1
        rest = target.split("://", 1)[1]
        hostport, _, path = rest.partition("/")
        host, _, port = hostport.rpartition(":")
        up_r, up_w = await asyncio.open_connection(host, int(port))
        kept = [line for line in lines[1:] if line and not line.lower().startswith("proxy-")]
        up_w.write((f"{method} /{path} HTTP/1.1\r\n" + "\r\n".join(kept)
                    + "\r\n\r\n").encode("latin-1"))
        await up_w.drain()
        await asyncio.gather(_pipe(reader, up_w), _pipe(up_r, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


@asynccontextmanager
async def silent_listener() -> AsyncIterator[int]:
    """Accepts connections and never says a word (a proxy that hangs)."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


@asynccontextmanager
async def socks5_replying(reply: int, *, auth_ok: bool = True) -> AsyncIterator[int]:
    """A SOCKS5 server that accepts no-auth or user/password (refused unless `auth_ok`) and
    answers every CONNECT with `reply` (0 would be success; it then closes)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            _ver, n = await reader.readexactly(2)
            methods = await reader.readexactly(n)
            if 2 in methods:
                writer.write(b"\x05\x02")
                await writer.drain()
                await reader.readexactly(1)
                user = await reader.readexactly((await reader.readexactly(1))[0])
                await reader.readexactly((await reader.readexactly(1))[0])
                writer.write(b"\x01\x00" if auth_ok and user else b"\x01\x01")
                await writer.drain()
                if not auth_ok:
                    return
            else:
                writer.write(b"\x05\x00")
                await writer.drain()
            await reader.read(262)
            writer.write(bytes([5, reply, 0, 1, 0, 0, 0, 0, 0, 0]))
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


def private_ca(folder: Path, issuer: str = "Zscaler Root CA") -> tuple[Path, ssl.SSLContext]:
    """A CA named `issuer` and a server certificate it signed for 127.0.0.1 / localhost: the
    CA's PEM path, and a server TLS context presenting the certificate."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    (folder / "ca.pem").write_bytes(ca.public_bytes(pem))
    (folder / "server.pem").write_bytes(cert.public_bytes(pem) + ca.public_bytes(pem))
    (folder / "server.key").write_bytes(key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(folder / "server.pem", folder / "server.key")
    return folder / "ca.pem", server


@asynccontextmanager
async def tls_front(server_tls: ssl.SSLContext, target_port: int) -> AsyncIterator[int]:
    """A TLS listener on 127.0.0.1 in front of a plain-http fake on `target_port`: the provider
    as https, its certificate from `private_ca` (what a TLS-intercepting proxy presents)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_w), _pipe(up_r, writer))

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_tls)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


@asynccontextmanager
async def socks5_tunnel(user: str | None = None, password: str | None = None
                        ) -> AsyncIterator[tuple[int, list[str]]]:
    """A SOCKS5 server that connects (names resolved here: socks5h) and tunnels; with `user`,
    only that user and password. Yields its port and the hosts it was asked for."""
    asked: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            _ver, n = await reader.readexactly(2)
            methods = await reader.readexactly(n)
            if user is not None:
                if 2 not in methods:
                    writer.write(b"\x05\xff")
                    return
                writer.write(b"\x05\x02")
                await reader.readexactly(1)
                got_user = await reader.readexactly((await reader.readexactly(1))[0])
                got_pw = await reader.readexactly((await reader.readexactly(1))[0])
                ok = got_user.decode() == user and got_pw.decode() == (password or "")
                writer.write(b"\x01\x00" if ok else b"\x01\x01")
                if not ok:
                    return
            else:
                writer.write(b"\x05\x00")
            _v, _cmd, _rsv, atyp = await reader.readexactly(4)
            if atyp == 3:
                host = (await reader.readexactly((await reader.readexactly(1))[0])).decode()
            elif atyp == 1:
                host = socket.inet_ntoa(await reader.readexactly(4))
            else:
                host = socket.inet_ntop(socket.AF_INET6, await reader.readexactly(16))
            port = int.from_bytes(await reader.readexactly(2), "big")
            asked.append(host)
            try:
                up_r, up_w = await asyncio.open_connection(host, port)
            except OSError:
                writer.write(bytes([5, 5, 0, 1, 0, 0, 0, 0, 0, 0]))
                return
            writer.write(bytes([5, 0, 0, 1, 127, 0, 0, 1, 0, 0]))
            await writer.drain()
            await asyncio.gather(_pipe(reader, up_w), _pipe(up_r, writer))
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], asked
    finally:
        server.close()
