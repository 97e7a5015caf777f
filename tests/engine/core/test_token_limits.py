"""A provider's stated max_tokens limit: read from its 400, retried once at that cap, remembered
for the next request, never a breaker failure (DESIGN.md failure table)."""

from __future__ import annotations

import pytest

from claudex.demo.fake_provider import FakeProvider
from claudex.providers.limits import stated_max_tokens
from tests.conftest import anthropic_body, build_config, profile_toml, served_models


@pytest.mark.parametrize(("message", "limit"), [
    ("Invalid max_tokens value, the valid range of max_tokens is [1, 8192]", 8192),
    ("max_tokens is too large: 100000. This model supports at most 16384 completion tokens, "
     "whereas you provided 100000.", 16384),
    ("max_tokens: 128000 > 64000, which is the maximum allowed number of output tokens for "
     "claude-opus-4-1", 64000),
    ("`max_tokens` must be less than or equal to `8192`, the maximum value for `max_tokens` is "
     "less than the `context_window` for this model", 8192),
    ("max_completion_tokens must be at most 32768", 32768),
    ("The maximum value for max_tokens is 4096", 4096),
])
def test_stated_limits_are_read_from_real_wordings(message: str, limit: int) -> None:
    assert stated_max_tokens(message) == limit


@pytest.mark.parametrize("message", [
    "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens "
    "(1000 in the messages, 4000 in the completion).",
    "messages.0.content: Input should be a valid list",
    "Invalid max_tokens value, the valid range of max_tokens is [1, 2]",  # not a real cap
    "",
])
def test_other_messages_state_no_limit(message: str) -> None:
    assert stated_max_tokens(message) is None


def _attempts(resp) -> str:  # type: ignore[no-untyped-def]
    return str(resp.headers.get("x-claudex-attempts"))


async def test_a_stated_limit_is_retried_at_that_cap_and_remembered(proxy_factory):
    capped = FakeProvider("ds", "openai", max_output_tokens=8192,
                          models=served_models("ds", "openai"))
    async with capped:
        proxy = await proxy_factory(build_config(profile_toml("ds", capped)), fakes={"ds": capped})
        resp = await proxy.messages({**anthropic_body(), "max_tokens": 32000}, profile="ds")
        assert resp.status_code == 200, resp.text
        assert _attempts(resp) == "ds:max_tokens_limit,ds:200"
        assert [r.json["max_tokens"] for r in capped.requests] == [32000, 8192]
        status = (await proxy.client.get("/_claudex/status")).json()["profiles"][0]
        assert status["learned_max_tokens"] == {"ds-model": 8192}
        assert status["breaker"]["consecutive_failures"] == 0
        # The next request is capped before it is sent: one upstream call.
        resp = await proxy.messages({**anthropic_body(), "max_tokens": 128000}, profile="ds")
        assert resp.status_code == 200, resp.text
        assert _attempts(resp) == "ds:200"
        assert capped.requests[-1].json["max_tokens"] == 8192
        assert len(capped.requests) == 3
        # A request under the limit is sent as it is.
        resp = await proxy.messages({**anthropic_body(), "max_tokens": 100}, profile="ds")
        assert capped.requests[-1].json["max_tokens"] == 100


async def test_a_backups_limit_does_not_end_the_failover(fakes, proxy_factory):
    f = await fakes(("anth", "anthropic"))
    capped = FakeProvider("ds", "openai", max_output_tokens=8192,
                          models=served_models("ds", "openai"))
    async with capped:
        text = profile_toml("anth", f["anth"], backups=["ds"]) + profile_toml("ds", capped)
        proxy = await proxy_factory(build_config(text), fakes={**f, "ds": capped})
        f["anth"].set_fault("500")
        resp = await proxy.messages({**anthropic_body(stream=True), "max_tokens": 64000})
        assert resp.status_code == 200, resp.text
        assert _attempts(resp) == "anth:500,ds:max_tokens_limit,ds:200"
        assert "message_stop" in resp.text
        assert proxy.engine.runtimes["ds"].token_limits == {"ds-model": 8192}
        assert proxy.engine.runtimes["ds"].breaker.snapshot().consecutive_failures == 0
