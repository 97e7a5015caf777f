"""Client credentials in any header are never recorded or shown (issue 20): a real `claudex serve`
gets a request carrying the credential headers real clients and gateways send, and a made-up
one, each with its own random secret; none of the secrets is anywhere claudex records or shows a
request — the journal's bytes (database and WAL), `GET /_claudex/history`, the event stream,
`claudex history` (`--json` and `--id`), the debug log and a screenshot of the console's request
detail — while the allow-listed headers are there as sent; and an upstream that quotes back
what it was sent finds its words masked wherever claudex keeps them. A journal written before
the header policy: tests/engine/history/test_journal_remask.py."""

from __future__ import annotations

import asyncio
import html
import json
import secrets
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from claudex.console.app import ConsoleApp
from claudex.console.components import RequestLog
from claudex.console.http_link import HttpLink
from claudex.engine.history.journal import Journal
from claudex.engine.masking.header_policy import masked_value, shown_as_is, shown_headers
from claudex.engine.masking.secrets import SCRUBBER
from tests.cli.test_cli import claudex, spawn_serve, wait_until_serving
from tests.conftest import anthropic_body, build_config, primary_backup_config, profile_toml
from tests.console.test_console_request_detail import open_row, until


def _secret(tag: str) -> str:
    return f"{tag}-{secrets.token_hex(16)}"


# Each credential header with a secret of its own, as the client sends it: what the issue's
# table found kept in full, and the ones real gateways use (Azure OpenAI's `api-key`, Google's
# `x-goog-api-key`, Portkey's `x-portkey-api-key`, Cloudflare AI Gateway's
# `cf-aig-authorization`), and two a user might add.
PLANTED_SECRETS = {name: _secret(name.replace("-", "")[:6]) for name in (
    "x-api-key", "authorization", "cookie", "proxy-authorization", "api-key", "x-goog-api-key",
    "x-portkey-api-key", "openai-api-key", "cf-aig-authorization", "x-custom-token",
    "x-my-token")}
_SCHEMES = {"authorization": "Bearer ", "proxy-authorization": "Basic ",
            "cf-aig-authorization": "Bearer ", "cookie": "session="}
PLANTED = {name: _SCHEMES.get(name, "") + secret for name, secret in PLANTED_SECRETS.items()}

# Headers on the allow-list, as Claude Code sends them: shown as they are.
KEPT = {
    "user-agent": "claude-cli/2.0.14 (external, cli)",
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
    "x-app": "cli",
    "x-claude-code-session-id": "5f1c1b8e-0d5e-4c3a-9a55-6a3f4e2b1c0d",
    "x-stainless-lang": "js",
    "x-stainless-retry-count": "0",
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
}


def leaks(text: str) -> list[str]:
    """The planted headers whose secret, or any 12 characters of it, `text` holds (a wrapped
    line or a mask showing more than it should would hide the whole value)."""
    found = []
    for name, secret in PLANTED_SECRETS.items():
        pieces = {secret[i:i + 12] for i in range(len(secret) - 11)}
        if any(piece in text for piece in pieces):
            found.append(name)
    return found


def assert_no_secret(where: str, text: str) -> None:
    leaked = leaks(text)
    assert not leaked, f"{where} holds the secret of {', '.join(leaked)}"


def assert_headers_shown(headers: dict[str, str]) -> None:
    """Every planted header by name, masked as credentials are; the allow-listed ones as sent."""
    for name, value in PLANTED.items():
        assert headers[name] == masked_value(value), name
    assert headers["authorization"].startswith("Bearer ")  # the scheme still says how
    for name, value in KEPT.items():
        assert headers[name] == value, name


def journal_bytes(directory: Path) -> str:
    files = [p for p in directory.iterdir() if p.name.startswith("history.sqlite3")]
    assert any(p.name == "history.sqlite3" for p in files)
    return "".join(p.read_bytes().decode("latin-1") for p in files)


