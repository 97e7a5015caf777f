"""The ChatGPT (Codex subscription) backend as it is (issue 22 item 4), through a real `claudex
serve`: `instructions` always carries the system prompt (and the system/developer turns before
the first user turn), "" without one; later system turns stay developer messages in place; an
`input` string becomes a list. The fake backend refuses what the real one refuses (400
{"detail": "Instructions are required"}, {"detail": "Input must be a list"}), so a request
claudex sent wrong would fail here as it would in production."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from claudex.demo.fake_responses import ChatGPTRules
from claudex.demo.world import free_port
from tests.conftest import GLOBALS
from tests.engine.credentials.test_proxy_codex_auth import ACCOUNT, codex_profile, write_auth_json
from tests.serve_world import serving

ANTHROPIC = {"anthropic-version": "2023-06-01"}


@pytest.fixture
async def served(fakes: Any, tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    f = await fakes(("backend", "responses"))
    backend = f["backend"]
    backend.chatgpt = ChatGPTRules(account_id=ACCOUNT)
    backend.strict_models = False
    auth_json = tmp_path / "auth.json"
    write_auth_json(auth_json, "tok-1")
    port = free_port()
    path = tmp_path / "profiles.toml"
    path.write_text(GLOBALS.replace("[proxy]", f'[proxy]\nport = {port}\ndefault_profile = "codex"')
                    + codex_profile(backend, auth_json, "http://127.0.0.1:9/never"))
    path.chmod(0o600)
    async with serving(path, port) as client:
        yield {"client": client, "backend": backend}


async def test_the_fake_backend_refuses_what_the_real_one_refuses(
        served: dict[str, Any]) -> None:
    backend = served["backend"]
    headers = {"authorization": "Bearer tok-1", "chatgpt-account-id": ACCOUNT}
    base = {"model": "gpt-5-codex", "store": False, "stream": True,
            "input": [{"type": "message", "role": "user",
                       "content": [{"type": "input_text", "text": "hi"}]}]}
    async with httpx.AsyncClient() as http:
        resp = await http.post(backend.base_url + "/responses", json=base, headers=headers)
        assert (resp.status_code, resp.json()) == (400, {"detail": "Instructions are required"})
        resp = await http.post(backend.base_url + "/responses", headers=headers,
                               json={**base, "instructions": "", "input": "hi"})
        assert (resp.status_code, resp.json()) == (400, {"detail": "Input must be a list"})
        resp = await http.post(backend.base_url + "/responses", headers=headers,
                               json={**base, "instructions": ""})
        assert resp.status_code == 200


async def test_a_claude_request_carries_its_system_prompt_as_instructions(
        served: dict[str, Any]) -> None:
    client, backend = served["client"], served["backend"]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "system": "Be brief.",
            "messages": [{"role": "user", "content": "hello"}]}
    resp = await client.post("/v1/messages", json=body, headers=ANTHROPIC)
    assert resp.status_code == 200, resp.text
    sent = backend.requests[-1].json
    assert sent["instructions"] == "Be brief."
    assert [item.get("role") for item in sent["input"]] == ["user"]

    # No system prompt at all: an empty `instructions`, which the backend takes.
    resp = await client.post("/v1/messages", headers=ANTHROPIC,
                             json={k: v for k, v in body.items() if k != "system"})
    assert resp.status_code == 200, resp.text
    assert backend.requests[-1].json["instructions"] == ""


async def test_a_chat_request_keeps_later_system_turns_in_place(
        served: dict[str, Any]) -> None:
    client, backend = served["client"], served["backend"]
    chat = {"model": "gpt-5-codex", "messages": [
        {"role": "system", "content": "sys"}, {"role": "developer", "content": "dev"},
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
        {"role": "system", "content": "mind the tests"}, {"role": "user", "content": "go"}]}
    resp = await client.post("/v1/chat/completions", json=chat)
    assert resp.status_code == 200, resp.text
    sent = backend.requests[-1].json
    assert sent["instructions"] == "sys\n\ndev"
    assert [item["role"] for item in sent["input"]] == ["user", "assistant", "developer", "user"]
    assert sent["input"][2]["content"] == [{"type": "input_text", "text": "mind the tests"}]


async def test_a_responses_client_without_instructions_gets_them_made(
        served: dict[str, Any]) -> None:
    client, backend = served["client"], served["backend"]
    # A string input: made a list, with an empty `instructions`.
    resp = await client.post("/v1/responses", json={"model": "gpt-5-codex", "input": "hi"})
    assert resp.status_code == 200, resp.text
    sent = backend.requests[-1].json
    assert sent["instructions"] == ""
    assert sent["input"] == [{"type": "message", "role": "user",
                              "content": [{"type": "input_text", "text": "hi"}]}]
    # Leading developer/system messages become `instructions`; later ones stay in place.
    items = [
        {"type": "message", "role": "developer", "content": [
            {"type": "input_text", "text": "You are a coding agent."}]},
        {"role": "system", "content": "Be brief."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "message", "role": "developer", "content": [
            {"type": "input_text", "text": "later"}]},
    ]
    resp = await client.post("/v1/responses", json={"model": "gpt-5-codex", "input": items})
    assert resp.status_code == 200, resp.text
    sent = backend.requests[-1].json
    assert sent["instructions"] == "You are a coding agent.\n\nBe brief."
    assert sent["input"] == items[2:]
    # Codex CLI's own request (instructions, an input list) goes as it came.
    codex = {"model": "gpt-5-codex", "instructions": "codex prompt", "input": items,
             "store": False, "stream": True}
    async with client.stream("POST", "/v1/responses", json=codex) as streamed:
        assert streamed.status_code == 200
        await streamed.aread()
    assert backend.requests[-1].json == codex
