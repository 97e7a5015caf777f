"""Latency users feel (addons/latency.py): the sliding window's percentiles against a sorted-list
reference, the per-minute series, histogram buckets, and what the engine records from real
traffic into status and /metrics."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from claudex.console.app import ConsoleApp
from claudex.console.components import ProviderPanel
from claudex.console.components.provider_panel import feel_words, queue_words
from claudex.console.link import LocalLink
from claudex.engine.addons.latency import (
    MINUTES,
    BucketCounts,
    LatencyWindow,
    MinuteSeries,
    latency_cell,
    latency_words,
    nearest_rank,
    short_ms,
)
from claudex.engine.addons.stats import ProviderStats, attempt_counts
from claudex.engine.clock import FakeClock
from claudex.engine.core.hooks import Flow, call_each
from claudex.engine.core.request import Attempt, ForwardResult, ProxyRequest
from claudex.engine.core.usage import Usage
from claudex.engine.engine import Engine
from claudex.text.status import render_status
from tests.conftest import TEST_ENV, anthropic_body, build_config, profile_toml
from tests.server.test_admin_api import two


def reference(samples: list[tuple[float, float]], now: float, window_s: float,
              capacity: int) -> tuple[float | None, float | None, int]:
    """The newest `capacity` samples recorded, those inside the window, sorted."""
    kept = sorted(v for t, v in samples[-capacity:] if t > now - window_s)
    if not kept:
        return None, None, 0
    n = len(kept)
    return kept[max(1, math.ceil(n / 2)) - 1], kept[max(1, math.ceil(0.95 * n)) - 1], n


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1000), st.floats(0, 1e5)), max_size=80),
       st.floats(0, 1400), st.integers(1, 40))
def test_percentiles_match_a_sorted_list_within_the_window(
        samples: list[tuple[float, float]], now: float, capacity: int) -> None:
    window = LatencyWindow(window_s=300.0, capacity=capacity)
    for at, value in samples:
        window.add(at, value)
    assert window.percentiles(now) == reference(samples, now, 300.0, capacity)
    # Read again later (the cached answer must not outlive the samples it used).
    assert window.percentiles(now + 150) == reference(samples, now + 150, 300.0, capacity)


def test_old_samples_leave_the_window_and_new_ones_come_in() -> None:
    window = LatencyWindow(window_s=300.0, capacity=8)
    for i in range(4):
        window.add(1000.0 + i, 100.0 * (i + 1))  # 100 200 300 400 ms
    assert window.percentiles(1010.0) == (200.0, 400.0, 4)
    assert window.percentiles(1301.5) == (300.0, 400.0, 2)  # the first two are 5 min old
    assert window.percentiles(1400.0) == (None, None, 0)
    window.add(1400.0, 50.0)
    assert window.percentiles(1400.0) == (50.0, 50.0, 1)


def test_the_ring_keeps_the_newest_samples_and_a_seed_only_fills_free_slots() -> None:
    window = LatencyWindow(window_s=300.0, capacity=3)
    for value in (1.0, 2.0, 3.0, 4.0, 5.0):
        window.add(100.0, value)
    assert window.percentiles(100.0) == (4.0, 5.0, 3)
    seeded = LatencyWindow(window_s=300.0, capacity=3)
    seeded.add(100.0, 9.0)  # live, before the journal's samples arrive
    seeded.seed([(90.0, 1.0), (80.0, 7.0), (95.0, 2.0)])
    assert len(seeded) == 3
    assert seeded.percentiles(100.0) == (2.0, 9.0, 3)  # the oldest seeded one did not fit


def test_nearest_rank() -> None:
    assert nearest_rank([1.0], 95) == 1.0
    assert nearest_rank([float(i) for i in range(1, 101)], 50) == 50.0
    assert nearest_rank([float(i) for i in range(1, 101)], 95) == 95.0
    assert nearest_rank([1.0, 2.0], 50) == 1.0


def test_minute_series_rolls_over_and_ignores_what_is_too_old() -> None:
    series = MinuteSeries(since=0.0)
    series.add(60.0 * 100 + 5, requests=2, errors=1, tokens=30)
    series.add(60.0 * 100 + 50, requests=1)
    series.add(60.0 * 102, requests=4, tokens=7)
    now = 60.0 * 102 + 30
    out = series.series(now)
    assert len(out["requests"]) == MINUTES
    assert out["requests"][-3:] == [3, 0, 4]
    assert out["errors"][-3:] == [1, 0, 0] and out["tokens"][-3:] == [30, 0, 7]
    later = 60.0 * (100 + MINUTES) + 1  # minute 100 has left the window; its slot is reused
    series.add(later, requests=1)
    series.add(60.0 * 100, requests=5)  # older than the ring reaches: dropped
    out = series.series(later)
    assert sum(out["requests"]) == 5 and out["requests"][-1] == 1
    assert series.series(60.0 * 10_000)["requests"] == [0] * MINUTES


def test_buckets_are_cumulative_with_inf_last() -> None:
    buckets = BucketCounts((0.1, 1.0, 10.0))
    for seconds in (0.05, 0.1, 0.7, 3.0, 400.0):
        buckets.observe(seconds)
    assert buckets.cumulative() == [(0.1, 2), (1.0, 3), (10.0, 4), (math.inf, 5)]
    assert buckets.total == 5 and buckets.sum == pytest.approx(403.85)


def test_what_counts_as_sent_and_as_an_error() -> None:
    assert attempt_counts("ok", "") == (1, 0)
    assert attempt_counts("client_error", "bad") == (1, 0)
    assert attempt_counts("server_error", "503") == (1, 1)
    assert attempt_counts("rate_limited", "") == (1, 1)
    assert attempt_counts("breaker_open", "") == (0, 0)
    assert attempt_counts("queue_full", "") == (0, 0)
    assert attempt_counts("ok", "local estimate") == (0, 0)


def test_rates_over_the_minutes_covered() -> None:
    stats = ProviderStats()
    start = 60.0 * 1000
    stats.minutes.since = start
    for i in range(10):
        stats.observe_attempt(start + i * 12, "ok" if i % 5 else "server_error", "")
    stats.minutes.add(start + 30, tokens=500)
    stats.observe_duration(start + 1, 800.0)
    stats.observe_duration(start + 2, 2100.0)
    out = stats.window_json(start + 120)  # two minutes of it seen
    assert out["requests_per_min"] == 5.0 and out["tokens_per_min"] == 250.0
    assert out["error_rate"] == 0.2
    assert out["latency"] == {"first_content_p50_ms": None, "first_content_p95_ms": None,
                              "duration_p50_ms": 800.0, "duration_p95_ms": 2100.0,
                              "samples": 2, "first_content_samples": 0, "duration_samples": 2}
    quiet = ProviderStats().window_json(start)
    assert quiet["error_rate"] == 0.0 and quiet["latency"]["samples"] == 0


class Wall:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_engine_records_the_served_attempt_only() -> None:
    config = build_config("""
