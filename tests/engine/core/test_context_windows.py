"""A backup that cannot hold the conversation (DESIGN.md failure table, issue 22 item 3): its 400
stating the context window fails over to the next backup, is no breaker failure, and is
remembered per (profile, model), so a later request estimated over it passes that backup over
without sending; a profile may declare `context_window`; at the addressed profile the 400 goes
to the client unchanged. Through a real `claudex serve` against the fakes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from claudex.demo.fake_provider import FakeProvider
from claudex.demo.world import free_port
from claudex.providers.context_limits import ContextRefusal, context_refusal
from tests.conftest import GLOBALS, profile_toml, served_models
from tests.serve_world import serving

ANTHROPIC = {"anthropic-version": "2023-06-01"}
# ~4,900 of the fakes' tokens (a quarter of the body's bytes), estimated ~4,500 by claudex.
LONG = "lorem ipsum " * 1500
SMALL_WINDOW = 2000


@pytest.mark.parametrize(("message", "window"), [
    # OpenAI (crewAIInc/crewAI-examples#121) and its completion form (quivr#505)
    ("This model's maximum context length is 8192 tokens. However, your messages resulted in "
     "8227 tokens. Please reduce the length of the messages.", 8192),
    ("This model's maximum context length is 4097 tokens. However, you requested 4203 tokens "
     "(3703 in the messages, 500 in the completion). Please reduce the length of the messages "
     "or completion.", 4097),
    # DeepSeek (FoundationAgents/OpenManus#79)
    ("This model's maximum context length is 65536 tokens. However, you requested 66343 tokens "
     "(62247 in the messages, 4096 in the completion). Please reduce the length of the "
     "messages or completion.", 65536),
    # OpenRouter (Aider-AI/aider#3721)
    ("This endpoint's maximum context length is 131072 tokens. However, you requested about "
     "141607 tokens (10535 of text input, 131072 in the output).", 131072),
    # Anthropic (RipperTs/claude-code-relay#23; anthropics/claude-code#408)
    ("prompt is too long: 200082 tokens > 200000 maximum", 200000),
    ("input length and `max_tokens` exceed context limit: 189136 + 20000 > 204648, decrease "
     "input length or `max_tokens` and try again", 204648),
    # xAI (cline/cline#3120)
    ("This model's maximum prompt length is 131072 but the request contains 136973 tokens.",
     131072),
    # Gemini (google-gemini/gemini-cli#4118)
    ("The input token count (132478) exceeds the maximum number of tokens allowed (131072).",
     131072),
    # Mistral
    ("Prompt contains 321774 tokens and 0 draft tokens, too large for model with 262144 "
     "maximum context length", 262144),
    # vLLM (thu-coai/Glyph#9)
    ("The decoder prompt (length 163840) is longer than the maximum model length of 131072. "
     "Make sure that `max_model_len` is no smaller than the number of text tokens", 131072),
    # Kimi (multica-ai/multica#4130)
    ("Your request exceeded model token limit: 262144 (requested: 275363)", 262144),
])
def test_the_window_is_read_from_each_providers_wording(message: str, window: int) -> None:
    assert context_refusal(message) == ContextRefusal(window)


def test_a_refusal_without_the_size_is_still_a_context_refusal() -> None:
    # Groq (thepersonalaicompany/amurex-backend#51): the code says it, the message does not.
    groq = (b'{"error":{"message":"Please reduce the length of the messages or completion.",'
            b'"type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}')
    assert context_refusal("Please reduce the length of the messages or completion.",
                           groq) == ContextRefusal(None)
    # llama.cpp (oobabooga/textgen#7257): n_ctx beside the message.
    llama = (b'{"error":{"code":400,"message":"the request exceeds the available context size. '
             b'try increasing the context size or enable context shift","type":'
             b'"exceed_context_size_error","n_prompt_tokens":14429,"n_ctx":8192}}')
    assert context_refusal("the request exceeds the available context size. try increasing "
                           "the context size or enable context shift", llama) == \
        ContextRefusal(8192)
    # The Responses API (anomalyco/opencode#6071)
    assert context_refusal("Your input exceeds the context window of this model. Please adjust "
                           "your input and try again.") == ContextRefusal(None)


@pytest.mark.parametrize("message", [
    "Invalid max_tokens value, the valid range of max_tokens is [1, 8192]",
    "messages.0.content: Input should be a valid list",
    "model: unknown",
    "Number of requests has exceeded your rate limit.",
    "",
])
def test_other_refusals_are_not_about_the_context(message: str) -> None:
    assert context_refusal(message, b'{"error":{"code":"invalid_request_error"}}') is None


def long_request(text: str = LONG) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 64,
            "messages": [{"role": "user", "content": text}]}


@pytest.fixture
async def served(fakes: Any, tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """primary (Anthropic) -> small (8k-like window, learned from its 400) -> big; declared
    (window configured, never sent a longer prompt) beside them."""
    f = await fakes(("primary", "anthropic"), ("big", "openai"), ("declared", "openai"))
    small = FakeProvider("small", "openai", models=served_models("small", "openai"))
    small.context_window = SMALL_WINDOW
    await small.start()
    f["small"] = small
    port = free_port()
    path = tmp_path / "profiles.toml"
    path.write_text(
        GLOBALS.replace("[proxy]", f'[proxy]\nport = {port}\ndefault_profile = "primary"')
        + profile_toml("primary", f["primary"], backups=["small", "big"])
        + profile_toml("small", small, backups=["big"])
        + profile_toml("big", f["big"])
        + profile_toml("declared", f["declared"], extra="context_window = 2048")
        + profile_toml("head", f["primary"], backups=["declared", "big"]))
    path.chmod(0o600)
    try:
        async with serving(path, port) as client:
            yield {"client": client, "fakes": f}
    finally:
        await small.stop()


async def _status(client: httpx.AsyncClient, name: str) -> dict[str, Any]:
    profiles = (await client.get("/_claudex/status")).json()["profiles"]
    return next(p for p in profiles if p["name"] == name)


async def test_a_backups_context_400_fails_over_and_a_later_request_skips_it_unsent(
        served: dict[str, Any]) -> None:
    client, f = served["client"], served["fakes"]
    f["primary"].set_fault("529")
    resp = await client.post("/v1/messages", json=long_request(), headers=ANTHROPIC)
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-claudex-provider"] == "big"
    assert resp.headers["x-claudex-attempts"] == "primary:529,small:context_exceeded,big:200"
    assert [r.status for r in f["small"].requests] == [400]
    small = await _status(client, "small")
    assert small["learned_context_window"] == {"small-model": SMALL_WINDOW}
    assert small["context_window"] is None
    # Not a breaker failure, nor counted against its health.
    assert small["breaker"]["consecutive_failures"] == 0
    assert small["health"]["color"] == "green"

    # The next long request passes it over without sending; the trail says why.
    resp = await client.post("/v1/messages", json=long_request(), headers=ANTHROPIC)
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-claudex-attempts"] == "primary:529,small:context_too_small,big:200"
    assert len(f["small"].requests) == 1
    body = (await client.get("/_claudex/history")).json()
    assert "context 2,000 < ~" in str(body)

    # A short one still goes there: the window is a size, not a ban.
    resp = await client.post("/v1/messages", json=long_request("hello"), headers=ANTHROPIC)
    assert resp.headers["x-claudex-attempts"] == "primary:529,small:200"


async def test_at_the_addressed_profile_the_context_400_goes_back_unchanged(
        served: dict[str, Any]) -> None:
    client, f = served["client"], served["fakes"]
    chat = {"model": "small-model", "messages": [{"role": "user", "content": LONG}]}
    resp = await client.post("/proxy/small/v1/chat/completions", json=chat)
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert error["message"].startswith(f"This model's maximum context length is {SMALL_WINDOW}")
    assert resp.headers["x-claudex-attempts"] == "small:400"
    assert f["big"].requests == []  # its own backup was not asked: the client compacts
    # Learned all the same; still never skipped where it is addressed.
    assert (await _status(client, "small"))["learned_context_window"] == {
        "small-model": SMALL_WINDOW}
    resp = await client.post("/proxy/small/v1/chat/completions", json=chat)
    assert resp.status_code == 400 and len(f["small"].requests) == 2


async def test_a_declared_window_skips_the_backup_before_any_400(
        served: dict[str, Any]) -> None:
    client, f = served["client"], served["fakes"]
    f["primary"].set_fault("500")
    resp = await client.post("/proxy/head/v1/messages", json=long_request(), headers=ANTHROPIC)
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-claudex-attempts"] == "head:500,declared:context_too_small,big:200"
    assert f["declared"].requests == []
    declared = await _status(client, "declared")
    assert declared["context_window"] == 2048
    assert declared["learned_context_window"] == {}


async def test_when_every_backup_is_too_small_the_sentence_says_so(
        fakes: Any, tmp_path: Path) -> None:
    f = await fakes(("primary", "anthropic"))
    small = FakeProvider("small", "openai", models=served_models("small", "openai"))
    small.context_window = SMALL_WINDOW
    async with small:
        port = free_port()
        path = tmp_path / "profiles.toml"
        path.write_text(GLOBALS.replace("[proxy]", f"[proxy]\nport = {port}")
                        + profile_toml("primary", f["primary"], backups=["small"])
                        + profile_toml("small", small))
        path.chmod(0o600)
        async with serving(path, port) as client:
            f["primary"].set_fault("529")
            resp = await client.post("/v1/messages", json=long_request(), headers=ANTHROPIC)
        assert resp.status_code == 502
        message = resp.json()["error"]["message"]
        assert "longer than small's context window" in message
        assert "/compact" in message


async def test_a_refusal_without_the_size_is_learned_from_the_prompt_refused(
        fakes: Any, tmp_path: Path) -> None:
    """Groq's wording says the conversation is too long but not the window: the backup is
    remembered as holding less than the refused prompt's estimate, so one as long is passed
    over, and a shorter one still reaches it."""
    f = await fakes(("primary", "anthropic"), ("big", "openai"))
    groq = FakeProvider("groq", "openai", models=served_models("groq", "openai"))
    groq.context_window, groq.context_sized = SMALL_WINDOW, False
    async with groq:
        port = free_port()
        path = tmp_path / "profiles.toml"
        path.write_text(GLOBALS.replace("[proxy]", f"[proxy]\nport = {port}")
                        + profile_toml("primary", f["primary"], backups=["groq", "big"])
                        + profile_toml("groq", groq) + profile_toml("big", f["big"]))
        path.chmod(0o600)
        async with serving(path, port) as client:
            f["primary"].set_fault("529")
            resp = await client.post("/v1/messages", json=long_request(), headers=ANTHROPIC)
            assert resp.headers["x-claudex-attempts"] == \
                "primary:529,groq:context_exceeded,big:200"
            [learned] = (await _status(client, "groq"))["learned_context_window"].values()
            assert SMALL_WINDOW < learned < len(LONG) // 4  # just under the estimate
            resp = await client.post("/v1/messages", json=long_request(), headers=ANTHROPIC)
            assert resp.headers["x-claudex-attempts"] == \
                "primary:529,groq:context_too_small,big:200"
            assert len(groq.requests) == 1
            resp = await client.post("/v1/messages", json=long_request("hello"),
                                     headers=ANTHROPIC)
            assert resp.headers["x-claudex-attempts"] == "primary:529,groq:200"
