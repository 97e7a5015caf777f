"""Requests that explain themselves (issue 15, request detail): every attempt sent carries its
timings, the model sent, the max_tokens cap applied, the breaker state it met and what was
dropped; the request event and the journal add the request id (also the response's
`x-claudex-request-id`), the route and the client's headers with credentials masked (and every
value off the header policy's allow-list)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx

from claudex.engine.events import Event
from claudex.engine.history.database import open_database
from claudex.engine.history.journal import Journal
from claudex.engine.masking.header_policy import shown_headers
from claudex.engine.masking.secrets import SCRUBBER
from tests.conftest import Proxy, anthropic_body, build_config, eventually, profile_toml

CLIENT_BEARER = "sk-client-bearer-0123456789abcdef"
CLIENT_KEY = "sk-ant-client-key-9876543210wxyz"
SECRET_HEADERS = {"authorization": f"Bearer {CLIENT_BEARER}", "x-api-key": CLIENT_KEY,
                  "cookie": "session=cookie-secret-value-42", "x-trace": "trace-1",
                  "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}


async def _chain(fakes: Any, proxy_factory: Any, backup: str = "openai",
                 **engine_kw: Any) -> Proxy:
    f = await fakes(("primary", "anthropic"), ("backup", backup))
    config = build_config(profile_toml("primary", f["primary"], backups=["backup"])
                          + profile_toml("backup", f["backup"], extra="max_tokens = 32"))
    proxy: Proxy = await proxy_factory(config, fakes=f, **engine_kw)
    return proxy


async def _event(proxy: Proxy, request_id: str) -> dict[str, Any]:
    events = proxy.engine.events

    def found() -> list[Event]:
        return [e for e in events.since(0, {"request"}) if e.data["request_id"] == request_id]

    await eventually(lambda: bool(found()))
    data: dict[str, Any] = found()[-1].data
    return data


def _timed(attempt: dict[str, Any]) -> None:
    assert attempt["latency_ms"] > 0 and attempt["headers_ms"] > 0, attempt
    assert attempt["headers_ms"] <= attempt["latency_ms"], attempt


def _no_client_secret(text: str) -> None:
    for secret in (CLIENT_BEARER, CLIENT_KEY, "cookie-secret-value-42"):
        assert secret not in text


async def test_a_failed_over_request_shows_each_attempt_and_is_journaled(
    fakes: Any, proxy_factory: Any, tmp_path: Path
) -> None:
    journal = Journal(tmp_path / "h.sqlite3", flush_interval_s=0.01)
    proxy = await _chain(fakes, proxy_factory, journal=journal)
    proxy.fakes["primary"].set_fault("500")
    body = {**anthropic_body(), "top_k": 5}  # OpenAI has no top_k: dropped at the backup
    resp = await proxy.messages(body, headers=SECRET_HEADERS)
    assert resp.status_code == 200
    request_id = resp.headers["x-claudex-request-id"]
    data = await _event(proxy, request_id)
    assert data["route"] == "/v1/messages"
    primary, backup = data["attempts"]
    assert (primary["provider"], primary["outcome"], primary["status"]) == \
        ("primary", "server_error", 500)
    _timed(primary)
    assert primary["model"] == "claude-sonnet-4-5"  # kept at the addressed profile
    assert primary["breaker"] == "closed"
    assert "max_tokens" not in primary and "first_content_ms" not in primary
    assert (backup["provider"], backup["outcome"], backup["status"]) == ("backup", "ok", 200)
    _timed(backup)
    assert backup["model"] == "backup-model"
    assert backup["max_tokens"] == 32  # the profile's cap, below the client's 64
    assert backup["breaker"] == "closed"
    assert backup["dropped"] == ["top_k"]
    assert data["first_content_ms"] is None  # not a stream
    # The client's headers as received, credentials masked, and so is any header the
    # allow-list does not know (engine/masking/header_policy.py).
    shown = data["headers"]
    assert shown["authorization"] == "Bearer sk-…cdef"
    assert shown["x-api-key"] == "sk-…wxyz"
    assert shown["cookie"] == "…e-42"
    assert shown["x-trace"] == "…"
    assert shown["traceparent"] == SECRET_HEADERS["traceparent"]
    _no_client_secret(json.dumps(data))
    # The journal keeps the same, and no secret anywhere in its file.
    await asyncio.to_thread(journal.flush)
    conn = sqlite3.connect(journal.path)
    conn.row_factory = sqlite3.Row
    rows = conn.execute("SELECT * FROM requests WHERE request_id = ?", (request_id,)).fetchall()
    conn.close()
    assert len(rows) == 1
    assert rows[0]["route"] == "/v1/messages"
    assert json.loads(rows[0]["headers"]) == shown
    assert json.loads(rows[0]["attempts"]) == data["attempts"]
    files = await asyncio.to_thread(lambda: [p.read_bytes() for p in tmp_path.iterdir()])
    assert files
    for content in files:
        _no_client_secret(content.decode("latin-1"))


async def test_a_stream_shows_its_time_to_first_content(fakes: Any, proxy_factory: Any) -> None:
    proxy = await _chain(fakes, proxy_factory, backup="anthropic")
    proxy.fakes["primary"].set_fault("cut_before_content")
    proxy.fakes["backup"].set_fault("slow", latency_ms=30)
    resp = await proxy.messages(anthropic_body(stream=True), profile="primary")
    assert resp.status_code == 200 and "message_stop" in resp.text
    data = await _event(proxy, resp.headers["x-claudex-request-id"])
    assert data["route"] == "/proxy/primary/v1/messages"
    primary, backup = data["attempts"]
    assert (primary["outcome"], primary["status"]) == ("stream_error", 200)
    _timed(primary)
    assert "first_content_ms" not in primary  # it never had content
    _timed(backup)
    assert backup["headers_ms"] <= backup["first_content_ms"] <= backup["latency_ms"]
    assert backup["headers_ms"] >= 30  # the backup's own delay before answering
    assert data["first_content_ms"] == backup["first_content_ms"]


async def test_a_half_open_trial_says_so_and_skips_carry_no_timings(
    fakes: Any, proxy_factory: Any
) -> None:
    offset = [0.0]
    proxy = await _chain(fakes, proxy_factory, backup="anthropic",
                         clock=lambda: time.monotonic() + offset[0])
    proxy.fakes["primary"].set_fault("500")
    for _ in range(3):
        await proxy.messages()
    resp = await proxy.messages()
    skipped = (await _event(proxy, resp.headers["x-claudex-request-id"]))["attempts"][0]
    assert skipped["outcome"] == "breaker_open"
    assert set(skipped) == {"provider", "outcome", "status", "message"}
    offset[0] += 31  # past recovery_seconds
    proxy.fakes["primary"].set_fault("ok")
    resp = await proxy.messages()
    assert resp.headers["x-claudex-provider"] == "primary"
    (trial,) = (await _event(proxy, resp.headers["x-claudex-request-id"]))["attempts"]
    assert trial["breaker"] == "half_open"
    _timed(trial)


async def test_request_ids_are_unique_within_an_engine(fakes: Any, proxy_factory: Any) -> None:
    proxy = await _chain(fakes, proxy_factory)
    ids = [(await proxy.messages()).headers["x-claudex-request-id"] for _ in range(3)]
    assert len(set(ids)) == 3
    assert len({i.split("-")[0] for i in ids}) == 1  # the engine's start, then a counter
    assert all(len(i) <= 12 for i in ids)
    # Refused before any provider (no such profile): still named.
    resp = await proxy.messages(profile="nobody")
    assert resp.status_code == 404 and resp.headers["x-claudex-request-id"] not in ids


def test_shown_headers_mask_credentials_and_known_secrets() -> None:
    SCRUBBER.note("registered-secret-0042")
    shown = shown_headers({
        "Authorization": "Bearer sk-ant-oat01-abcdefghijklmnop",
        "Proxy-Authorization": "Basic dXNlcjpwYXNzd29yZA==",
        "x-api-key": "short", "cookie": "a=b; session=0123456789abcdef",
        "x-custom": "carries registered-secret-0042 inside", "user-agent": "claude-cli/2.0",
        "X-Stainless-Lang": "js", "anthropic-beta": "beta with registered-secret-0042",
    })
    assert shown == {
        "Authorization": "Bearer sk-…mnop", "Proxy-Authorization": "Basic …ZA==",
        "x-api-key": "…", "cookie": "…cdef",
        "x-custom": "…side",  # not on the allow-list: masked whatever it holds
        "user-agent": "claude-cli/2.0", "X-Stainless-Lang": "js",
        "anthropic-beta": "beta with …0042",  # allow-listed values still pass the scrubber
    }


# The requests table as the first journal wrote it, before request_id, route and headers.
_OLD_SCHEMA = """
CREATE TABLE requests (
    rowid INTEGER PRIMARY KEY, event_id INTEGER, time REAL NOT NULL, protocol TEXT,
    endpoint TEXT, model TEXT, profile TEXT, provider TEXT, status INTEGER, outcome TEXT,
    latency_ms REAL, stream INTEGER, trail TEXT, attempts TEXT, dropped TEXT,
    input_tokens INTEGER, output_tokens INTEGER, cache_read_tokens INTEGER);
