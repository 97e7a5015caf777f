"""What the pools' members did (DESIGN.md "Pools"): each member's share of its pool's requests,
for status, the console and `claudex status`. Observes only: which member serves is decided in
the core (engine/core/pools.py). The engine adds this addon when the config has a pool."""

from __future__ import annotations

from claudex.engine.core.hooks import Flow


class PoolsAddon:
    name = "pools"

    def __init__(self) -> None:
        self.served: dict[str, dict[str, int]] = {}  # pool -> member -> requests served

    def request_ended(self, flow: Flow) -> None:
        result = flow.result
        if result is None or result.provider is None:
            return
        provider = result.provider
        for attempt in reversed(flow.trail.attempts):
            if attempt.provider == provider:
                if attempt.pool is not None:
                    members = self.served.setdefault(attempt.pool, {})
                    members[provider] = members.get(provider, 0) + 1
                return

    def of(self, pool: str) -> dict[str, int]:
        return self.served.get(pool, {})
