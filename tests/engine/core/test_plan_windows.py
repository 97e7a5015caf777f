"""Subscriptions through a real server on 127.0.0.1 (issue 22): a spent plan window fails over
at once with one request to it, is skipped until its reset (saying so), and serves again by
itself after it; the windows every answer describes are kept per provider and shown."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from claudex.demo.fake_plans import Plan
from claudex.engine.history.database import open_database
from claudex.engine.history.journal import Journal
from claudex.providers.windows import clock_text
from tests.conftest import anthropic_body, build_config, profile_toml


class Wall:
    """The wall clock the engine and the fakes' plans share (epoch s), moved by the test."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def subscription(fakes: Any, proxy_factory: Any, kind: str = "claude",
                       chain: tuple[str, ...] = ("backup",), **plan_kw: Any) -> Any:
    protocol = "anthropic" if kind == "claude" else "responses"
    f = await fakes(("sub", protocol), *((name, "anthropic") for name in chain))
    wall = Wall()
    plan = Plan.claude(clock=wall, **plan_kw) if kind == "claude" else \
        Plan.chatgpt(clock=wall, **plan_kw)
    f["sub"].plan = plan
    config = build_config(profile_toml("sub", f["sub"], backups=list(chain))
                          + "".join(profile_toml(name, f[name]) for name in chain))
    proxy = await proxy_factory(config, fakes=f, wall=wall)
    proxy.wall = wall
    return proxy


async def profile_status(proxy: Any, name: str) -> dict[str, Any]:
    """The profile's part of the status route's JSON."""
    status = (await proxy.client.get("/_claudex/status")).json()
    return dict(next(p for p in status["profiles"] if p["name"] == name))


async def test_a_spent_claude_window_fails_over_at_once_and_is_skipped_until_its_reset(
        fakes: Any, proxy_factory: Any) -> None:
    proxy = await subscription(fakes, proxy_factory)
    sub = proxy.fakes["sub"]
    sub.plan.spend(600)  # full, resets in 10 minutes; the 429 carries no Retry-After
    reset = proxy.wall.now + 600

    resp = await proxy.messages(profile="sub")
    assert resp.status_code == 200
    assert resp.headers["x-claudex-attempts"] == "sub:plan_limit,backup:200"
    assert sub.request_count == 1  # one request to the spent plan, no retry
    assert proxy.sleep.waits == []  # and no backoff before the failover
    rt = proxy.engine.runtimes["sub"]
    assert abs(rt.window_spent_until - reset) <= 1  # from anthropic-ratelimit-unified-reset
    assert rt.breaker.snapshot().consecutive_failures == 0  # not the provider's failure

    again = await proxy.messages(profile="sub")
    assert again.headers["x-claudex-attempts"] == "sub:window_spent,backup:200"
    assert sub.request_count == 1  # skipped without sending
    status = await profile_status(proxy, "sub")
    assert status["window_spent_until"] == round(rt.window_spent_until, 3)
    assert status["window_spent"] == "5h"
    assert status["health"]["color"] == "yellow"
    assert status["health"]["reason"] == (
        f"5-hour window spent until {clock_text(rt.window_spent_until, proxy.wall.now)}")
    events = [e for e in proxy.engine.events.since(0) if e.kind == "window"]
    assert len(events) == 1 and "sub: 5-hour window spent until" in events[0].message

    proxy.wall.now = reset + 1  # the window reset: the plan serves again, by itself
    back = await proxy.messages(profile="sub")
    assert back.headers["x-claudex-attempts"] == "sub:200"
    assert sub.request_count == 2
    assert (await profile_status(proxy, "sub"))["window_spent_until"] is None


async def test_a_spent_chatgpt_plan_fails_over_at_once_from_its_usage_limit_answer(
        fakes: Any, proxy_factory: Any) -> None:
    proxy = await subscription(fakes, proxy_factory, kind="chatgpt")
    sub = proxy.fakes["sub"]
    sub.plan.spend(3600)
    resp = await proxy.messages(profile="sub")
    assert resp.status_code == 200
    assert resp.headers["x-claudex-attempts"] == "sub:plan_limit,backup:200"
    assert sub.request_count == 1 and proxy.sleep.waits == []
    rt = proxy.engine.runtimes["sub"]
    assert abs(rt.window_spent_until - (proxy.wall.now + 3600)) <= 1  # from resets_at
    assert rt.window_spent_name == "5h"  # the window its headers said was full
    again = await proxy.messages(profile="sub")
    assert again.headers["x-claudex-attempts"] == "sub:window_spent,backup:200"
    assert sub.request_count == 1


