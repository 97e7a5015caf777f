"""API prices per token, from the genai-prices package's bundled table (no network, ever).

genai-prices (pydantic's table of LLM prices) computes a price with Decimal arithmetic over a
registry of units: about 80 µs a call, and 36 ms for the first. claudex prices every answer, so it
asks the package once per (provider address, model) and keeps what the answer costs per token of
each kind (`ModelRates`): the price of an answer is then a few float multiplications.

What is kept is read from genai-prices' own arithmetic, not from its fields: for each band of the
whole input (a model with tiered prices, say above 200k tokens, changes every rate past the
tier's start) the package prices an input of T tokens, T tokens of them read from the cache, T
written to it, and a million output tokens, and each rate is the difference over the count. A
price is linear in each count within a band, so this gives its figure exactly (to float
rounding) whatever units and partitions the table uses for that model: the tests compare with
`genai_prices.calc_price` for known usages.

Its convention for counts: `input_tokens` is the whole input, cache reads and writes included
(OpenAI's way); claudex's `Usage.input_tokens` is the part neither read nor written
(Anthropic's), so the whole is `Usage.all_input` (core/usage.py).

Which table entry: the provider whose API address matches the profile's `base_url` (its
`api_pattern`), the model looked up there; else the provider whose models match the model's
name (a fake provider on 127.0.0.1 serving `claude-sonnet-4-5`, a gateway); else none: the
answer is unpriced, never $0. Prices that change with the time (a price change on a date, an
off-peak discount) are looked up again when the next of their conditions turns (`_good_until`).

The package is imported on first use, or ahead by `load()` (the engine's start runs it in a
thread, since the import takes a quarter of a second): never at claudex's import. `claudex
serve` does not import it at all for the models its config names: a child process looks them
up with this module's code and the table is `seed`ed with the result (price_sheet.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from claudex.engine.core.usage import Usage

if TYPE_CHECKING:  # imported only where genai-prices is read (serve: in price_sheet's child)
    from decimal import Decimal

log = logging.getLogger("claudex.engine")

RECHECK_S: Final = 60.0  # a price on a condition of a kind not known here: looked up again
_PROBE_OUTPUT: Final = 1_000_000
_PROBE_INPUT: Final = 1_000_000
_FOREVER: Final = float("inf")


@dataclass(frozen=True)
class Rates:
    """USD per token of each kind, and per request, within one band of the whole input."""

    input: float
    cache_read: float
    cache_write: float
    output: float
    request: float

    def cost(self, usage: Usage) -> float:
        return (self.request + self.input * usage.input_tokens
                + self.cache_read * usage.cache_read_tokens
                + self.cache_write * usage.cache_write_tokens + self.output * usage.output_tokens)


@dataclass(frozen=True)
class ModelRates:
    """One model's rates; `bands` are (start, rates) ascending, a band applying to an answer
    whose whole input is above its start (genai-prices' tiers: the rate past a threshold applies
    to all the tokens)."""

    provider_id: str
    model_id: str
    bands: tuple[tuple[int, Rates], ...]
    good_until: float  # wall time after which to look again (inf: never)

    def cost(self, usage: Usage) -> float:
        whole = usage.all_input
        rates = self.bands[0][1]
        for start, band in reversed(self.bands):
            if whole > start:
                rates = band
                break
        return rates.cost(usage)


class PriceTable:
    """`cost(base_url, model, usage)`: USD at API prices, or None for a model the table does
    not know. Safe to call from the engine's loop: the lookups are cached per (address, model);
    unknown ones too."""

    def __init__(self, wall: Callable[[], float] = time.time) -> None:
        self._wall = wall
        self._rates: dict[tuple[str, str], ModelRates | None] = {}
        self._snapshot: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Import genai-prices and read its bundled table (idempotent; the engine's start calls
        it in a thread, a request that comes first calls it itself)."""
        if self._snapshot is not None:
            return
        with self._lock:
            if self._snapshot is None:
                # Only the bundled snapshot: genai-prices fetches newer prices only when its
                # UpdatePrices is started, which claudex never does (no network at run time).
                from genai_prices import data_snapshot

                snapshot = data_snapshot.get_snapshot()
                self._snapshot = snapshot

    def seed(self, known: Mapping[tuple[str, str], ModelRates | None]) -> None:
        """Take rates looked up elsewhere by this module's own code (price_sheet.py: in a child
        process, so that this one need not import genai-prices); lookups already made win."""
        for key, rates in known.items():
            self._rates.setdefault(key, rates)

    def knows(self, base_url: str, model: str) -> bool:
        """Whether (base_url, model) has been looked up (or seeded), priced or not."""
        return (base_url, model) in self._rates

    def cost(self, base_url: str, model: str | None, usage: Usage) -> float | None:
        rates = self.rates(base_url, model)
        return None if rates is None else rates.cost(usage)

    def rates(self, base_url: str, model: str | None) -> ModelRates | None:
        if not model:
            return None
        key = (base_url, model)
        try:
            found = self._rates[key]
        except KeyError:
            found = self._rates[key] = self._look_up(base_url, model)
        else:
            # (a fixed price's is inf: no clock read on the common path)
            if found is not None and found.good_until != _FOREVER and \
                    found.good_until < self._wall():
                found = self._rates[key] = self._look_up(base_url, model)
        return found

    def _look_up(self, base_url: str, model: str) -> ModelRates | None:
        self.load()
        found = self._find(base_url, model)
        if found is None:
            return None
        provider, info = found
        now = self._wall()
        try:
            bands = _bands(info, now)
        except (ArithmeticError, ValueError, TypeError, LookupError) as exc:
            log.info("prices: %s's price in the table cannot be read (%s): unpriced", model, exc)
            return None
        return ModelRates(str(provider.id), str(info.id), bands, _good_until(info, now))

    def _find(self, base_url: str, model: str) -> tuple[Any, Any] | None:
        snapshot = self._snapshot
        for api_url in (base_url, None):
            if api_url is None and base_url == "":
                continue
            try:
                return snapshot.find_provider_model(model, None, None, api_url or None)  # type: ignore[no-any-return]
            except LookupError:
                continue
        return None


