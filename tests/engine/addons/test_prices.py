"""The price table (engine/addons/prices.py): every cost equals genai-prices' own figure for the
same usage (its convention: `input_tokens` is the whole input, cached parts included), tiered
prices included; a model it does not know is unpriced; it never touches the network; and the
cost words say "API-equivalent" and "unpriced", never $0."""

from __future__ import annotations

import socket
from decimal import Decimal
from typing import Any

import pytest

from claudex.engine.addons.prices import PriceTable
from claudex.engine.core.usage import Usage
from claudex.text.cost import cost_cell, cost_words, usd_text

ANTHROPIC = "https://api.anthropic.com"
LOCAL = "http://127.0.0.1:9"  # a fake provider: no API address to go by, the model decides

# (base_url, model, usage in claudex's convention, genai-prices' provider id)
KNOWN = [
    # genai-prices' own README example: 4,740 input tokens of which 4,735 written to the cache.
    (ANTHROPIC, "claude-sonnet-4-20250514", Usage(5, 255, 0, 4735), "anthropic"),
    (ANTHROPIC, "claude-sonnet-4-5", Usage(120, 900, 30_000, 2_000), "anthropic"),
    # Above 200k tokens of whole input Sonnet 4.5's every rate changes (a tier).
    (ANTHROPIC, "claude-sonnet-4-5", Usage(150_000, 900, 60_000, 2_000), "anthropic"),
    (ANTHROPIC, "claude-haiku-4-5", Usage(10, 20), "anthropic"),
    (LOCAL, "claude-opus-4-1", Usage(1_000, 500, 8_000, 100), "anthropic"),
    ("https://api.openai.com/v1", "gpt-4o", Usage(700, 100, 300), "openai"),
    ("https://api.openai.com/v1", "gpt-5", Usage(7_000, 1_000, 30_000), "openai"),
    ("https://api.deepseek.com", "deepseek-chat", Usage(1_000, 100, 500), "deepseek"),
    (LOCAL, "gemini-2.5-pro", Usage(250_000, 100, 500), "google"),
]


def genai_price(usage: Usage, model: str, provider_id: str) -> Decimal:
    from genai_prices import Usage as PriceUsage
    from genai_prices import calc_price

    return calc_price(PriceUsage(input_tokens=usage.all_input, output_tokens=usage.output_tokens,
                                 cache_read_tokens=usage.cache_read_tokens,
                                 cache_write_tokens=usage.cache_write_tokens),
                      model_ref=model, provider_id=provider_id).total_price


@pytest.mark.parametrize(("base_url", "model", "usage", "provider_id"), KNOWN)
def test_the_cost_is_genai_prices_own_figure(base_url: str, model: str, usage: Usage,
                                             provider_id: str) -> None:
    table = PriceTable()
    rates = table.rates(base_url, model)
    assert rates is not None and rates.provider_id == provider_id
    cost = table.cost(base_url, model, usage)
    expected = genai_price(usage, model, provider_id)
    assert expected > 0
    assert cost == pytest.approx(float(expected), rel=1e-12, abs=1e-15)


def test_cache_tokens_are_priced_at_their_own_rates() -> None:
    """Anthropic bills a cache write at 1.25 x input and a read at 0.1 x: the four counts are
    not interchangeable (an under-count of cache writes is an under-count of cost)."""
    table = PriceTable()
    million = 1_000_000
    plain = table.cost(ANTHROPIC, "claude-sonnet-4-5", Usage(input_tokens=million))
    written = table.cost(ANTHROPIC, "claude-sonnet-4-5", Usage(cache_write_tokens=million))
    read = table.cost(ANTHROPIC, "claude-sonnet-4-5", Usage(cache_read_tokens=million))
    assert plain is not None and written is not None and read is not None
    assert written == pytest.approx(1.25 * plain) and read == pytest.approx(0.1 * plain)


def test_a_model_the_table_does_not_know_is_unpriced_not_free() -> None:
    table = PriceTable()
    assert table.cost(LOCAL, "fake-model-7", Usage(100, 100)) is None
    assert table.cost(ANTHROPIC, None, Usage(100, 100)) is None
    assert table.rates(LOCAL, "fake-model-7") is None  # and remembered as such


