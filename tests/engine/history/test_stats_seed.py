"""After a restart the panels' counters and sparklines start from the history journal
(engine/history/seed.py): two real engine lifetimes on one SQLite file, and the reading itself
against hand-made rows (today's totals, the 30-minute window, what this lifetime wrote)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from claudex.engine.addons.latency import MINUTES
from claudex.engine.core.usage import Usage
from claudex.engine.engine import Engine
from claudex.engine.events import Event
from claudex.engine.history.journal import Journal
from claudex.engine.history.seed import Seed, apply_seed, local_midnight, read_seed
from tests.conftest import TEST_ENV, build_config, openai_body, profile_toml
from tests.engine.history.test_journal import journal_with


async def lifetime(fakes: dict[str, Any], proxy_factory: Any, path: Path) -> Any:
    config = build_config(profile_toml("grok", fakes["grok"], backups=["deepseek"])
                          + profile_toml("deepseek", fakes["deepseek"]))
    journal = Journal(path, flush_interval_s=0.01)
    proxy = await proxy_factory(config, fakes=fakes, journal=journal)
    assert proxy.engine.seeding is not None  # started by the app's lifespan
    await asyncio.wait_for(proxy.engine.seeding, 20.0)
    return proxy


def counters(status: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for p in status["profiles"]:
        s = p["stats"]
        out[p["name"]] = {
            "requests": s["requests"], "successes": s["successes"], "failures": s["failures"],
            "tokens": p["tokens"], "minute_requests": sum(s["minutes"]["requests"]),
            "minute_errors": sum(s["minutes"]["errors"]),
            "minute_tokens": sum(s["minutes"]["tokens"]),
            "duration_p50": s["latency"]["duration_p50_ms"],
            "duration_p95": s["latency"]["duration_p95_ms"],
            "first_content_p50": s["latency"]["first_content_p50_ms"],
            "samples": s["latency"]["samples"]}
    return out


async def test_a_restart_starts_the_counters_from_the_journal(fakes: Any, proxy_factory: Any,
                                                               tmp_path: Path) -> None:
    f = await fakes(("grok", "openai"), ("deepseek", "openai"))
    path = tmp_path / "history.sqlite3"
    first = await lifetime(f, proxy_factory, path)
    assert counters((await first.client.get("/_claudex/status")).json())["grok"]["requests"] == 0
    for _ in range(3):
        assert (await first.chat(profile="grok")).status_code == 200
    async with first.client.stream("POST", "/proxy/grok/v1/chat/completions",
                                   json=openai_body(stream=True)) as resp:
        assert resp.status_code == 200
        await resp.aread()
    f["grok"].set_fault("500")
    for _ in range(2):  # grok answers 500, deepseek serves
        assert (await first.chat(profile="grok")).status_code == 200
    before = counters((await first.client.get("/_claudex/status")).json())
    assert before["grok"]["requests"] == 6 and before["grok"]["failures"] == 2
    assert isinstance(before["grok"]["first_content_p50"], float)
    assert before["grok"]["minute_errors"] == 2 and before["deepseek"]["successes"] == 2
    assert before["grok"]["tokens"]["input_tokens"] > 0
    await first.server.stop()  # the engine closes: the journal writes what is pending

    f["grok"].set_fault("ok")
    second = await lifetime(f, proxy_factory, path)
    seeded = counters((await second.client.get("/_claudex/status")).json())
    assert seeded == before
    # /metrics counts this process only: a restarted counter must not jump to today's total.
    metrics = (await second.client.get("/metrics")).text
    assert 'claudex_provider_requests_total{provider="grok"} 0.0' in metrics
    assert 'claudex_provider_tokens_total{kind="input",provider="grok"} 0.0' in metrics
    assert (await second.chat(profile="grok")).status_code == 200
    after = counters((await second.client.get("/_claudex/status")).json())["grok"]
    assert after["requests"] == 7 and after["successes"] == 5
    assert after["minute_requests"] == 7 and after["samples"] == 5
    await second.server.stop()


def request(provider: str, at: float, attempts: list[dict[str, Any]], *, status: int = 200,
            stream: bool = False, tokens: tuple[int, int] = (10, 2)) -> Event:
    return Event("request", "r", provider, {
        "protocol": "anthropic", "endpoint": "messages", "model": "m", "profile": provider,
        "provider": provider, "status": status, "stream": stream, "latency_ms": 1.0,
        "attempts": attempts, "trail": "", "dropped": [],
        "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]}}, time=at)


def test_the_seed_reads_today_the_last_half_hour_and_nothing_of_this_lifetime(
        tmp_path: Path) -> None:
    now = local_midnight(1_750_000_000.0) + 12 * 3600.0  # noon
    started = now - 5.0
    ok = {"provider": "a", "outcome": "ok", "status": 200, "latency_ms": 900.0}
    journal = journal_with(tmp_path, [
        request("a", now - 86400.0, [ok]),  # yesterday: nowhere
        request("a", now - 3 * 3600.0, [ok]),  # today, before the window: totals only
        request("b", now - 600.0, [{"provider": "a", "outcome": "server_error", "status": 503},
                                   {"provider": "b", "outcome": "ok", "status": 200,
                                    "first_content_ms": 420.0, "latency_ms": 500.0}],
                stream=True),
        request("a", now - 100.0, [{"provider": "a", "outcome": "breaker_open"},
                                   ok]),
        request("a", now - 1.0, [ok]),  # this lifetime's: not read
    ], wall=lambda: now)
    journal.close()
    seed = read_seed(journal.path, now=now, until=started, day_start=local_midnight(now))
    assert seed is not None
    a, b = seed.providers["a"], seed.providers["b"]
    assert (a.requests, a.successes, a.failures) == (3, 2, 1)
    assert (b.requests, b.successes, b.failures) == (1, 1, 0)
    assert a.tokens.input_tokens == 20 and b.tokens.output_tokens == 2
    minute = int((now - 600.0) // 60)
    assert a.minutes[minute] == [1, 1, 0] and b.minutes[minute] == [1, 0, 12]
    assert a.minutes[int((now - 100.0) // 60)] == [1, 0, 12]
    assert len(a.minutes) == 2  # the 3-hour-old row is outside the 30 minutes
    assert a.durations == [(now - 100.0, 900.0)]  # the one inside five minutes
    assert b.first_content == []  # ten minutes old
    assert seed.since == (int(now // 60) - MINUTES + 1) * 60.0


def test_an_unreadable_journal_leaves_the_counters_at_zero(tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "h.sqlite3"
    path.write_bytes(b"not a database at all" * 100)
    with caplog.at_level(logging.WARNING, logger="claudex.history"):
        assert read_seed(path, now=1000.0, until=1000.0, day_start=0.0) is None
    assert "start from zero" in caplog.text
    missing = read_seed(tmp_path / "none.sqlite3", now=1000.0, until=1000.0, day_start=0.0)
    assert missing is not None and missing.providers == {}


def test_a_journal_another_engine_has_just_created_is_an_empty_seed_not_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import sqlite3

    path = tmp_path / "h.sqlite3"
    sqlite3.connect(path).close()  # the file exists; its tables are still to come
    with caplog.at_level(logging.WARNING, logger="claudex.history"):
        seed = read_seed(path, now=1000.0, until=1000.0, day_start=0.0)
    assert seed is not None and seed.providers == {}
    assert caplog.text == ""


def test_applying_a_seed_sets_the_rates_over_the_minutes_the_journal_saw() -> None:
    config = build_config("".join(f"""
