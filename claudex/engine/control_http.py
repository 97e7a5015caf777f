"""The control plane's HTTP client (health probes, token refresh): httpx, as DESIGN.md says, with
the certificate store it verifies against read at its first TLS handshake.

httpx's default client reads certifi's bundle (~150 CA certificates) into its TLS context when it
is made: ~0.7 MB resident for the life of `claudex serve`, which makes the client at start. A
config whose providers all answer on plain http (a local model server, the benchmark's upstream)
never needs it. `LazyCertsContext` is the TLS context httpx would make — TLS client, hostname
checked, certificate required, the bundle httpx picks (`SSL_CERT_FILE`, else `SSL_CERT_DIR`, else
certifi's), `SSLKEYLOGFILE` honoured — that loads the bundle when it first wraps a connection.
"""

from __future__ import annotations

import os
import ssl
import sys
import threading
from typing import Any

import httpx


class LazyCertsContext(ssl.SSLContext):
    """An `ssl.SSLContext` for clients that loads its CA certificates at the first wrap."""

    _certs_loaded = False
    _certs_lock = threading.Lock()

    def _load_certs(self) -> None:
        with self._certs_lock:
            if self._certs_loaded:
                return
            # httpx's own choice (httpx._config.create_ssl_context, trust_env=True).
            if os.environ.get("SSL_CERT_FILE"):
                self.load_verify_locations(cafile=os.environ["SSL_CERT_FILE"])
            elif os.environ.get("SSL_CERT_DIR"):
                self.load_verify_locations(capath=os.environ["SSL_CERT_DIR"])
            else:
                import certifi

                self.load_verify_locations(cafile=certifi.where())
            self._certs_loaded = True

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        if not self._certs_loaded:
            self._load_certs()
        return super().wrap_socket(*args, **kwargs)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        if not self._certs_loaded:
            self._load_certs()
        return super().wrap_bio(*args, **kwargs)


def lazy_certs_context() -> LazyCertsContext:
    """What `ssl.create_default_context(cafile=...)` makes for httpx, certificates to come."""
    context = LazyCertsContext(ssl.PROTOCOL_TLS_CLIENT)
    context.verify_mode = ssl.CERT_REQUIRED
    context.check_hostname = True
    keylog = os.environ.get("SSLKEYLOGFILE")
    if keylog and not sys.flags.ignore_environment:
        context.keylog_filename = keylog
    return context


def control_client() -> httpx.AsyncClient:
    """The engine's own client when it is given none."""
    return httpx.AsyncClient(follow_redirects=False, verify=lazy_certs_context())
