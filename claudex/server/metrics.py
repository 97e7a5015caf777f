"""`/metrics` in Prometheus text format, read from the engine at scrape time so the hot path
pays nothing for it."""

from __future__ import annotations

import math
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from claudex.engine.addons.latency import BucketCounts
from claudex.engine.breaker.circuit import BreakerState
from claudex.engine.engine import Engine

_STATES = [s.value for s in BreakerState]
_COLORS = ("green", "yellow", "red")


class EngineCollector(Collector):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        engine = self.engine
        totals = engine.totals
        yield CounterMetricFamily("claudex_requests", "Client requests received",
                                  value=totals.requests)
        yield CounterMetricFamily("claudex_failovers", "Requests served by a backup",
                                  value=totals.failovers)
        yield CounterMetricFamily("claudex_all_failed", "Requests no provider could serve",
                                  value=totals.all_failed)
        yield GaugeMetricFamily("claudex_in_flight", "Requests in flight", value=totals.in_flight)
        sent = CounterMetricFamily("claudex_provider_requests", "Attempts sent to a provider",
                                   labels=["provider"])
        ok = CounterMetricFamily("claudex_provider_successes", "Successful attempts",
                                 labels=["provider"])
        failed = CounterMetricFamily("claudex_provider_failures", "Attempts counted as failures",
                                     labels=["provider"])
        limited = CounterMetricFamily("claudex_provider_rate_limited", "429 answers",
                                      labels=["provider"])
        state = GaugeMetricFamily("claudex_breaker_state", "1 for the breaker's current state",
                                  labels=["provider", "state"])
        health = GaugeMetricFamily("claudex_provider_health", "1 for the provider's colour",
                                   labels=["provider", "color"])
        latency = GaugeMetricFamily("claudex_provider_probe_latency_ms",
                                    "Latency of the last health probe", labels=["provider"])
        dropped = CounterMetricFamily(
            "claudex_translation_dropped",
            "Requests served with a field or content kind left out", labels=["provider", "field"])
        # claudex's own limits at each provider (engine/core/gate.py).
        in_flight = GaugeMetricFamily("claudex_provider_in_flight",
                                      "Requests holding a slot at the provider",
                                      labels=["provider"])
        queued = GaugeMetricFamily("claudex_provider_queued",
                                   "Requests waiting for a slot at the provider",
                                   labels=["provider"])
        limit = GaugeMetricFamily("claudex_provider_concurrency_limit",
                                  "The adaptive limit on requests in flight, while one holds",
                                  labels=["provider"])
        queue_full = CounterMetricFamily("claudex_provider_queue_full",
                                         "Requests that waited queue_timeout and failed over",
                                         labels=["provider"])
        refused = CounterMetricFamily("claudex_provider_retries_refused",
                                      "429 retries refused by the retry budget",
                                      labels=["provider"])
        window_used = GaugeMetricFamily(
            "claudex_provider_window_used_ratio",
            "Share (0-1) of a plan's quota window used, as the provider's last answer said",
            labels=["provider", "window"])
        window_spent = GaugeMetricFamily(
            "claudex_provider_window_spent_until",
            "While a plan's window is spent: when it resets (epoch seconds)",
            labels=["provider"])
        slow = GaugeMetricFamily(
            "claudex_provider_slow",
            "1 while a provider's recent p95 latency is slow_factor times its usual or more",
            labels=["provider"])
        baseline = GaugeMetricFamily(
            "claudex_provider_latency_baseline_seconds",
            "A provider's usual p95 (slow-moving), once known (measure: first_content of "
            "streams, duration of whole answers)", labels=["provider", "measure"])
        now = engine.clock()
        wall = engine.wall()
        degraded = engine.config.health.degraded_latency_ms
        for name, rt in engine.runtimes.items():
            for window in rt.windows:
                window_used.add_metric([name, window.name], window.used)
            if rt.window_spent_until and rt.window_spent(wall):
                window_spent.add_metric([name], rt.window_spent_until)
            slow.add_metric([name], 0.0 if rt.slowness.verdict is None else 1.0)
            for measure, base in rt.slowness.baselines.items():
                baseline.add_metric([name, measure], base.p95_ms / 1000.0)
            in_flight.add_metric([name], rt.gate.in_flight)
            queued.add_metric([name], rt.gate.queued)
            if rt.gate.limit.limit is not None:
                limit.add_metric([name], rt.gate.limit.limit)
            queue_full.add_metric([name], rt.gate.queue_full)
            refused.add_metric([name], rt.budget.refused)
            s = rt.stats
            sent.add_metric([name], s.requests)
            ok.add_metric([name], s.successes)
            failed.add_metric([name], s.failures)
            limited.add_metric([name], s.rate_limited)
            current = rt.breaker.state.value
            for value in _STATES:
                state.add_metric([name, value], 1.0 if value == current else 0.0)
            color, _ = rt.color(now, degraded, wall)
            for value in _COLORS:
                health.add_metric([name, value], 1.0 if value == color else 0.0)
            if rt.health.latency_ms is not None:
                latency.add_metric([name], rt.health.latency_ms)
            for field_name, count in s.dropped.items():
                dropped.add_metric([name, field_name], count)
        tokens = CounterMetricFamily(
            "claudex_provider_tokens", "Tokens in answers a provider served (kind: input, not "
            "read from or written to a cache; output; cache_read; cache_write)",
            labels=["provider", "kind"])
        cost = CounterMetricFamily(
            "claudex_provider_cost_usd", "What the tokens a provider served cost at API prices "
            "(genai-prices' table; API-equivalent for a subscription login), in USD",
            labels=["provider"])
        unpriced = CounterMetricFamily(
            "claudex_provider_unpriced_answers", "Answers with tokens whose model the price "
            "table does not know (their cost is not in claudex_provider_cost_usd)",
            labels=["provider"])
        for name in engine.runtimes:
            counted = engine.tokens.of_provider(name)
            for kind in ("input", "output", "cache_read", "cache_write"):
                tokens.add_metric([name, kind], counted[f"{kind}_tokens"])
            spend = engine.costs.of_provider(name)
            cost.add_metric([name], spend.usd if spend is not None else 0.0)
            unpriced.add_metric([name], spend.unpriced if spend is not None else 0)
        # Upstream proxies (issue 36): tries through each by outcome, and its breaker's state.
        proxy_tries = CounterMetricFamily(
            "claudex_upstream_proxy_requests", "Tries through an upstream proxy, by what came "
            "of them (ok, refused, unresolvable, connect_timeout, auth_failed, rejected, "
            "bad_gateway, rate_limited, untrusted, tls_failed)", labels=["proxy", "outcome"])
        proxy_state = GaugeMetricFamily(
            "claudex_upstream_proxy_state", "An upstream proxy's breaker: 0 closed, 1 half-open, "
            "2 open (or tripped)", labels=["proxy"])
        proxy_limit = GaugeMetricFamily(
            "claudex_upstream_proxy_concurrency_limit", "An upstream proxy's adaptive limit on "
            "tries through it at once (its CONNECT 429s narrow it), while one holds",
            labels=["proxy"])
        for proxy in engine.proxies.runtimes():
            for outcome, count in sorted(proxy.outcomes.items()):
                proxy_tries.add_metric([proxy.name, outcome], count)
            proxy_state.add_metric([proxy.name], engine.proxies.state_code(proxy.name))
            if proxy.gate.limit.limit is not None:
                proxy_limit.add_metric([proxy.name], proxy.gate.limit.limit)
        yield from (sent, ok, failed, limited, state, health, latency, dropped, tokens, cost,
                    unpriced, in_flight, queued, limit, queue_full, refused, window_used,
                    window_spent, slow, baseline, proxy_tries, proxy_state, proxy_limit)
        yield from _histograms(engine)


def _histograms(engine: Engine) -> Iterator[Metric]:
    """What requests felt (engine/addons/latency.py), observed since this process started."""
    first = HistogramMetricFamily(
        "claudex_first_content_seconds",
        "Time to the first content of streamed answers, at the provider that served them",
        labels=["provider"])
    duration = HistogramMetricFamily(
        "claudex_request_duration_seconds",
        "Duration of answers that were not streamed, at the provider that served them",
        labels=["provider"])
    for name, rt in engine.runtimes.items():
        first.add_metric([name], _buckets(rt.stats.first_content_hist),
                         rt.stats.first_content_hist.sum)
        duration.add_metric([name], _buckets(rt.stats.duration_hist), rt.stats.duration_hist.sum)
    yield from (first, duration)


def _buckets(counts: BucketCounts) -> list[tuple[str, float]]:
    # Bounds as Prometheus writes them: 0.25, 1.0, 120.0, +Inf.
    return [("+Inf" if math.isinf(bound) else repr(float(bound)), float(n))
            for bound, n in counts.cumulative()]


def make_registry(engine: Engine) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector(engine))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
