"""A context-window refusal inside a 200 stream, before any content (the Responses API's
`response.failed` / `error` event with code `context_length_exceeded`; openai/codex
codex-rs/codex-api/src/sse/responses.rs): at a backup it is `context_exceeded` (fail over, the
window learned, no breaker failure), at the addressed profile it is passed on as it came.
Through a real `claudex serve` against the fakes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from claudex.demo.replies_responses import CONTEXT_WORDS
from claudex.demo.world import free_port
from tests.conftest import GLOBALS, profile_toml
from tests.serve_world import serving

ANTHROPIC = {"anthropic-version": "2023-06-01"}
LONG = "lorem ipsum " * 1500  # ~4,500 tokens by claudex's estimate
SMALL_WINDOW = 2000


@pytest.fixture
async def served(fakes: Any, tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """primary (Anthropic) and head (Responses), both down, -> small (a Responses backup that
    refuses long prompts inside its stream) -> big."""
    f = await fakes(("primary", "anthropic"), ("head", "responses"), ("small", "responses"),
                    ("big", "responses"))
    f["small"].context_window = SMALL_WINDOW
    f["primary"].set_fault("529")
    f["head"].set_fault("500")
    port = free_port()
    path = tmp_path / "profiles.toml"
    path.write_text(
        GLOBALS.replace("[proxy]", f'[proxy]\nport = {port}\ndefault_profile = "primary"')
        + profile_toml("primary", f["primary"], backups=["small", "big"])
        + profile_toml("head", f["head"], backups=["small", "big"])
        + profile_toml("small", f["small"], backups=["big"])
        + profile_toml("big", f["big"]))
    path.chmod(0o600)
    async with serving(path, port) as client:
        yield {"client": client, "fakes": f}


async def _small(client: httpx.AsyncClient) -> dict[str, Any]:
    profiles = (await client.get("/_claudex/status")).json()["profiles"]
    return next(p for p in profiles if p["name"] == "small")


def responses_body(text: str = LONG) -> dict[str, Any]:
    return {"model": "small-model", "input": text, "stream": True}


@pytest.mark.parametrize("how", ["response.failed", "error"])
async def test_at_a_backup_the_refusal_in_the_stream_fails_over_and_is_learned(
        served: dict[str, Any], how: str) -> None:
    client, f = served["client"], served["fakes"]
    f["small"].context_in_stream = how
    # A Responses client, passed through (the stream relayed as it is).
    resp = await client.post("/proxy/head/v1/responses", json={**responses_body(),
                                                               "model": "head-model"})
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-claudex-attempts"] == "head:500,small:context_exceeded,big:200"
    assert "response.completed" in resp.text and "context_length_exceeded" not in resp.text
    assert [r.status for r in f["small"].requests] == [200]  # refused inside its 200 stream
    small = await _small(client)
    assert len(small["learned_context_window"]) == 1  # said without the size: the estimate
    assert small["breaker"]["consecutive_failures"] == 0
    assert small["health"]["color"] == "green"
    # An Anthropic client, translated: the next long one passes it over unsent.
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": True,
            "messages": [{"role": "user", "content": LONG}]}
    resp = await client.post("/v1/messages", json=body, headers=ANTHROPIC)
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-claudex-attempts"] == "primary:529,small:context_too_small,big:200"
    assert "event: error" not in resp.text and "message_stop" in resp.text
    assert len(f["small"].requests) == 1


async def test_translated_the_refusal_in_the_stream_fails_over_too(
        served: dict[str, Any]) -> None:
    client, f = served["client"], served["fakes"]
    f["small"].context_in_stream = "response.failed"
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": True,
            "messages": [{"role": "user", "content": LONG}]}
    resp = await client.post("/v1/messages", json=body, headers=ANTHROPIC)
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-claudex-attempts"] == "primary:529,small:context_exceeded,big:200"
    assert "event: error" not in resp.text and "message_stop" in resp.text
    assert (await _small(client))["breaker"]["consecutive_failures"] == 0


@pytest.mark.parametrize("how", ["response.failed", "error"])
async def test_at_the_addressed_profile_the_refusal_in_the_stream_goes_back_as_it_came(
        served: dict[str, Any], how: str) -> None:
    client, f = served["client"], served["fakes"]
    f["small"].context_in_stream = how
    resp = await client.post("/proxy/small/v1/responses", json=responses_body())
    assert resp.status_code == 200
    assert resp.headers["x-claudex-attempts"] == "small:context_exceeded"
    events = [json.loads(line[6:]) for line in resp.text.splitlines()
              if line.startswith("data: ")]
    assert [e["type"] for e in events] == ["response.created", "response.in_progress", how]
    last = events[-1]
    error = last["response"]["error"] if how == "response.failed" else last
    assert (error["code"], error["message"]) == ("context_length_exceeded", CONTEXT_WORDS)
    assert f["big"].requests == []  # its backup was not asked: the client compacts
    small = await _small(client)
    assert len(small["learned_context_window"]) == 1  # learned all the same
    assert small["breaker"]["consecutive_failures"] == 0
    # A short request is still served there.
    resp = await client.post("/proxy/small/v1/responses", json=responses_body("hello"))
    assert resp.headers["x-claudex-attempts"] == "small:200" and "response.completed" in resp.text
