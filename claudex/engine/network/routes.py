"""A profile's route to its provider: the proxies a request may go through, in order, and the
TLS context it verifies (and presents a client certificate) with.

Routes are resolved when the config loads, never per request: a profile whose route is direct
with default TLS sends exactly as it did before routes existed (no per-request work).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Hop:
    """One upstream proxy a request can go through."""

    # The `[[upstream_proxies]]` name; "env" for the environment's proxy (or the variable's name,
    # lowercased, when the environment names several); an inline URL is named by its host:port.
    name: str
    url: str  # scheme://host:port, never with credentials
    scheme: str  # http | https | socks5 | socks5h
    username: str | None = None
    password: str | None = field(default=None, repr=False)  # a secret: never printed

    @property
    def where(self) -> str:
        """`proxy.corp:3128`: the proxy's address, as the escalation sentence names it."""
        return self.url.split("://", 1)[-1]

    @property
    def shown(self) -> str:
        """The URL as status shows it: the user, never the password."""
        if self.username is None:
            return self.url
        scheme, rest = self.url.split("://", 1)
        secret = ":****" if self.password else ""
        return f"{scheme}://{self.username}{secret}@{rest}"


@dataclass(frozen=True)
class Route:
    hops: tuple[Hop, ...] = ()  # () = direct
    ssl: ssl.SSLContext | None = None  # None = the default verification

    @property
    def direct(self) -> bool:
        return not self.hops

    @property
    def plain(self) -> bool:
        """Direct with default TLS: sent exactly as without routes."""
        return not self.hops and self.ssl is None

    @property
    def label(self) -> str:
        if not self.hops:
            return "direct"
        return "via " + ", ".join(hop.name for hop in self.hops)


DIRECT = Route()
