"""The price sheet (engine/addons/price_sheet.py): the rates a child process reads from
genai-prices for `claudex serve` are exactly the ones the price table reads itself, unknown models
included (unpriced, never $0), and a table seeded with them answers from them."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from claudex.engine.addons.price_sheet import config_pairs, read_sheet
from claudex.engine.addons.prices import PriceTable, _good_until
from claudex.engine.core.usage import Usage
from tests.conftest import build_config

PAIRS = [
    ("https://api.anthropic.com", "claude-sonnet-4-5"),
    ("https://api.anthropic.com", "claude-sonnet-4-5-20250929"),
    ("http://127.0.0.1:9", "claude-opus-4-1"),
    ("https://api.openai.com/v1", "gpt-5"),
    ("https://api.deepseek.com", "deepseek-chat"),  # an off-peak price: a conditional one
    ("http://127.0.0.1:9", "gemini-2.5-pro"),
    ("http://127.0.0.1:9", "fake-model-7"),
]


def test_the_sheet_is_the_tables_own_lookup_exactly() -> None:
    now = time.time()
    sheet = read_sheet(PAIRS, now)
    assert sheet is not None
    table = PriceTable(wall=lambda: now)
    assert sheet == {pair: table.rates(*pair) for pair in PAIRS}
    assert sheet[("http://127.0.0.1:9", "fake-model-7")] is None


def test_a_seeded_table_answers_from_the_sheet() -> None:
    now = time.time()
    sheet = read_sheet(PAIRS[:1], now)
    assert sheet is not None
    table = PriceTable(wall=lambda: now)
    table.seed(sheet)
    assert table.rates(*PAIRS[0]) is sheet[PAIRS[0]]
    usage = Usage(120, 900, 30_000, 2_000)
    assert table.cost(*PAIRS[0], usage) == PriceTable(wall=lambda: now).cost(*PAIRS[0], usage)


def test_the_configs_models_are_on_the_sheet() -> None:
    config = build_config('''
[model_aliases]
fast = "claude-haiku-4-5"

[[profiles]]
name = "a"
provider_type = "DirectAnthropic"
base_url = "https://api.anthropic.com"
api_key = "sk-test"
default_model = "claude-sonnet-4-5"
models = { opus = "claude-opus-4-1" }
''')
    assert set(config_pairs(config)) == {
        ("https://api.anthropic.com", m)
        for m in ("claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5")}


def test_a_conditional_price_holds_until_its_next_turn() -> None:
    from genai_prices import data_snapshot

    _, info = data_snapshot.get_snapshot().find_provider_model(
        "deepseek-chat", None, None, "https://api.deepseek.com")
    now = 1_796_000_000.0
    until = _good_until(info, now)
    assert now < until < now + 86_400  # an off-peak interval turns within a day

    def price(at: float) -> object:
        return info.get_prices(datetime.fromtimestamp(at, tz=UTC))

    assert price(until - 1) == price(now)


PROFILE = '''
[[profiles]]
name = "{name}"
provider_type = "DirectAnthropic"
base_url = "https://api.anthropic.com"
api_key = "sk-test"
default_model = "{model}"
'''


async def test_an_engine_apart_prices_its_models_at_start_and_after_a_reload() -> None:
    import asyncio

    from claudex.engine.engine import Engine

    first = build_config(PROFILE.format(name="a", model="claude-sonnet-4-5"))
    engine = Engine(first, env={}, prices_apart=True)
    await engine.start(health=False)
    try:
        assert engine.prices.knows("https://api.anthropic.com", "claude-sonnet-4-5")
        engine.apply_config(build_config(
            PROFILE.format(name="a", model="claude-sonnet-4-5")
            + PROFILE.format(name="b", model="claude-haiku-4-5")))
        await asyncio.gather(*engine._price_reads)
        assert engine.prices.knows("https://api.anthropic.com", "claude-haiku-4-5")
        rates = engine.prices.rates("https://api.anthropic.com", "claude-haiku-4-5")
        assert rates == PriceTable().rates("https://api.anthropic.com", "claude-haiku-4-5")
    finally:
        await engine.close()