async def test_when_every_provider_is_out_the_sentence_names_the_reset(
        fakes: Any, proxy_factory: Any) -> None:
    proxy = await subscription(fakes, proxy_factory)
    proxy.fakes["sub"].plan.spend(600)
    proxy.fakes["backup"].set_fault("down")
    resp = await proxy.messages(profile="sub")
    assert resp.status_code == 502
    until = clock_text(proxy.engine.runtimes["sub"].window_spent_until, proxy.wall.now)
    assert resp.json()["error"]["message"] == (
        f"sub's 5-hour window is spent until {until} and backup is down.")


async def test_a_spent_plan_alone_answers_429_with_the_time_to_its_reset(
        fakes: Any, proxy_factory: Any) -> None:
    proxy = await subscription(fakes, proxy_factory, chain=())
    proxy.fakes["sub"].plan.spend(120)
    for expected in ("sub:plan_limit", "sub:window_spent"):
        resp = await proxy.messages(profile="sub")
        assert resp.status_code == 429
        assert resp.headers["x-claudex-attempts"] == expected
        assert 115 <= int(resp.headers["retry-after"]) <= 121
        assert "sub's 5-hour window is spent until" in resp.json()["error"]["message"]
    assert proxy.fakes["sub"].request_count == 1


async def test_every_answer_keeps_the_plans_windows_for_status(
        fakes: Any, proxy_factory: Any) -> None:
    proxy = await subscription(fakes, proxy_factory, tokens_5h=1000)
    resp = await proxy.messages(profile="sub")
    assert resp.status_code == 200
    rt = proxy.engine.runtimes["sub"]
    used = proxy.fakes["sub"].plan.windows[0].share()
    assert 0 < used < 1
    windows = (await profile_status(proxy, "sub"))["windows"]
    assert [w["name"] for w in windows] == ["5h", "7d"]
    assert abs(windows[0]["used"] - used) < 0.001
    assert windows[0]["status"] in ("allowed", "allowed_warning")
    assert rt.window_used() == max(w.used for w in rt.windows)
    metrics = (await proxy.client.get("/metrics")).text
    used_5h = rt.windows[0].used
    assert f'claudex_provider_window_used_ratio{{provider="sub",window="5h"}} {used_5h}' \
        in metrics
    assert 'provider="backup",window=' not in metrics
    # A provider not asked yet has no windows.
    assert (await profile_status(proxy, "backup"))["windows"] == []
    assert proxy.engine.runtimes["backup"].window_used() == 0.0


async def test_a_plan_filled_by_the_tokens_served_fails_over_when_full(
        fakes: Any, proxy_factory: Any) -> None:
    proxy = await subscription(fakes, proxy_factory, tokens_5h=60)
    trails = []
    for _ in range(8):
        resp = await proxy.messages(anthropic_body("hello " * 5), profile="sub")
        assert resp.status_code == 200
        trails.append(resp.headers["x-claudex-attempts"])
    assert trails[0] == "sub:200"
    assert "sub:plan_limit,backup:200" in trails
    assert trails[-1] == "sub:window_spent,backup:200"
    assert proxy.fakes["sub"].plan.refused == 1


async def test_the_journal_keeps_each_requests_windows(
        fakes: Any, proxy_factory: Any, tmp_path: Path) -> None:
    f = await fakes(("sub", "anthropic"), ("key", "anthropic"))
    f["sub"].plan = Plan.claude(tokens_5h=1000)
    journal = Journal(tmp_path / "history.sqlite3")
    config = build_config(profile_toml("sub", f["sub"]) + profile_toml("key", f["key"]))
    proxy = await proxy_factory(config, fakes=f, journal=journal)
    assert (await proxy.messages(profile="sub")).status_code == 200
    assert (await proxy.messages(profile="key")).status_code == 200
    journal.flush()
    conn = sqlite3.connect(tmp_path / "history.sqlite3")
    rows = dict(conn.execute("SELECT profile, windows FROM requests").fetchall())
    conn.close()
    kept = json.loads(rows["sub"])
    assert kept["provider"] == "sub"
    assert [w["name"] for w in kept["windows"]] == ["5h", "7d"]
    assert kept["windows"][0]["used"] == round(f["sub"].plan.windows[0].share(), 4)
    # An API key's answer describes its rate limits (tests/engine/core/test_key_windows.py),
    # which status shows and the journal does not keep: a plan's windows only.
    assert rows["key"] is None


