"""Claudex's `[router]` through the proxy (DESIGN.md "Routes"): the classifier profile is asked
once per conversation, its answer routes every turn of it, and any failure — an answer that is
no category, an error, no answer in time — sends the conversation to `rules.default`."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import httpx

from claudex.demo.fake_provider import FakeProvider
from claudex.demo.world import free_port
from tests.cli.test_cli import spawn_serve, wait_until_serving
from tests.conftest import GLOBALS, Proxy, build_config, eventually, profile_toml

SHORT_TIMEOUT = 0.3  # the engine's router_timeout in these tests (the contract's is 2 s)


def router_config(f: dict[str, FakeProvider]) -> str:
    # The default profile is the first: main.
    return "".join(profile_toml(name, fake) for name, fake in f.items()) + """
[router]
enabled = true
profile = "clf"
model = "clf-mini"

[router.rules]
code = "coder"
math = "mathy"
default = "fallback"
"""


async def routed_proxy(fakes: Any, proxy_factory: Any) -> tuple[Proxy, dict[str, FakeProvider]]:
    f = await fakes(("main", "anthropic"), ("clf", "openai"), ("coder", "anthropic"),
                    ("mathy", "openai"), ("fallback", "anthropic"))
    config = build_config(router_config(f))
    proxy = await proxy_factory(config, fakes=f, router_timeout=SHORT_TIMEOUT)
    return proxy, f


def turn(first: str, *later: str, session: str | None = None,
         model: str = "claude-sonnet-4-5") -> tuple[dict[str, Any], dict[str, str]]:
    """A request whose conversation starts with `first` (later turns appended)."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": first}]
    for text in later:
        msgs += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": text}]
    headers = {"anthropic-version": "2023-06-01"}
    if session:
        headers["x-claude-code-session-id"] = session
    return {"model": model, "max_tokens": 64, "system": "You are a coding agent.",
            "messages": msgs}, headers


async def send(proxy: Proxy, first: str, *later: str, **kw: Any) -> httpx.Response:
    body, headers = turn(first, *later, **kw)
    resp = await proxy.messages(body, headers=headers)
    assert resp.status_code == 200, resp.text
    return resp


def asked(fake: FakeProvider) -> list[Any]:
    return [r.json for r in fake.requests if r.path == "/v1/chat/completions"]


async def test_classifier_is_asked_once_per_conversation_and_its_category_serves_it(
        fakes: Any, proxy_factory: Any) -> None:
    proxy, f = await routed_proxy(fakes, proxy_factory)
    f["clf"].reply_text = "code"

    first = await send(proxy, "Fix the failing test in parser.py", session="s-1")
    assert first.headers["x-claudex-provider"] == "coder"
    assert first.headers["x-claudex-route"] == "router:code -> coder"
    later = await send(proxy, "Fix the failing test in parser.py", "now run it", "thanks",
                       session="s-1")
    assert later.headers["x-claudex-route"] == "router:code -> coder"
    [question] = asked(f["clf"])
    # The classifier's own protocol and model, our instructions naming the rule categories,
    # the first user message as the question.
    assert question["model"] == "clf-mini" and question["max_tokens"] == 16
    system, user = question["messages"]
    assert system["role"] == "system" and "- code:" in system["content"]
    assert "- math:" in system["content"] and "default" not in system["content"]
    assert user == {"role": "user", "content": "Fix the failing test in parser.py"}

    # A subagent of the same session starts another prompt: another conversation, asked anew.
    f["clf"].reply_text = "Math."
    sub = await send(proxy, "Compute the integral of x^2", session="s-1")
    assert sub.headers["x-claudex-route"] == "router:math -> mathy"
    assert len(asked(f["clf"])) == 2
    # Without a session id the prompt's start alone names the conversation.
    assert (await send(proxy, "Compute the integral of x^2")).headers["x-claudex-provider"] \
        == "mathy"
    assert len(asked(f["clf"])) == 3


async def test_claude_codes_reminders_are_not_the_question(fakes: Any,
                                                          proxy_factory: Any) -> None:
    proxy, f = await routed_proxy(fakes, proxy_factory)
    f["clf"].reply_text = "code"
    body, headers = turn("placeholder")
    body["messages"][0]["content"] = [
        {"type": "text", "text": "<system-reminder>\nCLAUDE.md says: be brief\n</system-reminder>"},
        {"type": "text", "text": "Add a --verbose flag", "cache_control": {"type": "ephemeral"}},
    ]
    assert (await proxy.messages(body, headers=headers)).status_code == 200
    [question] = asked(f["clf"])
    assert question["messages"][1]["content"] == "Add a --verbose flag"
    # The next turn moved the cache marker: the same conversation all the same.
    del body["messages"][0]["content"][1]["cache_control"]
    body["messages"] += [{"role": "assistant", "content": "done"},
                         {"role": "user", "content": [{"type": "text", "text": "more",
                                                       "cache_control": {"type": "ephemeral"}}]}]
    resp = await proxy.messages(body, headers=headers)
    assert resp.headers["x-claudex-provider"] == "coder" and len(asked(f["clf"])) == 1


