"""Who signed a certificate that did not verify (through a proxy, or a provider reached
directly), to name it: `certificate not trusted: issuer CN=Zscaler Root CA — set ca_bundle`
(issue 36).

OpenSSL's verification error carries no certificate (and Python 3.11 has no unverified chain to
read), so after such a failure claudex opens one more connection (through the same proxy, or
directly) to the same host, lets the TLS handshake finish without verifying, reads the
certificate's issuer and closes: nothing is sent over it. Bounded by the connect timeout; any
failure means "not known" (the words then say OpenSSL's reason). Runs only after a failure,
never per request.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
from urllib.parse import urlsplit

from claudex.engine.network.routes import Hop


def _unverified() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # to read who signed it, never to send anything
    return context


def _proxy_address(hop: Hop) -> tuple[str, int]:
    host, _, port = hop.where.rpartition(":")
    return host.strip("[]"), int(port)


async def _through_http(hop: Hop, host: str, port: int) -> bytes | None:
    proxy_host, proxy_port = _proxy_address(hop)
    reader, writer = await asyncio.open_connection(proxy_host, proxy_port)
    try:
        auth = ""
        if hop.username is not None:
            token = base64.b64encode(f"{hop.username}:{hop.password or ''}".encode()).decode()
            auth = f"Proxy-Authorization: Basic {token}\r\n"
        writer.write(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n{auth}\r\n"
                     .encode("latin-1"))
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        if head.split(b" ", 2)[1:2] != [b"200"]:
            return None
        await writer.start_tls(_unverified(), server_hostname=host)
        ssl_object = writer.get_extra_info("ssl_object")
        return ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    finally:
        writer.close()


async def _through_socks(hop: Hop, host: str, port: int) -> bytes | None:
    from python_socks import ProxyType
    from python_socks.async_.asyncio import Proxy

    proxy_host, proxy_port = _proxy_address(hop)
    proxy = Proxy(ProxyType.SOCKS5, proxy_host, proxy_port, hop.username, hop.password,
                  rdns=hop.scheme == "socks5h")
    sock = await proxy.connect(dest_host=host, dest_port=port)
    _reader, writer = await asyncio.open_connection(sock=sock, ssl=_unverified(),
                                                    server_hostname=host)
    try:
        ssl_object = writer.get_extra_info("ssl_object")
        return ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    finally:
        writer.close()


async def _direct(host: str, port: int) -> bytes | None:
    _reader, writer = await asyncio.open_connection(host, port, ssl=_unverified(),
                                                    server_hostname=host)
    try:
        ssl_object = writer.get_extra_info("ssl_object")
        return ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    finally:
        writer.close()


async def presented_issuer(hop: Hop | None, url: str, timeout_s: float) -> str | None:
    """The issuer's common name of the certificate presented for `url` through `hop` (None:
    reached directly), or None when it cannot be read (an https proxy: its own certificate is
    another matter)."""
    parts = urlsplit(url)
    host, port = parts.hostname, parts.port or 443
    if host is None or parts.scheme != "https":
        return None
    try:
        async with asyncio.timeout(timeout_s):
            if hop is None:
                der = await _direct(host, port)
            elif hop.scheme == "http":
                der = await _through_http(hop, host, port)
            elif hop.scheme in ("socks5", "socks5h"):
                der = await _through_socks(hop, host, port)
            else:
                return None
    except Exception:  # only a name for the words: any failure means "not known"
        return None
    if not der:
        return None
    try:
        # cryptography only here: a claudex whose certificates all verify never loads it.
        from cryptography import x509
        from cryptography.x509.oid import NameOID

        names = x509.load_der_x509_certificate(der).issuer.get_attributes_for_oid(
            NameOID.COMMON_NAME)
    except ValueError:
        return None
    return str(names[0].value) if names else None
