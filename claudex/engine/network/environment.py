"""The environment's proxy for a provider's URL (`upstream_proxy = "env"`, the default): the
variables curl reads, read the way curl reads them, plus the loopback rule of Go and Chrome.

- https targets: `https_proxy`, `HTTPS_PROXY`, then `all_proxy`, `ALL_PROXY`; http targets:
  `http_proxy`, `HTTP_PROXY`, then the same two. An empty variable counts as unset. The value is
  returned as written (a bare `proxy.corp:3128` means http://; `https://` and `socks5h://`
  proxies are kept, which aiohttp's own `trust_env` drops or never reads).
- `no_proxy`, then `NO_PROXY` (curl's order): entries separated by commas and/or spaces; the
  whole value `*` matches every host (as in curl, a `*` among other entries matches none); a
  leading dot is ignored (`.corp.com` = `corp.com`); a name matches itself and its sub-domains
  on a label boundary (`corp.com` matches `api.corp.com`, not `notcorp.com`); an IP literal
  (v4 or v6, `[::1]` too) matches that address, with `/bits` a network, and only a host written
  as an address (nothing is resolved); case does not matter, nor a trailing dot; a port written
  in an entry is ignored, as curl ignores it.
- A loopback target (127.0.0.0/8, ::1, localhost, *.localhost) never goes through a proxy that
  came from the environment: a proxy elsewhere cannot reach this machine's loopback (Go's and
  Chrome's rule). A proxy the config names is used even there (tests, local relays).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from claudex.config.network import PROXY_VARIABLES

_HTTPS_VARIABLES = ("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")
_HTTP_VARIABLES = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")
_SEPARATORS = re.compile(r"[,\s]+")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def proxy_from_environment(target_url: str, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """(variable name, proxy URL as written) for a request to `target_url`, or None: no variable
    set, the target excluded by NO_PROXY, or a loopback target."""
    parts = urlsplit(target_url)
    host = (parts.hostname or "").lower()
    if not host or is_loopback(host):
        return None
    names = _HTTPS_VARIABLES if parts.scheme.lower() == "https" else _HTTP_VARIABLES
    found = next(((name, value.strip()) for name in names
                  if (value := environ.get(name, "")).strip()), None)
    if found is None:
        return None
    no_proxy = environ.get("no_proxy") or environ.get("NO_PROXY") or ""
    if bypasses(host, no_proxy):
        return None
    return found


def bypasses(host: str, no_proxy: str) -> bool:
    """Whether NO_PROXY's value `no_proxy` says `host` is reached without the proxy."""
    value = no_proxy.strip()
    if not value:
        return False
    if value == "*":
        return True
    name = host.lower().removeprefix("[").removesuffix("]").rstrip(".")
    address = _address(name)
    for entry in _SEPARATORS.split(value.lower()):
        if not entry:
            continue
        if address is not None:
            if _address_matches(address, entry):
                return True
        elif _name_matches(name, entry):
            return True
    return False


def _name_matches(name: str, entry: str) -> bool:
    pattern = _without_port(entry).lstrip(".").rstrip(".")
    if not pattern:
        return False
    return name == pattern or name.endswith("." + pattern)


def _address_matches(address: IPAddress, entry: str) -> bool:
    text, _, bits = entry.partition("/")
    if not bits:
        text = _without_port(text)
    text = text.removeprefix("[").removesuffix("]")
    try:
        if bits:
            network = ipaddress.ip_network(f"{text}/{bits}", strict=False)
            return address.version == network.version and address in network
        return address == ipaddress.ip_address(text)
    except ValueError:
        return False


def _without_port(entry: str) -> str:
    """`host:8080` -> `host`, `[::1]:80` -> `[::1]`; a bare IPv6 literal stays whole."""
    if entry.startswith("["):
        end = entry.find("]")
        return entry[: end + 1] if end > 0 else entry
    if entry.count(":") == 1:
        return entry.split(":", 1)[0]
    return entry


def _address(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 (an IPv4-mapped 127.x too), localhost and its sub-domains."""
    name = host.lower().removeprefix("[").removesuffix("]").rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    address = _address(name)
    if address is None:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def environment_proxies(environ: Mapping[str, str]) -> dict[str, str]:
    """Every proxy variable set (non-empty), by name: how many different proxies the
    environment names decides whether its hop is called "env" or by its variable."""
    return {name: value.strip() for name in PROXY_VARIABLES
            if (value := environ.get(name, "")).strip()}