def test_an_older_journal_gains_the_windows_column(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE requests (rowid INTEGER PRIMARY KEY, event_id INTEGER, "
                 "time REAL NOT NULL, protocol TEXT, endpoint TEXT, model TEXT, profile TEXT, "
                 "provider TEXT, status INTEGER, outcome TEXT, latency_ms REAL, stream INTEGER, "
                 "trail TEXT, attempts TEXT, dropped TEXT, input_tokens INTEGER, "
                 "output_tokens INTEGER, cache_read_tokens INTEGER)")
    conn.execute("INSERT INTO requests (time, profile, status) VALUES (1.0, 'old', 200)")
    conn.commit()
    conn.close()
    open_database(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT profile, windows FROM requests").fetchall() == [("old", None)]
    conn.close()


async def test_within_its_reserve_a_plan_starts_new_conversations_on_the_backups(
        fakes: Any, proxy_factory: Any) -> None:
    f = await fakes(("sub", "anthropic"), ("backup", "anthropic"))
    wall = Wall()
    f["sub"].plan = Plan.claude(clock=wall)
    config = build_config(profile_toml("sub", f["sub"], backups=["backup"],
                                       extra="reserve = 0.1")
                          + profile_toml("backup", f["backup"]))
    proxy = await proxy_factory(config, fakes=f, wall=wall)
    ongoing = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [
        {"role": "user", "content": "the session under way"},
        {"role": "assistant", "content": "yes"}, {"role": "user", "content": "go on"}]}
    assert (await proxy.messages(ongoing, profile="sub")).headers["x-claudex-provider"] == "sub"
    window = f["sub"].plan.windows[0]
    window.used = int(window.capacity * 0.92)  # within the last 10 %
    assert (await proxy.messages(profile="sub")).headers["x-claudex-provider"] == "sub"  # (read)
    new = await proxy.messages(anthropic_body("a new conversation"), profile="sub")
    assert new.headers["x-claudex-attempts"] == "sub:reserve,backup:200"
    # Its next turn stays on the backups; the conversation under way stays on the plan.
    later = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [
        {"role": "user", "content": "a new conversation"},
        {"role": "assistant", "content": "hi"}, {"role": "user", "content": "more"}]}
    assert (await proxy.messages(later, profile="sub")).headers["x-claudex-attempts"] == \
        "sub:reserve,backup:200"
    assert (await proxy.messages(ongoing, profile="sub")).headers["x-claudex-provider"] == "sub"
    # No backup can take it: the plan serves after all.
    f["backup"].set_fault("down")
    resp = await proxy.messages(anthropic_body("another new one"), profile="sub")
    assert resp.status_code == 200
    assert resp.headers["x-claudex-attempts"] == "sub:reserve,backup:connect_error,sub:200"


async def test_the_chatgpt_backends_rate_limits_event_gives_the_windows(
        fakes: Any, proxy_factory: Any, tmp_path: Path) -> None:
    from claudex.demo.fake_responses import ChatGPTRules
    from tests.engine.credentials.test_proxy_codex_auth import (
        ACCOUNT,
        codex_profile,
        write_auth_json,
    )

    f = await fakes(("backend", "responses"),)
    backend = f["backend"]
    backend.chatgpt = ChatGPTRules(account_id=ACCOUNT)
    backend.strict_models = False
    plan = backend.plan = Plan.chatgpt(tokens_5h=1000)
    plan.headers = lambda: {}  # type: ignore[method-assign]  # the event alone says them
    auth_json = tmp_path / "auth.json"
    write_auth_json(auth_json, "tok")
    proxy = await proxy_factory(build_config(codex_profile(backend, auth_json,
                                                           "http://127.0.0.1:9/token")),
                                fakes=f)
    resp = await proxy.messages(profile="codex")
    assert resp.status_code == 200, resp.text
    windows = (await profile_status(proxy, "codex"))["windows"]
    assert [w["name"] for w in windows] == ["5h", "7d"]
    assert windows[0]["used"] > 0
    # A streamed answer's event, before the commit, says them too.
    proxy.engine.runtimes["codex"].windows = ()
    streamed = await proxy.client.post("/proxy/codex/v1/messages",
                                       json=anthropic_body(stream=True),
                                       headers={"anthropic-version": "2023-06-01"})
    assert streamed.status_code == 200 and "message_stop" in streamed.text
    assert [w.name for w in proxy.engine.runtimes["codex"].windows] == ["5h", "7d"]
