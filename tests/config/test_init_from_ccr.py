"""`claudex init --from-ccr FILE` (issue 23, item 5): a claude-code-router config.json, with
ccr's comments, trailing commas and `$VAR` keys, becomes a claudex config that `claudex serve`
runs as ccr routed — the default, background, think, longContext and webSearch entries each
reach their provider and model — and no key from the file is written or printed anywhere."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from claudex.config import load_config
from claudex.demo.fake_provider import FakeProvider
from claudex.demo.world import free_port
from tests.cli.test_cli import spawn_serve, wait_until_serving
from tests.conftest import TEST_ENV

INLINE_KEY = "sk-ccr-inline-secret-0123456789"
CLIENT_KEY = "ccr-client-key-abcdef"


def ccr_config(f: dict[str, FakeProvider]) -> str:
    """ccr's README example, pointed at the fakes (as JSON5: a comment, a trailing comma)."""
    return f"""{{
  "APIKEY": "{CLIENT_KEY}",
  "API_TIMEOUT_MS": 120000,
  "Providers": [
    {{
      "name": "deepseek",
      // IMPORTANT: api_base_url must be a complete (full) URL.
      "api_base_url": "{f['deepseek'].base_url}/chat/completions",
      "api_key": "$DEEPSEEK_API_KEY",
      "models": ["deepseek-chat", "deepseek-reasoner"],
      "transformer": {{"use": ["deepseek"], "deepseek-chat": {{"use": ["tooluse"]}}}}
    }},
    {{
      "name": "ollama",
      "api_base_url": "{f['ollama'].base_url}/chat/completions",
      "api_key": "{INLINE_KEY}",
      "models": ["qwen2.5-coder:latest"],
    }},
    {{
      "name": "claude",
      "api_base_url": "{f['claude'].base_url}/v1/messages",
      "api_key": "${{CLAUDE_KEY}}",
      "models": ["claude-opus-4-1"],
      "transformer": {{"use": ["Anthropic"]}}
    }},
    {{
      "name": "search",
      "api_base_url": "{f['search'].base_url}/chat/completions",
      "api_key": "",
      "models": ["search-online"],
      "transformer": {{"use": [["maxtoken", {{"max_tokens": 16384}}]]}}
    }},
    {{
      "name": "unused",
      "api_base_url": "https://unused.example/v1/chat/completions",
      "api_key": "sk-unused-secret-9876543210",
      "models": ["u-1"]
    }}
  ],
  "Router": {{
    "default": "deepseek,deepseek-chat",
    "background": "ollama,qwen2.5-coder:latest",
    "think": "deepseek,deepseek-reasoner",
    "longContext": "claude,claude-opus-4-1",
    "longContextThreshold": 2000,
    "webSearch": "search,search-online",
    "image": "claude,claude-opus-4-1"
  }}
}}
"""


def init_from_ccr(config: Path, source: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "claudex.cli", "--config", str(config), "init", "--from-ccr",
         str(source)],
        capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", **TEST_ENV})


@pytest.fixture
async def ccr_fakes() -> AsyncIterator[dict[str, FakeProvider]]:
    f: dict[str, FakeProvider] = {}
    for name, protocol, models in (("deepseek", "openai", ("deepseek-chat", "deepseek-reasoner")),
                                   ("ollama", "openai", ("qwen2.5-coder:latest",)),
                                   ("claude", "anthropic", ("claude-opus-4-1",)),
                                   ("search", "openai", ("search-online",))):
        fake = FakeProvider(name, protocol, models=models)  # type: ignore[arg-type]
        await fake.start()
        f[name] = fake
    yield f
    for fake in f.values():
        await fake.stop()


