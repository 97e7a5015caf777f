"""What reaches the upstream: the client's headers and query string on the same-protocol path,
only the target protocol's own headers on a translated one, the profile's `query_params`, and
the model each chain member is sent (DESIGN.md "Headers and query", "Models")."""

from __future__ import annotations

from typing import Any

import pytest

from claudex.config.model import Profile
from claudex.engine.core.addressing import USER_AGENT, map_model
from tests.conftest import anthropic_body, build_config, profile_toml

# Headers like Claude Code's own (values invented here).
CLAUDE_CODE_HEADERS = {
    "user-agent": "claude-cli/9.9.9 (external, sdk-cli)",
    "x-app": "cli",
    "x-claude-code-session-id": "6b1b2a9e-0000-4000-8000-000000000001",
    "x-stainless-lang": "js",
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
    "anthropic-dangerous-direct-browser-access": "true",
    "x-api-key": "sk-ant-client-own-key-0000",
    "x-claudex-failover": "on",
    "accept-encoding": "gzip, deflate, br, zstd",
}


async def test_same_protocol_upstream_gets_the_clients_headers_and_query(fakes, proxy_factory):
    f = await fakes(("anth", "anthropic"))
    proxy = await proxy_factory(build_config(profile_toml("anth", f["anth"])), fakes=f)
    resp = await proxy.client.post("/proxy/anth/v1/messages?beta=true", json=anthropic_body(),
                                   headers=CLAUDE_CODE_HEADERS)
    assert resp.status_code == 200, resp.text
    got = f["anth"].requests[-1]
    assert got.query == "beta=true"
    for name in ("user-agent", "x-app", "x-claude-code-session-id", "x-stainless-lang",
                 "anthropic-beta", "anthropic-dangerous-direct-browser-access"):
        assert got.headers[name] == CLAUDE_CODE_HEADERS[name], name
    # The profile's key, never the client's; nothing of claudex's own; the proxy's encoding.
    assert got.headers["x-api-key"] == "sk-test-key-0123456789"
    assert not any(k.startswith("x-claudex-") for k in got.headers)
    assert got.headers.get("accept-encoding") != CLAUDE_CODE_HEADERS["accept-encoding"]
    assert got.headers["host"] == f"127.0.0.1:{f['anth'].port}"


async def test_passthrough_profile_forwards_the_clients_key(fakes, proxy_factory):
    f = await fakes(("anth", "anthropic"))
    text = profile_toml("anth", f["anth"]).replace('api_key_env = "FAKE_KEY"',
                                                   'auth_type = "passthrough"')
    proxy = await proxy_factory(build_config(text), fakes=f)
    resp = await proxy.client.post("/proxy/anth/v1/messages", json=anthropic_body(),
                                   headers=CLAUDE_CODE_HEADERS)
    assert resp.status_code == 200, resp.text
    assert f["anth"].requests[-1].headers["x-api-key"] == CLAUDE_CODE_HEADERS["x-api-key"]


async def test_translated_upstream_gets_only_its_own_protocols_headers(fakes, proxy_factory):
    f = await fakes(("oai", "openai"))
    proxy = await proxy_factory(build_config(profile_toml("oai", f["oai"])), fakes=f)
    resp = await proxy.client.post("/proxy/oai/v1/messages?beta=true", json=anthropic_body(),
                                   headers=CLAUDE_CODE_HEADERS)
    assert resp.status_code == 200, resp.text
    got = f["oai"].requests[-1]
    assert got.query == ""
    assert got.headers["user-agent"] == USER_AGENT
    assert got.headers["authorization"] == "Bearer sk-test-key-0123456789"
    for name in ("x-app", "x-claude-code-session-id", "anthropic-beta", "anthropic-version",
                 "x-api-key", "x-stainless-lang"):
        assert name not in got.headers, name


async def test_query_params_ride_on_every_upstream_url(fakes, proxy_factory):
    f = await fakes(("anth", "anthropic"), ("oai", "openai"))
    extra = 'query_params = { "api-version" = "2024-12-01-preview" }'
    text = (profile_toml("anth", f["anth"], extra=extra)
            + profile_toml("oai", f["oai"], extra=extra))
    proxy = await proxy_factory(build_config(text), fakes=f)
    resp = await proxy.client.post("/proxy/anth/v1/messages?beta=true", json=anthropic_body())
    assert resp.status_code == 200, resp.text
    assert f["anth"].requests[-1].query == "beta=true&api-version=2024-12-01-preview"
    resp = await proxy.messages(profile="oai")
    assert resp.status_code == 200, resp.text
    assert f["oai"].requests[-1].query == "api-version=2024-12-01-preview"


# -- models ------------------------------------------------------------------------------------

def _profile(provider_type: str, **kw: Any) -> Profile:
    return Profile(name="p", provider_type=provider_type, base_url="http://127.0.0.1:1",  # type: ignore[arg-type]
                   **kw)


OPENAI = "OpenAICompatible"
ANTHROPIC = "DirectAnthropic"


