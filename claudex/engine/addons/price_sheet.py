"""The rates `claudex serve` needs, read from genai-prices in a child process, so that the serving
process never imports it.

genai-prices is claudex's one source of prices (prices.py), but importing it brings pydantic and
its table of ~2,300 models: ~13 MB resident for the life of the process, a fifth of a lone
proxy's memory, to price the handful of models a config serves. So at start (`Engine.start`
when `prices_apart`) a child `python -m claudex.engine.addons.price_sheet` does the lookups
prices.py would do, for every (provider address, model) the config names, and prints each
model's rates (`ModelRates`, floats as JSON keeps them: exactly); the parent's `PriceTable` is
seeded with them. A model not named there (a client's own model kept at the profile it
addressed, a config reloaded with new ones) is looked up in the process as before, at the
first answer that needs it, so every price is the same as without the sheet; only memory and
when the package is imported differ. If the child fails, the table loads the package at start
as before.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterable
from typing import Any, Final

from claudex.config.model import Config
from claudex.engine.addons.prices import ModelRates, PriceTable, Rates

log = logging.getLogger("claudex.engine")

Pair = tuple[str, str]  # (base_url, model)
TIMEOUT_S: Final = 60.0


def config_pairs(config: Config) -> list[Pair]:
    """Every (base_url, model) a profile of `config` may be sent: its default model, its model
    mapping's targets, the aliases' targets and `[router]`'s model (a request's model, kept at
    the profile it addressed, may be any other: prices.py looks that one up when it comes)."""
    aliases = {*config.model_aliases.values(), config.router.model}
    pairs: dict[Pair, None] = {}
    for profile in config.profiles:
        if not profile.base_url:
            continue  # a pool: its members serve
        models = {profile.default_model, *profile.models.values(), *aliases}
        for model in sorted(m for m in models if m):
            pairs[(profile.price_url, model)] = None
    return list(pairs)


def _rates_json(rates: ModelRates | None) -> dict[str, Any] | None:
    if rates is None:
        return None
    return {"provider_id": rates.provider_id, "model_id": rates.model_id,
            "good_until": rates.good_until,
            "bands": [[start, [band.input, band.cache_read, band.cache_write, band.output,
                               band.request]] for start, band in rates.bands]}


def _rates_of(data: dict[str, Any] | None) -> ModelRates | None:
    if data is None:
        return None
    bands = tuple((int(start), Rates(*(float(v) for v in values)))
                  for start, values in data["bands"])
    return ModelRates(str(data["provider_id"]), str(data["model_id"]), bands,
                      float(data["good_until"]))


def compute(pairs: Iterable[Pair], now: float) -> list[list[Any]]:
    """In the child: prices.py's own lookup of each pair, at the parent's time."""
    table = PriceTable(wall=lambda: now)
    return [[base_url, model, _rates_json(table.rates(base_url, model))]
            for base_url, model in pairs]


def read_sheet(pairs: list[Pair], now: float,
               timeout: float = TIMEOUT_S) -> dict[Pair, ModelRates | None] | None:
    """The rates of `pairs` from a child process, or None (said in the log) if it failed."""
    if not pairs:
        return {}
    request = json.dumps({"now": now, "pairs": pairs})
    try:
        done = subprocess.run([sys.executable, "-m", __name__], input=request,
                              capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError((done.stderr.strip().splitlines() or ["no output"])[-1])
        rows = json.loads(done.stdout)
        return {(str(base_url), str(model)): _rates_of(data) for base_url, model, data in rows}
    except (OSError, subprocess.SubprocessError, RuntimeError, ValueError, TypeError,
            KeyError) as exc:
        log.info("prices: the child process reading them failed (%s): read in this process",
                 exc)
        return None


def main() -> None:
    request = json.loads(sys.stdin.read())
    pairs = [(str(base_url), str(model)) for base_url, model in request["pairs"]]
    sys.stdout.write(json.dumps(compute(pairs, float(request["now"]))))


if __name__ == "__main__":
    main()
