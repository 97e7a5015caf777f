"""The fakes' subscription plans (claudex/demo/fake_plans.py): windows that fill with the tokens
served, described on every answer in the service's headers, refused when full with the
service's own 429 until the reset; and the control route that spends one."""

from __future__ import annotations

import httpx

from claudex.demo.fake_plans import Plan
from claudex.demo.fake_provider import FakeProvider

BODY = {"model": "claude-sonnet-4-5", "max_tokens": 64,
        "messages": [{"role": "user", "content": "hello"}]}


def test_a_claude_window_fills_warns_and_resets() -> None:
    now = [1000.0]
    plan = Plan.claude(tokens_5h=100, seconds_5h=60, clock=lambda: now[0])
    plan.serve(40)
    headers = plan.headers()
    assert headers["anthropic-ratelimit-unified-status"] == "allowed"
    assert headers["anthropic-ratelimit-unified-5h-utilization"] == "0.4"
    assert headers["anthropic-ratelimit-unified-5h-reset"] == "1060"
    assert headers["anthropic-ratelimit-unified-representative-claim"] == "five_hour"
    plan.serve(40)
    headers = plan.headers()
    assert headers["anthropic-ratelimit-unified-status"] == "allowed_warning"
    assert headers["anthropic-ratelimit-unified-5h-surpassed-threshold"] == "0.75"
    assert plan.refusal() is None
    plan.serve(40)
    refused = plan.refusal()
    assert refused is not None and refused[0] == 429
    assert refused[1]["error"]["type"] == "rate_limit_error"
    assert refused[2]["anthropic-ratelimit-unified-status"] == "rejected"
    assert "retry-after" not in refused[2]
    now[0] = 1060.0  # the window's end: empty again
    assert plan.refusal() is None
    assert plan.headers()["anthropic-ratelimit-unified-5h-utilization"] == "0"


def test_a_chatgpt_window_says_usage_limit_reached_with_its_reset() -> None:
    now = [1000.0]
    plan = Plan.chatgpt(clock=lambda: now[0])
    plan.spend(90.5)
    status, body, headers = plan.refusal() or (0, {}, {})
    assert status == 429
    assert body["error"]["type"] == "usage_limit_reached"
    assert body["error"]["resets_at"] == 1091 and body["error"]["resets_in_seconds"] == 91
    assert headers["x-codex-primary-used-percent"] == "100"
    assert headers["x-codex-primary-window-minutes"] == "300"
    assert headers["x-codex-secondary-window-minutes"] == "10080"


async def test_the_control_route_spends_the_window() -> None:
    async with FakeProvider("sub", "anthropic") as fake:
        root = fake.base_url
        async with httpx.AsyncClient(base_url=root, timeout=10.0) as client:
            bad = await client.post("/_fake/plan", json={"spend_s": -1})
            assert bad.status_code == 400
            made = await client.post("/_fake/plan", json={})
            assert made.status_code == 200 and made.json()["kind"] == "claude"
            ok = await client.post("/v1/messages", json=BODY)
            assert ok.status_code == 200
            assert ok.headers["anthropic-ratelimit-unified-status"] == "allowed"
            assert (await client.post("/_fake/plan", json={"spend_s": 30})).status_code == 200
            spent = await client.post("/v1/messages", json=BODY)
            assert spent.status_code == 429
            assert spent.headers["anthropic-ratelimit-unified-status"] == "rejected"
            assert fake.plan is not None and fake.plan.refused == 1
