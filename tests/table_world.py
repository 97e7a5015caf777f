"""Many profiles for the provider table's tests and snapshots: a generated config, fixed
statistics laid over the engine's status, and a few providers in each state.

The statistics the table reads (`stats.requests_per_min`, `tokens_per_min`, `latency`,
`minutes`, whose last five slots make its error %) are set by `StatsLink` on top of the real
engine's status, so a test says exactly what each provider reports, whatever the engine
computes itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from claudex.console.link import LocalLink
from claudex.engine.clock import FakeClock
from claudex.engine.engine import Engine


def many_profiles_toml(count: int) -> str:
    """`count` profiles named p01, p02, ... alternating Anthropic and OpenAI, each backed up
    by the next one."""
    parts = []
    for index in range(1, count + 1):
        anthropic = index % 2 == 1
        backup = f'backup_providers = ["p{index + 1:02d}"]\n' if index < count else ""
        parts.append(
            "[[profiles]]\n"
            f'name = "p{index:02d}"\n'
            f'provider_type = "{"DirectAnthropic" if anthropic else "OpenAICompatible"}"\n'
            f'base_url = "http://127.0.0.1:9{"" if anthropic else "/v1"}"\n'
            'api_key_env = "FAKE_KEY"\n'
            f'default_model = "{"claude-sonnet-4-5" if anthropic else "grok-3-beta"}"\n'
            + backup)
    return "\n".join(parts)


def stats_for(index: int) -> dict[str, Any]:
    """Statistics that differ from one provider to the next, the same on every run."""
    requests = [(index * 3 + minute * 7) % 11 for minute in range(30)]
    errors = [1 if (minute + index) % 13 == 0 and requests[minute] else 0
              for minute in range(30)]
    return {
        "requests_per_min": round(2 + (index * 7) % 40 + index / 10, 1),
        "error_rate": ((index * 13) % 17) / 200 if index % 3 else 0.0,
        "tokens_per_min": (index * 811) % 9000 + 120,
        "latency": {
            "duration_p50_ms": 280 + (index * 37) % 500,
            "duration_p95_ms": 900 + (index * 173) % 2600,
            "first_content_p50_ms": 180 + (index * 29) % 400,
            "first_content_p95_ms": 600 + (index * 97) % 1500,
            "samples": 40 + index,
        },
        "minutes": {"requests": requests, "errors": errors,
                    "tokens": [n * 300 for n in requests]},
    }


def erring(stats: Mapping[str, Any], rate: float) -> dict[str, Any]:
    """`stats` with this error rate over the last five minutes: 100 requests in the current
    minute, `rate` of them errors (the older minutes as they were)."""
    minutes = stats["minutes"]
    return {**stats, "error_rate": rate, "minutes": {
        **minutes, "requests": [*minutes["requests"][:-5], 0, 0, 0, 0, 100],
        "errors": [*minutes["errors"][:-5], 0, 0, 0, 0, round(rate * 100)]}}


class StatsLink(LocalLink):
    """The engine's status with each named provider's `stats` overlaid."""

    def __init__(self, engine: Engine, stats: Mapping[str, Mapping[str, Any]]) -> None:
        super().__init__(engine)
        self.stats = stats  # (not copied: a test may change it between refreshes)

    def snapshot(self) -> dict[str, Any]:
        snapshot = super().snapshot()
        for profile in snapshot.get("profiles") or []:
            extra = self.stats.get(profile["name"])
            if extra:
                profile["stats"] = {**(profile.get("stats") or {}), **extra}
        return snapshot


def set_scene(engine: Engine, clock: FakeClock) -> None:
    """A few providers out of the ordinary: one tripped, one opened 12 s ago, one with a
    recent failure and its error, and the last with an error three hours old."""
    names = list(engine.runtimes)
    engine.trip(names[4])
    opened = engine.runtimes[names[9]]
    clock.advance(-12)
    for _ in range(3):
        opened.breaker.record_failure(None)
    clock.advance(12)
    opened.stats.last_error = "connect_error: connection refused"
    opened.stats.last_error_at = clock.wall() - 12
    flaky = engine.runtimes[names[2]]
    flaky.breaker.record_failure(None)
    flaky.stats.last_error = "server_error: upstream returned 503 Service Unavailable"
    flaky.stats.last_error_at = clock.wall() - 42
    old = engine.runtimes[names[-1]]
    old.stats.last_error = "rate_limited: 429 Too Many Requests (retry after 5 s)"
    old.stats.last_error_at = clock.wall() - 3 * 3600
