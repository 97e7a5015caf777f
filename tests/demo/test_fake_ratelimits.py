"""The fakes' API-key rate limits (claudex/demo/fake_ratelimits.py): buckets that empty with the
requests and tokens served and refill, described on every answer in the service's headers
(Anthropic's RFC 3339 resets, OpenAI's durations) and refused with 429 when empty."""

from __future__ import annotations

import httpx

from claudex.demo.fake_provider import FakeProvider
from claudex.demo.fake_ratelimits import Bucket, RateLimits
from claudex.providers.windows import duration_seconds, read_windows

BODY = {"model": "claude-sonnet-4-5", "max_tokens": 16,
        "messages": [{"role": "user", "content": "hi"}]}


def test_a_bucket_refills_continuously_up_to_its_limit() -> None:
    b = Bucket(60)
    b.take(30, 100.0)
    assert b.left(100.0) == 30
    assert b.left(110.0) == 40      # one a second for a limit of 60 a minute
    assert b.full_in(110.0) == 20.0
    assert b.left(1000.0) == 60     # never above the limit


def test_anthropic_headers_say_each_limit_with_an_rfc3339_reset() -> None:
    now = [1_755_780_000.0]
    limits = RateLimits.of("anthropic", requests=50, tokens=30_000)
    limits.clock = lambda: now[0]
    assert limits.refusal_in() is None
    limits.serve(3_000, 1_200)
    headers = limits.headers()
    assert headers["anthropic-ratelimit-requests-limit"] == "50"
    assert headers["anthropic-ratelimit-requests-remaining"] == "49"
    assert headers["anthropic-ratelimit-requests-reset"] == "2025-08-21T12:40:02Z"
    assert headers["anthropic-ratelimit-input-tokens-remaining"] == "27000"
    assert headers["anthropic-ratelimit-output-tokens-limit"] == "6000"
    # `tokens` is the most restrictive: output, 80 % left against input's 90 %.
    assert headers["anthropic-ratelimit-tokens-limit"] == "6000"
    assert headers["anthropic-ratelimit-tokens-remaining"] == "4800"
    windows = read_windows([(k.encode(), v.encode()) for k, v in headers.items()])
    assert windows is not None
    assert [(w.name, round(w.used, 3)) for w in windows] == [
        ("requests", 0.02), ("tokens", 0.2), ("input-tokens", 0.1), ("output-tokens", 0.2)]


def test_openai_headers_reset_after_a_go_duration() -> None:
    now = [1000.0]
    limits = RateLimits.of("openai", requests=60, tokens=150_000)
    limits.clock = lambda: now[0]
    assert limits.refusal_in() is None
    limits.serve(16, 0)
    headers = limits.headers()
    assert headers["x-ratelimit-remaining-requests"] == "59"
    assert headers["x-ratelimit-reset-requests"] == "1s"
    assert headers["x-ratelimit-remaining-tokens"] == "149984"
    assert headers["x-ratelimit-reset-tokens"] == "7ms"
    assert "anthropic-ratelimit-requests-limit" not in headers
    limits.serve(75_000, 0)
    assert duration_seconds(limits.headers()["x-ratelimit-reset-tokens"]) == 31.0


def test_an_empty_bucket_is_refused_until_it_refills() -> None:
    now = [1000.0]
    limits = RateLimits.of("anthropic", requests=2)
    limits.clock = lambda: now[0]
    assert limits.refusal_in() is None and limits.refusal_in() is None
    wait = limits.refusal_in()
    assert wait is not None and 29.0 < wait <= 30.0  # one request every 30 s
    assert limits.refused == 1
    now[0] += 30.0
    assert limits.refusal_in() is None


async def test_a_fake_key_answers_with_its_limits_and_refuses_when_empty() -> None:
    async with FakeProvider("key", "anthropic") as fake:
        assert fake.rate_limits is not None
        fake.rate_limits.requests = Bucket(1)
        async with httpx.AsyncClient(base_url=fake.base_url, timeout=10.0) as client:
            ok = await client.post("/v1/messages", json=BODY)
            assert ok.status_code == 200
            assert ok.headers["anthropic-ratelimit-requests-remaining"] == "0"
            over = await client.post("/v1/messages", json=BODY)
            assert over.status_code == 429
            assert over.json()["error"]["type"] == "rate_limit_error"
            assert int(over.headers["retry-after"]) >= 1
            assert over.headers["anthropic-ratelimit-requests-limit"] == "1"
        fake.rate_limits = None  # a provider that sends no rate-limit headers
        async with httpx.AsyncClient(base_url=fake.base_url, timeout=10.0) as client:
            plain = await client.post("/v1/messages", json=BODY)
            assert plain.status_code == 200
            assert not any(k.startswith("anthropic-ratelimit") for k in plain.headers)


async def test_a_plan_or_the_chatgpt_backend_sends_no_key_limits() -> None:
    async with FakeProvider("sub", "anthropic") as fake:
        async with httpx.AsyncClient(base_url=fake.base_url, timeout=10.0) as client:
            assert (await client.post("/_fake/plan", json={})).status_code == 200
            ok = await client.post("/v1/messages", json=BODY)
            assert "anthropic-ratelimit-unified-status" in ok.headers
            assert "anthropic-ratelimit-requests-limit" not in ok.headers