async def test_a_ccr_config_becomes_a_claudex_config_that_routes_as_ccr_did(
        ccr_fakes: dict[str, FakeProvider], tmp_path: Path) -> None:
    source, config = tmp_path / "config.json", tmp_path / "profiles.toml"
    source.write_text(ccr_config(ccr_fakes))
    done = init_from_ccr(config, source)
    assert done.returncode == 0, done.stdout + done.stderr
    text = config.read_text()
    for secret in (INLINE_KEY, CLIENT_KEY, "sk-unused-secret"):
        assert secret not in text and secret not in done.stdout + done.stderr
    assert config.stat().st_mode & 0o777 == 0o600
    # The variables to set are named, with where their value was.
    out = done.stdout
    assert "OLLAMA_API_KEY: the key config.json had inline for provider 'ollama' " \
           "(Providers[1].api_key)" in out
    assert "CLAUDEX_TOKEN: the key your clients send (config.json's APIKEY)" in out
    assert "DEEPSEEK_API_KEY" in out and "CLAUDE_KEY" in out
    assert "5 profile(s) (deepseek-chat, ollama, deepseek-reasoner, claude, search)" in out
    assert "# ccr's Router.image" in text and "# ccr provider 'unused' is in no Router" in text

    loaded = load_config(config, env={"DEEPSEEK_API_KEY": "x", "CLAUDE_KEY": "y",
                                      "OLLAMA_API_KEY": "z", "CLAUDEX_TOKEN": "t"})
    by_name = {p.name: p for p in loaded.profiles}
    assert loaded.proxy.default_profile == "deepseek-chat"
    assert loaded.routes.targets() == {"long_context": "claude", "web_search": "search",
                                       "thinking": "deepseek-reasoner", "background": "ollama"}
    assert loaded.routes.long_context_tokens == 2000
    assert by_name["deepseek-chat"].api_key_env == "DEEPSEEK_API_KEY"
    assert by_name["claude"].provider_type == "DirectAnthropic"
    assert by_name["claude"].base_url == ccr_fakes["claude"].base_url
    assert by_name["search"].api_key == "" and by_name["search"].max_tokens == 16384
    assert loaded.proxy.auth_token_env == "CLAUDEX_TOKEN" and loaded.proxy.read_timeout == 120

    # Served as ccr routed.
    port = free_port()
    config.write_text(text.replace("[proxy]\n", f"[proxy]\nport = {port}\n", 1))
    env = {"DEEPSEEK_API_KEY": "sk-deepseek-env-0001", "CLAUDE_KEY": "sk-claude-env-0002",
           "OLLAMA_API_KEY": "sk-ollama-env-0003", "CLAUDEX_TOKEN": "local-token-0004"}
    proc = await spawn_serve(config, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_until_serving(url, proc)
        async with httpx.AsyncClient(base_url=url, timeout=10.0, headers={
                "x-api-key": "local-token-0004", "anthropic-version": "2023-06-01"}) as client:
            async def served(body: dict[str, Any]) -> tuple[str, str]:
                resp = await client.post("/v1/messages", json={
                    "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}], **body})
                assert resp.status_code == 200, resp.text
                sent = ccr_fakes[resp.headers["x-claudex-provider"].split("-")[0]]
                return resp.headers["x-claudex-provider"], sent.requests[-1].json["model"]

            assert await served({"model": "claude-sonnet-4-5"}) == (
                "deepseek-chat", "deepseek-chat")
            assert await served({"model": "claude-haiku-4-5"}) == (
                "ollama", "qwen2.5-coder:latest")
            assert await served({"model": "claude-sonnet-4-5", "thinking": {
                "type": "enabled", "budget_tokens": 1024}}) == (
                "deepseek-reasoner", "deepseek-reasoner")
            assert await served({"model": "claude-sonnet-4-5", "tools": [
                {"type": "web_search_20250305", "name": "web_search"}]}) == (
                "search", "search-online")
            assert await served({"model": "claude-sonnet-4-5", "messages": [
                {"role": "user", "content": "long " * 3000}]}) == ("claude", "claude-opus-4-1")
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.communicate(), 20)
    # Each provider got its own key, from the environment.
    assert ccr_fakes["ollama"].requests[-1].headers["authorization"] == "Bearer sk-ollama-env-0003"
    assert ccr_fakes["claude"].requests[-1].headers["x-api-key"] == "sk-claude-env-0002"


@pytest.mark.parametrize(("content", "said"), [
    ('{\n  "Providers": [\n    {"name": "a" "api_base_url": "x"}\n  ]\n}\n',
     "config.json:3:18: not valid JSON (Expecting ',' delimiter)"),
    ('{"Router": {"default": "a,m"}}', "config.json: no Providers"),
    ('{"Providers": [{"name": "a", "api_base_url": "https://a.test/v1/chat/completions",'
     ' "models": ["m"]}], "Router": {"default": "b,m"}}',
     "config.json: Router.default names provider 'b', which Providers does not have (it has a)"),
    ('{"Providers": [{"name": "a", "api_base_url": "https://a.test/v1/chat/completions"}],'
     ' "Router": {"think": "a"}}', 'config.json: Router.think must be "provider,model"'),
    ('{"Providers": [{"api_base_url": "https://a.test"}]}', "config.json: Providers[0] has no "
     "name"),
    ("{'Providers': []}", "config.json:1: a single-quoted string (JSON5)"),
    ("[1, 2]", "config.json: a ccr config is a JSON object"),
])
def test_a_broken_ccr_config_is_named_and_nothing_is_written(tmp_path: Path, content: str,
                                                             said: str) -> None:
    source, config = tmp_path / "config.json", tmp_path / "profiles.toml"
    source.write_text(content)
    done = init_from_ccr(config, source)
    assert done.returncode == 1 and not config.exists()
    assert said in done.stderr and "nothing was written" in done.stderr
    assert "Traceback" not in done.stderr


def test_it_never_replaces_a_config_and_says_when_the_file_is_missing(tmp_path: Path) -> None:
    source, config = tmp_path / "config.json", tmp_path / "profiles.toml"
    config.write_text("# mine\n")
    source.write_text(json.dumps({"Providers": [{"name": "a", "models": ["m"],
                                                 "api_base_url": "https://a.test/v1"}]}))
    done = init_from_ccr(config, source)
    assert done.returncode == 1 and "never replaces a config" in done.stderr
    assert config.read_text() == "# mine\n"
    config.unlink()
    missing = init_from_ccr(config, tmp_path / "nope.json")
    assert missing.returncode == 1 and "Cannot read" in missing.stderr
    assert "No such file" in missing.stderr and not config.exists()
