"""The console's words and numbers: pure functions of the engine's snapshot and events."""

from __future__ import annotations

from pathlib import Path

from claudex.console.colors import DEFAULTS, tcss_colours
from claudex.console.format import (
    breaker_words,
    colour_counts,
    duration,
    last_error_words,
    probe_words,
    request_row,
    safe,
    short_path,
)
from claudex.engine.events import Event


def test_duration_uses_two_units_at_most() -> None:
    assert [duration(s) for s in (0, 42.9, 185, 7260, 3 * 86400 + 4 * 3600)] == [
        "0s", "42s", "3m05s", "2h01m", "3d04h"]
    assert duration(-5) == "0s"


def test_breaker_words_count_down_to_half_open() -> None:
    assert breaker_words({"state": "open", "retry_in_s": 11.2}) == "open · half-open in 12s"
    assert breaker_words({"state": "open", "retry_in_s": 0}) == "open · half-open now"
    assert breaker_words({"state": "forced_open"}) == "tripped by operator · r resets"
    assert breaker_words({"state": "closed", "consecutive_failures": 2}) == (
        "closed · 2 consecutive failures")
    assert breaker_words({"state": "half_open"}).startswith("half-open")


def test_secrets_are_masked_before_they_reach_the_screen() -> None:
    shown = safe("upstream said: bad key sk-ant-api03-abcdefghijklmnop\nBearer abcdefgh12345678")
    assert "abcdefghijklmnop" not in shown and "abcdefgh12345678" not in shown
    assert "\n" not in shown
    words = last_error_words({"last_error": "auth_error: key sk-proj-0123456789abcdef rejected",
                              "last_error_at": 100.0}, now_wall=130.0)
    assert words.startswith("last error 30s ago: ") and "0123456789abcdef" not in words


def test_probe_words() -> None:
    assert probe_words({"latency_ms": 41.6, "last_checked": 1.0}) == "probe 42 ms"
    assert probe_words({"error": "connection refused", "last_checked": 1.0}) == (
        "probe failed: connection refused")
    assert probe_words({"probe_unsupported": True}) == "probe unsupported"
    assert probe_words({}) == "probe pending"


def test_request_row_from_an_event() -> None:
    event = Event("request", "", "b", {
        "protocol": "anthropic", "model": "claude-sonnet-4-5", "stream": True, "provider": "b",
        "status": 200, "latency_ms": 1234.5, "attempts": [{}, {}],
        "trail": "a 503 -> b 200"}, time=0.0)
    row = request_row(event, lambda t: "00:00:00")
    assert row.request == "anthropic claude-sonnet-4-5 stream"
    assert row.trail == "a 503 → b 200" and row.failed_over
    assert row.latency_text == "1.23 s"
    assert row.matches("503") and row.matches("B 200") and not row.matches("grok")


def test_colour_counts_and_paths() -> None:
    profiles = [{"health": {"color": c}} for c in ("green", "red", "green")]
    assert colour_counts(profiles) == {"green": 2, "yellow": 0, "red": 1}
    assert short_path("/home/me/.config/claudex/profiles.toml", Path("/home/me")) == (
        "~/.config/claudex/profiles.toml")
    assert short_path(None) == "(no config file)"


def test_status_colours_come_from_the_stylesheet() -> None:
    assert tcss_colours("$claudex-red: #ff0000;\n") == {**DEFAULTS, "claudex-red": "#ff0000"}
    shipped = tcss_colours()
    assert set(shipped) == set(DEFAULTS)
    assert all(value.startswith("#") for value in shipped.values())


def test_traffic_mix_is_mostly_anthropic_messages() -> None:
    import random

    from claudex.demo.traffic import TrafficGenerator

    generator = TrafficGenerator("http://127.0.0.1:1", rand=random.Random(7))
    kinds = [generator.pick_kind() for _ in range(1000)]
    shares = {kind: kinds.count(kind) / len(kinds) for kind in set(kinds)}
    assert set(shares) == {"messages", "messages_stream", "chat", "responses"}
    assert shares["messages"] > 0.5
    assert 0.1 < shares["messages_stream"] < 0.3 and 0.05 < shares["chat"] < 0.25
    assert 0.03 < shares["responses"] < 0.2


def test_limit_words_name_the_smallest_context_window_known() -> None:
    from claudex.console.format import limit_words
    assert limit_words({}) == ""
    assert limit_words({"context_window": 131072}) == " · context ≤ 131k"
    assert limit_words({"context_window": 131072, "learned_context_window": {"m": 8192},
                        "learned_max_tokens": {"m": 4096}}) == \
        " · max_tokens ≤ 4096 · context ≤ 8.2k"