async def test_turns_arriving_together_share_one_question(fakes: Any,
                                                         proxy_factory: Any) -> None:
    proxy, f = await routed_proxy(fakes, proxy_factory)
    f["clf"].reply_text = "code"
    f["clf"].set_fault("slow", latency_ms=100)
    answers = await asyncio.gather(*(send(proxy, "Refactor the cache", session="s-2")
                                     for _ in range(5)))
    assert {a.headers["x-claudex-provider"] for a in answers} == {"coder"}
    assert len(asked(f["clf"])) == 1


async def test_an_answer_that_is_no_category_goes_to_the_default_rule(
        fakes: Any, proxy_factory: Any) -> None:
    proxy, f = await routed_proxy(fakes, proxy_factory)
    f["clf"].reply_text = "poetry"
    resp = await send(proxy, "Write a sonnet about caches")
    assert resp.headers["x-claudex-provider"] == "fallback"
    assert resp.headers["x-claudex-route"] == "router:default -> fallback"
    # Remembered with the conversation: not asked again.
    await send(proxy, "Write a sonnet about caches", "another one")
    assert len(asked(f["clf"])) == 1


async def test_a_failing_classifier_sends_the_conversation_to_the_default_rule(
        fakes: Any, proxy_factory: Any) -> None:
    proxy, f = await routed_proxy(fakes, proxy_factory)
    f["clf"].set_fault("500")
    resp = await send(proxy, "Explain this stack trace")
    assert resp.headers["x-claudex-route"] == "router:default -> fallback"
    await send(proxy, "Explain this stack trace", "and this one")
    assert len(asked(f["clf"])) == 1  # the fallback is remembered too
    # The classifier's request is a request of its own in the request log.
    assert proxy.engine.runtimes["clf"].stats.requests == 1


async def test_a_classifier_that_does_not_answer_in_time_costs_one_wait(
        fakes: Any, proxy_factory: Any) -> None:
    proxy, f = await routed_proxy(fakes, proxy_factory)
    f["clf"].set_fault("hang")
    resp = await send(proxy, "Summarise the design doc")
    assert resp.headers["x-claudex-route"] == "router:default -> fallback"
    await eventually(lambda: proxy.engine.totals.in_flight == 0)  # the question was given up
    # The next turn does not wait again.
    f["clf"].set_fault("ok")
    f["clf"].reply_text = "code"
    resp = await send(proxy, "Summarise the design doc", "shorter")
    assert resp.headers["x-claudex-route"] == "router:default -> fallback"
    assert len(asked(f["clf"])) == 1


async def test_a_disabled_router_or_a_named_profile_is_not_classified(
        fakes: Any, proxy_factory: Any) -> None:
    proxy, f = await routed_proxy(fakes, proxy_factory)
    f["clf"].reply_text = "code"
    body, headers = turn("Fix it")
    resp = await proxy.messages(body, profile="main", headers=headers)
    assert resp.headers["x-claudex-provider"] == "main" and "x-claudex-route" not in resp.headers
    assert asked(f["clf"]) == []

    off = build_config(router_config(f).replace("enabled = true", "enabled = false"))
    proxy.engine.apply_config(off)
    assert proxy.engine.routing is None
    resp = await proxy.messages(body, headers=headers)
    assert resp.headers["x-claudex-provider"] == "main" and asked(f["clf"]) == []


async def test_routes_match_before_the_router_and_a_reload_keeps_what_it_learnt(
        fakes: Any, proxy_factory: Any) -> None:
    proxy, f = await routed_proxy(fakes, proxy_factory)
    f["clf"].reply_text = "math"
    assert (await send(proxy, "Prove it")).headers["x-claudex-provider"] == "mathy"
    with_routes = build_config(router_config(f) + '\n[routes]\nbackground = "main"\n')
    proxy.engine.apply_config(with_routes)
    haiku = await send(proxy, "Title for: prove it", model="claude-haiku-4-5")
    assert haiku.headers["x-claudex-route"] == "background -> main"
    again = await send(proxy, "Prove it", "go on")
    assert again.headers["x-claudex-route"] == "router:math -> mathy"
    assert len(asked(f["clf"])) == 1


async def test_the_real_two_second_timeout_through_claudex_serve(fakes: Any,
                                                                 tmp_path: Path) -> None:
    f = await fakes(("main", "anthropic"), ("clf", "openai"), ("coder", "anthropic"),
                    ("mathy", "openai"), ("fallback", "anthropic"))
    f["clf"].set_fault("hang")
    port = free_port()
    path = tmp_path / "profiles.toml"
    path.write_text(GLOBALS.replace("[proxy]", f"[proxy]\nport = {port}") + router_config(f))
    path.chmod(0o600)
    proc = await spawn_serve(path)
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_until_serving(url, proc)
        body, headers = turn("Plan the migration")
        async with httpx.AsyncClient(base_url=url, timeout=10.0) as client:
            resp = await client.post("/v1/messages", json=body, headers=headers)
            assert resp.status_code == 200
            assert resp.headers["x-claudex-route"] == "router:default -> fallback"
            assert len(asked(f["clf"])) == 1
            row = (await client.get("/_claudex/history")).json()["requests"][0]
            assert row["routed"] == "router:default -> fallback"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 20)
    assert ("router: classifier clf did not answer within 2 s; the conversation goes to "
            "fallback") in err.decode()
