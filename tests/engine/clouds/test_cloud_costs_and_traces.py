"""What a cloud profile's answers cost and how its spans are named (issue 37): priced with
genai-prices' Bedrock (`aws`) and Vertex (`google`) tables by the cloud's own address, wherever
the profile's base_url points; `gen_ai.provider.name` `aws.bedrock` / `gcp.vertex_ai`."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from claudex.config import parse_config
from claudex.demo.fake_bedrock import FakeBedrock
from claudex.engine.addons.price_sheet import config_pairs
from claudex.engine.addons.prices import PriceTable
from claudex.engine.addons.traces import provider_name
from claudex.engine.core.usage import Usage
from tests.cloud_world import MODEL, VERTEX_MODEL, bedrock_toml, vertex_toml
from tests.conftest import TEST_ENV, anthropic_body, build_config, eventually

USAGE = Usage(input_tokens=1000, output_tokens=200, cache_read_tokens=3000,
              cache_write_tokens=500)


def _genai(model: str, provider: str) -> float:
    from genai_prices import Usage as PriceUsage
    from genai_prices import calc_price

    price = calc_price(PriceUsage(input_tokens=USAGE.all_input, output_tokens=200,
                                  cache_read_tokens=3000, cache_write_tokens=500),
                       model_ref=model, provider_id=provider)
    return float(Decimal(price.total_price))


@pytest.mark.parametrize(("text", "address", "provider", "model"), [
    (bedrock_toml("b", "http://127.0.0.1:9"), "https://bedrock-runtime.us-east-1.amazonaws.com",
     "aws", MODEL),
    (vertex_toml("v", "http://127.0.0.1:9"), "https://us-east5-aiplatform.googleapis.com/v1",
     "google", VERTEX_MODEL),
])
def test_a_cloud_profile_is_priced_by_its_clouds_table(text: str, address: str, provider: str,
                                                       model: str) -> None:
    [profile] = parse_config(text, env={}).profiles
    assert profile.price_url == address
    assert (address, model) in config_pairs(parse_config(text, env={}))
    table = PriceTable()
    rates = table.rates(profile.price_url, model)
    assert rates is not None and rates.provider_id == provider
    cost = table.cost(profile.price_url, model, USAGE)
    assert cost == pytest.approx(_genai(model, provider), rel=1e-9)


def test_spans_name_the_cloud() -> None:
    config = parse_config(bedrock_toml("b", "http://127.0.0.1:9")
                          + vertex_toml("v", "http://127.0.0.1:9")
                          + '[[profiles]]\nname = "m"\nprovider_type = "DirectAnthropic"\n'
                          'base_url = "https://bedrock-mantle.us-east-1.api.aws/anthropic"\n'
                          'auth_type = "aws-sigv4"\n', env={})
    assert [provider_name(p) for p in config.profiles] == [
        "aws.bedrock", "gcp.vertex_ai", "aws.bedrock"]


async def test_a_served_bedrock_answer_carries_its_cost(proxy_factory: Any) -> None:
    async with FakeBedrock(api_keys=[TEST_ENV["FAKE_KEY"]]) as bedrock:
        proxy = await proxy_factory(build_config(bedrock_toml("bedrock", bedrock.base_url)))
        await proxy.engine.start(health=False)
        resp = await proxy.messages(anthropic_body())
        assert resp.status_code == 200
        events = proxy.engine.events
        await eventually(lambda: bool(events.since(0, {"request"})))
        request = events.since(0, {"request"})[-1].data
        assert request["cost_usd"] is not None and request["cost_usd"] > 0
        await proxy.engine.close()
