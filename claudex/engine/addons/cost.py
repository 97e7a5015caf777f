"""What each answer's tokens cost at API prices, summed per provider and per profile.

Always on, and cheap: at a request's end (the `request_ended` hook) one dict lookup of the served
model's rates (prices.py, cached per provider address and model) and a few multiplications. The
price is the API's: for an OAuth subscription login (`auth_type = "oauth"`: a Claude or ChatGPT
plan) it is what the same tokens would have cost through the API ("API-equivalent"), since what
the plan costs does not grow with them. A model the price table does not know leaves the answer
unpriced: counted as such, never as $0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from claudex.config.model import Profile
from claudex.engine.addons.prices import PriceTable
from claudex.engine.core.runtime import ProviderRuntime

if TYPE_CHECKING:
    from claudex.engine.core.hooks import Flow
    from claudex.engine.core.request import ForwardResult

CostBasis = Literal["api", "api_equivalent"]
API: Final = "api"
API_EQUIVALENT: Final = "api_equivalent"


def cost_basis(profile: Profile) -> CostBasis:
    """`api_equivalent` for a subscription login (its marginal cost is the plan), else `api`."""
    return API_EQUIVALENT if profile.auth_type == "oauth" else API


@dataclass
class Spend:
    """USD summed over priced answers, and how many answers with tokens were left unpriced."""

    usd: float = 0.0
    priced: int = 0
    unpriced: int = 0

    def add(self, usd: float | None) -> None:
        if usd is None:
            self.unpriced += 1
        else:
            self.usd += usd
            self.priced += 1

    def add_sum(self, usd: float, priced: int, unpriced: int) -> None:
        self.usd += usd
        self.priced += priced
        self.unpriced += unpriced

    def plus(self, other: Spend | None) -> Spend:
        if other is None:
            return Spend(self.usd, self.priced, self.unpriced)
        return Spend(self.usd + other.usd, self.priced + other.priced,
                     self.unpriced + other.unpriced)

    @property
    def cost_usd(self) -> float | None:
        """None when nothing was priced: "unpriced" (or no answer yet), never $0."""
        return round(self.usd, 6) if self.priced else None

    def to_json(self) -> dict[str, Any]:
        return {"cost_usd": self.cost_usd, "priced": self.priced, "unpriced": self.unpriced}


class CostTotals:
    """Spend per provider (the profile that served) and per profile addressed."""

    def __init__(self) -> None:
        self.by_provider: dict[str, Spend] = {}
        self.by_profile: dict[str, Spend] = {}

    def add(self, provider: str | None, profile: str | None, usd: float | None) -> None:
        if provider:
            spend = self.by_provider.get(provider)
            if spend is None:
                spend = self.by_provider[provider] = Spend()
            spend.add(usd)
        if profile:
            spend = self.by_profile.get(profile)
            if spend is None:
                spend = self.by_profile[profile] = Spend()
            spend.add(usd)

    def of_provider(self, name: str) -> Spend | None:
        return self.by_provider.get(name)


def served_model(result: ForwardResult) -> str | None:
    """The model the serving provider was sent (what it bills), from its attempt."""
    for attempt in reversed(result.attempts):
        if attempt.provider == result.provider and attempt.outcome == "ok":
            return attempt.model
    return None


class CostAddon:
    """Prices each answer that reported tokens; `flow.cost_usd` is its price (None: unpriced),
    for the request event and the journal that the addons after it write."""

    name = "cost"

    def __init__(self, table: PriceTable, totals: CostTotals,
                 runtimes: Callable[[], Mapping[str, ProviderRuntime]]) -> None:
        self.table = table
        self.totals = totals
        self._runtimes = runtimes

    def request_ended(self, flow: Flow) -> None:
        usage, result = flow.usage, flow.result
        if usage is None or result is None or result.provider is None:
            return
        rt = self._runtimes().get(result.provider)
        if rt is None:
            return
        model = served_model(result) or flow.req.model
        usd = self.table.cost(rt.profile.price_url, model, usage)
        flow.cost_usd = usd
        flow.cost_basis = cost_basis(rt.profile)
        self.totals.add(result.provider, flow.req.profile, usd)