@pytest.mark.parametrize(("provider_type", "kw", "requested", "addressed", "aliases", "sent"), [
    # An OpenAI client's own model at the OpenAI profile it addressed is kept; at an Anthropic
    # one (translated) the profile's default is sent.
    (OPENAI, {"default_model": "grok-3"}, "grok-3-mini", True, {"client": "openai"}, "grok-3-mini"),
    (ANTHROPIC, {"default_model": "claude-x"}, "gpt-4o", True, {"client": "openai"}, "claude-x"),
    (OPENAI, {"default_model": "grok-3"}, "claude-sonnet-4-6", True, {"client": "openai"},
     "grok-3"),
    # An addressed profile of the client's protocol keeps the model...
    (ANTHROPIC, {"default_model": "claude-x"}, "claude-sonnet-4-6", True, {}, "claude-sonnet-4-6"),
    # ...but a Claude model name never reaches a provider that does not speak Anthropic.
    (OPENAI, {"default_model": "grok-3"}, "claude-sonnet-4-6", True, {}, "grok-3"),
    (OPENAI, {"default_model": "grok-3"}, "Claude-Opus-5-5", True, {}, "grok-3"),
    # Through translation the addressed profile's default is sent (an exact `models` key keeps
    # a name the client may choose).
    (OPENAI, {"default_model": "grok-3"}, "grok-3-mini", True, {}, "grok-3"),
    (OPENAI, {"default_model": "grok-3", "models": {"grok-3-mini": "grok-3-mini"}},
     "grok-3-mini", True, {}, "grok-3-mini"),
    # The family mapping wins over everything but an exact key.
    (OPENAI, {"default_model": "d", "models": {"sonnet": "s", "opus": "o"}},
     "claude-opus-5-5", True, {}, "o"),
    (OPENAI, {"models": {"claude-haiku-4-5": "exact", "haiku": "family"}},
     "claude-haiku-4-5", False, {}, "exact"),
    # At a backup: default_model, else the requested model.
    (ANTHROPIC, {"default_model": "claude-backup"}, "claude-sonnet-4-6", False, {},
     "claude-backup"),
    (ANTHROPIC, {}, "claude-sonnet-4-6", False, {}, "claude-sonnet-4-6"),
    # model_aliases apply first, then the rules above.
    (OPENAI, {"default_model": "d"}, "ds3", True, {"ds3": "deepseek-chat"}, "deepseek-chat"),
    (OPENAI, {"default_model": "d", "models": {"sonnet": "s"}}, "claude", True,
     {"claude": "claude-sonnet-4-20250514"}, "s"),
    # No default and a Claude name at an OpenAI provider: nothing better to send
    # (`claudex check` warns about such a chain member).
    (OPENAI, {}, "claude-sonnet-4-6", True, {}, "claude-sonnet-4-6"),
])
def test_model_rules(provider_type: str, kw: dict[str, Any], requested: str, addressed: bool,
                     aliases: dict[str, str], sent: str) -> None:
    client = aliases.pop("client", "anthropic")
    assert map_model(_profile(provider_type, **kw), requested, addressed, aliases,
                     client=client) == sent  # type: ignore[arg-type]


async def test_claude_model_addressed_to_an_openai_profile_gets_its_default(fakes,
                                                                             proxy_factory):
    f = await fakes(("grok", "openai"))
    proxy = await proxy_factory(build_config(profile_toml("grok", f["grok"])), fakes=f)
    resp = await proxy.messages(anthropic_body(model="claude-sonnet-4-6"), profile="grok")
    assert resp.status_code == 200, resp.text
    assert f["grok"].requests[-1].json["model"] == "grok-model"
    assert resp.json()["model"] == "grok-model"  # the answer names the model that served it


async def test_model_aliases_reach_the_upstream(fakes, proxy_factory):
    f = await fakes(("anth", "anthropic"))
    text = '[model_aliases]\nsonnet = "claude-sonnet-4-5"\n' + profile_toml("anth", f["anth"])
    proxy = await proxy_factory(build_config(text), fakes=f)
    resp = await proxy.messages(anthropic_body(model="sonnet"), profile="anth")
    assert resp.status_code == 200, resp.text
    assert f["anth"].requests[-1].json["model"] == "claude-sonnet-4-5"


async def test_strip_params_are_removed_on_both_paths(fakes, proxy_factory):
    f = await fakes(("anth", "anthropic"), ("oai", "openai"))
    extra = 'strip_params = ["temperature", "top_p"]'
    text = (profile_toml("anth", f["anth"], extra=extra)
            + profile_toml("oai", f["oai"], extra=extra))
    proxy = await proxy_factory(build_config(text), fakes=f)
    body = {**anthropic_body(), "temperature": 0.5, "top_p": 0.9}
    for name in ("anth", "oai"):
        resp = await proxy.messages(body, profile=name)
        assert resp.status_code == 200, resp.text
        sent = f[name].requests[-1].json
        assert "temperature" not in sent and "top_p" not in sent, sent
    assert f["anth"].requests[-1].json["max_tokens"] == 64  # the rest as the client sent it
