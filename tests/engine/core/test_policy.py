"""The failure policy (core/policy.py) as a table, and each row once through the proxy: a real
request to claudex's fake providers on 127.0.0.1 whose outcome is that row's, checked against
what the row says — retried or not, failed over or not, breaker and health effects, the attempt
token."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from claudex.demo.fake_bedrock import FakeBedrock
from claudex.demo.fake_oauth import FakeTokenServer
from claudex.demo.fake_plans import Plan
from claudex.demo.fake_provider import FakeProvider
from claudex.engine.core.classify import Outcome
from claudex.engine.core.policy import (
    AFTER_COMMIT,
    POLICY,
    BreakerEffect,
    HealthEffect,
    Key,
    Local,
    Retry,
    Rule,
    breaker_failure,
    dispositions,
)
from claudex.engine.network.routes import Hop, Route
from claudex.providers import translate
from tests import cloud_world
from tests.conftest import (
    TEST_ENV,
    Proxy,
    anthropic_body,
    build_config,
    eventually,
    profile_toml,
    served_models,
)
from tests.engine.credentials.test_proxy_oauth import oauth_profile, write_credentials
from tests.engine.network.local_proxies import ConnectProxy, closed_port, private_ca, tls_front
from tests.engine.network.static_network import http_hop, network

F = TypeVar("F", bound=Callable[..., Any])
TESTED: set[Key] = set()


def row(key: Key) -> Callable[[F], F]:
    """Marks the test of one row (the last test checks that every row has one)."""
    def mark(test: F) -> F:
        TESTED.add(key)
        return test
    return mark


# -- the table itself --------------------------------------------------------------------------

# DESIGN.md's failure table, column by column: retry same, fail over, breaker, health.
_R, _B, _H = Retry, BreakerEffect, HealthEffect
EXPECTED: dict[Key, tuple[Retry, bool, BreakerEffect, HealthEffect]] = {
    Outcome.OK: (_R.NO, False, _B.SUCCESS, _H.HEALTHY),
    Outcome.CLIENT_ERROR: (_R.NO, False, _B.RELEASE, _H.NONE),
    Outcome.TOKEN_LIMIT: (_R.AT_CAP, True, _B.RELEASE, _H.NONE),
    Outcome.CONTEXT_EXCEEDED: (_R.NO, True, _B.RELEASE, _H.NONE),
    Outcome.RATE_LIMITED: (_R.BACKOFF, True, _B.RELEASE, _H.NONE),
    Outcome.PLAN_LIMIT: (_R.AFTER_RESET, True, _B.RELEASE, _H.NONE),
    Outcome.AUTH_ERROR: (_R.NO, True, _B.FAILURE, _H.AUTH_FAILING),
    Outcome.TOKEN_EXPIRED: (_R.AFTER_REFRESH, True, _B.FAILURE, _H.AUTH_FAILING),
    Outcome.SERVER_ERROR: (_R.NO, True, _B.FAILURE, _H.LIVE_FAILURE),
    Outcome.CONNECT_ERROR: (_R.NO, True, _B.FAILURE, _H.LIVE_FAILURE),
    Outcome.TIMEOUT: (_R.NO, True, _B.FAILURE, _H.LIVE_FAILURE),
    Outcome.DISCONNECTED: (_R.NO, True, _B.FAILURE, _H.LIVE_FAILURE),
    Outcome.STREAM_ERROR: (_R.NO, True, _B.FAILURE, _H.LIVE_FAILURE),
    Outcome.UNSUPPORTED_FIELD: (_R.WITHOUT_REFUSED, True, _B.RELEASE, _H.NONE),
    Outcome.MODEL_UNAVAILABLE: (_R.NO, True, _B.FAILURE, _H.LIVE_FAILURE),
    # An upstream proxy's failure (issue 36): never the provider's breaker or health.
    Outcome.PROXY_REFUSED: (_R.NEXT_HOP, True, _B.RELEASE, _H.NONE),
    Outcome.PROXY_AUTH_FAILED: (_R.NEXT_HOP, True, _B.RELEASE, _H.NONE),
    Outcome.PROXY_REJECTED: (_R.NEXT_HOP, True, _B.RELEASE, _H.NONE),
    Outcome.PROXY_BAD_GATEWAY: (_R.NEXT_HOP, True, _B.RELEASE, _H.NONE),
    Outcome.PROXY_RATE_LIMITED: (_R.PROXY_BACKOFF, True, _B.RELEASE, _H.NONE),
    Outcome.CERTIFICATE_UNTRUSTED: (_R.NEXT_HOP, True, _B.RELEASE, _H.NONE),
    # ... and reached directly, "the route's" is the provider's: its breaker, red.
    Outcome.UNTRUSTED_PROVIDER: (_R.NO, True, _B.FAILURE, _H.UNTRUSTED),
    Local.INVALID_REQUEST: (_R.NO, False, _B.RELEASE, _H.NONE),
    Local.TRANSLATION_ERROR: (_R.NO, True, _B.RELEASE, _H.NONE),
    Local.CREDENTIALS: (_R.NO, True, _B.RELEASE, _H.CREDENTIALS),
    Local.QUEUE_FULL: (_R.NO, True, _B.RELEASE, _H.NONE),
    Local.NEEDS_LOGIN: (_R.NO, True, _B.FAILURE, _H.AUTH_FAILING),
}


def test_every_outcome_has_exactly_one_row() -> None:
    assert set(POLICY) == set(Outcome) | set(Local)
    assert len(POLICY) == len(Outcome) + len(Local)  # no value shared by the two kinds


@pytest.mark.parametrize("key", list(POLICY), ids=str)
def test_the_row_says_what_the_failure_table_says(key: Key) -> None:
    rule = POLICY[key]
    assert (rule.retry, rule.failover, rule.breaker, rule.health) == EXPECTED[key]
    assert rule.token == TOKENS.get(key, key.value)


# A row whose attempt carries another row's word: the one outcome, told apart by route.
TOKENS: dict[Key, str] = {Outcome.UNTRUSTED_PROVIDER: "certificate_untrusted"}


def test_only_what_the_client_asked_for_is_answered_without_failing_over() -> None:
    answered = {k for k, r in POLICY.items() if not r.failover}
    assert answered == {Outcome.OK, Outcome.CLIENT_ERROR, Local.INVALID_REQUEST}
    assert not AFTER_COMMIT.failover and AFTER_COMMIT.retry is Retry.NO
    assert AFTER_COMMIT.breaker is BreakerEffect.FAILURE


def test_breaker_failure_reads_the_table_and_blames_the_provider_for_unknown_words() -> None:
    assert [breaker_failure(w) for w in ("server_error", "needs_login", "rate_limited",
                                         "queue_full", "ok", "something_older")] == \
        [True, True, False, False, False, True]


def test_the_older_three_column_view_agrees_with_the_table() -> None:
    for outcome, d in dispositions().items():
        rule = POLICY[outcome]
        assert (d.retry_same, d.failover, d.breaker_failure) == (
            rule.retry is not Retry.NO, rule.failover, rule.breaker is BreakerEffect.FAILURE)
    assert set(dispositions()) == set(Outcome)


# -- each row through the proxy ----------------------------------------------------------------


async def _pair(fakes: Any, proxy_factory: Any, primary: str = "anthropic", *,
                extra: str = "", **engine_kw: Any) -> Proxy:
    f = await fakes(("primary", primary), ("backup", "anthropic"))
    config = build_config(profile_toml("primary", f["primary"], backups=["backup"], extra=extra)
                          + profile_toml("backup", f["backup"]))
    proxy: Proxy = await proxy_factory(config, fakes=f, **engine_kw)
    return proxy


async def _trail(proxy: Proxy, provider: str = "primary") -> list[str]:
    """The outcomes of `provider`'s attempts in the last request event."""
    events = proxy.engine.events
    await eventually(lambda: bool(events.since(0, {"request"})))
    attempts = events.since(0, {"request"})[-1].data["attempts"]
    return [a["outcome"] for a in attempts if a["provider"] == provider]


