"""Which failures are an upstream proxy's, not the provider's (issue 36, the failure table's proxy
rows) — mapped at one place, as classify.py maps the provider's.

What aiohttp and aiohttp-socks raise, verified against real sockets on 127.0.0.1
(tests/engine/network/test_failures.py)::

    ClientProxyConnectionError (os_error ConnectionRefusedError)   -> refused
    ClientConnectorDNSError whose host is the proxy's               -> unresolvable
    ConnectionTimeoutError while going through a proxy              -> connect_timeout
        (the connect phase through a proxy is the proxy's: its TCP connect and its CONNECT
        answer; a provider it cannot reach makes it answer 502/504, not time out)
    ClientHttpProxyError(status, headers), the CONNECT's answer:
        407, 401 (tinyproxy answers a bad password with 401)        -> auth_failed
        403                                                         -> rejected
        429 (Retry-After in its headers)                            -> rate_limited
        502, 503, 504 and any other status                          -> bad_gateway
    aiohttp_socks / python_socks errors (they derive from Exception, not aiohttp.ClientError):
        ProxyConnectionError (errno 111 refused, <0 a DNS failure)  -> refused / unresolvable
        ProxyTimeoutError                                           -> connect_timeout
        ProxyError "authentication failure" / other replies         -> auth_failed / rejected
    ClientConnectorCertificateError through a proxy                 -> untrusted
        (a TLS-intercepting proxy re-signs the provider's certificate: `certificate not
        trusted: issuer CN=... — set ca_bundle`)
    ClientSSLError (another TLS failure) with the proxy's host      -> tls_failed

`proxy_failure()` returns None for every other exception: the provider's (classify.py).

Not the proxy's either: a proxy's word that it reached out and the *provider* could not be
reached — tinyproxy's CONNECT answer 500 "Unable to connect", a SOCKS5 reply 3, 4 or 5 (network
unreachable, host unreachable, connection refused by the destination). Neither is in the issue's
table, and charging them to the proxy would let one dead provider open the breaker of a proxy
every other provider shares. `beyond_proxy()` words them; they count against the provider as a
refused direct connection would (a connect error: the next provider).
"""

from __future__ import annotations

import ssl
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

import aiohttp

from claudex.engine.core.backoff import parse_retry_after
from claudex.engine.network.routes import Hop


class ProxyKind(StrEnum):
    REFUSED = "refused"
    UNRESOLVABLE = "unresolvable"
    CONNECT_TIMEOUT = "connect_timeout"
    AUTH_FAILED = "auth_failed"
    REJECTED = "rejected"
    BAD_GATEWAY = "bad_gateway"
    RATE_LIMITED = "rate_limited"
    UNTRUSTED = "untrusted"
    TLS_FAILED = "tls_failed"


@dataclass(frozen=True)
class ProxyFailure:
    """What went wrong at a proxy, in words for the trail, status and events (never a secret:
    no URL with credentials, no header value)."""

    kind: ProxyKind
    words: str
    retry_after: float | None = None  # a 429's Retry-After, seconds
    status: int | None = None         # the CONNECT's answer, when there was one
    headers: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)


_STATUS_WORDS = {407: "proxy authentication required (407)",
                 401: "proxy authentication refused (401)",
                 403: "CONNECT forbidden (403)", 429: "rate limited (429)"}


def _host_port(hop: Hop) -> tuple[str, int | None]:
    where = hop.where
    if where.startswith("["):  # [::1]:3128
        host, _, rest = where[1:].partition("]")
        port = rest.lstrip(":")
    else:
        host, _, port = where.rpartition(":")
        if not host:
            host, port = where, ""
    return host.lower(), int(port) if port.isdigit() else None


def _is_proxy(exc: aiohttp.ClientConnectorError, hop: Hop) -> bool:
    host, port = _host_port(hop)
    return exc.host.lower().strip("[]") == host and (port is None or exc.port == port)


def status_failure(status: int, headers: Mapping[str, str], now_wall: float) -> ProxyFailure:
    """A proxy's own answer to CONNECT (or, for a plain-http target, its 407)."""
    if status in (401, 407):
        kind = ProxyKind.AUTH_FAILED
    elif status == 403:
        kind = ProxyKind.REJECTED
    elif status == 429:
        return ProxyFailure(ProxyKind.RATE_LIMITED, _STATUS_WORDS[429],
                            parse_retry_after(headers, now_wall), status, dict(headers))
    else:
        kind = ProxyKind.BAD_GATEWAY
    words = _STATUS_WORDS.get(status, f"bad gateway ({status})")
    return ProxyFailure(kind, words, None, status)


def untrusted_words(error: ssl.SSLCertVerificationError | None, issuer: str | None = None) -> str:
    """`certificate not trusted: issuer CN=Zscaler Root CA — set ca_bundle`; without the issuer,
    OpenSSL's reason (`self-signed certificate in certificate chain`)."""
    if issuer:
        said = f"issuer CN={issuer}"
    else:
        said = (error.verify_message if error is not None and error.verify_message
                else "verification failed")
    return f"certificate not trusted: {said} — set ca_bundle"


def _socks_classes() -> tuple[tuple[type[Exception], ...], tuple[type[Exception], ...]]:
    """(python-socks' error classes, aiohttp-socks' own), imported here only: a SOCKS error can
    exist only once the transport imported aiohttp-socks for a SOCKS hop, and a claudex without
    one never loads either library (~2 MB resident, 32 modules)."""
    import aiohttp_socks
    import python_socks

    return ((python_socks.ProxyError, python_socks.ProxyConnectionError,
             python_socks.ProxyTimeoutError),
            # aiohttp-socks' own classes (not python-socks' subclasses), raised from python-socks'.
            (aiohttp_socks.ProxyError, aiohttp_socks.ProxyConnectionError,
             aiohttp_socks.ProxyTimeoutError))


