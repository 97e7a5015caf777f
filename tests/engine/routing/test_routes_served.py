"""`[routes]` through a real `claudex serve` (DESIGN.md "Routes"): each route's requests reach its
profile, first match in the contract's order, only on the default routes; the route is named in
the answer's header, the log line, the journal row (from the request event) and what the
console shows of it."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from claudex.console.format import record_row
from claudex.demo.world import free_port
from claudex.text.history import detail_fields
from tests.cli.test_cli import spawn_serve, wait_until_serving
from tests.conftest import GLOBALS, profile_toml

ANTHROPIC = {"anthropic-version": "2023-06-01"}
# 2,000 tokens is over the threshold below: the estimate is ~4 ASCII characters a token.
LONG = "lorem ipsum " * 800


def messages(text: str = "hello", *, model: str = "claude-sonnet-4-5",
             **extra: Any) -> dict[str, Any]:
    return {"model": model, "max_tokens": 64,
            "messages": [{"role": "user", "content": text}], **extra}


THINKING = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
WEB_SEARCH = {"tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 2}]}


@pytest.fixture
async def served(fakes: Any, tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    f = await fakes(("main", "anthropic"), ("big", "openai"), ("search", "anthropic"),
                    ("reasoner", "openai"), ("cheap", "openai"))
    port = free_port()
    path = tmp_path / "profiles.toml"
    path.write_text(GLOBALS.replace("[proxy]", f'[proxy]\nport = {port}\ndefault_profile = "main"')
                    + "".join(profile_toml(name, fake) for name, fake in f.items())
                    + """
[routes]
long_context = "big"
long_context_tokens = 1000
web_search = "search"
thinking = "reasoner"
background = "cheap"
""")
    path.chmod(0o600)
    proc = await spawn_serve(path, "--debug")
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_until_serving(url, proc)
        async with httpx.AsyncClient(base_url=url, timeout=10.0) as client:
            yield {"client": client, "fakes": f, "proc": proc}
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.communicate(), 20)


async def served_by(client: httpx.AsyncClient, body: dict[str, Any],
                    path: str = "/v1/messages") -> tuple[str, str | None]:
    resp = await client.post(path, json=body, headers=ANTHROPIC)
    assert resp.status_code == 200, resp.text
    return resp.headers["x-claudex-provider"], resp.headers.get("x-claudex-route")


async def test_each_route_takes_its_requests_first_match_in_the_contracts_order(
        served: dict[str, Any]) -> None:
    client = served["client"]
    assert await served_by(client, messages()) == ("main", None)
    assert await served_by(client, messages(model="claude-haiku-4-5")) == (
        "cheap", "background -> cheap")
    assert await served_by(client, messages(**THINKING)) == ("reasoner", "thinking -> reasoner")
    assert await served_by(client, messages(**WEB_SEARCH)) == ("search", "web_search -> search")
    assert await served_by(client, messages(LONG)) == ("big", "long_context -> big")
    # First match: long_context, web_search, thinking, background.
    assert await served_by(client, messages(LONG, model="claude-haiku-4-5", **THINKING,
                                            **WEB_SEARCH)) == ("big", "long_context -> big")
    assert await served_by(client, messages(model="claude-haiku-4-5", **THINKING,
                                            **WEB_SEARCH)) == ("search", "web_search -> search")
    assert await served_by(client, messages(model="claude-haiku-4-5", **THINKING)) == (
        "reasoner", "thinking -> reasoner")
    # A body big enough to be estimated whose prompt is short: framing is not prompt.
    many = messages()
    many["messages"] = [{"role": role, "content": "ok"}
                        for _ in range(300) for role in ("user", "assistant")][:-1]
    assert len(str(many)) > 4 * 1000
    assert await served_by(client, many) == ("main", None)


async def test_routes_apply_to_every_default_route_and_never_to_a_named_profile(
        served: dict[str, Any]) -> None:
    client = served["client"]
    chat = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}],
            "reasoning_effort": "high"}
    assert await served_by(client, chat, "/v1/chat/completions") == (
        "reasoner", "thinking -> reasoner")
    minimal = {**chat, "reasoning_effort": "minimal"}
    assert await served_by(client, minimal, "/v1/chat/completions") == ("main", None)
    responses = {"model": "gpt-5", "input": "hi", "reasoning": {"effort": "medium"}}
    assert await served_by(client, responses, "/v1/responses") == (
        "reasoner", "thinking -> reasoner")
    long_responses = {"model": "gpt-5", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": LONG}]}]}
    assert await served_by(client, long_responses, "/v1/responses") == (
        "big", "long_context -> big")

    # /proxy/NAME/...: the client chose; nothing routes it.
    assert await served_by(client, messages(LONG, model="claude-haiku-4-5"),
                           "/proxy/main/v1/messages") == ("main", None)
    # count_tokens is no turn of a conversation: the default profile counts.
    resp = await client.post("/v1/messages/count_tokens", headers=ANTHROPIC,
                             json={"model": "claude-haiku-4-5", "messages": [
                                 {"role": "user", "content": "hi"}]})
    assert resp.status_code == 200 and resp.headers["x-claudex-provider"] == "main"
    assert "x-claudex-route" not in resp.headers


async def test_the_route_is_named_in_the_log_journal_and_console(
        served: dict[str, Any]) -> None:
    client, proc = served["client"], served["proc"]
    await served_by(client, messages(LONG))
    await served_by(client, messages())
    history = (await client.get("/_claudex/history")).json()["requests"]
    by_provider = {row["provider"]: row for row in history}
    routed, plain = by_provider["big"], by_provider["main"]
    assert routed["routed"] == "long_context -> big" and routed["profile"] == "big"
    assert plain["routed"] is None
    found = (await client.get("/_claudex/history", params={"q": "long_context"})).json()
    assert [row["provider"] for row in found["requests"]] == ["big"]

    # The console's request log row and detail, from the journal's row.
    row = record_row(routed, lambda epoch: "12:00:00")
    assert row.trail_text == "route long_context → big · big 200"
    assert ("routed", "route long_context -> big") in detail_fields(routed)
    assert record_row(plain, lambda epoch: "12:00:00").trail_text == "main 200"

    proc.send_signal(signal.SIGTERM)
    _, err = await asyncio.wait_for(proc.communicate(), 20)
    lines = [line for line in err.decode().splitlines() if "request anthropic" in line]
    assert any(line.endswith("route long_context -> big") and "-> big 200 [big 200]" in line
               for line in lines), lines
