"""A resolved network built by hand (routes and proxies), for engine tests that do not go
through the config's `[network]` (engine/network/resolve.py is helper netcfg's)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from claudex.config.model import BreakerSettings, Config, RetrySettings
from claudex.engine.network.proxy_state import DefaultSpec
from claudex.engine.network.routes import DIRECT, Hop, Route


@dataclass
class StaticNetwork:
    routes: dict[str, Route]
    proxies: dict[str, DefaultSpec] = field(default_factory=dict)

    def route(self, profile: str) -> Route:
        return self.routes.get(profile, DIRECT)

    def __call__(self, config: Config, environ: Mapping[str, str]) -> StaticNetwork:
        return self


def network(routes: dict[str, Route], *, threshold: int = 3, max_attempts: int = 3,
            retry_after_cap: float = 60.0) -> StaticNetwork:
    """Every hop named in `routes` a proxy with its own breaker and `[retry]`."""
    proxies: dict[str, DefaultSpec] = {}
    for name, route in routes.items():
        for hop in route.hops:
            spec = proxies.get(hop.name)
            users = (*spec.profiles, name) if spec is not None else (name,)
            proxies[hop.name] = DefaultSpec(
                hop, BreakerSettings(failure_threshold=threshold, recovery_seconds=30),
                RetrySettings(initial_delay=0.5, max_attempts=max_attempts, jitter="none",
                              max_retry_after=retry_after_cap), True, users)
    return StaticNetwork(routes, proxies)


def http_hop(name: str, port: int, user: str | None = None, password: str | None = None,
             host: str = "127.0.0.1") -> Hop:
    return Hop(name, f"http://{host}:{port}", "http", user, password)