[[profiles]]
name = "{name}"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "FAKE_KEY"
""" for name in ("a", "quiet")))
    now = 60.0 * 29_000_000
    engine = Engine(config, env=TEST_ENV, wall=lambda: now)
    seed = Seed(since=now - 30 * 60.0)
    a = seed.of("a")
    a.requests, a.failures = 12, 3
    a.tokens = Usage(100, 20)
    for back in range(1, 11):  # ten requests a minute ago, ... ten minutes ago, one failing
        a.minute(int(now // 60) - back)[:] = [1, 1 if back == 4 else 0, 6]
    a.durations = [(now - 10.0, 700.0), (now - 20.0, 900.0)]
    seed.of("gone").requests = 5  # a profile no longer configured: ignored
    apply_seed(seed, engine.runtimes, engine.earlier_tokens)
    engine.runtimes["a"].stats.requests = 1  # this process's own
    status = {p["name"]: p for p in engine.snapshot()["profiles"]}
    stats = status["a"]["stats"]
    assert stats["requests"] == 13 and stats["failures"] == 3
    assert status["a"]["tokens"]["input_tokens"] == 100
    assert stats["requests_per_min"] == round(10 / 30, 2) and stats["error_rate"] == 0.1
    assert stats["latency"]["duration_p95_ms"] == 900.0
    assert sum(stats["minutes"]["requests"]) == 10 and stats["minutes"]["requests"][-1] == 0
    quiet = status["quiet"]["stats"]
    engine.runtimes["quiet"].stats.observe_attempt(now, "ok", "")
    assert engine.runtimes["quiet"].stats.window_json(now)["requests_per_min"] == round(1 / 30, 2)
    assert quiet["requests"] == 0
