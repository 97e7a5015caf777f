"""Backoff bounds, Retry-After parsing in every form, and the 429 wait-or-fail-over decision."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from claudex.config.model import RetrySettings
from claudex.engine.core.backoff import (
    RateLimitDecision,
    backoff_delay,
    cooldown_seconds,
    parse_retry_after,
    rate_limit_decision,
)

# 1994-11-06 08:49:00 UTC: 37 seconds before the RFC 9110 example date.
NOW = datetime(1994, 11, 6, 8, 49, 0, tzinfo=UTC).timestamp()

retry_settings = st.builds(
    RetrySettings,
    initial_delay=st.floats(0.0, 10.0),
    multiplier=st.floats(1.0, 5.0),
    max_delay=st.floats(0.0, 120.0),
)


@given(
    retry_number=st.integers(1, 60),
    config=retry_settings,
    draw=st.floats(0.0, 1.0, exclude_max=True),
)
def test_full_jitter_stays_within_the_exponential_bound(
    retry_number: int, config: RetrySettings, draw: float
) -> None:
    bound = min(config.max_delay, config.initial_delay * config.multiplier ** (retry_number - 1))
    delay = backoff_delay(retry_number, config, rand=lambda: draw)
    assert 0.0 <= delay <= bound
    assert delay == pytest.approx(draw * bound)


@given(retry_number=st.integers(1, 60), config=retry_settings)
def test_no_jitter_is_exactly_the_bound(retry_number: int, config: RetrySettings) -> None:
    none = RetrySettings(
        initial_delay=config.initial_delay,
        multiplier=config.multiplier,
        max_delay=config.max_delay,
        jitter="none",
    )
    bound = min(none.max_delay, none.initial_delay * none.multiplier ** (retry_number - 1))
    assert backoff_delay(retry_number, none) == bound


def test_backoff_sequence_and_cap() -> None:
    config = RetrySettings(initial_delay=1.0, multiplier=2.0, max_delay=10.0, jitter="none")
    assert [backoff_delay(n, config) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_huge_retry_number_is_capped_not_an_overflow() -> None:
    config = RetrySettings(max_delay=60.0, jitter="none")
    assert backoff_delay(100_000, config) == 60.0


def test_default_randomness_stays_within_bounds() -> None:
    config = RetrySettings(initial_delay=1.0, multiplier=2.0, max_delay=60.0)
    delays = [backoff_delay(3, config) for _ in range(200)]
    assert all(0.0 <= d <= 4.0 for d in delays)
    assert len(set(delays)) > 1


def test_retry_number_counts_from_one() -> None:
    with pytest.raises(ValueError, match="counts from 1"):
        backoff_delay(0, RetrySettings())


# --- Retry-After ---------------------------------------------------------------------------


def test_retry_after_ms_takes_precedence() -> None:
    headers = {"retry-after-ms": "1500", "retry-after": "30"}
    assert parse_retry_after(headers, NOW) == 1.5


def test_invalid_retry_after_ms_falls_back_to_retry_after() -> None:
    assert parse_retry_after({"retry-after-ms": "soon", "retry-after": "30"}, NOW) == 30.0


@pytest.mark.parametrize(("value", "seconds"), [("30", 30.0), ("0", 0.0), ("1.5", 1.5)])
def test_delta_seconds(value: str, seconds: float) -> None:
    assert parse_retry_after({"retry-after": value}, NOW) == seconds


@pytest.mark.parametrize(
    "value",
    [
        "Sun, 06 Nov 1994 08:49:37 GMT",  # IMF-fixdate
        "Sunday, 06-Nov-94 08:49:37 GMT",  # RFC 850
        "Sun Nov  6 08:49:37 1994",  # asctime
    ],
)
def test_all_three_http_date_forms(value: str) -> None:
    assert parse_retry_after({"Retry-After": value}, NOW) == 37.0


def test_rfc850_two_digit_year_is_windowed_around_now() -> None:
    # "50" read naively is 1950; RFC 9110 says: within 50 years ahead of now, so 2050.
    now = datetime(2050, 1, 1, 0, 0, 0, tzinfo=UTC).timestamp()
    value = "Saturday, 01-Jan-50 00:00:10 GMT"
    assert parse_retry_after({"retry-after": value}, now) == 10.0


def test_date_in_the_past_means_no_wait() -> None:
    assert parse_retry_after({"retry-after": "Sun, 06 Nov 1994 08:48:00 GMT"}, NOW) == 0.0


@pytest.mark.parametrize(
    "value",
    [
        "",
        "   ",
        "soon",
        "-5",
        "+5",
        "nan",
        "inf",
        "1e3",
        "1_000",
        "12abc",
        "9" * 400,  # finite digits, infinite float
        "Sun, 32 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 25:49:37 GMT",
        "06 Nov 1994",
    ],
)
def test_garbage_is_ignored(value: str) -> None:
    assert parse_retry_after({"retry-after": value}, NOW) is None
    assert parse_retry_after({"retry-after-ms": value}, NOW) is None


def test_no_header_means_no_answer() -> None:
    assert parse_retry_after({"content-type": "application/json"}, NOW) is None


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"RETRY-AFTER": "7"}, 7.0),
        ({"Retry-After-Ms": "250"}, 0.25),
        ({"RETRY-AFTER-MS": "250", "Retry-After": "9"}, 0.25),
    ],
)
def test_header_names_are_case_insensitive(headers: dict[str, str], seconds: float) -> None:
    assert parse_retry_after(headers, NOW) == seconds


def test_works_with_a_real_header_mapping() -> None:
    headers = httpx.Headers({"Retry-After-Ms": "2000", "Retry-After": "9"})
    assert parse_retry_after(headers, NOW) == 2.0


# --- decisions -----------------------------------------------------------------------------

CONFIG = RetrySettings(initial_delay=1.0, multiplier=2.0, max_delay=60.0, max_attempts=5)


def test_attempts_spent_means_fail_over() -> None:
    decision = rate_limit_decision(5, {"retry-after": "1"}, CONFIG, NOW)
    assert decision.wait is None
    assert decision.reason.startswith("attempts spent")


def test_last_attempt_still_waits() -> None:
    assert rate_limit_decision(4, {}, CONFIG, NOW, rand=lambda: 0.5).wait == 4.0


def test_wait_over_max_retry_after_means_fail_over() -> None:
    decision = rate_limit_decision(1, {"retry-after": "120"}, CONFIG, NOW)
    assert decision == RateLimitDecision(None, "server asks for 120s, over max_retry_after (60s)")


@pytest.mark.parametrize("value", ["7", "60"])
def test_server_wait_is_honoured_exactly(value: str) -> None:
    # rand 0 would make any jittered wait zero: the server's wait must not be jittered.
    decision = rate_limit_decision(3, {"retry-after": value}, CONFIG, NOW, rand=lambda: 0.0)
    assert decision.wait == float(value)


def test_server_date_is_honoured() -> None:
    headers = {"retry-after": "Sun, 06 Nov 1994 08:49:37 GMT"}
    assert rate_limit_decision(1, headers, CONFIG, NOW).wait == 37.0


def test_without_server_wait_backoff_applies() -> None:
    decision = rate_limit_decision(3, {"retry-after": "garbage"}, CONFIG, NOW, rand=lambda: 0.5)
    assert decision.wait == 0.5 * 4.0
    assert "backoff" in decision.reason


def test_cooldown_uses_server_wait_uncapped() -> None:
    assert cooldown_seconds({"retry-after": "600"}, CONFIG, NOW) == 600.0
    assert cooldown_seconds({"retry-after-ms": "1500"}, CONFIG, NOW) == 1.5


def test_cooldown_without_server_wait_is_initial_delay() -> None:
    assert cooldown_seconds({}, RetrySettings(initial_delay=2.5), NOW) == 2.5
    assert cooldown_seconds({"retry-after": "nope"}, CONFIG, NOW) == 1.0
