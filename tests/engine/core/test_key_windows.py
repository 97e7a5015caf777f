"""API keys' rate limits as quota windows, through a real server on 127.0.0.1 (DESIGN.md
"Windows"): the fakes answer with Anthropic's `anthropic-ratelimit-*` and OpenAI's
`x-ratelimit-*` headers as the real APIs do, and claudex keeps them per provider like a plan's,
in status, `/metrics`, the journal and the words the console shows."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from claudex.demo.fake_ratelimits import Bucket, RateLimits
from claudex.engine.history.journal import Journal
from claudex.text.windows import window_words
from tests.conftest import build_config, openai_body, profile_toml
from tests.engine.core.test_plan_windows import Wall, profile_status


async def _keys(fakes: Any, proxy_factory: Any, **engine_kw: Any) -> Any:
    f = await fakes(("anth", "anthropic"), ("chat", "openai"))
    wall = Wall()
    for fake, style in ((f["anth"], "anthropic"), (f["chat"], "openai")):
        fake.rate_limits = RateLimits.of(style, requests=10,  # type: ignore[arg-type]
                                         tokens=100_000)
        fake.rate_limits.clock = wall
    config = build_config(profile_toml("anth", f["anth"]) + profile_toml("chat", f["chat"]))
    proxy = await proxy_factory(config, fakes=f, wall=wall, **engine_kw)
    proxy.wall = wall
    return proxy


async def test_an_anthropic_keys_limits_are_its_windows(fakes: Any, proxy_factory: Any) -> None:
    proxy = await _keys(fakes, proxy_factory)
    for _ in range(3):
        assert (await proxy.messages(profile="anth")).status_code == 200
    windows = (await profile_status(proxy, "anth"))["windows"]
    assert [w["name"] for w in windows] == ["requests", "tokens", "input-tokens",
                                            "output-tokens"]
    assert windows[0]["used"] == 0.3  # 3 of 10 requests a minute, none refilled yet
    assert windows[0]["status"] == "allowed" and not windows[0]["warning"]
    # The reset is when the bucket is full again: 3 requests at 10 a minute, 18 s.
    assert abs(windows[0]["resets_at"] - (proxy.wall.now + 18)) <= 1
    limits = proxy.fakes["anth"].rate_limits
    left = limits.input_tokens.left(proxy.wall.now)
    assert abs(windows[2]["used"] - (1 - int(left) / 100_000)) < 1e-4
    metrics = (await proxy.client.get("/metrics")).text
    assert 'claudex_provider_window_used_ratio{provider="anth",window="requests"} 0.3' \
        in metrics
    assert window_words(await profile_status(proxy, "anth"), proxy.wall.now).startswith(
        "requests 30% · tokens ")


async def test_an_openai_keys_reset_is_a_duration_from_the_answer(
        fakes: Any, proxy_factory: Any) -> None:
    proxy = await _keys(fakes, proxy_factory)
    assert (await proxy.chat(openai_body(), profile="chat")).status_code == 200
    windows = (await profile_status(proxy, "chat"))["windows"]
    assert [w["name"] for w in windows] == ["requests", "tokens"]
    assert windows[0]["used"] == 0.1
    # "6s" after the answer, by the engine's wall clock (a status read later says the same).
    assert windows[0]["resets_at"] == proxy.wall.now + 6
    proxy.wall.now += 100
    again = (await profile_status(proxy, "chat"))["windows"]
    assert again[0]["resets_at"] == windows[0]["resets_at"]


async def test_a_spent_key_limit_shows_full_with_its_reset(fakes: Any, proxy_factory: Any) -> None:
    proxy = await _keys(fakes, proxy_factory)
    proxy.fakes["anth"].rate_limits.requests = Bucket(1)
    assert (await proxy.messages(profile="anth")).status_code == 200
    profile = await profile_status(proxy, "anth")
    assert profile["windows"][0]["used"] == 1.0
    assert profile["windows"][0]["status"] == "rejected"
    assert profile["window_spent_until"] is None  # a full rate limit is no spent plan
    assert window_words(profile, proxy.wall.now).startswith("requests 100%, resets ")


async def test_the_journal_keeps_no_keys_windows_status_shows_them(
        fakes: Any, proxy_factory: Any, tmp_path: Path) -> None:
    # The journal keeps a plan's windows only (engine/history/rows.py: an API key's limits
    # change with every answer and cost the writer a parse a row); status has them now.
    journal = Journal(tmp_path / "history.sqlite3")
    proxy = await _keys(fakes, proxy_factory, journal=journal)
    proxy.fakes["chat"].rate_limits = None  # as DeepSeek: no rate-limit headers
    assert (await proxy.messages(profile="anth")).status_code == 200
    assert (await proxy.chat(openai_body(), profile="chat")).status_code == 200
    journal.flush()
    conn = sqlite3.connect(tmp_path / "history.sqlite3")
    rows = dict(conn.execute("SELECT profile, windows FROM requests").fetchall())
    conn.close()
    assert rows == {"anth": None, "chat": None}
    kept = (await profile_status(proxy, "anth"))["windows"]
    assert kept[0] == {"name": "requests", "used": 0.1, "resets_at": kept[0]["resets_at"],
                       "status": "allowed", "warning": False}
    assert (await profile_status(proxy, "chat"))["windows"] == []