def _check(proxy: Proxy, resp: httpx.Response, rule: Rule, outcomes: list[str],
           name: str = "primary") -> None:
    """What the row says happened: the token, the retry, the failover, breaker and health."""
    rt = proxy.engine.runtimes[name]
    assert rule.token in outcomes, outcomes
    retried = outcomes.count(rule.token) > 1 or outcomes[-1] != rule.token
    # (AFTER_RESET tries the provider again only after its window's reset, by another request)
    assert retried == (rule.retry not in (Retry.NO, Retry.AFTER_RESET)), outcomes
    if rule.failover:
        assert resp.headers["x-claudex-provider"] == "backup", resp.headers
    else:
        assert resp.headers.get("x-claudex-provider") in (name, None)
        assert proxy.fakes["backup"].request_count == 0
    failures = 1 if rule.breaker is BreakerEffect.FAILURE else 0
    assert rt.breaker.snapshot().consecutive_failures == failures
    assert rt.stats.failures == failures
    live = rule.health in (HealthEffect.LIVE_FAILURE, HealthEffect.AUTH_FAILING,
                           HealthEffect.UNTRUSTED)
    assert rt.health.live_failure_since_probe is live
    assert rt.health.auth_failing is (rule.health is HealthEffect.AUTH_FAILING)
    assert (rt.health.credentials_problem is not None) is (rule.health is HealthEffect.CREDENTIALS)
    assert (rt.health.untrusted is not None) is (rule.health is HealthEffect.UNTRUSTED)
    assert rt.breaker.snapshot().probes_in_flight == 0  # the permit went back
    if rule.counter is not None:
        assert getattr(rt.stats, rule.counter) == outcomes.count(rule.token)


