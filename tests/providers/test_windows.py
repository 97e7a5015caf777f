"""Reading quota windows from answers' headers, and the answers that say a window is spent
(claudex/providers/windows.py; the header names: Claude Code's src/services/claudeAiLimits.ts,
openai/codex codex-rs/codex-api/src/rate_limits.rs)."""

from __future__ import annotations

import json

from multidict import CIMultiDict

from claudex.providers.windows import (
    Window,
    described_windows,
    duration_seconds,
    read_windows,
    spent_details,
    spent_window,
    windows_in_event,
)


def raw(**headers: str) -> list[tuple[bytes, bytes]]:
    return [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]


def test_anthropic_unified_headers_give_each_window() -> None:
    windows = read_windows([
        (b"Content-Type", b"application/json"),
        (b"Anthropic-Ratelimit-Unified-Status", b"allowed_warning"),
        (b"anthropic-ratelimit-unified-representative-claim", b"five_hour"),
        (b"anthropic-ratelimit-unified-reset", b"1796160000"),
        (b"anthropic-ratelimit-unified-5h-utilization", b"0.92"),
        (b"anthropic-ratelimit-unified-5h-reset", b"1796160000"),
        (b"anthropic-ratelimit-unified-5h-status", b"allowed_warning"),
        (b"anthropic-ratelimit-unified-5h-surpassed-threshold", b"0.9"),
        (b"anthropic-ratelimit-unified-7d-utilization", b"0.13"),
        (b"anthropic-ratelimit-unified-7d-reset", b"1796600000"),
        (b"anthropic-ratelimit-unified-7d-status", b"allowed"),
    ])
    assert windows == (Window("5h", 0.92, 1796160000.0, "allowed_warning", True),
                       Window("7d", 0.13, 1796600000.0, "allowed", False))
    assert windows[0].to_json() == {"name": "5h", "used": 0.92, "resets_at": 1796160000.0,
                                    "status": "allowed_warning", "warning": True}


def test_only_the_overall_status_names_the_representative_window() -> None:
    windows = read_windows(raw(anthropic_ratelimit_unified_status="rejected",
                               anthropic_ratelimit_unified_representative_claim="seven_day",
                               anthropic_ratelimit_unified_reset="1796600000"))
    assert windows == (Window("7d", 1.0, 1796600000.0, "rejected", False),)


def test_chatgpt_headers_name_windows_by_their_length() -> None:
    windows = read_windows(raw(x_codex_primary_used_percent="42.5",
                               x_codex_primary_window_minutes="300",
                               x_codex_primary_reset_at="1796160000",
                               x_codex_secondary_used_percent="100",
                               x_codex_secondary_window_minutes="10080"))
    assert windows == (Window("5h", 0.425, 1796160000.0, None, False),
                       Window("7d", 1.0, None, "rejected", False))


def test_an_anthropic_keys_rate_limits_are_windows() -> None:
    # The form of a real answer (docs.anthropic.com/en/api/rate-limits: RFC 3339 resets).
    windows = read_windows([
        (b"Anthropic-Ratelimit-Requests-Limit", b"1000"),
        (b"anthropic-ratelimit-requests-remaining", b"999"),
        (b"anthropic-ratelimit-requests-reset", b"2025-08-21T12:40:59Z"),
        (b"anthropic-ratelimit-tokens-limit", b"96000"),
        (b"anthropic-ratelimit-tokens-remaining", b"24000"),
        (b"anthropic-ratelimit-tokens-reset", b"2025-08-21T12:41:00Z"),
        (b"anthropic-ratelimit-input-tokens-limit", b"80000"),
        (b"anthropic-ratelimit-input-tokens-remaining", b"80000"),
        (b"anthropic-ratelimit-input-tokens-reset", b"2025-08-21T12:40:59+00:00"),
        (b"anthropic-ratelimit-output-tokens-limit", b"16000"),
        (b"anthropic-ratelimit-output-tokens-remaining", b"0"),
        (b"anthropic-ratelimit-output-tokens-reset", b"not a time"),
        (b"anthropic-organization-id", b"36562039"),
        (b"request-id", b"req_011"),
    ])
    assert windows == (Window("requests", 0.001, 1755780059.0),
                       Window("tokens", 0.75, 1755780060.0),
                       Window("input-tokens", 0.0, 1755780059.0),
                       Window("output-tokens", 1.0, None))
    assert windows[3].to_json()["status"] == "rejected"