[[profiles]]
name = "a"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "FAKE_KEY"
backup_providers = ["b"]

[[profiles]]
name = "b"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "FAKE_KEY"
""")
    wall = Wall(1_750_000_000.0)
    engine = Engine(config, env=TEST_ENV, wall=wall)

    def finish(body: dict[str, Any], attempts: list[Attempt], usage: Usage | None = None,
               endpoint: str = "messages") -> None:
        req = ProxyRequest("anthropic", endpoint, body, b"", {})  # type: ignore[arg-type]
        flow = Flow(req, 0.0, wall.now)
        flow.addressed = "a"
        flow.result = ForwardResult(200, {}, attempts[-1].provider, attempts)
        flow.usage, flow.ms = usage, 1.0
        call_each(engine.hooks.request_started, flow)  # as the core calls them
        call_each(engine.hooks.request_ended, flow)

    finish(anthropic_body(stream=True), [
        Attempt("a", "server_error", 503, "down", 40.0),
        Attempt("b", "ok", 200, "", 900.0, first_content_ms=650.0)], Usage(100, 20))
    finish(anthropic_body(), [Attempt("b", "ok", 200, "", 1800.0)])
    finish(anthropic_body(stream=True), [Attempt("b", "ok", 200, "", 300.0)])  # no ttfc known
    finish(anthropic_body(), [Attempt("b", "ok", 200, "", 5.0)], endpoint="count_tokens")
    wall.now += 1
    status = {p["name"]: p for p in engine.snapshot()["profiles"]}
    a, b = status["a"]["stats"], status["b"]["stats"]
    assert a["latency"]["samples"] == 0
    assert a["minutes"]["requests"][-1] == 1 and a["minutes"]["errors"][-1] == 1
    assert b["latency"]["first_content_p50_ms"] == 650.0
    assert b["latency"]["duration_p50_ms"] == 1800.0 and b["latency"]["samples"] == 2
    assert b["minutes"]["requests"][-1] == 4 and b["minutes"]["tokens"][-1] == 120
    assert b["error_rate"] == 0.0 and a["error_rate"] == 1.0
    fc = engine.runtimes["b"].stats.first_content_hist
    assert fc.total == 1 and fc.cumulative()[2] == (0.5, 0) and fc.cumulative()[3] == (1.0, 1)


async def test_real_traffic_reaches_status_metrics_and_the_table(fakes: Any,
                                                                 proxy_factory: Any) -> None:
    proxy = await two(fakes, proxy_factory)
    for _ in range(3):
        assert (await proxy.chat(profile="grok")).status_code == 200
    status = (await proxy.client.get("/_claudex/status")).json()
    grok = status["profiles"][0]["stats"]
    assert grok["latency"]["duration_samples"] == 3
    assert isinstance(grok["latency"]["duration_p95_ms"], float)
    assert grok["minutes"]["requests"][-1] == 3 and len(grok["minutes"]["errors"]) == MINUTES
    metrics = (await proxy.client.get("/metrics")).text
    assert 'claudex_request_duration_seconds_count{provider="grok"} 3.0' in metrics
    assert 'claudex_request_duration_seconds_bucket{le="120.0",provider="grok"} 3.0' in metrics
    assert 'claudex_first_content_seconds_count{provider="grok"} 0.0' in metrics
    console = Console(record=True, width=200)
    render_status(status, console)
    text = console.export_text()
    assert "p50/p95" in text
    assert "s/" in text.split("grok", 1)[1].splitlines()[0]  # grok's row shows its numbers


def test_words_for_panels_and_the_status_table() -> None:
    assert [short_ms(x) for x in (0.44, 12.4, 812.0, 2140.0, 95_000.0, 250_000.0)] == [
        "0.4ms", "12ms", "812ms", "2.1s", "95.0s", "250s"]
    both = {"first_content_p50_ms": 800.0, "first_content_p95_ms": 2100.0,
            "duration_p50_ms": 1200.0, "duration_p95_ms": 3400.0}
    assert latency_words(both) == "ttfc p50 800ms · p95 2.1s"
    whole = {**both, "first_content_p50_ms": None, "first_content_p95_ms": None}
    assert latency_words(whole) == "took p50 1.2s · p95 3.4s"
    assert latency_cell(whole) == "took 1.2s/3.4s" and latency_cell(None) == "–"
    assert latency_words({"duration_p50_ms": None}) == ""
    probe_ok = {"latency_ms": 120.0, "last_checked": 1.0}
    assert feel_words(probe_ok, {"latency": both}) == "ttfc p50 800ms · p95 2.1s"
    assert feel_words(probe_ok, {}) == "probe 120 ms"
    failing = {"latency_ms": None, "error": "connection refused", "last_checked": 1.0}
    assert feel_words(failing, {"latency": both}) == "probe failed: connection refused"
    assert queue_words({"concurrency": {"queued": 3}}) == "queue 3"
    assert queue_words({"concurrency": {"queued": 0}}) == "" and queue_words({}) == ""


async def test_a_panel_at_100x30_shows_what_requests_felt_and_the_queue() -> None:
    config = build_config("""
