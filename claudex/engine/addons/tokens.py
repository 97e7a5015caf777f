"""Token usage summed per provider and profile (core/usage.py's `TokenTotals`), from what each
answer reported (`flow.usage`, read by the core from the bytes the client got)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from claudex.engine.core.usage import TokenTotals

if TYPE_CHECKING:
    from claudex.engine.core.hooks import Flow


class TokensAddon:
    name = "tokens"

    def __init__(self, totals: TokenTotals) -> None:
        self.totals = totals

    def request_ended(self, flow: Flow) -> None:
        usage = flow.usage
        if usage is not None and flow.result is not None:
            self.totals.add(flow.result.provider, flow.req.profile, usage)
