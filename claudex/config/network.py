"""The network's words the config and the engine share (issue 36): what an `upstream_proxy` entry
is, and a proxy's URL taken apart — read the same way for `[[upstream_proxies]]` urls, for a URL
written in `upstream_proxy`, and for the environment's `HTTPS_PROXY` & co (the engine's
`engine/network/environment.py`), so they can never disagree about what a URL means.

Messages never quote the URL: it may hold a password.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

ENV = "env"  # an `upstream_proxy` entry: the environment's HTTPS_PROXY & co
DIRECT = "direct"  # an `upstream_proxy` entry: no proxy
SPECIAL_ROUTES: tuple[str, ...] = (ENV, DIRECT)
# What a hop from the environment is called when the variables name several proxies (the
# variable, lowercased): no `[[upstream_proxies]]` entry may take these names either.
ENV_HOP_NAMES: tuple[str, ...] = ("https_proxy", "http_proxy", "all_proxy")
# The variables "env" reads (curl's), lower-case first as curl reads them.
PROXY_VARIABLES: tuple[str, ...] = ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY",
                                    "all_proxy", "ALL_PROXY")

PROXY_SCHEMES: tuple[str, ...] = ("http", "https", "socks5", "socks5h")
# A URL without a port takes its scheme's usual one (as Go's and Python's clients do; curl
# would take 1080 for every scheme, so the docs advise writing the port).
DEFAULT_PORTS = {"http": 80, "https": 443, "socks5": 1080, "socks5h": 1080}


class ProxyURLError(ValueError):
    """The URL cannot name a proxy; the message says why, never quoting the URL."""


@dataclass(frozen=True)
class ProxyAddress:
    scheme: str  # http | https | socks5 | socks5h (lower-case)
    host: str  # lower-case; an IPv6 literal without brackets
    port: int
    username: str | None = None  # percent-decoded
    password: str | None = field(default=None, repr=False)  # percent-decoded; a secret

    @property
    def where(self) -> str:
        """`proxy.corp:3128`, `[::1]:1080`: the address, without scheme or credentials."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def url(self) -> str:
        """scheme://host:port, never with credentials."""
        return f"{self.scheme}://{self.where}"


def parse_proxy_url(text: str, *, default_scheme: str | None = None) -> ProxyAddress:
    """Take `text` apart, or raise `ProxyURLError`. Without a scheme, `default_scheme` is assumed
    (the environment's variables: curl reads a bare `proxy.corp:3128` as http); with None, a
    scheme is required (the config file says what it means)."""
    text = text.strip()
    if not text:
        raise ProxyURLError("is empty")
    if any(char.isspace() for char in text):
        raise ProxyURLError("must be a URL without spaces")
    if "://" not in text:
        if default_scheme is None:
            raise ProxyURLError("must start with http://, https://, socks5:// or socks5h://")
        text = f"{default_scheme}://{text}"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ProxyURLError("is not a valid URL (look at the host and port)") from None
    scheme = parts.scheme.lower()
    if scheme not in PROXY_SCHEMES:
        shown = scheme if scheme.isascii() and scheme.isalnum() and len(scheme) < 20 else "?"
        hint = " (socks5 or socks5h)" if scheme.startswith("socks") else ""
        raise ProxyURLError(f"scheme {shown} is not supported{hint}: a proxy URL starts with "
                            "http://, https://, socks5:// or socks5h://")
    if not parts.hostname:
        raise ProxyURLError("names no host (http://proxy.corp:3128)")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ProxyURLError("must be scheme://[user@]host:port, without a path or query")
    if port == 0:
        raise ProxyURLError("has port 0")
    username = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    return ProxyAddress(scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme],
                        username, password)


def is_url(entry: str) -> bool:
    """Whether an `upstream_proxy` entry is a URL (else "env", "direct" or a proxy's name)."""
    return "://" in entry


def expand_path(path: str, env: Mapping[str, str]) -> Path:
    """A file named in the config (ca_bundle, client_cert, client_key): `~` from the given
    environment's HOME (the process's when it has none)."""
    home = env.get("HOME")
    if home and (path == "~" or path.startswith(("~/", "~" + os.sep))):
        return Path(home + path[1:])
    return Path(os.path.expanduser(path))
