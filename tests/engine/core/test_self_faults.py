"""Faults in claudex itself: a probe that crashes or hangs, a misconfigured profile, SIGTERM with
requests in flight, config reloads racing with traffic, and a crash while writing the config.

Network only to 127.0.0.1: claudex's fake providers, the proxy in-process under uvicorn, and
`claudex serve` as a real process where signals are the point.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
import signal
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from claudex.config import editing
from claudex.config.atomic_files import write_json_atomic
from claudex.config.editing import WriteError
from claudex.config.loader import load_config, parse_config
from claudex.config.model import Config
from claudex.config.watch import ConfigWatcher
from claudex.demo.fake_provider import FakeProvider
from claudex.engine.credentials.oauth import FORMATS, read_token_file
from claudex.engine.engine import Engine
from claudex.server.app import create_app
from claudex.server.run import start_in_background
from tests.cli.test_cli import free_port, spawn_serve, wait_until_serving
from tests.conftest import TEST_ENV, RecordingSleep, anthropic_body, eventually, openai_body
from tests.engine.core.test_proxy_streaming import sse_events
from tests.paths import REPO

# A secret whose shape no redaction pattern knows: only not logging it keeps it out of the log.
ODD_SECRET = "tok_live_QX7Rb2Kd9Lm4Np8S"

HEALTH_GLOBALS = """
[proxy]
connect_timeout = 2
read_timeout = 5

[health]
enabled = false
# Short, so a hung probe's round ends soon; long enough that a healthy fake's probe answers in
# time on a loaded two-core machine (0.1 s did not, one full-suite run in three).
timeout_seconds = 1
"""


def profile(name: str, fake: FakeProvider, *, backups: tuple[str, ...] = (), **keys: Any) -> str:
    """A `[[profiles]]` table for `fake`; more keys given as Python values."""
    provider_type = "DirectAnthropic" if fake.protocol == "anthropic" else "OpenAICompatible"
    lines = [
        "[[profiles]]",
        f'name = "{name}"',
        f'provider_type = "{provider_type}"',
        f'base_url = "{fake.base_url}"',
        f'default_model = "{name}-model"',
        "backup_providers = [" + ", ".join(f'"{b}"' for b in backups) + "]",
    ]
    if "api_key_env" not in keys and "auth_type" not in keys and "token_command" not in keys:
        keys["api_key_env"] = "FAKE_KEY"
    for key, value in keys.items():
        lines.append(f"{key} = {_toml(value)}")
    return "\n" + "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f'"{k}" = {_toml(v)}' for k, v in value.items()) + " }"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value)


class RoundGate:
    """The health loop's sleep: after each round the loop waits here until the test lets it on."""

    def __init__(self) -> None:
        self._permits = asyncio.Semaphore(0)

    async def __call__(self, seconds: float) -> None:
        await self._permits.acquire()

    def next_round(self) -> None:
        self._permits.release()


class Ticker:
    """A wall clock that only moves when told to, so each round's `last_checked` is its own."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@contextlib.asynccontextmanager
async def health_engine(config: Config) -> AsyncIterator[tuple[Engine, RoundGate, Ticker]]:
    gate, ticker = RoundGate(), Ticker()
    engine = Engine(config, env=TEST_ENV, sleep=gate, wall=ticker)
    try:
        yield engine, gate, ticker
    finally:
        await engine.close()


async def next_round(engine: Engine, gate: RoundGate, ticker: Ticker, done: int) -> None:
    ticker.now += 30.0
    gate.next_round()
    await eventually(lambda: engine.health.rounds == done)


def health_of(engine: Engine, name: str) -> dict[str, Any]:
    for entry in engine.snapshot()["profiles"]:
        if entry["name"] == name:
            return dict(entry["health"])
    raise AssertionError(f"no profile {name}")


def warnings_from(caplog: pytest.LogCaptureFixture, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == logger and r.levelno == logging.WARNING]


# ---------------------------------------------------------------------------------------------
# 1. A health probe that raises or hangs never stops the health checker.


async def three_fakes(fakes: Any) -> Config:
    f = await fakes(("a", "anthropic"), ("b", "openai"), ("c", "anthropic"))
    config = parse_config(HEALTH_GLOBALS + "".join(profile(n, f[n]) for n in ("a", "b", "c")),
                          "test.toml", env=TEST_ENV)
    return config


def make_b_probe_raise(engine: Engine, monkeypatch: pytest.MonkeyPatch, where: str,
                  times: int) -> list[int]:
    """Make b's probe raise an unexpected exception (carrying a secret) `times` times."""
    calls = [0]
    exc_type: type[BaseException] = {"credentials": KeyError, "stray-cancel": asyncio.CancelledError
                                     }.get(where, RuntimeError)
    b = engine.runtimes["b"]

    def should_raise() -> bool:
        calls[0] += 1
        return calls[0] <= times

    if where == "credentials":
        real_auth = b.credentials.auth_headers

        async def auth_headers() -> Any:
            if should_raise():
                raise exc_type(ODD_SECRET)
            return await real_auth()

        monkeypatch.setattr(b.credentials, "auth_headers", auth_headers)
    elif where == "transport":
        real_get = engine.http.get

        async def get(url: str, **kw: Any) -> httpx.Response:
            if url.startswith(b.profile.base_url) and should_raise():
                raise exc_type(f"bad state {ODD_SECRET}")
            return await real_get(url, **kw)

        monkeypatch.setattr(engine.http, "get", get)
    else:  # the probe function itself ("probe", or a library's stray CancelledError)
        real_check = engine.health.check

        async def check(rt: Any) -> None:
            if rt.name == "b" and should_raise():
                raise exc_type(ODD_SECRET)
            await real_check(rt)

        monkeypatch.setattr(engine.health, "check", check)
    return calls


