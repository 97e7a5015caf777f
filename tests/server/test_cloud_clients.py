"""Clients in Bedrock or Vertex mode served by claudex (issue 37): boto3's bedrock-runtime,
AnthropicBedrock and AnthropicVertex pointed at claudex get claudex's failover in their own wire —
Bedrock's eventstream frames and AWS errors, Vertex's rawPredict routes — whatever serves
behind it (the Anthropic API, or Bedrock itself)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from claudex.demo.fake_bedrock import FakeBedrock
from claudex.demo.fake_provider import FakeProvider
from tests.cloud_world import MESSAGE, MODEL, PROJECT, VERTEX_MODEL, bedrock_toml, isolate_cloud_env
from tests.conftest import TEST_ENV, Proxy, build_config, profile_toml, served_models

BODY = {"anthropic_version": "bedrock-2023-05-31", **MESSAGE}


@pytest.fixture
async def served(proxy_factory: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
                 ) -> AsyncIterator[tuple[Proxy, FakeProvider, FakeProvider, FakeBedrock]]:
    """claudex: `primary` (an Anthropic fake) by default, `backup` behind it; `bedrock` (the
    Bedrock fake, by its API key) at /proxy/bedrock."""
    isolate_cloud_env(monkeypatch, tmp_path)
    async with FakeProvider("primary", "anthropic",
                            models=served_models("primary", "anthropic")) as primary, \
            FakeProvider("backup", "anthropic",
                         models=served_models("backup", "anthropic")) as backup, \
            FakeBedrock(api_keys=[TEST_ENV["FAKE_KEY"]]) as bedrock:
        config = build_config(profile_toml("primary", primary, backups=["backup"])
                              + profile_toml("backup", backup)
                              + bedrock_toml("bedrock", bedrock.base_url))
        proxy = await proxy_factory(config, fakes={"primary": primary, "backup": backup})
        yield proxy, primary, backup, bedrock


def _boto(url: str) -> Any:
    once = Config(retries={"total_max_attempts": 1, "mode": "standard"})
    return boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=url,
                        config=once, aws_access_key_id="AKIDNOTCHECKED0000000",
                        aws_secret_access_key="not-checked-by-claudex")


def _bedrock_sdk(url: str) -> anthropic.AnthropicBedrock:
    return anthropic.AnthropicBedrock(aws_region="us-east-1", base_url=url, max_retries=0,
                                      aws_access_key="AKIDNOTCHECKED0000000",
                                      aws_secret_key="not-checked-by-claudex")


async def test_boto3_invokes_through_claudex_whole_and_streamed(served: Any) -> None:
    proxy, primary, _, _ = served
    client = _boto(proxy.url)
    whole = await asyncio.to_thread(client.invoke_model, modelId=MODEL, body=json.dumps(BODY))
    answer = json.loads(whole["body"].read())
    assert answer["type"] == "message" and answer["content"][0]["text"].startswith(
        "Hello from primary")
    # The Anthropic API got the Anthropic name of the model the client named.
    assert primary.requests[-1].json["model"] == "claude-sonnet-4-5-20250929"

    def streamed() -> list[str]:
        out = client.invoke_model_with_response_stream(modelId=MODEL, body=json.dumps(BODY))
        return [json.loads(e["chunk"]["bytes"])["type"] for e in out["body"]]

    types = await asyncio.to_thread(streamed)
    assert types[0] == "message_start" and types[-1] == "message_stop"
    assert "content_block_delta" in types


async def test_anthropic_bedrock_fails_over_in_its_own_wire(served: Any) -> None:
    proxy, primary, backup, _ = served
    primary.faults.mode = "529"
    client = _bedrock_sdk(proxy.url)
    message = await asyncio.to_thread(client.messages.create, model=MODEL, **MESSAGE)
    assert message.content[0].text.startswith("Hello from backup")

    def streamed() -> str:
        with client.messages.stream(model=MODEL, **MESSAGE) as stream:  # type: ignore[arg-type]
            return stream.get_final_text()

    assert (await asyncio.to_thread(streamed)).startswith("Hello from backup")
    # Everything down: the client hears it as Bedrock would say it.
    backup.faults.mode = "529"
    with pytest.raises(anthropic.APIStatusError) as caught:
        await asyncio.to_thread(client.messages.create, model=MODEL, **MESSAGE)
    assert caught.value.status_code == 503
    with pytest.raises(ClientError) as refused:
        await asyncio.to_thread(_boto(proxy.url).invoke_model, modelId=MODEL,
                                body=json.dumps(BODY))
    assert refused.value.response["Error"]["Code"] == "ServiceUnavailableException"


async def test_a_rate_limit_reaches_boto3_as_throttling(served: Any) -> None:
    proxy, primary, backup, _ = served
    primary.faults.mode = backup.faults.mode = "429"
    with pytest.raises(ClientError) as refused:
        await asyncio.to_thread(_boto(proxy.url).invoke_model, modelId=MODEL,
                                body=json.dumps(BODY))
    assert refused.value.response["Error"]["Code"] == "ThrottlingException"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 429


async def test_a_bedrock_profile_behind_a_proxy_prefix(served: Any) -> None:
    proxy, primary, _, bedrock = served
    client = _bedrock_sdk(f"{proxy.url}/proxy/bedrock")
    message = await asyncio.to_thread(client.messages.create, model=MODEL, **MESSAGE)
    assert message.content[0].text.startswith("Hello from bedrock")
    assert bedrock.requests[-1].path == f"/model/{MODEL}/invoke"
    assert primary.request_count == 0


async def test_anthropic_vertex_through_claudex(served: Any) -> None:
    proxy, primary, _, _ = served
    client = anthropic.AnthropicVertex(region="us-east5", project_id=PROJECT,
                                       base_url=f"{proxy.url}/v1", access_token="unused",
                                       max_retries=0)
    message = await asyncio.to_thread(client.messages.create, model=VERTEX_MODEL, **MESSAGE)
    assert message.content[0].text.startswith("Hello from primary")
    assert primary.requests[-1].json["model"] == "claude-sonnet-4-5-20250929"

    def streamed() -> str:
        with client.messages.stream(model=VERTEX_MODEL, **MESSAGE) as stream:  # type: ignore[arg-type]
            return stream.get_final_text()

    assert (await asyncio.to_thread(streamed)).startswith("Hello from primary")
    counted = await asyncio.to_thread(client.messages.count_tokens, model=VERTEX_MODEL,
                                      messages=MESSAGE["messages"])  # type: ignore[arg-type]
    assert counted.input_tokens > 0
    assert primary.requests[-1].path == "/v1/messages/count_tokens"