def test_lookups_are_cached_per_address_and_model() -> None:
    table = PriceTable()
    first = table.rates(ANTHROPIC, "claude-sonnet-4-5")
    assert table.rates(ANTHROPIC, "claude-sonnet-4-5") is first


def test_a_time_dependent_price_is_looked_up_again(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1_700_000_000.0]
    table = PriceTable(wall=lambda: now[0])
    rates = table.rates(ANTHROPIC, "claude-sonnet-4-5")
    assert rates is not None
    if rates.good_until == float("inf"):  # a fixed price: kept
        now[0] += 10 * 86400
        assert table.rates(ANTHROPIC, "claude-sonnet-4-5") is rates
    else:
        now[0] = rates.good_until + 1
        assert table.rates(ANTHROPIC, "claude-sonnet-4-5") is not rates


def test_it_never_touches_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundled table only: no connection is opened, whatever is looked up (genai-prices
    fetches newer prices only from its UpdatePrices, which claudex never starts)."""
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the price table opened a connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    table = PriceTable()
    table.load()
    for base_url, model, usage, _ in KNOWN:
        assert table.cost(base_url, model, usage) is not None
    assert table.cost(LOCAL, "no-such-model", Usage(1, 1)) is None
    from genai_prices import data_snapshot

    assert not data_snapshot.get_snapshot().from_auto_update


def test_cost_words() -> None:
    assert usd_text(0.0123456) == "$0.0123"
    assert usd_text(12.345) == "$12.35"
    assert usd_text(1234.5) == "$1,234"
    assert usd_text(0.00001) == "$0.000010"
    api = {"cost_usd": 1.5, "cost": {"priced": 3, "unpriced": 0, "basis": "api"}}
    plan = {"cost_usd": 1.5, "cost": {"priced": 3, "unpriced": 2, "basis": "api_equivalent"}}
    unpriced = {"cost_usd": None, "cost": {"priced": 0, "unpriced": 2, "basis": "api"}}
    nothing = {"cost_usd": None, "cost": {"priced": 0, "unpriced": 0, "basis": "api"}}
    assert [cost_cell(p) for p in (api, plan, unpriced, nothing, {})] == \
        ["$1.50", "≈$1.50+", "unpriced", "—", "—"]
    assert cost_words(api) == " · $1.50"
    assert cost_words(plan) == " · $1.50 API-equivalent (+2 unpriced)"
    assert cost_words(unpriced) == " · unpriced"
    assert cost_words(nothing) == ""


def test_claudex_status_shows_the_cost_and_says_what_it_is() -> None:
    from rich.console import Console

    from claudex.text.status import render_status

    def profile(name: str, usd: float | None, unpriced: int, basis: str) -> dict[str, Any]:
        return {"name": name, "provider_type": "DirectAnthropic", "health": {"color": "green"},
                "breaker": {"state": "closed"}, "stats": {"requests": 3, "failures": 0},
                "cost_usd": usd, "cost": {"priced": 3, "unpriced": unpriced, "basis": basis}}

    out = Console(record=True, width=200)
    render_status({"profiles": [profile("max", 12.5, 0, "api_equivalent"),
                                profile("key", 0.5, 2, "api"),
                                profile("local", None, 4, "api")]}, out)
    text = out.export_text()
    assert "$ today" in text and "≈$12.50" in text and "$0.5000+" in text
    assert "unpriced" in text
    assert "≈ API-equivalent: a subscription login" in text


def test_a_subscription_login_is_priced_as_api_equivalent(tmp_path: Any) -> None:
    from claudex.engine.addons.cost import cost_basis
    from claudex.engine.engine import Engine
    from tests.conftest import build_config

    config = build_config(f'''
[[profiles]]
name = "max"
provider_type = "DirectAnthropic"
base_url = "https://api.anthropic.com"
auth_type = "oauth"
oauth_provider = "claude"
credentials_file = "{tmp_path / 'missing.json'}"

[[profiles]]
name = "key"
provider_type = "DirectAnthropic"
base_url = "https://api.anthropic.com"
api_key = "sk-test"
''')
    assert [cost_basis(p) for p in config.profiles] == ["api_equivalent", "api"]
    status = Engine(config, env={}).snapshot()
    assert [(p["name"], p["cost_usd"], p["cost"]["basis"]) for p in status["profiles"]] == \
        [("max", None, "api_equivalent"), ("key", None, "api")]