[[profiles]]
name = "claude"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "FAKE_KEY"
""")
    clock = FakeClock(start=1000.0, wall_start=1_750_000_000.0)
    engine = Engine(config, clock=clock, wall=clock.wall, sleep=clock.sleep, env=TEST_ENV)
    rt = engine.runtimes["claude"]
    for ms in (600.0, 800.0, 900.0, 2100.0):
        rt.stats.observe_first_content(clock.wall(), ms)
    rt.gate.max_connections = 1  # one request holds the only slot, three wait in line
    assert await rt.gate.acquire(1.0)
    waiting = [asyncio.ensure_future(rt.gate.acquire(600.0)) for _ in range(3)]
    await asyncio.sleep(0)
    app = ConsoleApp(LocalLink(engine), wall=clock.wall)
    try:
        assert rt.gate.queued == 3
        async with app.run_test(size=(100, 30)) as pilot:
            await app.main_screen.refresh_now()
            await pilot.pause()
            panel = app.main_screen.query(ProviderPanel).first()
            assert str(panel.probe_line.visual) == "ttfc p50 800ms · p95 2.1s"
            assert "queue 3" in str(panel.breaker_line.visual)
    finally:
        for task in waiting:
            task.cancel()
        await engine.close()


async def test_a_served_stream_counts_its_time_to_first_content(fakes: Any,
                                                               proxy_factory: Any) -> None:
    f = await fakes(("claude", "anthropic"))
    proxy = await proxy_factory(build_config(profile_toml("claude", f["claude"])), fakes=f)
    for _ in range(2):
        async with proxy.client.stream("POST", "/v1/messages",
                                       json=anthropic_body(stream=True)) as resp:
            assert resp.status_code == 200
            await resp.aread()
    stats = (await proxy.client.get("/_claudex/status")).json()["profiles"][0]["stats"]
    assert stats["latency"]["first_content_samples"] == 2
    assert stats["latency"]["duration_samples"] == 0
    assert stats["latency"]["first_content_p95_ms"] >= stats["latency"]["first_content_p50_ms"]
    metrics = (await proxy.client.get("/metrics")).text
    assert 'claudex_first_content_seconds_count{provider="claude"} 2.0' in metrics
