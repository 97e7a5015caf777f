"""Reading quota windows from answers' headers, and the answers that say a window is spent
(claudex/providers/windows.py; the header names: Claude Code's src/services/claudeAiLimits.ts,
openai/codex codex-rs/codex-api/src/rate_limits.rs)."""

from __future__ import annotations

import json

from multidict import CIMultiDict

from claudex.providers.windows import (
    Window,
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


def test_an_api_keys_answer_describes_no_window() -> None:
    assert read_windows(raw(anthropic_ratelimit_requests_limit="50",
                            x_ratelimit_remaining_tokens="1000",
                            content_type="application/json")) is None
    assert read_windows(raw(x_codex_primary_used_percent="not a number")) is None


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