def test_an_openai_keys_rate_limits_reset_after_a_duration() -> None:
    # platform.openai.com/docs/guides/rate-limits: "1s", "6m0s"; answers also say "12ms".
    windows = read_windows(raw(x_ratelimit_limit_requests="60",
                               x_ratelimit_remaining_requests="45",
                               x_ratelimit_reset_requests="1s",
                               x_ratelimit_limit_tokens="150000",
                               x_ratelimit_remaining_tokens="149984",
                               x_ratelimit_reset_tokens="6m0s"), 1000.0)
    assert windows is not None
    assert [(w.name, round(w.used, 6), w.resets_at) for w in windows] == [
        ("requests", 0.25, 1001.0), ("tokens", round(16 / 150000, 6), 1360.0)]


def test_go_durations() -> None:
    assert duration_seconds("6m0s") == 360.0
    assert duration_seconds("12ms") == 0.012
    assert duration_seconds("2m59.56s") == 179.56
    assert duration_seconds("1h2m3s") == 3723.0
    assert duration_seconds("7") == 7.0
    for bad in ("", "soon", "6m0", "-1s", "1s junk", "-3"):
        assert duration_seconds(bad) is None, bad


def test_answers_that_describe_no_window() -> None:
    assert read_windows(raw(content_type="application/json", request_id="req_1")) is None
    # Half a limit (no remaining, or no limit) is none; a limit of 0 cannot be a share.
    assert read_windows(raw(anthropic_ratelimit_requests_limit="50",
                            x_ratelimit_remaining_tokens="1000",
                            x_ratelimit_limit_requests="0",
                            x_ratelimit_remaining_requests="0")) is None
    assert read_windows(raw(x_codex_primary_used_percent="not a number")) is None


def test_described_headers_are_read_when_asked() -> None:
    headers = tuple(raw(x_ratelimit_limit_requests="10", x_ratelimit_remaining_requests="5",
                        x_ratelimit_reset_requests="20ms"))
    assert described_windows((500.0, headers)) == (Window("requests", 0.5, 500.02),)
    already = (Window("5h", 0.1),)
    assert described_windows(already) == already
    assert described_windows(()) == ()


def test_the_codex_rate_limits_event() -> None:
    event = {"type": "codex.rate_limits", "plan_type": "pro", "rate_limits": {
        "allowed": True, "limit_reached": False,
        "primary": {"used_percent": 7, "window_minutes": 300, "reset_at": 1779398785},
        "secondary": {"used_percent": 29, "window_minutes": 10080, "reset_at": 1779820580}}}
    assert windows_in_event(event) == (Window("5h", 0.07, 1779398785.0, None, False),
                                       Window("7d", 0.29, 1779820580.0, None, False))


def test_a_spent_window_is_told_apart_from_a_rate_limit() -> None:
    rejected = CIMultiDict({"Anthropic-Ratelimit-Unified-Status": "rejected"})
    assert spent_window(429, rejected, b"{}")
    assert not spent_window(429, CIMultiDict({"anthropic-ratelimit-unified-status": "allowed"}),
                            b"{}")
    assert not spent_window(500, rejected, b"{}")
    for kind in ("usage_limit_reached", "usage_not_included"):
        body = json.dumps({"error": {"type": kind, "resets_in_seconds": 30}}).encode()
        assert spent_window(429, CIMultiDict(), body)
    assert not spent_window(429, CIMultiDict(), b'{"error": {"type": "rate_limit_exceeded"}}')
    assert not spent_window(429, CIMultiDict(), b"usage_limit_reached but not JSON")


def test_the_reset_comes_from_the_best_source() -> None:
    headers = CIMultiDict({"anthropic-ratelimit-unified-status": "rejected",
                           "anthropic-ratelimit-unified-representative-claim": "five_hour",
                           "anthropic-ratelimit-unified-reset": "1796160000"})
    spent = spent_details(headers, b"{}", 1796150000.0)
    assert (spent.until, spent.window) == (1796160000.0, "5h")
    only_window = CIMultiDict({"anthropic-ratelimit-unified-representative-claim": "five_hour",
                               "anthropic-ratelimit-unified-5h-reset": "1796160001"})
    assert spent_details(only_window, b"", 0.0).until == 1796160001.0
    both = json.dumps({"error": {"type": "usage_limit_reached", "resets_at": 1796160002,
                                 "resets_in_seconds": 5}}).encode()
    assert spent_details(CIMultiDict(), both, 1000.0).until == 1796160002.0
    within = json.dumps({"error": {"type": "usage_limit_reached",
                                   "resets_in_seconds": 90}}).encode()
    assert spent_details(CIMultiDict(), within, 1000.0).until == 1090.0
    assert spent_details(CIMultiDict(), b'{"error": {"type": "usage_not_included"}}',
                         1000.0).until is None