class Served:
    """A `claudex serve --debug` child whose stderr (the log) is read as it comes."""

    def __init__(self, config: Path, port: int) -> None:
        self.config = config
        self.url = f"http://127.0.0.1:{port}"
        self.log = bytearray()
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._proc = await spawn_serve(self.config, "--debug",
                                       stdout=asyncio.subprocess.DEVNULL)
        self._reader = asyncio.create_task(self._drain())
        await wait_until_serving(self.url, self._proc)

    async def _drain(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        while chunk := await self._proc.stderr.read(65536):
            self.log += chunk

    async def stop(self) -> str:
        """Stop it as a user would (SIGTERM) and return everything it logged."""
        if self._proc is not None and self._proc.returncode is None:
            self._proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(self._proc.wait(), 20)
        if self._reader is not None:
            await asyncio.wait_for(self._reader, 5)
        return self.log.decode("utf-8", "replace")


@pytest.fixture
async def served(fakes: Any, tmp_path: Path) -> AsyncIterator[Served]:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    history = f'\n[history]\npath = "{tmp_path / "history.sqlite3"}"\n'
    serve = Served(*primary_backup_config(tmp_path, f, history))
    await serve.start()
    try:
        yield serve
    finally:
        await serve.stop()


async def request_events(url: str) -> list[dict[str, Any]]:
    """The request events in the engine's backlog, read as an attached console reads them."""
    found: list[dict[str, Any]] = []
    async with httpx.AsyncClient(timeout=10.0) as client, client.stream(
            "GET", url + "/_claudex/events?since=0&kinds=request") as resp:
        assert resp.status_code == 200
        async for line in resp.aiter_lines():
            if line.startswith("data:"):
                found.append(json.loads(line[5:]))
                if len(found) == 2:
                    return found
    raise AssertionError("the event stream ended")


async def detail_screenshot(url: str) -> str:
    """The console's detail of the newest request, attached to the engine, as SVG text."""
    link = HttpLink(url)
    assert await link.connect()
    app = ConsoleApp(link)
    try:
        async with app.run_test(size=(200, 70)) as pilot:
            log = app.main_screen.query_one(RequestLog)
            await until(app, pilot, lambda: log.row_count == 2)
            await open_row(app, pilot)
            await pilot.pause()
            return app.export_screenshot()
    finally:
        await link.close()


async def test_no_planted_secret_is_recorded_or_shown(served: Served, tmp_path: Path) -> None:
    async with httpx.AsyncClient(base_url=served.url, timeout=10.0) as client:
        resp = await client.post("/proxy/primary/v1/messages", json=anthropic_body(),
                                 headers={**PLANTED, **KEPT})
        assert resp.status_code == 200, resp.text
        request_id = resp.headers["x-claudex-request-id"]
        stream = await client.post("/proxy/primary/v1/messages",
                                   json=anthropic_body(stream=True), headers={**PLANTED, **KEPT})
        assert stream.status_code == 200
        # The history API (it flushes the journal first).
        history = await client.get("/_claudex/history")
        assert history.status_code == 200
    assert_no_secret("GET /_claudex/history", history.text)
    rows = [r for r in history.json()["requests"] if r["request_id"] == request_id]
    assert len(rows) == 1
    assert_headers_shown(rows[0]["headers"])
    # The journal's file and its WAL, as they are on disk while the engine runs.
    assert_no_secret("the journal's files", journal_bytes(tmp_path))
    # The event stream.
    events = await request_events(served.url)
    assert_no_secret("GET /_claudex/events", json.dumps(events))
    (event,) = [e for e in events if e["data"]["request_id"] == request_id]
    assert_headers_shown(event["data"]["headers"])
    # `claudex history`: the listing as JSON and one request in full.
    code, out, err = await claudex("--config", str(served.config), "history", "--json")
    assert code == 0, err
    assert_no_secret("claudex history --json", out + err)
    cli_rows = [r for r in json.loads(out)["requests"] if r["request_id"] == request_id]
    assert_headers_shown(cli_rows[0]["headers"])
    code, out, err = await claudex("--config", str(served.config), "history", "--id",
                                   request_id)
    assert code == 0, err
    assert_no_secret("claudex history --id", out + err)
    assert f"x-goog-api-key: {masked_value(PLANTED['x-goog-api-key'])}" in out
    assert f"user-agent: {KEPT['user-agent']}" in out
    # The console's request detail, as a screenshot.
    svg = await detail_screenshot(served.url)
    text = html.unescape(svg).replace("\xa0", " ")
    assert_no_secret("a screenshot of the request detail", text)
    assert "client headers" in text
    for name, value in KEPT.items():
        assert f"{name}:" in text and value in text, name
    for name, value in PLANTED.items():
        assert f"{name}:" in text and masked_value(value) in text, name
    # The debug log, once the engine is gone; and the journal as it left it.
    log_text = await served.stop()
    assert "request anthropic" in log_text  # debug logging was on: one line per request
    assert_no_secret("the log", log_text)
    assert_no_secret("the journal's files after shutdown", journal_bytes(tmp_path))


# -- upstream answers ----------------------------------------------------------------------------


@pytest.fixture
async def quoting_upstream() -> AsyncIterator[tuple[str, set[str]]]:
    """An Anthropic-style upstream that fails every request with a 500 whose message quotes
    the header named in the request's `?quote=` (all of them would not fit the 300 characters
    claudex keeps of a message), and echoes every header it was sent back as a response header.
    Made up to be as careless as an upstream can be (real ones quote the key at most: "invalid
    x-api-key"), so that whatever claudex keeps of an upstream's answer is shown masked."""

    async def refuse(request: web.Request) -> web.Response:
        sent = {k.lower(): v for k, v in request.headers.items()}
        received.update(k for k, v in sent.items() if PLANTED.get(k) == v)
        name = request.query.get("quote", "")
        body = {"type": "error", "error": {
            "type": "api_error",
            "message": f"invalid {name}: {sent.get(name)} (from {sent.get('user-agent')})"}}
        echoed = {f"x-echo-{k}": v for k, v in sent.items() if k in PLANTED}
        return web.json_response(body, status=500, headers=echoed)

    received: set[str] = set()  # the planted headers that reached it as the client sent them
    app = web.Application()
    app.router.add_post("/v1/messages", refuse)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", received
    finally:
        await runner.cleanup()


async def test_an_upstream_quoting_what_it_was_sent_is_masked_everywhere_claudex_keeps_it(
    quoting_upstream: tuple[str, set[str]], fakes: Any, proxy_factory: Any, tmp_path: Path
) -> None:
    url, received = quoting_upstream
    f = await fakes(("backup", "anthropic"))
    config = build_config(f"""
[[profiles]]
name = "quoting"
provider_type = "DirectAnthropic"
base_url = "{url}"
api_key_env = "FAKE_KEY"
backup_providers = ["backup"]
failure_threshold = 50
""" + profile_toml("backup", f["backup"]))
    journal = Journal(tmp_path / "history.sqlite3", flush_interval_s=0.01)
    proxy = await proxy_factory(config, fakes=f, journal=journal)

    async def failed_upstream(quote: str) -> dict[str, Any]:
        resp = await proxy.client.post(f"/proxy/quoting/v1/messages?quote={quote}",
                                       json=anthropic_body(), headers={**PLANTED, **KEPT})
        assert resp.status_code == 200 and resp.headers["x-claudex-provider"] == "backup"
        history = await proxy.client.get("/_claudex/history", params={
            "request_id": resp.headers["x-claudex-request-id"]})
        assert_no_secret("GET /_claudex/history", history.text)
        (row,) = history.json()["requests"]
        attempt: dict[str, Any] = row["attempts"][0]
        assert (attempt["provider"], attempt["status"]) == ("quoting", 500)
        return attempt

    await failed_upstream("x-goog-api-key")
    # The client's own credential stays with claudex (the upstream is sent the profile's key)
    # and proxy-authorization is hop-by-hop; every other header goes on as it came.
    assert received == set(PLANTED) - {"x-api-key", "authorization", "proxy-authorization"}
    for name in sorted(received):
        attempt = await failed_upstream(name)
        # The upstream's words are kept, with what it quoted of the planted header masked.
        assert attempt["message"] == (f"invalid {name}: {masked_value(PLANTED[name])} "
                                      f"(from {KEPT['user-agent']})")
    status = await proxy.client.get("/_claudex/status")
    events = [e.to_json() for e in proxy.engine.events.since(0)]
    for where, text in (("GET /_claudex/status", status.text),
                        ("the events", json.dumps(events)),
                        ("the journal's files", journal_bytes(tmp_path))):
        assert_no_secret(where, text)


# -- the policy -----------------------------------------------------------------------------------


def test_the_allow_list_and_the_mask() -> None:
    assert all(shown_as_is(name) for name in KEPT)
    assert shown_as_is("Anthropic-Version") and shown_as_is("X-Claudex-Failover")
    assert not any(shown_as_is(name) for name in PLANTED)
    assert not shown_as_is("chatgpt-account-id")  # an account, not what went wrong
    # The scheme stays, the credential is masked; a mask is not masked again.
    assert masked_value("Bearer sk-ant-oat01-abcdefghijklmnop") == "Bearer sk-…mnop"
    assert masked_value("Bearer sk-…mnop") == "Bearer sk-…mnop"
    assert masked_value("…") == "…" and masked_value("tiny") == "…"
    # A value on the allow-list holding a key-shaped string is scrubbed.
    shown = shown_headers({"user-agent": "curl/8 sk-abcdefghijklmnop1234"})
    assert shown == {"user-agent": "curl/8 sk-…1234"}


def test_the_same_headers_give_the_same_object_until_a_secret_is_registered() -> None:
    headers = {"user-agent": "claude-cli/2.0", "x-api-key": "sk-ant-0123456789abcd"}
    first = shown_headers(dict(headers))
    assert shown_headers(dict(headers)) is first  # the event backlog keeps one copy
    assert shown_headers(first) == first  # shown again (a journal row): nothing changes
    SCRUBBER.note("header-policy-test-secret-77")
    assert shown_headers(dict(headers)) is not first
