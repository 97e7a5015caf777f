"""System turns and Claude Code shapes through a real in-process proxy to fake upstreams, and the
WARNING line for a request claudex refuses itself (issue 10)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from tests.conftest import build_config, profile_toml
from tests.providers.test_translate_claude_code import DEVICE_ID, claude_code_request

REPRO = {"model": "claude-sonnet-4-6", "max_tokens": 100,
         "messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": "ctx"}]}


async def mixed(fakes: Any, proxy_factory: Any) -> Any:
    f = await fakes(("claude", "anthropic"), ("grok", "openai"))
    config = build_config(profile_toml("claude", f["claude"], backups=["grok"])
                          + profile_toml("grok", f["grok"]))
    return await proxy_factory(config, fakes=f)


async def test_the_issues_repro_is_served_by_an_openai_profile(fakes: Any,
                                                                proxy_factory: Any) -> None:
    proxy = await mixed(fakes, proxy_factory)
    resp = await proxy.messages(REPRO, profile="grok")
    assert resp.status_code == 200, resp.text
    assert resp.json()["type"] == "message"
    sent = proxy.fakes["grok"].requests[-1].json
    assert sent["messages"] == [{"role": "user", "content": "hi"},
                                {"role": "system", "content": "ctx"}]
    # The same to the Anthropic profile goes through unchanged.
    assert (await proxy.messages(REPRO, profile="claude")).status_code == 200
    assert proxy.fakes["claude"].requests[-1].json["messages"] == REPRO["messages"]


async def test_failover_and_count_tokens_take_system_turns(fakes: Any,
                                                           proxy_factory: Any) -> None:
    proxy = await mixed(fakes, proxy_factory)
    proxy.fakes["claude"].set_fault("529")
    resp = await proxy.messages(REPRO)
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-claudex-attempts"] == "claude:529,grok:200"
    assert proxy.fakes["grok"].requests[-1].json["messages"][-1] == {"role": "system",
                                                                     "content": "ctx"}
    counting = {k: v for k, v in REPRO.items() if k != "max_tokens"}
    plain = await proxy.client.post("/proxy/grok/v1/messages/count_tokens", json=counting)
    longer = {**counting, "messages": [*REPRO["messages"],
                                       {"role": "system", "content": "more context " * 50}]}
    more = await proxy.client.post("/proxy/grok/v1/messages/count_tokens", json=longer)
    assert plain.status_code == 200 and more.status_code == 200, (plain.text, more.text)
    assert more.json()["input_tokens"] >= plain.json()["input_tokens"] + 100


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_claude_code_request_through_an_openai_profile(
    fakes: Any, proxy_factory: Any, stream: bool
) -> None:
    proxy = await mixed(fakes, proxy_factory)
    resp = await proxy.messages(claude_code_request(stream=stream, history=True),
                                profile="grok")
    assert resp.status_code == 200, resp.text
    if stream:
        assert "event: message_stop" in resp.text and "event: error" not in resp.text
    sent = proxy.fakes["grok"].requests[-1].json
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "system", "assistant",
                                                     "tool", "system"]
    for left_out in ("thinking", "context_management", "output_config", "metadata", "user"):
        assert left_out not in sent, left_out
    assert DEVICE_ID not in json.dumps(sent)


async def test_a_request_claudex_refuses_is_logged_at_warning(
    fakes: Any, proxy_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = await mixed(fakes, proxy_factory)
    caplog.set_level(logging.WARNING, logger="claudex")
    secret_text = "do-not-log-this-conversation"
    # Found while translating for the OpenAI profile.
    bad = {"model": "claude-sonnet-4-6", "max_tokens": 10,
           "messages": [{"role": "user", "content": secret_text},
                        {"role": "assistant", "content": [{"type": "tool_use", "name": "x"}]}]}
    resp = await proxy.messages(bad, profile="grok")
    assert resp.status_code == 400
    # Found at the edge, before any provider.
    edge = await proxy.messages({"model": "m", "messages": [{"role": "user",
                                                             "content": secret_text}]})
    assert edge.status_code == 400
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(m.startswith("grok: refused") and "messages.1.content.0.id: Field required" in m
               for m in warnings), warnings
    assert any("default profile" in m and "max_tokens: Field required" in m
               for m in warnings), warnings
    assert not any(secret_text in m for m in warnings)
    assert proxy.fakes["grok"].requests == [] and proxy.fakes["claude"].requests == []
