"""A ChatGPT (Codex subscription) profile end to end: the token and account from a copy of
Codex CLI's auth.json, the backend's rules (the Responses fake enforcing them), a stream
collected for a client that did not stream, and a 401 that rotates the token in the file."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import anthropic

from claudex.demo.fake_oauth import FakeTokenServer
from claudex.demo.fake_responses import ChatGPTRules
from tests.conftest import build_config

ACCOUNT = "acct-fake"


def write_auth_json(path: Path, access: str, refresh: str = "rt-1") -> dict[str, Any]:
    doc: dict[str, Any] = {
        "OPENAI_API_KEY": None,
        "tokens": {"id_token": "id-1", "access_token": access, "refresh_token": refresh,
                   "account_id": ACCOUNT},
        "last_refresh": "2099-01-01T00:00:00Z",  # fresh: no refresh ahead of time
        "agent_identity": None,
    }
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    return doc


def codex_profile(fake: Any, auth_json: Path, token_url: str) -> str:
    return f"""
[[profiles]]
name = "codex"
provider_type = "OpenAIResponses"
base_url = "{fake.base_url}"
default_model = "gpt-5-codex"
auth_type = "oauth"
oauth_provider = "chatgpt"
credentials_file = "{auth_json}"
token_url = "{token_url}"
"""


async def test_a_401_rotates_the_token_in_auth_json_and_the_retry_succeeds(
    fakes: Any, proxy_factory: Any, tmp_path: Path
) -> None:
    f = await fakes(("backend", "responses"),)
    backend = f["backend"]
    backend.chatgpt = ChatGPTRules(account_id=ACCOUNT)
    backend.strict_models = False
    auth_json = tmp_path / "auth.json"
    before = write_auth_json(auth_json, "tok-old")
    async with FakeTokenServer() as tokens:
        tokens.set_next("tok-new", "rt-2")
        proxy = await proxy_factory(build_config(codex_profile(backend, auth_json,
                                                               tokens.token_url)), fakes=f)
        backend.faults.valid_tokens = {"tok-new"}  # the old token has expired at the backend
        client = anthropic.AsyncAnthropic(base_url=proxy.url + "/proxy/codex",
                                          api_key="unused", max_retries=0)
        message = await client.messages.with_raw_response.create(
            model="claude-sonnet-4-5", max_tokens=512, temperature=0.3,
            messages=[{"role": "user", "content": "hello"}])
        answer = message.parse()
        assert answer.content[0].type == "text" and "backend" in answer.content[0].text
        assert message.headers["x-claudex-attempts"] == "codex:token_expired,codex:200"
        assert message.headers["content-type"].startswith("application/json")

        [grant] = tokens.calls
        assert grant.json == {"grant_type": "refresh_token", "refresh_token": "rt-1",
                              "client_id": "app_EMoamEEZ73f0CkXaXp7hrann"}
        written = json.loads(auth_json.read_text())
        assert stat.S_IMODE(auth_json.stat().st_mode) == 0o600
        assert written["tokens"] == {**before["tokens"], "access_token": "tok-new",
                                     "refresh_token": "rt-2"}
        assert {k: v for k, v in written.items() if k not in ("tokens", "last_refresh")} == {
            "OPENAI_API_KEY": None, "agent_identity": None}
        assert written["last_refresh"] != before["last_refresh"]

        sent = backend.requests[-1]
        assert sent.headers["authorization"] == "Bearer tok-new"
        assert sent.headers["chatgpt-account-id"] == ACCOUNT
        assert sent.headers["originator"] == "codex_cli_rs"
        assert sent.json["stream"] is True and sent.json["store"] is False
        assert sent.json["model"] == "gpt-5-codex"
        assert not {"max_output_tokens", "temperature"} & set(sent.json)
        assert sent.json["instructions"] == ""  # no system prompt: still there, as required
        await client.close()


async def test_a_streaming_client_through_the_chatgpt_backend(
    fakes: Any, proxy_factory: Any, tmp_path: Path
) -> None:
    f = await fakes(("backend", "responses"),)
    backend = f["backend"]
    backend.chatgpt = ChatGPTRules(account_id=ACCOUNT)
    backend.strict_models = False
    auth_json = tmp_path / "auth.json"
    write_auth_json(auth_json, "tok-1")
    proxy = await proxy_factory(build_config(codex_profile(backend, auth_json,
                                                           "http://127.0.0.1:9/never")),
                                fakes=f)
    client = anthropic.AsyncAnthropic(base_url=proxy.url + "/proxy/codex", api_key="unused",
                                      max_retries=0)
    async with client.messages.stream(
        model="claude-sonnet-4-5", max_tokens=64, system="sys",
        messages=[{"role": "user", "content": "events:6"}],
    ) as stream:
        text = "".join([chunk async for chunk in stream.text_stream])
        final = await stream.get_final_message()
    assert len(text.split()) == 6 and final.stop_reason == "end_turn"
    sent = backend.requests[-1].json
    # The system prompt is `instructions`: the backend refuses a request without (400
    # {"detail": "Instructions are required"}, which the fake answers too).
    assert sent["instructions"] == "sys"
    assert sent["input"][0]["role"] == "user"
    await client.close()


async def test_health_probe_of_a_chatgpt_profile_uses_its_login(
    fakes: Any, proxy_factory: Any, tmp_path: Path
) -> None:
    f = await fakes(("backend", "responses"),)
    backend = f["backend"]
    backend.chatgpt = ChatGPTRules(account_id=ACCOUNT)
    auth_json = tmp_path / "auth.json"
    write_auth_json(auth_json, "tok-1")
    proxy = await proxy_factory(build_config(codex_profile(backend, auth_json,
                                                           "http://127.0.0.1:9/never")),
                                fakes=f)
    await proxy.engine.check_health_now()
    probe = backend.requests[-1]
    assert (probe.method, probe.path) == ("GET", "/v1/models")
    assert probe.headers["authorization"] == "Bearer tok-1"
    assert probe.headers["chatgpt-account-id"] == ACCOUNT
    codex = proxy.engine.snapshot()["profiles"][0]
    assert codex["health"]["color"] == "green"