def _good_until(info: Any, now: float) -> float:
    """Until when the price `_bands` read at `now` holds: for ever for one fixed price (its
    `price_variants`, selected by a request context such as batch processing, never apply:
    claudex passes none); for a list of conditional prices the next time one of their
    constraints turns (a start date's UTC midnight, an off-peak interval's start or end);
    else a minute (a constraint of a kind not known here)."""
    from genai_prices.types import ModelPrice, StartDateConstraint, TimeOfDateConstraint

    if isinstance(info.prices, ModelPrice):
        return _FOREVER
    from datetime import UTC, datetime, timedelta

    at = datetime.fromtimestamp(now, tz=UTC)
    turns: list[datetime] = []
    for conditional in info.prices:
        constraint = conditional.constraint
        if constraint is None:
            continue
        if isinstance(constraint, StartDateConstraint):
            start = datetime.combine(constraint.start_date, datetime.min.time(), tzinfo=UTC)
            if start > at:
                turns.append(start)
        elif isinstance(constraint, TimeOfDateConstraint):
            for moment in (constraint.start_time, constraint.end_time):
                utc = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
                turn = datetime.combine(at.date(), utc).astimezone(UTC)
                while turn <= at:
                    turn += timedelta(days=1)
                turns.append(turn)
        else:
            return now + RECHECK_S
    return min(turns).timestamp() if turns else _FOREVER


def _bands(info: Any, now: float) -> tuple[tuple[int, Rates], ...]:
    """The model's rates in each band of the whole input, read from genai-prices' own price of
    a few probe usages (see the module's docstring)."""
    from datetime import UTC, datetime
    from decimal import Decimal

    from genai_prices.types import TieredPrices

    price = info.get_prices(datetime.fromtimestamp(now, tz=UTC))
    starts = sorted({tier.start for value in vars(price).values()
                     if isinstance(value, TieredPrices) for tier in value.tiers})

    def priced(**counts: int) -> Decimal:
        from genai_prices import Usage as PriceUsage

        return Decimal(price.calc_price(PriceUsage(**counts))["total_price"])

    request = priced()
    bands: list[tuple[int, Rates]] = []
    for i, start in enumerate([-1, *starts]):
        # An input inside the band: past its start, not past the next one.
        upper = starts[i] if i < len(starts) else None
        whole = start + 1 if start >= 0 else min(_PROBE_INPUT, upper or _PROBE_INPUT)
        whole = max(whole, 1)
        base = priced(input_tokens=whole)
        rates = Rates(
            input=float((base - request) / whole),
            cache_read=float((priced(input_tokens=whole, cache_read_tokens=whole) - request)
                             / whole),
            cache_write=float((priced(input_tokens=whole, cache_write_tokens=whole) - request)
                              / whole),
            output=float((priced(input_tokens=whole, output_tokens=_PROBE_OUTPUT) - base)
                         / _PROBE_OUTPUT),
            request=float(request))
        bands.append((start, rates))
    return tuple(bands)
