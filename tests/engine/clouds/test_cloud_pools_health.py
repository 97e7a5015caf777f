"""Bedrock regions and accounts as a pool, breakers, and health without a free probe (issue 37)."""

from __future__ import annotations

from typing import Any

from claudex.demo.fake_bedrock import FakeBedrock
from tests.cloud_world import bedrock_toml
from tests.conftest import TEST_ENV, anthropic_body, build_config

POOL = """
[[profiles]]
name = "bedrock"
members = ["bedrock-east", "bedrock-west"]
balance = "round_robin"
"""


async def test_a_pool_of_regions_serves_from_the_other_when_one_is_down(
        proxy_factory: Any) -> None:
    async with FakeBedrock("east", region="us-east-1",
                           api_keys=[TEST_ENV["FAKE_KEY"]]) as east, \
            FakeBedrock("west", region="us-west-2", api_keys=[TEST_ENV["FAKE_KEY"]]) as west:
        config = build_config(POOL + bedrock_toml("bedrock-east", east.base_url)
                              + bedrock_toml("bedrock-west", west.base_url).replace(
                                  'region = "us-east-1"', 'region = "us-west-2"'))
        proxy = await proxy_factory(config)
        served = {(await proxy.messages(profile="bedrock")).headers["x-claudex-provider"]
                  for _ in range(4)}
        assert served == {"bedrock-east", "bedrock-west"}  # round robin over the regions
        east.set_fault("unavailable")
        for _ in range(6):  # east first in every other turn: three failures there
            resp = await proxy.messages(anthropic_body(stream=True), profile="bedrock")
            assert resp.status_code == 200
            assert resp.headers["x-claudex-provider"] == "bedrock-west"
        # Three failures in a row opened east's breaker: it is passed over unsent now.
        assert proxy.engine.runtimes["bedrock-east"].breaker.state.value == "open"
        tried = east.request_count
        await proxy.messages(profile="bedrock")
        await proxy.messages(profile="bedrock")
        assert east.request_count == tried


async def test_bedrock_health_comes_from_traffic_and_the_panel_says_why(
        proxy_factory: Any) -> None:
    async with FakeBedrock(api_keys=[TEST_ENV["FAKE_KEY"]]) as bedrock:
        proxy = await proxy_factory(build_config(bedrock_toml("bedrock", bedrock.base_url)))
        await proxy.engine.check_health_now()
        assert bedrock.request_count == 0  # nothing sent: every Bedrock request costs tokens
        status = proxy.engine.snapshot()["profiles"][0]["health"]
        assert status["probe_unsupported"] is True
        assert status["reason"] == ("ok (probe unsupported: bedrock has no request that costs "
                                    "nothing; health from traffic)")
        bedrock.set_fault("unavailable")
        for _ in range(3):
            await proxy.messages()
        status = proxy.engine.snapshot()["profiles"][0]["health"]
        assert status["color"] == "red" and status["reason"] == "breaker open"