@row(Outcome.OK)
async def test_ok_is_served_and_clears_auth_failing(fakes: Any, proxy_factory: Any) -> None:
    proxy = await _pair(fakes, proxy_factory)
    proxy.engine.runtimes["primary"].health.auth_failing = True  # from an earlier 401
    resp = await proxy.messages()
    assert resp.status_code == 200
    _check(proxy, resp, POLICY[Outcome.OK], await _trail(proxy))
    assert proxy.engine.runtimes["primary"].stats.successes == 1


@row(Outcome.CLIENT_ERROR)
async def test_a_client_error_goes_back_unchanged(fakes: Any, proxy_factory: Any) -> None:
    proxy = await _pair(fakes, proxy_factory)
    resp = await proxy.messages(anthropic_body(model="no-such-model"))
    assert resp.status_code == 404  # the fake's own answer to a model it does not serve
    assert resp.json()["type"] == "error"
    _check(proxy, resp, POLICY[Outcome.CLIENT_ERROR], await _trail(proxy))


@row(Outcome.TOKEN_LIMIT)
async def test_a_stated_token_limit_is_tried_once_at_that_cap(proxy_factory: Any) -> None:
    capped = FakeProvider("ds", "openai", max_output_tokens=8192,
                          models=served_models("ds", "openai"))
    async with capped:
        proxy = await proxy_factory(build_config(profile_toml("ds", capped)),
                                    fakes={"ds": capped})
        resp = await proxy.messages({**anthropic_body(), "max_tokens": 32000}, profile="ds")
        assert resp.status_code == 200
        outcomes = await _trail(proxy, "ds")
        assert outcomes == ["max_tokens_limit", "ok"]  # once, at the cap
        rt = proxy.engine.runtimes["ds"]
        assert rt.breaker.snapshot().consecutive_failures == 0 and rt.stats.failures == 0
        assert not rt.health.live_failure_since_probe
        assert [r.json["max_tokens"] for r in capped.requests] == [32000, 8192]


@row(Outcome.CONTEXT_EXCEEDED)
async def test_a_backup_too_small_for_the_conversation_passes_it_on(fakes: Any,
                                                                    proxy_factory: Any) -> None:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    small = FakeProvider("small", "openai", models=served_models("small", "openai"))
    small.context_window = 1024
    async with small:
        config = build_config(profile_toml("primary", f["primary"], backups=["small", "backup"])
                              + profile_toml("small", small) + profile_toml("backup", f["backup"]))
        proxy = await proxy_factory(config, fakes={**f, "small": small})
        f["primary"].set_fault("529")
        resp = await proxy.messages(anthropic_body("lorem ipsum " * 600))
        assert resp.status_code == 200
        outcomes = await _trail(proxy, "small")
        assert outcomes == ["context_exceeded"]
        _check(proxy, resp, POLICY[Outcome.CONTEXT_EXCEEDED], outcomes, "small")


_STUBBORN = (b'{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: '
             b'64000 > 8192, which is the maximum allowed number of output tokens"}}')