CREATE INDEX requests_time ON requests(time);
CREATE TABLE events (
    rowid INTEGER PRIMARY KEY, event_id INTEGER, time REAL NOT NULL, kind TEXT, profile TEXT,
    message TEXT, data TEXT);
"""


def test_a_journal_from_before_gains_the_new_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(_OLD_SCHEMA)
    now = time.time()  # recent: retention keeps it
    old.execute("INSERT INTO requests (time, protocol, status, attempts) VALUES (?, "
                "'anthropic', 200, '[]')", (now - 1.0,))
    old.commit()
    old.close()
    journal = Journal(path, flush_interval_s=0.01)
    journal.start()
    journal.record(Event("request", "r", "a", {
        "protocol": "anthropic", "status": 200, "attempts": [], "request_id": "abc-1",
        "route": "/v1/messages", "headers": {"x-api-key": "sk-…wxyz"}}, time=now, id=7))
    journal.flush()
    journal.close()
    assert journal.problem is None
    conn = open_database(path)  # opening again is harmless
    conn.row_factory = sqlite3.Row
    rows = conn.execute("SELECT * FROM requests ORDER BY time").fetchall()
    conn.close()
    assert [(r["request_id"], r["route"], r["headers"]) for r in rows] == [
        (None, None, None), ("abc-1", "/v1/messages", '{"x-api-key": "sk-\\u2026wxyz"}')]


async def test_the_request_id_comes_with_a_stream_before_its_body(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await _chain(fakes, proxy_factory)
    async with httpx.AsyncClient(base_url=proxy.url, timeout=10.0) as client:
        async with client.stream("POST", "/v1/messages",
                                 json=anthropic_body(stream=True)) as resp:
            request_id = resp.headers["x-claudex-request-id"]
            await resp.aread()
    assert (await _event(proxy, request_id))["first_content_ms"] > 0


async def test_a_stream_that_breaks_after_its_commit_says_so_in_its_trail(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await _chain(fakes, proxy_factory, backup="anthropic")
    proxy.fakes["primary"].set_fault("cut", cut_after_events=2)
    resp = await proxy.messages(anthropic_body(stream=True), profile="primary")
    assert resp.status_code == 200  # committed: the client got the error as an SSE event
    assert "event: error" in resp.text
    data = await _event(proxy, resp.headers["x-claudex-request-id"])
    (attempt,) = data["attempts"]  # nothing to fail over to once content was sent
    assert attempt["provider"] == "primary" and attempt["outcome"] == "stream_error"
    assert "after the response started" in attempt["message"]
    assert attempt["headers_ms"] <= attempt["first_content_ms"] <= attempt["latency_ms"]
    minutes = proxy.engine.snapshot()["profiles"][0]["stats"]["minutes"]
    assert minutes["requests"][-1] == 1 and minutes["errors"][-1] == 1


def test_an_attempts_json_and_label_keep_their_rule() -> None:
    """`Attempt.to_json` and `label` are written out field by field (every journal row makes
    them): each still gives what the plain rule gives — the four fields, then each detail field
    in `_DETAIL_FIELDS`' order when it is set (a tuple as a list), and the status unless the
    outcome names itself."""
    from claudex.engine.core.request import _DETAIL_FIELDS, _NAMED_EVEN_WITH_STATUS, Attempt

    def plain_json(a: Attempt) -> dict[str, Any]:
        out: dict[str, Any] = {"provider": a.provider, "outcome": a.outcome,
                               "status": a.status, "message": a.message}
        for key in _DETAIL_FIELDS:
            value = getattr(a, key)
            if value is not None and value != ():
                out[key] = list(value) if isinstance(value, tuple) else value
        return out

    def plain_label(a: Attempt) -> str:
        result = str(a.status) if a.status is not None and \
            a.outcome not in _NAMED_EVEN_WITH_STATUS else a.outcome
        return f"{a.pool}/{a.provider} {result}" if a.pool is not None else \
            f"{a.provider} {result}"

    attempts = [
        Attempt("anth", "ok", 200),
        Attempt("grok", "server_error", 503, "overloaded", 12.5, 3.0),
        Attempt("anth", "stream_error", 200, "cut", 40.0, 2.0, 9.0, "m", 256, "closed",
                ("thinking", "top_k"), "claude"),
        Attempt("b", "breaker_open", message="breaker open"),
        Attempt("c", "timeout", None, "", None, None, None, "", 0, "half_open", (), None),
    ]
    for a in attempts:
        assert a.to_json() == plain_json(a)
        assert list(a.to_json()) == list(plain_json(a))  # the same keys in the same order
        assert a.label() == plain_label(a)