def _socks_failure(exc: Exception) -> ProxyFailure | None:
    import aiohttp_socks
    import python_socks

    if isinstance(exc, python_socks.ProxyTimeoutError | aiohttp_socks.ProxyTimeoutError):
        return ProxyFailure(ProxyKind.CONNECT_TIMEOUT, "connect timeout")
    if isinstance(exc, aiohttp_socks.ProxyConnectionError):
        return ProxyFailure(ProxyKind.REFUSED, "cannot connect")
    if isinstance(exc, python_socks.ProxyConnectionError):
        code = exc.errno if isinstance(exc.errno, int) else 0
        if code < 0:  # getaddrinfo's EAI_* codes are negative
            return ProxyFailure(ProxyKind.UNRESOLVABLE, "does not resolve (DNS lookup failed)")
        return ProxyFailure(ProxyKind.REFUSED, "connection refused" if code == 111
                            else f"cannot connect ({exc.strerror or 'error'})")
    if isinstance(exc, python_socks.ProxyError | aiohttp_socks.ProxyError):
        said = str(exc) or "refused"
        if "authentication" in said.lower():
            return ProxyFailure(ProxyKind.AUTH_FAILED, f"SOCKS {said[:120]}")
        return ProxyFailure(ProxyKind.REJECTED, f"SOCKS: {said[:120]}")
    return None


def _socks_error(exc: BaseException) -> Exception | None:
    """python-socks' error (it has the errno and the SOCKS reply) that aiohttp-socks raised its
    own from, else aiohttp-socks' own."""
    if "aiohttp_socks" not in sys.modules:  # no SOCKS hop was ever used: no SOCKS error
        return None
    socks_errors, aiohttp_socks_errors = _socks_classes()
    found: Exception | None = None
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, socks_errors):
            return seen
        if found is None and isinstance(seen, aiohttp_socks_errors):
            found = seen
        seen = seen.__cause__
    return found


# SOCKS5 replies (RFC 1928 section 6) that say the destination, not the proxy, failed.
_SOCKS_TARGET_REPLIES = {3: "network unreachable", 4: "host unreachable",
                         5: "connection refused by the provider"}
# A CONNECT answer that says the proxy could not connect to the target (tinyproxy 1.11: 500
# "Unable to connect"); 502/503/504 stay the proxy's, as the table says.
_TARGET_STATUSES = frozenset({500})


def beyond_proxy(exc: BaseException) -> str | None:
    """Words for a failure the proxy reports at the provider (see the module's docstring), or
    None."""
    socks = _socks_error(exc)
    if socks is not None:
        import python_socks

        if isinstance(socks, python_socks.ProxyError):
            code = socks.error_code
            said = _SOCKS_TARGET_REPLIES.get(code) if isinstance(code, int) else None
            return None if said is None else f"{said} (SOCKS reply {code})"
    if isinstance(exc, aiohttp.ClientHttpProxyError) and exc.status in _TARGET_STATUSES:
        return f"the proxy could not connect to the provider ({exc.status})"
    return None


def proxy_failure(exc: BaseException, hop: Hop, now_wall: float) -> ProxyFailure | None:
    """The proxy's failure that `exc` (raised sending through `hop`) says, or None: not the
    proxy's (the provider's own, classify.py maps it)."""
    if beyond_proxy(exc) is not None:
        return None
    socks = _socks_error(exc)
    if socks is not None:
        return _socks_failure(socks)
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        return status_failure(exc.status, exc.headers or {}, now_wall)
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        # Through a proxy the certificate that does not verify is the one it presents (its own
        # for an https proxy, or the one a TLS-intercepting proxy made for the provider).
        return ProxyFailure(ProxyKind.UNTRUSTED, untrusted_words(
            exc.certificate_error if isinstance(exc.certificate_error,
                                                ssl.SSLCertVerificationError) else None))
    if isinstance(exc, aiohttp.ClientProxyConnectionError):
        os_error = exc.os_error
        if isinstance(os_error, ConnectionRefusedError):
            return ProxyFailure(ProxyKind.REFUSED, "connection refused")
        if isinstance(os_error, TimeoutError):
            return ProxyFailure(ProxyKind.CONNECT_TIMEOUT, "connect timeout")
        return ProxyFailure(ProxyKind.REFUSED,
                            f"cannot connect ({os_error.strerror or type(os_error).__name__})")
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        if _is_proxy(exc, hop):
            return ProxyFailure(ProxyKind.UNRESOLVABLE, "does not resolve (DNS lookup failed)")
        return None
    if isinstance(exc, aiohttp.ClientSSLError) and _is_proxy(exc, hop):
        said = exc.os_error.strerror or "handshake"
        return ProxyFailure(ProxyKind.TLS_FAILED, f"TLS failed ({said})"[:160])
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return ProxyFailure(ProxyKind.CONNECT_TIMEOUT, "connect timeout")
    if isinstance(exc, aiohttp.ClientConnectorError) and _is_proxy(exc, hop):
        return ProxyFailure(ProxyKind.REFUSED,
                            f"cannot connect ({exc.os_error.strerror or 'error'})")
    return None