async def test_a_provider_refusing_even_at_its_stated_cap_is_left_for_a_backup(
    fakes: Any, proxy_factory: Any
) -> None:
    asked: list[int] = []

    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        asked.append(json.loads(await reader.readexactly(length))["max_tokens"])
        writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
                     b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
                     % (len(_STUBBORN), _STUBBORN))
        await writer.drain()
        writer.close()

    async with _raw_server(refuse) as base_url:
        proxy = await _raw_pair(fakes, proxy_factory, base_url)
        resp = await proxy.messages({**anthropic_body(), "max_tokens": 64000})
        outcomes = await _trail(proxy)
        assert outcomes == ["max_tokens_limit", "max_tokens_limit"]
        assert asked == [64000, 8192]  # once more, at the stated cap, then no more
        _check(proxy, resp, POLICY[Outcome.TOKEN_LIMIT], outcomes)


@row(Outcome.RATE_LIMITED)
async def test_a_rate_limit_is_retried_with_backoff_then_fails_over(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await _pair(fakes, proxy_factory)
    proxy.fakes["primary"].set_fault("429", retry_after=2)
    resp = await proxy.messages()
    assert resp.status_code == 200
    outcomes = await _trail(proxy)
    assert outcomes == ["rate_limited"] * 5  # [retry] max_attempts
    assert proxy.sleep.waits == [2.0] * 4  # the provider's Retry-After, honoured
    _check(proxy, resp, POLICY[Outcome.RATE_LIMITED], outcomes)


@row(Outcome.AUTH_ERROR)
async def test_an_auth_error_fails_over_and_shows_auth(fakes: Any, proxy_factory: Any) -> None:
    proxy = await _pair(fakes, proxy_factory)
    proxy.fakes["primary"].set_fault("401")
    resp = await proxy.messages()
    _check(proxy, resp, POLICY[Outcome.AUTH_ERROR], await _trail(proxy))


async def _oauth_pair(fakes: Any, proxy_factory: Any, creds: Path, token_url: str) -> Proxy:
    f = await fakes(("claude", "anthropic"), ("backup", "anthropic"))
    text = oauth_profile(f["claude"], creds, token_url).replace(
        "token_url", 'backup_providers = ["backup"]\ntoken_url')
    text += profile_toml("backup", f["backup"])
    proxy: Proxy = await proxy_factory(build_config(text), fakes=f)
    f["claude"].faults.valid_tokens = {"a-token-nobody-has"}
    return proxy


@row(Outcome.TOKEN_EXPIRED)
async def test_an_expired_token_is_refreshed_once_then_fails_over(
    fakes: Any, proxy_factory: Any, tmp_path: Path
) -> None:
    creds = tmp_path / "credentials.json"
    write_credentials(creds, "tok-old", refresh="refresh-1")
    async with FakeTokenServer() as tokens:
        proxy = await _oauth_pair(fakes, proxy_factory, creds, tokens.token_url)
        resp = await proxy.messages()
        outcomes = await _trail(proxy, "claude-oauth")
        assert outcomes == ["token_expired", "token_expired"]  # refreshed, retried once
        _check(proxy, resp, POLICY[Outcome.TOKEN_EXPIRED], outcomes, "claude-oauth")


@row(Local.NEEDS_LOGIN)
async def test_a_refresh_that_cannot_happen_says_needs_login(
    fakes: Any, proxy_factory: Any, tmp_path: Path
) -> None:
    creds = tmp_path / "credentials.json"
    write_credentials(creds, "tok-old", refresh="refresh-1")
    async with FakeTokenServer() as tokens:
        tokens.set_failing("invalid_grant")
        proxy = await _oauth_pair(fakes, proxy_factory, creds, tokens.token_url)
        resp = await proxy.messages()
        outcomes = await _trail(proxy, "claude-oauth")
        assert outcomes == ["token_expired", "needs_login"]
        _check(proxy, resp, POLICY[Local.NEEDS_LOGIN], outcomes[1:], "claude-oauth")


@row(Outcome.SERVER_ERROR)
async def test_a_server_error_fails_over(fakes: Any, proxy_factory: Any) -> None:
    proxy = await _pair(fakes, proxy_factory)
    proxy.fakes["primary"].set_fault("529")
    resp = await proxy.messages()
    assert resp.headers["x-claudex-attempts"] == "primary:529,backup:200"
    _check(proxy, resp, POLICY[Outcome.SERVER_ERROR], await _trail(proxy))


@row(Outcome.CONNECT_ERROR)
async def test_a_refused_connection_fails_over_at_once(fakes: Any, proxy_factory: Any) -> None:
    proxy = await _pair(fakes, proxy_factory)
    proxy.fakes["primary"].set_fault("down")
    resp = await proxy.messages()
    _check(proxy, resp, POLICY[Outcome.CONNECT_ERROR], await _trail(proxy))
    assert proxy.sleep.waits == []


@row(Outcome.TIMEOUT)
async def test_no_answer_in_time_fails_over(fakes: Any, proxy_factory: Any) -> None:
    proxy = await _pair(fakes, proxy_factory, extra="read_timeout = 0.3")
    proxy.fakes["primary"].set_fault("hang")
    resp = await proxy.messages()
    _check(proxy, resp, POLICY[Outcome.TIMEOUT], await _trail(proxy))


@contextlib.asynccontextmanager
async def _raw_server(handle: Callable[[asyncio.StreamReader, asyncio.StreamWriter],
                                       Awaitable[None]]) -> AsyncIterator[str]:
    """A provider that is not one: `handle` answers (or does not) each connection."""
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()


async def _raw_pair(fakes: Any, proxy_factory: Any, base_url: str) -> Proxy:
    f = await fakes(("backup", "anthropic"))
    config = build_config(f"""
[[profiles]]
name = "primary"
provider_type = "DirectAnthropic"
base_url = "{base_url}"
api_key_env = "FAKE_KEY"
backup_providers = ["backup"]
""" + profile_toml("backup", f["backup"]))
    proxy: Proxy = await proxy_factory(config, fakes=f)
    return proxy


@row(Outcome.DISCONNECTED)
async def test_a_connection_closed_before_answering_fails_over(
    fakes: Any, proxy_factory: Any
) -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")  # the request's head, then nothing
        writer.close()

    async with _raw_server(hang_up) as base_url:
        proxy = await _raw_pair(fakes, proxy_factory, base_url)
        resp = await proxy.messages()
        _check(proxy, resp, POLICY[Outcome.DISCONNECTED], await _trail(proxy))


@row(Outcome.STREAM_ERROR)
async def test_a_stream_cut_before_content_fails_over(fakes: Any, proxy_factory: Any) -> None:
    proxy = await _pair(fakes, proxy_factory)
    proxy.fakes["primary"].set_fault("cut_before_content")
    resp = await proxy.messages(anthropic_body(stream=True))
    assert "content_block_delta" in resp.text
    _check(proxy, resp, POLICY[Outcome.STREAM_ERROR], await _trail(proxy))


async def test_after_the_commit_nothing_fails_over_and_the_breaker_counts(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await _pair(fakes, proxy_factory)
    proxy.fakes["primary"].set_fault("cut", cut_after_events=2)
    resp = await proxy.messages(anthropic_body(stream=True))
    assert "event: error" in resp.text
    # Committed, then broke: the served attempt's trail entry says how it ended.
    assert await _trail(proxy) == ["stream_error"]
    rt = proxy.engine.runtimes["primary"]
    await eventually(lambda: rt.stats.failures == 1)
    assert rt.breaker.snapshot().consecutive_failures == 1
    assert rt.health.live_failure_since_probe
    assert proxy.fakes["backup"].request_count == 0 and proxy.fakes["primary"].request_count == 1


@row(Local.INVALID_REQUEST)
async def test_a_request_translation_refuses_is_answered_400(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await _pair(fakes, proxy_factory, primary="openai")
    body = anthropic_body()
    body["messages"][0]["content"] = 5  # not a string, not a list of blocks
    resp = await proxy.messages(body)
    assert resp.status_code == 400
    assert proxy.fakes["primary"].request_count == 0
    _check(proxy, resp, POLICY[Local.INVALID_REQUEST], await _trail(proxy))


@row(Local.TRANSLATION_ERROR)
async def test_a_translator_bug_fails_over_without_blame(
    fakes: Any, proxy_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise TypeError("a bug in the translator")

    monkeypatch.setattr(translate, "anthropic_to_openai_request", broken)
    proxy = await _pair(fakes, proxy_factory, primary="openai")
    resp = await proxy.messages()
    assert resp.status_code == 200
    _check(proxy, resp, POLICY[Local.TRANSLATION_ERROR], await _trail(proxy))


@row(Local.CREDENTIALS)
async def test_credentials_that_cannot_be_read_fail_over_and_show_misconfigured(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await _pair(fakes, proxy_factory, extra='token_command = "exit 3"')
    resp = await proxy.messages()
    assert proxy.fakes["primary"].request_count == 0
    _check(proxy, resp, POLICY[Local.CREDENTIALS], await _trail(proxy))


@row(Local.QUEUE_FULL)
async def test_no_slot_in_time_fails_over_without_blame(fakes: Any, proxy_factory: Any) -> None:
    proxy = await _pair(fakes, proxy_factory, extra="max_connections = 1\nqueue_timeout = 0.2")
    proxy.fakes["primary"].set_fault("hang")
    holder = asyncio.create_task(proxy.messages())
    await proxy.fakes["primary"].wait_for_requests(1)
    resp = await proxy.messages()
    outcomes = await _trail(proxy)
    assert outcomes == ["queue_full"]
    _check(proxy, resp, POLICY[Local.QUEUE_FULL], outcomes)
    holder.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holder


@row(Outcome.PLAN_LIMIT)
async def test_a_spent_plan_window_fails_over_at_once(fakes: Any, proxy_factory: Any) -> None:
    proxy = await _pair(fakes, proxy_factory)
    proxy.fakes["primary"].plan = Plan.claude()
    proxy.fakes["primary"].plan.spend(600)
    resp = await proxy.messages()
    assert resp.status_code == 200
    _check(proxy, resp, POLICY[Outcome.PLAN_LIMIT], await _trail(proxy))
    assert proxy.fakes["primary"].request_count == 1 and proxy.sleep.waits == []
    assert proxy.engine.runtimes["primary"].window_spent_until > 0


async def _bedrock_pair(fakes: Any, proxy_factory: Any, bedrock: FakeBedrock,
                        model: str = cloud_world.MODEL) -> Proxy:
    f = await fakes(("backup", "anthropic"))
    config = build_config(cloud_world.bedrock_toml("primary", bedrock.base_url,
                                                   backups=("backup",), model=model)
                          + profile_toml("backup", f["backup"]))
    proxy: Proxy = await proxy_factory(config, fakes={"primary": bedrock, **f})
    return proxy


@row(Outcome.UNSUPPORTED_FIELD)
async def test_a_field_a_cloud_refuses_is_dropped_and_tried_again(fakes: Any,
                                                                   proxy_factory: Any) -> None:
    async with FakeBedrock(api_keys=[TEST_ENV["FAKE_KEY"]]) as bedrock:
        proxy = await _bedrock_pair(fakes, proxy_factory, bedrock)
        resp = await proxy.messages({**anthropic_body(), "context_management": {}})
        assert resp.status_code == 200 and resp.headers["x-claudex-provider"] == "primary"
        outcomes = await _trail(proxy)
        assert outcomes == ["unsupported_field", "ok"]  # once more, without it
        rt = proxy.engine.runtimes["primary"]
        assert rt.breaker.snapshot().consecutive_failures == 0 and rt.stats.failures == 0
        assert not rt.health.live_failure_since_probe
        assert proxy.fakes["backup"].request_count == 0


@row(Outcome.MODEL_UNAVAILABLE)
async def test_a_model_the_cloud_cannot_serve_fails_over(fakes: Any, proxy_factory: Any) -> None:
    async with FakeBedrock(api_keys=[TEST_ENV["FAKE_KEY"]]) as bedrock:
        proxy = await _bedrock_pair(fakes, proxy_factory, bedrock, "us.anthropic.none-v1:0")
        resp = await proxy.messages()
        assert resp.status_code == 200
        _check(proxy, resp, POLICY[Outcome.MODEL_UNAVAILABLE], await _trail(proxy))


# -- an upstream proxy's rows (issue 36): the provider behind two proxies that both fail ----------


async def _via_proxies(fakes: Any, proxy_factory: Any, hops: tuple[Hop, ...],
                       base_url: str | None = "https://127.0.0.1:9",
                       ssl_context: Any = None) -> Proxy:
    """primary (backup: backup) with primary's route through `hops`; `base_url`: https, so
    the proxies are asked to CONNECT (nothing listens there: a failing proxy never gets that
    far)."""
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    text = profile_toml("primary", f["primary"], backups=["backup"]) + profile_toml(
        "backup", f["backup"])
    if base_url is not None:
        text = text.replace(f["primary"].base_url, base_url, 1)
    proxy: Proxy = await proxy_factory(build_config(text), fakes=f, resolve_network=network(
        {"primary": Route(hops, ssl_context)}, max_attempts=2))
    return proxy


async def _proxy_row(fakes: Any, proxy_factory: Any, key: Outcome, status: int) -> None:
    corp, corp2 = (await ConnectProxy(status, {"Retry-After": "1"}).start(),
                   await ConnectProxy(status, {"Retry-After": "1"}).start())
    try:
        proxy = await _via_proxies(fakes, proxy_factory, (http_hop("corp", corp.port),
                                                          http_hop("corp-2", corp2.port)))
        resp = await proxy.messages()
        outcomes = await _trail(proxy)
        _check(proxy, resp, POLICY[key], outcomes)
        assert {a.split(":")[0] for a in resp.headers["x-claudex-attempts"].split(",")} == {
            "primary", "backup"}
        assert corp.connects >= 1 and corp2.connects >= 1  # seed 000: the next one at once
    finally:
        await corp.close()
        await corp2.close()


@row(Outcome.PROXY_REFUSED)
async def test_a_refusing_proxy_is_the_proxys_failure(fakes: Any, proxy_factory: Any) -> None:
    proxy = await _via_proxies(fakes, proxy_factory, (http_hop("corp", closed_port()),
                                                      http_hop("corp-2", closed_port())))
    resp = await proxy.messages()
    outcomes = await _trail(proxy)
    _check(proxy, resp, POLICY[Outcome.PROXY_REFUSED], outcomes)
    assert outcomes == ["proxy_refused", "proxy_refused"]


@row(Outcome.PROXY_AUTH_FAILED)
async def test_a_proxy_refusing_the_password_is_the_proxys(fakes: Any,
                                                           proxy_factory: Any) -> None:
    await _proxy_row(fakes, proxy_factory, Outcome.PROXY_AUTH_FAILED, 407)


@row(Outcome.PROXY_REJECTED)
async def test_a_proxy_forbidding_the_connect_is_the_proxys(fakes: Any,
                                                            proxy_factory: Any) -> None:
    await _proxy_row(fakes, proxy_factory, Outcome.PROXY_REJECTED, 403)


@row(Outcome.PROXY_BAD_GATEWAY)
async def test_a_proxys_bad_gateway_is_the_proxys(fakes: Any, proxy_factory: Any) -> None:
    await _proxy_row(fakes, proxy_factory, Outcome.PROXY_BAD_GATEWAY, 503)


@row(Outcome.PROXY_RATE_LIMITED)
async def test_a_proxys_429_backs_off_there_then_moves_on(fakes: Any,
                                                          proxy_factory: Any) -> None:
    await _proxy_row(fakes, proxy_factory, Outcome.PROXY_RATE_LIMITED, 429)


@row(Outcome.CERTIFICATE_UNTRUSTED)
async def test_an_untrusted_certificate_through_a_proxy_is_the_proxys(
        tmp_path: Path, fakes: Any, proxy_factory: Any) -> None:
    _ca, server_tls = private_ca(tmp_path)
    corp, corp2 = await ConnectProxy().start(), await ConnectProxy().start()
    f = await fakes(("target", "anthropic"))
    try:
        async with tls_front(server_tls, int(f["target"].base_url.rsplit(":", 1)[1])) as port:
            proxy = await _via_proxies(fakes, proxy_factory, (
                http_hop("corp", corp.port), http_hop("corp-2", corp2.port)),
                base_url=f"https://127.0.0.1:{port}")
            resp = await proxy.messages()
            _check(proxy, resp, POLICY[Outcome.CERTIFICATE_UNTRUSTED], await _trail(proxy))
    finally:
        await corp.close()
        await corp2.close()


@row(Outcome.UNTRUSTED_PROVIDER)
async def test_an_untrusted_certificate_reached_directly_is_the_providers(
        tmp_path: Path, fakes: Any, proxy_factory: Any) -> None:
    _ca, server_tls = private_ca(tmp_path)
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    async with tls_front(server_tls, int(f["primary"].base_url.rsplit(":", 1)[1])) as port:
        text = profile_toml("primary", f["primary"], backups=["backup"]) + profile_toml(
            "backup", f["backup"])
        config = build_config(text.replace(f["primary"].base_url,
                                           f"https://127.0.0.1:{port}", 1))
        proxy = await proxy_factory(config, fakes=f)
        resp = await proxy.messages()
        _check(proxy, resp, POLICY[Outcome.UNTRUSTED_PROVIDER], await _trail(proxy))
        assert proxy.engine.runtimes["primary"].health.untrusted == (
            "certificate not trusted: issuer CN=Zscaler Root CA — set ca_bundle")


def test_every_row_is_tested_through_the_proxy() -> None:
    assert TESTED == set(POLICY)