@pytest.mark.parametrize("where, kind", [
    ("credentials", "KeyError"), ("transport", "RuntimeError"), ("probe", "RuntimeError"),
    ("stray-cancel", "CancelledError"),
])
async def test_a_probe_raising_an_unexpected_error_is_recorded_and_the_rounds_go_on(
    fakes: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, where: str,
    kind: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    config = await three_fakes(fakes)
    async with health_engine(config) as (engine, gate, ticker):
        make_b_probe_raise(engine, monkeypatch, where, times=3)
        await engine.start(health=True)
        for done in (1, 2, 3):
            if done > 1:
                await next_round(engine, gate, ticker, done)
            else:
                await eventually(lambda: engine.health.rounds == 1)
            b = health_of(engine, "b")
            # Recorded as b's probe error, in words, every round; the others are untouched.
            assert b["error"] == f"health probe failed unexpectedly ({kind})"
            assert b["last_checked"] == ticker.now
            for other in ("a", "c"):
                assert health_of(engine, other)["last_checked"] == ticker.now
                assert health_of(engine, other)["error"] is None
                assert health_of(engine, other)["color"] == "green"
        # A claudex bug is not the provider's failure: b's breaker was not charged.
        assert engine.runtimes["b"].breaker.snapshot().consecutive_failures == 0
        status = json.dumps(engine.snapshot())
        assert ODD_SECRET not in status and "Traceback" not in status

        await next_round(engine, gate, ticker, 4)  # the fault is gone: b recovers
        assert health_of(engine, "b")["error"] is None
        assert health_of(engine, "b")["color"] == "green"
    warned = warnings_from(caplog, "claudex.health")
    assert len(warned) == 1, warned  # once, not once per round
    assert warned[0].startswith(f"b: health probe failed unexpectedly ({kind} at ")
    every_line = "\n".join(caplog.text.splitlines() + [r.getMessage() for r in caplog.records])
    assert ODD_SECRET not in every_line and "Traceback" not in every_line


async def test_a_new_unexpected_error_after_recovery_is_logged_again(
    fakes: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    config = await three_fakes(fakes)
    async with health_engine(config) as (engine, gate, ticker):
        calls = make_b_probe_raise(engine, monkeypatch, "probe", times=1)
        await engine.start(health=True)
        await eventually(lambda: engine.health.rounds == 1)
        await next_round(engine, gate, ticker, 2)  # b works
        calls[0] = 0  # and fails once more
        await next_round(engine, gate, ticker, 3)
    assert len(warnings_from(caplog, "claudex.health")) == 2


async def test_a_hung_request_times_out_as_a_failed_probe_and_the_round_completes(
    fakes: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = await three_fakes(fakes)
    async with health_engine(config) as (engine, gate, ticker):
        real_get = engine.http.get
        b_url = engine.runtimes["b"].profile.base_url

        async def get(url: str, **kw: Any) -> httpx.Response:
            if url.startswith(b_url):
                await asyncio.Event().wait()  # a wedged transport: ignores its own timeout
            return await real_get(url, **kw)

        monkeypatch.setattr(engine.http, "get", get)
        await engine.start(health=True)
        await eventually(lambda: engine.health.rounds == 1)
        b = health_of(engine, "b")
        assert b["error"] == "no response in time" and b["color"] == "yellow"
        # A probe timeout counts against the breaker (DESIGN.md, Health).
        assert engine.runtimes["b"].breaker.snapshot().consecutive_failures == 1
        assert health_of(engine, "a")["color"] == health_of(engine, "c")["color"] == "green"
        await next_round(engine, gate, ticker, 2)
        assert health_of(engine, "b")["color"] == "red"
        assert health_of(engine, "a")["last_checked"] == ticker.now


async def test_a_probe_hung_outside_the_request_is_abandoned_at_its_deadline(
    fakes: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = await three_fakes(fakes)
    async with health_engine(config) as (engine, gate, ticker):
        entered = [0]

        async def auth_headers() -> Any:
            entered[0] += 1
            await asyncio.Event().wait()  # e.g. a credential source that never answers

        monkeypatch.setattr(engine.runtimes["b"].credentials, "auth_headers", auth_headers)
        await engine.start(health=True)
        await eventually(lambda: engine.health.rounds == 1)
        b = health_of(engine, "b")
        assert b["error"] == "probe did not finish within 3 s"
        assert b["last_checked"] == ticker.now
        assert engine.runtimes["b"].breaker.snapshot().consecutive_failures == 0
        assert health_of(engine, "a")["color"] == health_of(engine, "c")["color"] == "green"
        await next_round(engine, gate, ticker, 2)
        assert health_of(engine, "b")["last_checked"] == ticker.now
        # Closing the engine mid-round still cancels the hung probe (nothing swallows that).
        gate.next_round()
        await eventually(lambda: entered[0] == 3)  # round 3 is under way, b's probe hanging
        await asyncio.wait_for(engine.close(), 2)


async def test_a_round_that_fails_as_a_whole_does_not_stop_the_loop(
    fakes: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    config = await three_fakes(fakes)
    async with health_engine(config) as (engine, gate, ticker):
        real_publish = engine.events.publish
        failed = [False]

        def publish(event: Any) -> None:
            if event.kind == "health" and not failed[0]:
                failed[0] = True
                raise RuntimeError(ODD_SECRET)
            real_publish(event)

        monkeypatch.setattr(engine.events, "publish", publish)
        await engine.start(health=True)
        await eventually(lambda: engine.health.rounds == 1)
        await next_round(engine, gate, ticker, 2)
        assert all(health_of(engine, n)["last_checked"] == ticker.now for n in "abc")
    warned = warnings_from(caplog, "claudex.health")
    assert warned == [warned[0]] and warned[0].startswith("health round failed unexpectedly")
    assert ODD_SECRET not in caplog.text


# ---------------------------------------------------------------------------------------------
# 2. One misconfigured profile never blocks the others.


@contextlib.asynccontextmanager
async def serve_file(path: Path) -> AsyncIterator[tuple[Engine, httpx.AsyncClient]]:
    """The proxy in-process, reloading from `path` on POST /_claudex/reload."""
    engine = Engine(load_config(path, TEST_ENV), env=TEST_ENV, sleep=RecordingSleep())
    app = create_app(engine, load_config=lambda: load_config(path, TEST_ENV))
    server = await start_in_background(app)
    client = httpx.AsyncClient(base_url=server.url, timeout=10.0)
    try:
        yield engine, client
    finally:
        await client.aclose()
        await server.stop()


async def test_misconfigured_profiles_never_block_the_others(fakes: Any, tmp_path: Path) -> None:
    f = await fakes(("good", "anthropic"), ("spare", "anthropic"))
    missing_token = tmp_path / "no-such-token"
    path = tmp_path / "profiles.toml"
    path.write_text(
        HEALTH_GLOBALS
        + profile("good", f["good"], backups=("noenv", "nofile", "badcmd", "spare"))
        + profile("noenv", f["good"], api_key_env="CLAUDEX_TEST_UNSET_VARIABLE")
        + profile("nofile", f["good"], auth_type="oauth", oauth_provider="claude",
                  credentials_file=str(tmp_path / "none.json"))
        + profile("badcmd", f["good"], token_command=f"cat {missing_token}")
        + profile("spare", f["spare"])
    )
    async with serve_file(path) as (engine, client):
        # The proxy started; the good profiles serve.
        for name in ("good", "spare"):
            resp = await client.post(f"/proxy/{name}/v1/messages", json=anthropic_body())
            assert resp.status_code == 200 and resp.headers["x-claudex-provider"] == name

        # Failover skips each broken profile, saying why, and reaches the spare.
        f["good"].set_fault("down")
        resp = await client.post("/proxy/good/v1/messages", json=anthropic_body())
        assert resp.status_code == 200 and resp.headers["x-claudex-provider"] == "spare"
        assert resp.headers["x-claudex-attempts"] == (
            "good:connect_error,noenv:misconfigured,nofile:misconfigured,badcmd:credentials,"
            "spare:200")
        f["good"].set_fault("ok")

        # Addressed directly, a broken profile answers with a clear error, not a crash.
        resp = await client.post("/proxy/noenv/v1/messages", json=anthropic_body())
        assert resp.status_code == 502
        assert "CLAUDEX_TEST_UNSET_VARIABLE is not set" in resp.json()["error"]["message"]

        # A health round completes for the others and shows each broken one with its reason.
        rounds = engine.health.rounds
        resp = await client.post("/_claudex/health")
        assert resp.status_code == 200 and engine.health.rounds == rounds + 1
        shown = {p["name"]: p for p in resp.json()["profiles"]}
        for name in ("good", "spare"):  # (good is yellow: its outage above is remembered)
            assert shown[name]["health"]["error"] is None
            assert shown[name]["health"]["last_checked"] is not None
        assert shown["spare"]["health"]["color"] == "green"
        reasons = {name: (shown[name]["health"]["color"], shown[name]["health"]["reason"])
                   for name in ("noenv", "nofile", "badcmd")}
        assert reasons == {
            "noenv": ("red", "misconfigured: environment variable CLAUDEX_TEST_UNSET_VARIABLE "
                             "is not set"),
            "nofile": ("red", f"misconfigured: credentials file {tmp_path / 'none.json'} "
                              "not found"),
            "badcmd": ("red", "misconfigured: token_command exited with status 1: cat: "
                              f"{missing_token}: No such file or directory"),
        }
        assert shown["badcmd"]["health"]["error"].startswith("token_command exited")
        status = (await client.get("/_claudex/status")).json()
        assert [p["health"]["reason"] for p in status["profiles"]] == [
            "1 recent failure", reasons["noenv"][1], reasons["nofile"][1], reasons["badcmd"][1],
            "ok"]

        # Reload with the broken profiles still in the file works, and so does traffic after.
        path.write_text(path.read_text() + "# touched\n")
        resp = await client.post("/_claudex/reload")
        assert resp.status_code == 200
        assert resp.json()["profiles"] == ["good", "noenv", "nofile", "badcmd", "spare"]
        resp = await client.post("/proxy/good/v1/messages", json=anthropic_body())
        assert resp.status_code == 200 and resp.headers["x-claudex-provider"] == "good"

        # Once its token can be read, the next probe clears its run-time problem.
        missing_token.write_text(TEST_ENV["FAKE_KEY"] + "\n")
        resp = await client.post("/_claudex/health")
        assert {p["name"]: p["health"]["color"] for p in resp.json()["profiles"]}["badcmd"] \
            == "green"


# ---------------------------------------------------------------------------------------------
# 3. SIGTERM drains in-flight requests (streaming and not), refuses new ones, exits 0.


async def test_sigterm_drains_a_stream_and_a_plain_request_then_exits_0(
    fakes: Any, tmp_path: Path
) -> None:
    f = await fakes(("plain", "anthropic"), ("streamy", "openai"))
    f["plain"].set_fault("slow", latency_ms=1000)
    f["streamy"].stream_delay_ms = 40  # 25 deltas: about a second of stream
    port = free_port()
    path = tmp_path / "profiles.toml"
    path.write_text(HEALTH_GLOBALS.replace("[proxy]", f"[proxy]\nport = {port}")
                    + profile("plain", f["plain"]) + profile("streamy", f["streamy"]))
    proc = await spawn_serve(path)
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_until_serving(url, proc)
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            plain = asyncio.create_task(
                client.post("/proxy/plain/v1/messages", json=anthropic_body()))
            committed = asyncio.Event()

            async def stream() -> tuple[int, str]:
                body = openai_body("events:25", stream=True)
                async with client.stream("POST", "/proxy/streamy/v1/chat/completions",
                                         json=body) as resp:
                    text = ""
                    async for chunk in resp.aiter_text():
                        text += chunk
                        if '"content"' in text:
                            committed.set()
                    return resp.status_code, text

            streaming = asyncio.create_task(stream())
            await asyncio.wait_for(committed.wait(), 10)  # the stream is flowing
            await asyncio.wait_for(f["plain"].wait_for_requests(1), 10)  # and plain is waiting
            proc.send_signal(signal.SIGTERM)

            async def refused() -> bool:
                # What matters is that no new request is answered. A connection the kernel
                # queued just before the listener closed is reset rather than refused, so the
                # client may see it fail on connect, on read or as a closed connection.
                async with httpx.AsyncClient(base_url=url, timeout=2) as fresh:
                    try:
                        await fresh.get("/healthz")
                    except (httpx.ConnectError, httpx.ReadError, httpx.WriteError,
                            httpx.RemoteProtocolError):
                        return True
                return False

            for _ in range(200):  # bounded: uvicorn stops listening within a tick or two
                if await refused():
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("new connections were still accepted after SIGTERM")
            assert not streaming.done() and not plain.done()  # refused while they run

            resp = await plain
            assert resp.status_code == 200 and resp.headers["x-claudex-provider"] == "plain"
            assert resp.json()["content"][0]["text"].startswith("Hello from plain")
            status, text = await streaming
            assert status == 200
            events = sse_events(text)
            assert events[-1] == (None, "[DONE]")
            deltas = [json.loads(d)["choices"][0]["delta"].get("content", "")
                      for _, d in events[:-1] if json.loads(d)["choices"]]
            assert sum(1 for d in deltas if d) == 25
        assert await asyncio.wait_for(proc.wait(), 10) == 0
        stderr = (await proc.stderr.read()).decode() if proc.stderr else ""
        assert "Traceback" not in stderr
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_sigterm_ends_an_attached_event_stream_and_exits_at_once(
    fakes: Any, tmp_path: Path
) -> None:
    """An attached console holds `GET /_claudex/events` open for as long as it runs. The server
    ends that stream when it begins to stop; before, uvicorn waited out its whole graceful
    window (30 s) for the stream to finish, then cancelled it with a traceback."""
    f = await fakes(("plain", "anthropic"))
    port = free_port()
    path = tmp_path / "profiles.toml"
    path.write_text(HEALTH_GLOBALS.replace("[proxy]", f"[proxy]\nport = {port}")
                    + profile("plain", f["plain"]))
    proc = await spawn_serve(path)
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_until_serving(url, proc)
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            connected = asyncio.Event()

            async def attached() -> str:
                async with client.stream("GET", "/_claudex/events") as resp:
                    assert resp.status_code == 200
                    text = ""
                    async for chunk in resp.aiter_text():
                        text += chunk
                        connected.set()
                    return text  # the response ended: the server closed the stream

            reader = asyncio.create_task(attached())
            await asyncio.wait_for(connected.wait(), 10)
            resp = await client.post("/proxy/plain/v1/messages", json=anthropic_body())
            assert resp.status_code == 200
            proc.send_signal(signal.SIGTERM)
            # Well inside the 15 s keep-alive and the 30 s graceful window it used to wait for.
            text = await asyncio.wait_for(reader, 10)
            assert text.startswith(": connected") and "event: request" in text
        assert await asyncio.wait_for(proc.wait(), 10) == 0
        stderr = (await proc.stderr.read()).decode() if proc.stderr else ""
        assert "Traceback" not in stderr and "Cancel" not in stderr
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


# ---------------------------------------------------------------------------------------------
# 4. Config reloads racing with requests lose none.


def race_config(f: dict[str, FakeProvider], gen: int) -> str:
    """Generation `gen` of a config that keeps changing the profiles in use."""
    with_extra = gen % 2 == 0
    main_backups = ("alt", "extra") if with_extra and gen % 4 == 0 else \
        ("extra", "alt") if with_extra else ("alt",)
    text = HEALTH_GLOBALS
    text += profile("main", f["main"], backups=main_backups, custom_headers={"X-Gen": str(gen)},
                    read_timeout=5 + gen % 3)
    text += profile("alt", f["alt"], read_timeout=6 + gen % 2, connect_timeout=2 + gen % 2)
    text += profile("steady", f["steady"], failure_threshold=5)
    text += profile("tripped", f["steady"])
    if with_extra:
        text += profile("extra", f["extra"])
    return text


async def race_fakes(fakes: Any) -> dict[str, FakeProvider]:
    f: dict[str, FakeProvider] = await fakes(
        ("main", "anthropic"), ("alt", "openai"), ("steady", "anthropic"), ("extra", "anthropic"))
    f["main"].stream_delay_ms = 2
    f["alt"].stream_delay_ms = 2
    return f


async def traffic(client: httpx.AsyncClient, count: int) -> list[str]:
    """`count` requests (plain and streaming, both protocols), a few at a time; returns a
    description of each one that did not end with a complete, valid 200 answer."""
    limit = asyncio.Semaphore(12)
    problems: list[str] = []

    async def one(i: int) -> None:
        kind = ("anthropic", "openai")[i % 2]
        streaming = i % 4 >= 2
        if kind == "anthropic":
            path, body = "/proxy/main/v1/messages", anthropic_body("events:15", stream=streaming)
        else:
            path, body = "/proxy/alt/v1/chat/completions", openai_body("events:15",
                                                                       stream=streaming)
        async with limit:
            resp = await client.post(path, json=body)
        problem = answer_problem(kind, streaming, resp)
        if problem:
            problems.append(f"request {i} ({kind}, stream={streaming}): {problem}")

    await asyncio.gather(*(one(i) for i in range(count)))
    return problems


def answer_problem(kind: str, streaming: bool, resp: httpx.Response) -> str | None:
    if resp.status_code != 200:
        return f"status {resp.status_code}: {resp.text[:200]}"
    if not streaming:
        data = resp.json()
        text = data["content"][0]["text"] if kind == "anthropic" else \
            data["choices"][0]["message"]["content"]
        return None if text.count(" ") == 14 else f"short answer {text!r}"
    events = sse_events(resp.text)
    if kind == "anthropic":
        names = [n for n, _ in events]
        if names[-1] != "message_stop" or names.count("content_block_delta") != 15:
            return f"incomplete stream {names}"
        return None
    if events[-1] != (None, "[DONE]"):
        return "stream without [DONE]"
    pieces = [json.loads(d)["choices"][0]["delta"].get("content") for _, d in events[:-1]
              if json.loads(d)["choices"]]
    return None if sum(1 for p in pieces if p) == 15 else "incomplete stream"


async def prepare_kept_state(engine: Engine, client: httpx.AsyncClient,
                             f: dict[str, FakeProvider]) -> None:
    """steady: two successes then one failure; tripped: forced open by the operator."""
    for _ in range(2):
        assert (await client.post("/proxy/steady/v1/messages", json=anthropic_body())
                ).status_code == 200
    f["steady"].set_fault("500", times=1)
    resp = await client.post("/proxy/steady/v1/messages", json=anthropic_body(),
                             headers={"x-claudex-failover": "off"})
    assert resp.status_code == 502
    assert (await client.post("/_claudex/breakers/tripped/trip")).status_code == 200


def assert_kept_state(engine: Engine, served_by_main: int) -> None:
    steady = engine.runtimes["steady"]
    assert (steady.stats.requests, steady.stats.successes, steady.stats.failures) == (3, 2, 1)
    assert steady.breaker.snapshot().consecutive_failures == 1
    assert engine.runtimes["tripped"].breaker.state.value == "forced_open"
    # main changed on every reload, yet kept its runtime: every request it served is counted.
    assert engine.runtimes["main"].stats.successes == served_by_main
    assert engine.totals.in_flight == 0


async def test_reloads_by_the_admin_route_racing_with_requests_lose_none(
    fakes: Any, tmp_path: Path
) -> None:
    f = await race_fakes(fakes)
    path = tmp_path / "profiles.toml"
    path.write_text(race_config(f, 0))
    async with serve_file(path) as (engine, client):
        await prepare_kept_state(engine, client, f)
        kept = dict(engine.runtimes)
        reloads = 0

        async def reload_repeatedly(stop: asyncio.Event) -> None:
            nonlocal reloads
            gen = 0
            while not stop.is_set() or gen < 12:
                gen += 1
                path.write_text(race_config(f, gen))
                resp = await client.post("/_claudex/reload")
                assert resp.status_code == 200, resp.text
                reloads += 1
                await asyncio.sleep(0.005)

        stop = asyncio.Event()
        reloader = asyncio.create_task(reload_repeatedly(stop))
        problems = await traffic(client, 100)
        stop.set()
        await reloader
        assert problems == []
        assert reloads >= 12
        # The reloads really changed what the requests were sent with, while they ran.
        assert len({r.headers.get("x-gen") for r in f["main"].requests}) > 3
        assert_kept_state(engine, served_by_main=50)
        for name in ("main", "alt", "steady", "tripped"):
            assert engine.runtimes[name] is kept[name]


async def test_reloads_by_the_file_watcher_racing_with_requests_lose_none(
    fakes: Any, tmp_path: Path
) -> None:
    f = await race_fakes(fakes)
    path = tmp_path / "profiles.toml"
    path.write_text(race_config(f, 0))
    rejected: list[Any] = []
    async with serve_file(path) as (engine, client):
        await prepare_kept_state(engine, client, f)
        # Wired as the console wires it (claudex.console.launch.watch_config).
        watcher = ConfigWatcher(path, engine.apply_config, rejected.append,
                                debounce_ms=10, tick_ms=200, env=TEST_ENV)
        watcher.start()
        await watcher.wait_ready()
        applied = [0]

        def gen_live() -> int:
            main = engine.config.profile("main")
            return int(main.custom_headers["X-Gen"]) if main else -1

        async def edit_repeatedly() -> None:
            for gen in range(1, 11):
                tmp = path.with_name("edit.tmp")  # saved as editors do: write, then rename
                tmp.write_text(race_config(f, gen))
                os.replace(tmp, path)
                await eventually(lambda g=gen: gen_live() == g)  # type: ignore[misc]
                applied[0] += 1

        try:
            editor = asyncio.create_task(edit_repeatedly())
            problems = await traffic(client, 100)
            await editor
        finally:
            await watcher.stop()
        assert problems == [] and rejected == [] and applied[0] == 10
        assert_kept_state(engine, served_by_main=50)


async def test_a_request_in_flight_to_a_removed_profile_completes(
    fakes: Any, tmp_path: Path
) -> None:
    f = await race_fakes(fakes)
    f["extra"].stream_delay_ms = 20
    path = tmp_path / "profiles.toml"
    path.write_text(race_config(f, 0))  # has "extra"
    async with serve_file(path) as (engine, client):
        started = asyncio.Event()

        async def stream() -> str:
            body = anthropic_body("events:40", stream=True)  # about 0.8 s
            text = ""
            async with client.stream("POST", "/proxy/extra/v1/messages", json=body) as resp:
                async for chunk in resp.aiter_text():
                    text += chunk
                    started.set()
            return text

        stream_task = asyncio.create_task(stream())
        await asyncio.wait_for(started.wait(), 5)
        f["extra"].set_fault("slow", latency_ms=800)
        plain_task = asyncio.create_task(client.post("/proxy/extra/v1/messages",
                                                     json=anthropic_body()))
        await asyncio.wait_for(f["extra"].wait_for_requests(2), 5)
        f["extra"].set_fault("ok")  # (the plain request keeps its delay)
        path.write_text(race_config(f, 1))  # "extra" removed
        assert (await client.post("/_claudex/reload")).status_code == 200
        assert "extra" not in engine.runtimes
        path.write_text(race_config(f, 2))  # and added back at once
        assert (await client.post("/_claudex/reload")).status_code == 200
        assert not stream_task.done() and not plain_task.done()  # both were in flight
        names = [n for n, _ in sse_events(await stream_task)]
        assert names[-1] == "message_stop" and names.count("content_block_delta") == 40
        assert (await plain_task).status_code == 200
        resp = await client.post("/proxy/extra/v1/messages", json=anthropic_body())
        assert resp.status_code == 200


# ---------------------------------------------------------------------------------------------
# 5. A crash while writing the config (or credentials) leaves the old file intact.

CRASHING_WRITER = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path

    from claudex.config import editing
    from claudex.config import atomic_files

    point, operation, target = sys.argv[1], sys.argv[2], Path(sys.argv[3])

    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    if point == "replace":
        os.replace = die
    elif point == "fsync":
        os.fsync = die
    else:  # mid-write: half the new text reaches the temp file, then the process dies
        real_fdopen = os.fdopen

        class HalfWriter:
            def __init__(self, handle):
                self._handle = handle
            def __enter__(self):
                return self
            def __exit__(self, *exc):
                return self._handle.__exit__(*exc)
            def write(self, text):
                self._handle.write(text[: len(text) // 2])
                self._handle.flush()
                os.fsync(self._handle.fileno())
                die()
            def __getattr__(self, name):
                return getattr(self._handle, name)

        os.fdopen = lambda *a, **k: HalfWriter(real_fdopen(*a, **k))

    if operation == "update":
        editing.update_profile(target, "main", {"read_timeout": 99, "custom_headers": None})
    elif operation == "add":
        editing.add_profile(target, {"name": "added", "provider_type": "DirectAnthropic",
                                     "base_url": "http://127.0.0.1:9", "api_key_env": "FAKE_KEY"})
    elif operation == "delete":
        editing.delete_profile(target, "spare")
    elif operation == "rename":
        editing.rename_profile(target, "spare", "reserve")
    elif operation == "credentials":
        atomic_files.write_json_atomic(target, {"claudeAiOauth": {"accessToken": "new-token"}})
    print("survived")  # never reached
""")

ORIGINAL_CONFIG = """# hand-written, with comments that must survive
[proxy]
port = 13456

[[profiles]]
name = "main"   # the primary
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "FAKE_KEY"
backup_providers = ["spare"]
custom_headers = { "X-Title" = "claudex" }

[[profiles]]
name = "spare"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "FAKE_KEY"
"""


async def run_crashing_writer(point: str, operation: str, target: Path) -> int:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CRASHING_WRITER, point, operation, str(target),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        cwd=REPO, env={**os.environ, **TEST_ENV},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 20)
    assert b"survived" not in out, err.decode()
    assert proc.returncode is not None
    return proc.returncode


def temp_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# Every crash point with one operation, and every other operation at one point: the crash
# points are in the one atomic writer all operations share.
@pytest.mark.parametrize("operation, point", [
    ("update", "mid-write"), ("update", "fsync"), ("update", "replace"),
    ("add", "mid-write"), ("delete", "fsync"), ("rename", "replace"),
])
async def test_a_writer_killed_mid_write_leaves_the_config_intact(
    tmp_path: Path, point: str, operation: str
) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text(ORIGINAL_CONFIG)
    original = path.read_bytes()
    changes: list[Config] = []
    errors: list[Any] = []
    watcher = ConfigWatcher(path, changes.append, errors.append, debounce_ms=10, tick_ms=100,
                            env=TEST_ENV)
    watcher.start()
    await watcher.wait_ready()
    try:
        assert await run_crashing_writer(point, operation, path) == -signal.SIGKILL
        assert path.read_bytes() == original
        assert [p.name for p in load_config(path, TEST_ENV).profiles] == ["main", "spare"]
        # Whatever the dead writer left is not a config to the loader or the watcher.
        await watcher.check_now()
        assert changes == [] and errors == []
        # A later write succeeds, is seen once, and leaves no temp file behind (its own or
        # the dead writer's).
        editing.update_profile(path, "spare", {"read_timeout": 42})
        await eventually(lambda: len(changes) == 1)
    finally:
        await watcher.stop()
    assert errors == [] and changes[0].profile("spare").read_timeout == 42  # type: ignore[union-attr]
    assert temp_files(tmp_path) == []
    assert path.read_text().startswith("# hand-written, with comments that must survive")


@pytest.mark.parametrize("point", ["mid-write", "fsync", "replace"])
async def test_a_credentials_writer_killed_mid_write_leaves_the_file_intact(
    tmp_path: Path, point: str
) -> None:
    path = tmp_path / ".credentials.json"
    original_doc = {"claudeAiOauth": {"accessToken": "old-token", "refreshToken": "r-1",
                                      "expiresAt": 4_102_444_800_000}, "other": "kept"}
    write_json_atomic(path, original_doc)
    original = path.read_bytes()
    assert await run_crashing_writer(point, "credentials", path) == -signal.SIGKILL
    assert path.read_bytes() == original
    token, doc = read_token_file(FORMATS["claude"], path)
    assert token.access_token == "old-token" and doc == original_doc
    leftovers = temp_files(tmp_path)
    # Anything left is a hidden temp file, never a name a reader would open.
    assert all(name.startswith(f".{path.name}.") for name in leftovers)
    write_json_atomic(path, {**original_doc, "other": "changed"})
    assert json.loads(path.read_text())["other"] == "changed"
    assert temp_files(tmp_path) == leftovers  # fresh leftovers stay: their writer may be alive
    # Once a leftover is clearly stale (no live writer keeps one for a minute), the next write
    # removes it: it may hold a token.
    for name in leftovers:
        os.utime(tmp_path / name, (0, 0))
    write_json_atomic(path, {**original_doc, "other": "again"})
    assert temp_files(tmp_path) == []


def fail_with(error: OSError) -> Callable[..., Any]:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise error
    return fail


@pytest.mark.parametrize("where, error, words", [
    ("mkstemp", PermissionError(errno.EACCES, "Permission denied"), "Permission denied"),
    ("fsync", OSError(errno.ENOSPC, "No space left on device"), "No space left on device"),
    ("replace", OSError(errno.EROFS, "Read-only file system"), "Read-only file system"),
])
def test_a_failed_write_leaves_the_config_intact_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, error: OSError, words: str
) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text(ORIGINAL_CONFIG)
    original = path.read_bytes()
    if where == "mkstemp":
        monkeypatch.setattr("tempfile.mkstemp", fail_with(error))
    else:
        monkeypatch.setattr(os, where, fail_with(error))
    with pytest.raises(WriteError) as raised:
        editing.update_profile(path, "main", {"read_timeout": 99})
    assert str(raised.value) == f"cannot write {path}: {words}; the file was not changed"
    assert raised.value.path == path
    monkeypatch.undo()
    assert path.read_bytes() == original and temp_files(tmp_path) == []
    editing.update_profile(path, "main", {"read_timeout": 99})  # the next write works
    assert load_config(path, TEST_ENV).profile("main").read_timeout == 99  # type: ignore[union-attr]


def test_two_writers_take_turns_so_neither_edit_is_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both read the same file; the second must see the first's write as a conflict, never
    slip between its conflict check and its rename (which would lose the first edit)."""
    path = tmp_path / "profiles.toml"
    path.write_text(ORIGINAL_CONFIG)
    digest = editing.file_fingerprint(path).digest
    inside, release = threading.Event(), threading.Event()
    real_transform = editing.with_profile_updated

    def transform(text: str, name: str, values: Any, *, file: str) -> str:
        if values.get("read_timeout") == 11:  # writer A holds its turn here
            inside.set()
            release.wait(5)
        return real_transform(text, name, values, file=file)

    monkeypatch.setattr(editing, "with_profile_updated", transform)
    results: dict[str, str] = {}

    def write(label: str, value: int) -> None:
        try:
            editing.update_profile(path, "main", {"read_timeout": value}, expected_digest=digest)
            results[label] = "written"
        except editing.ConflictError:
            results[label] = "conflict"

    a = threading.Thread(target=write, args=("a", 11))
    b = threading.Thread(target=write, args=("b", 22))
    a.start()
    assert inside.wait(5)
    b.start()
    b.join(0.2)  # time enough for a writer that does not wait its turn to finish
    assert b.is_alive()
    release.set()
    a.join(5)
    b.join(5)
    assert results == {"a": "written", "b": "conflict"}
    assert load_config(path, TEST_ENV).profile("main").read_timeout == 11  # type: ignore[union-attr]
