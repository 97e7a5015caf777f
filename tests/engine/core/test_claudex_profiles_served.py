"""Claudex profiles through the running proxy: what claudex cannot serve (an OAuth login it
lacks) is skipped as misconfigured (never sent anything), and `api_key = ""` reaches a local
server with no key."""

from __future__ import annotations

from typing import Any

from tests.conftest import build_config, profile_toml


async def test_unserved_profiles_in_a_chain_are_skipped_and_the_rest_serves(
    fakes: Any, proxy_factory: Any
) -> None:
    f = await fakes(("codex", "openai"), ("google", "openai"), ("backup", "anthropic"))
    # A Codex login whose auth.json is missing, and a login claudex does not have.
    config = build_config(
        profile_toml("codex", f["codex"], backups=["google", "backup"],
                     extra='auth_type = "oauth"\noauth_provider = "codex"\n'
                     'credentials_file = "/nonexistent/auth.json"').replace(
            'api_key_env = "FAKE_KEY"\n', "")
        + profile_toml("google", f["google"], extra='auth_type = "oauth"\n'
                       'oauth_provider = "google"').replace('api_key_env = "FAKE_KEY"\n', "")
        + profile_toml("backup", f["backup"])
    )
    assert [p.usable for p in config.profiles] == [False, False, True]
    proxy = await proxy_factory(config, fakes=f)
    for path in ("/proxy/codex/v1/messages", "/proxy/codex/v1/chat/completions"):
        body = ({"model": "claude-sonnet-4-5", "max_tokens": 64,
                 "messages": [{"role": "user", "content": "hi"}]})
        resp = await proxy.client.post(path, json=body)
        assert resp.status_code == 200, resp.text
        assert resp.headers["x-claudex-provider"] == "backup"
        assert resp.headers["x-claudex-attempts"] == (
            "codex:misconfigured,google:misconfigured,backup:200")
    assert f["codex"].requests == [] and f["google"].requests == []


async def test_an_empty_api_key_sends_no_credential_to_a_local_server(
    fakes: Any, proxy_factory: Any
) -> None:
    f = await fakes(("ollama", "openai"), ("lmstudio", "anthropic"))
    keyless = 'api_key = ""\n'
    config = build_config(
        profile_toml("ollama", f["ollama"]).replace('api_key_env = "FAKE_KEY"\n', keyless)
        + profile_toml("lmstudio", f["lmstudio"]).replace('api_key_env = "FAKE_KEY"\n', keyless)
    )
    proxy = await proxy_factory(config, fakes=f)
    for name in ("ollama", "lmstudio"):
        resp = await proxy.messages(profile=name)
        assert resp.status_code == 200, resp.text
        sent = f[name].requests[-1].headers
        assert "authorization" not in sent and "x-api-key" not in sent
