"""Thinking blocks stay portable between Claude on Bedrock and Claude on Vertex (issue 37): both
sign as Anthropic does ("Signature values are compatible across platforms": Anthropic's
extended-thinking docs), so a conversation failed over from one to the other keeps its thinking
blocks. The fakes keep Anthropic's thinking rules, sharing one signing key as the real services
share Claude's; a provider outside that family still gets them dropped."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from claudex.demo.fake_bedrock import FakeBedrock
from claudex.demo.fake_google_token import FakeGoogleTokenServer
from claudex.demo.fake_vertex import FakeVertex
from tests.cloud_world import (
    bedrock_toml,
    isolate_cloud_env,
    service_account,
    vertex_toml,
)
from tests.conftest import TEST_ENV, Proxy, build_config, eventually
from tests.engine.addons.test_portable_conversations import content_of

TOOLS = [{"name": "Bash", "description": "Run a command",
          "input_schema": {"type": "object", "properties": {"command": {"type": "string"}},
                           "required": ["command"]}}]


@pytest.fixture
async def clouds(proxy_factory: Any, monkeypatch: pytest.MonkeyPatch,
                 tmp_path: Path) -> AsyncIterator[tuple[Proxy, FakeBedrock, FakeVertex]]:
    isolate_cloud_env(monkeypatch, tmp_path)
    async with FakeBedrock(api_keys=[TEST_ENV["FAKE_KEY"]]) as bedrock, \
            FakeGoogleTokenServer() as tokens, FakeVertex(tokens=tokens) as vertex:
        vertex.signing_key = bedrock.signing_key  # one Claude behind both
        account = service_account(tmp_path, tokens.token_url)
        tokens.add_service_account(account.email, account.key.public_key())
        config = build_config(
            bedrock_toml("bedrock", bedrock.base_url, backups=("vertex",))
            + vertex_toml("vertex", vertex.base_url, auth=f'credentials_file = "{account.path}"',
                          backups=("bedrock",)))
        yield await proxy_factory(config), bedrock, vertex


async def _turn(client: httpx.AsyncClient, messages: list[dict[str, Any]], *,
                stream: bool) -> tuple[str, list[dict[str, Any]]]:
    body = {"model": "claude-sonnet-4-5-20250929", "max_tokens": 4096, "stream": stream,
            "thinking": {"type": "enabled", "budget_tokens": 1024}, "tools": TOOLS,
            "messages": messages}
    resp = await client.post("/proxy/bedrock/v1/messages", json=body)
    assert resp.status_code == 200, resp.text
    content = content_of(resp, stream)
    call = next(b for b in content if b["type"] == "tool_use")
    messages += [{"role": "assistant", "content": content},
                 {"role": "user", "content": [
                     {"type": "tool_result", "tool_use_id": call["id"], "content": "a.txt"},
                     {"type": "text", "text": "And now? use tool Bash"}]}]
    return resp.headers["x-claudex-provider"], content


@pytest.mark.parametrize("stream", [False, True])
async def test_a_conversation_moves_between_bedrock_and_vertex_with_its_thinking(
        clouds: tuple[Proxy, FakeBedrock, FakeVertex], stream: bool) -> None:
    proxy, bedrock, vertex = clouds
    messages: list[dict[str, Any]] = [{"role": "user", "content": "List the files. use tool Bash"}]
    provider, content = await _turn(proxy.client, messages, stream=stream)
    assert provider == "bedrock" and content[0]["type"] == "thinking"
    bedrock.set_fault("unavailable")
    provider, content = await _turn(proxy.client, messages, stream=stream)
    assert provider == "vertex" and content[0]["type"] == "thinking"
    # Vertex got Bedrock's thinking block as it was, and took it.
    sent = vertex.requests[-1].json["messages"][1]["content"]
    assert sent[0]["type"] == "thinking" and sent[0]["signature"]
    events = proxy.engine.events
    await eventually(lambda: len(events.since(0, {"request"})) == 2)
    assert "dropped: thinking" not in json.dumps(events.since(0, {"request"})[-1].data)
    bedrock.set_fault("ok")  # and back: Bedrock takes Vertex's
    proxy.engine.reset_provider("bedrock")
    provider, _ = await _turn(proxy.client, messages, stream=stream)
    assert provider == "bedrock"
    assert bedrock.requests[-1].json["messages"][3]["content"][0]["type"] == "thinking"
