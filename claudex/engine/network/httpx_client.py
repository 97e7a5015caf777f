"""The control plane through a profile's route (issue 36): health probes, OAuth token refreshes
and grants, the `[router]` classifier call and Vertex token minting go where the profile's
requests go — the same proxy, the same certificates — never direct around a configured proxy.

`client_for(route, hop)` makes an httpx client for one hop of a route (httpx `proxy=` with the
hop's credentials; SOCKS through socksio) verifying with the route's TLS context, else the
lazily loaded default store (engine/control_http.py). `RouteClients` keeps one per (route, hop)
for the engine's life and closes them with it; a plain direct route gets the engine's shared
client. Which hop: the first eligible one of the route (the proxies' board says), else the
first — a route that is out fails as its proxy fails, it is never bypassed.
"""

from __future__ import annotations

import httpx

from claudex.engine.control_http import lazy_certs_context
from claudex.engine.network.routes import Hop, Route

# What httpx raises when the proxy itself fails (refused, does not resolve, times out,
# answers CONNECT with an error): through a proxy, a connect-phase failure is the proxy's.
PROXY_ERRORS = (httpx.ProxyError, httpx.ConnectError, httpx.ConnectTimeout)


def client_for(route: Route, hop: Hop | None = None) -> httpx.AsyncClient:
    """A new client that sends through `hop` (None: direct) with the route's TLS context."""
    proxy: httpx.Proxy | None = None
    if hop is not None:
        auth = (hop.username, hop.password or "") if hop.username is not None else None
        proxy = httpx.Proxy(hop.url, auth=auth)
    return httpx.AsyncClient(follow_redirects=False, proxy=proxy,
                             verify=route.ssl or lazy_certs_context(), trust_env=False)


def sync_client_for(route: Route, hop: Hop | None, timeout_s: float) -> httpx.Client:
    """A synchronous client through `hop` (google-auth's token requests: Vertex)."""
    proxy: httpx.Proxy | None = None
    if hop is not None:
        auth = (hop.username, hop.password or "") if hop.username is not None else None
        proxy = httpx.Proxy(hop.url, auth=auth)
    return httpx.Client(follow_redirects=False, proxy=proxy, timeout=timeout_s,
                        verify=route.ssl or True, trust_env=False)


class RouteClients:
    """One httpx client per (route, hop), made when first asked, closed with the engine."""

    def __init__(self, shared: httpx.AsyncClient) -> None:
        self._shared = shared
        self._clients: dict[tuple[Route, Hop | None], httpx.AsyncClient] = {}

    def get(self, route: Route | None, hop: Hop | None = None) -> httpx.AsyncClient:
        """The client for `route` through `hop`; a plain route's (None): the shared one."""
        if route is None or route.plain:
            return self._shared
        if hop is None and route.hops:
            hop = route.hops[0]
        key = (route, hop)
        client = self._clients.get(key)
        if client is None or client.is_closed:
            client = self._clients[key] = client_for(route, hop)
        return client

    async def aclose(self) -> None:
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.aclose()
