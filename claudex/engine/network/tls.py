"""The TLS context a route verifies providers (and https proxies) with, and the client
certificate it presents: built once per config load, never per request.

- `ca_bundle` set: the default store plus the bundle (a company's CA beside the public ones).
- Without it: the default store (OpenSSL's own reading of `SSL_CERT_FILE`/`SSL_CERT_DIR`, which
  replace it), plus `NODE_EXTRA_CA_CERTS`'s file when set (what Claude Code users behind a
  TLS-inspecting proxy already have) unless it is the store's own file; an unreadable one is
  skipped, as Node skips it.
- `client_cert` (with `client_key`, unlocked with the password from `client_key_password_env`).
- Nothing of these: None, and the caller keeps aiohttp's default context (the plain hot path).

The environment is the one given, not the process's: `SSL_CERT_FILE`/`SSL_CERT_DIR` set there are
loaded explicitly; when the process has them and the given environment does not, OpenSSL's
compiled-in store is loaded instead of letting OpenSSL read the process's variables.
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

_STORE_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR")


@dataclass(frozen=True)
class TlsChoice:
    """What a route's TLS differs from the default by (paths already expanded)."""

    ca_bundle: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    key_password: str | None = field(default=None, repr=False)  # a secret: never printed

    @property
    def default(self) -> bool:
        return self.ca_bundle is None and self.client_cert is None


class TlsSetupError(ValueError):
    """A bundle, certificate or key that cannot be used; the message names the file."""


def extra_ca_file(choice: TlsChoice, environ: Mapping[str, str]) -> str | None:
    """The file added to the default store: `ca_bundle`, else NODE_EXTRA_CA_CERTS."""
    if choice.ca_bundle is not None:
        return choice.ca_bundle
    extra = environ.get("NODE_EXTRA_CA_CERTS", "").strip() or None
    store = environ.get("SSL_CERT_FILE") or ssl.get_default_verify_paths().openssl_cafile
    if extra is not None and os.path.realpath(extra) == os.path.realpath(store):
        # Often the system's own bundle (Debian's ca-certificates.crt): nothing to add, and
        # the route stays plain.
        return None
    return extra


def ssl_context(choice: TlsChoice, environ: Mapping[str, str]) -> ssl.SSLContext | None:
    """The context for `choice`, or None when it is the default one. Raises `TlsSetupError`
    for a `ca_bundle` or client certificate that cannot be loaded (`claudex check` names them
    first)."""
    extra = extra_ca_file(choice, environ)
    if extra is None and choice.client_cert is None:
        return None
    context = _default_store(environ)
    if extra is not None:
        try:
            context.load_verify_locations(cafile=extra)
        except (OSError, ssl.SSLError, ValueError) as error:
            if choice.ca_bundle is not None:
                raise TlsSetupError(f"ca_bundle {extra}: {_reason(error)}") from None
            # Node warns and goes on; so do we (the default store still verifies).
            log.warning("NODE_EXTRA_CA_CERTS %s not loaded: %s", extra, _reason(error))
            if choice.client_cert is None:
                return None
    if choice.client_cert is not None:
        # The password is always given (empty without one): with None, OpenSSL would prompt on
        # the terminal for an encrypted key, hanging a server.
        password = choice.key_password or ""
        try:
            context.load_cert_chain(choice.client_cert, choice.client_key,
                                    password=lambda: password)
        except (OSError, ssl.SSLError, ValueError) as error:
            raise TlsSetupError(f"client_cert {choice.client_cert}: {_reason(error)}") from None
    return context


def _default_store(environ: Mapping[str, str]) -> ssl.SSLContext:
    cafile = environ.get("SSL_CERT_FILE") or None
    capath = environ.get("SSL_CERT_DIR") or None
    if cafile is None and capath is None and any(os.environ.get(v) for v in _STORE_VARIABLES):
        # The process's variables would be read by OpenSSL; the given environment has none.
        paths = ssl.get_default_verify_paths()
        cafile = paths.openssl_cafile if os.path.isfile(paths.openssl_cafile) else None
        capath = paths.openssl_capath if os.path.isdir(paths.openssl_capath) else None
    if cafile is None and capath is None:
        return ssl.create_default_context()
    try:
        return ssl.create_default_context(cafile=cafile, capath=capath)
    except (OSError, ssl.SSLError) as error:
        # OpenSSL skips a store it cannot read; so do we, rather than refuse to start.
        log.warning("SSL_CERT_FILE/SSL_CERT_DIR not loaded: %s", _reason(error))
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def _reason(error: Exception) -> str:
    if isinstance(error, ssl.SSLError) and error.reason:
        return str(error.reason).replace("_", " ").lower()
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__
