"""Security defaults (DESIGN.md, Interfaces: Security), with real servers on 127.0.0.1.

- Binding: loopback by default; `claudex serve` refuses a non-loopback address without a token.
- The local token guards every proxy and admin route, in both header forms; wrong, partial,
  empty and non-ASCII credentials are refused without a crash, in the client's own format.
- Host allowlist (DNS rebinding) on every route; a browser Origin refused on admin routes, and
  on proxy routes unless the page is served from this machine (CSRF).
- Secrets masked everywhere: keys planted in the config, the environment, an OAuth credentials
  file, an upstream's error body and the local token are searched for — whole and as any 8
  characters of their secret part — in the logs of a real `claudex serve` (text and JSON), the
  CLI's output, every answer the client got, status, metrics, events and the console's picture.
- Files holding secrets are written atomically with mode 0600, and a config holding an inline
  key that others can read is reported once, with the fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import os
import re
import signal
import stat
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from claudex.config.editing import add_profile, update_profile
from claudex.config.loader import load_config, parse_config
from claudex.config.permissions import config_permission_warning, file_permission_warning
from claudex.console.app import ConsoleApp
from claudex.console.hosting import host_config
from claudex.console.link import LocalLink
from claudex.demo.fake_oauth import FakeTokenServer
from claudex.demo.fake_provider import FakeProvider
from claudex.engine.masking.secrets import SecretScrubber, mask_secret
from claudex.server.security import host_name, is_loopback_host
from claudex.server.serve import listening_on
from tests.cli.test_cli import claudex, free_port, spawn_serve, wait_until_serving
from tests.conftest import (
    anthropic_body,
    build_config,
    eventually,
    openai_body,
    profile_toml,
    served_models,
)

# -- planted secrets ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Planted:
    """A secret to search for: `prefix` names its kind (shown by the mask), `body` is secret."""

    name: str
    prefix: str
    body: str

    @property
    def value(self) -> str:
        return self.prefix + self.body

    def pieces(self) -> Iterator[str]:
        """The whole value and every 8 characters of the secret part: any longer leak holds one."""
        yield self.value
        for start in range(len(self.body) - 7):
            yield self.body[start : start + 8]


INLINE = Planted("inline api_key", "", "inlQ7vK3yZr8Lm2Np5Tx9Wc4Hb6Jd")
ENV_KEY = Planted("api_key_env value", "sk-proj-", "envA9qZr7Xw2Lm5Np8Tc4Vb6Gh3Kf")
OAUTH_ACCESS = Planted("oauth access token", "oat-", "accM4nB8vC2xZ6lK9jH3gF7dS5aP1")
OAUTH_REFRESH = Planted("oauth refresh token", "ort-", "refT6yU2iO8pL4kJ9hG3fD7sA5zX1")
NEW_ACCESS = Planted("refreshed access token", "oat-", "newR2eW8qA4sD6fG9hJ3kL7zX5cV1")
NEW_REFRESH = Planted("refreshed refresh token", "ort-", "nrfB3nM7qW1eR5tY9uI2oP6aS4dF8")
LOCAL = Planted("local token", "", "locZ8xC4vB7nM2qW6eR9tY3uI5oP1")
PLANTED = (INLINE, ENV_KEY, OAUTH_ACCESS, OAUTH_REFRESH, NEW_ACCESS, NEW_REFRESH, LOCAL)

LOCAL_ENV = "CLAUDEX_SECTEST_TOKEN"
KEY_ENV = "CLAUDEX_SECTEST_KEY"
SECRET_ENV = {LOCAL_ENV: LOCAL.value, KEY_ENV: ENV_KEY.value}


def leaks(text: str) -> list[str]:
    """Which planted secrets `text` shows, whole or in part (also across line wraps)."""
    squeezed = "".join(text.split())
    return sorted({p.name for p in PLANTED for piece in p.pieces()
                   if piece in text or piece in squeezed})


def svg_text(svg: str) -> str:
    """What a screenshot shows: the text of its elements, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", svg))


def test_the_leak_finder_finds_whole_and_partial_secrets() -> None:
    assert leaks(f"key={INLINE.value}") == ["inline api_key"]
    assert leaks("…" + ENV_KEY.body[5:14] + "…") == ["api_key_env value"]
    assert leaks(LOCAL.body[:6] + "\n   " + LOCAL.body[6:12]) == ["local token"]  # wrapped
    assert leaks(mask_secret(ENV_KEY.value) + mask_secret(INLINE.value)) == []


# -- the scrubber -------------------------------------------------------------------------------


def test_scrubber_masks_known_secrets_and_secret_shapes() -> None:
    scrubber = SecretScrubber([INLINE.value, None, "", "short"])
    text = scrubber.text(f"invalid x-api-key {INLINE.value}; Bearer {OAUTH_ACCESS.value}; "
                         f"{ENV_KEY.value}; refresh_token={OAUTH_REFRESH.value}")
    assert leaks(text) == []
    assert mask_secret(INLINE.value) in text and "Bearer oat-…" in text
    assert scrubber.text("a short word stays: short") == "a short word stays: short"


def test_scrubber_masks_error_bodies_and_keeps_clean_ones_byte_for_byte() -> None:
    tricky = 'tok"with/quote-' + LOCAL.body  # JSON escapes its quote inside a body
    scrubber = SecretScrubber([INLINE.value, tricky])
    body = json.dumps({"error": {"message": f"bad key {INLINE.value} / {tricky}"}}).encode()
    scrubbed = scrubber.data(body, extra=[NEW_ACCESS.value])
    assert leaks(scrubbed.decode()) == []
    assert json.loads(scrubbed)["error"]["message"].startswith("bad key …")  # still JSON
    passthrough = json.dumps({"error": {"message": f"client key {NEW_ACCESS.value}"}}).encode()
    assert leaks(scrubber.data(passthrough, extra=[NEW_ACCESS.value]).decode()) == []
    assert not scrubber.knows(NEW_ACCESS.value)  # a request's own credential is not kept
    clean = b'{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens"}}'
    assert scrubber.data(clean) == clean


# -- binding ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("LOCALHOST", True), ("0.0.0.0", False), ("::", False), ("", False),
    ("192.168.1.10", False), ("example.com", False), ("localhost.example.com", False),
])
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


def test_serve_override_is_what_the_host_check_and_status_see() -> None:
    config = build_config("")
    assert config.proxy.host == "127.0.0.1"  # the default bind
    served = listening_on(config, "0.0.0.0", 4242)
    assert (served.proxy.host, served.proxy.port) == ("0.0.0.0", 4242)
    assert listening_on(config, config.proxy.host, config.proxy.port) is config


async def test_serve_refuses_a_non_loopback_bind_without_a_token(tmp_path: Path) -> None:
    plain = tmp_path / "plain.toml"
    plain.write_text("[proxy]\nport = 9\n")
    in_file = tmp_path / "in_file.toml"
    in_file.write_text('[proxy]\nhost = "0.0.0.0"\nport = 9\n')
    unset = tmp_path / "unset.toml"
    unset.write_text('[proxy]\nport = 9\nauth_token_env = "CLAUDEX_SECTEST_UNSET"\n')
    runs = await asyncio.gather(  # (other addresses: test_loopback_addresses)
        claudex("--config", str(plain), "serve", "--host", "0.0.0.0"),
        claudex("--config", str(in_file), "serve"),
        claudex("--config", str(unset), "serve", "--host", "::"),
    )
    for code, out, err in runs:
        assert code != 0 and out == ""
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("claudex: "), err
        assert "auth_token_env" in err and "Traceback" not in err
    assert "Refusing to listen on 0.0.0.0" in runs[0][2]
    assert f"{in_file}:2: proxy.host" in runs[1][2]
    assert "CLAUDEX_SECTEST_UNSET" in runs[2][2] and "not set" in runs[2][2]


def listening_addresses(port: int) -> list[str] | None:
    """The local addresses the kernel lists as listening on `port` (Linux /proc/net; None
    where there is no such table)."""
    if not os.path.exists("/proc/net/tcp"):
        return None
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as handle:
            for line in handle.readlines()[1:]:
                fields = line.split()
                address, port_hex = fields[1].rsplit(":", 1)
                if int(port_hex, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                    found.append(address)
    return found


# -- the local token on every route ---------------------------------------------------------------

TOKEN = "local-Secret-Token-0123456789abcdef"
ANTHROPIC_ROUTE, OPENAI_ROUTE, PLAIN_ROUTE = "anthropic", "openai", "plain"
COUNT_BODY = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}

# method, path, body, status with the right token, the format of a refusal
ROUTES: list[tuple[str, str, Any, int, str]] = [
    ("POST", "/v1/messages", anthropic_body(), 200, ANTHROPIC_ROUTE),
    ("POST", "/v1/messages/count_tokens", COUNT_BODY, 200, ANTHROPIC_ROUTE),
    ("POST", "/v1/chat/completions", openai_body(), 200, OPENAI_ROUTE),
    ("POST", "/proxy/grok/v1/messages", anthropic_body(), 200, ANTHROPIC_ROUTE),
    ("POST", "/proxy/claude/v1/messages/count_tokens", COUNT_BODY, 200, ANTHROPIC_ROUTE),
    ("POST", "/proxy/grok/v1/chat/completions", openai_body(), 200, OPENAI_ROUTE),
    ("GET", "/v1/models", None, 200, OPENAI_ROUTE),
    ("GET", "/proxy/grok/v1/models", None, 200, OPENAI_ROUTE),
    ("GET", "/healthz", None, 200, PLAIN_ROUTE),
    ("GET", "/metrics", None, 200, PLAIN_ROUTE),
    ("GET", "/_claudex/status", None, 200, PLAIN_ROUTE),
    ("POST", "/_claudex/breakers/grok/trip", None, 200, PLAIN_ROUTE),
    ("POST", "/_claudex/breakers/grok/reset", None, 200, PLAIN_ROUTE),
    ("POST", "/_claudex/reload", None, 409, PLAIN_ROUTE),  # no config file behind this engine
    ("POST", "/_claudex/health", None, 200, PLAIN_ROUTE),
    ("GET", "/_claudex/events", None, 200, PLAIN_ROUTE),
    ("GET", "/no/such/route", None, 404, PLAIN_ROUTE),
]
ADMIN_ROUTES = [r for r in ROUTES if r[1].startswith("/_claudex/")]

WRONG_SAME_LENGTH = TOKEN[:-1] + ("X" if TOKEN[-1] != "X" else "Y")
BAD_CREDENTIALS: list[dict[str, str | bytes]] = [
    {},
    {"authorization": f"Bearer {WRONG_SAME_LENGTH}"},
    {"x-api-key": WRONG_SAME_LENGTH},
    {"authorization": f"Bearer {TOKEN[:-1]}"},        # a prefix
    {"x-api-key": TOKEN[:8]},
    {"authorization": f"Bearer {TOKEN}x"},            # the token and more
    {"x-api-key": f"{TOKEN} {TOKEN}"},
    {"authorization": f"Bearer {TOKEN.upper()}"},
    {"authorization": "Bearer"},
    {"x-api-key": ""},
    {"authorization": f"Basic {TOKEN}"},              # another scheme
    {"authorization": TOKEN},                         # no scheme
    {"authorization": b"Bearer " + "t\u00f6k\u00e9n-\u00fcnic\u00f8de".encode()},  # not ASCII
    {"x-api-key": "\u00e9".encode("latin-1") * len(TOKEN)},
    {"x-api-key": b"\xff\xfe" + TOKEN.encode()[2:]},
]
GOOD_CREDENTIALS: list[dict[str, str | bytes]] = [
    {"authorization": f"Bearer {TOKEN}"},
    {"x-api-key": TOKEN},
    {"authorization": f"bearer {TOKEN}"},  # the scheme is case-insensitive (RFC 9110)
]


async def call(client: httpx.AsyncClient, method: str, path: str, body: Any,
               headers: dict[str, str | bytes]) -> tuple[int, httpx.Headers, str]:
    """One request; an accepted event stream is left as soon as its headers arrive."""
    raw = [(k.encode(), v if isinstance(v, bytes) else v.encode()) for k, v in headers.items()]
    request = client.build_request(method, path, json=body, headers=raw)
    response = await client.send(request, stream=True)
    try:
        if path == "/_claudex/events" and response.status_code == 200:
            return response.status_code, response.headers, ""
        await response.aread()
        return response.status_code, response.headers, response.text
    finally:
        await response.aclose()


def assert_refusal_format(kind: str, status: int, text: str) -> str:
    """The refusal parses in the client's protocol; returns its message."""
    body = json.loads(text)
    if kind == ANTHROPIC_ROUTE:
        assert body["type"] == "error"
        expected = "authentication_error" if status == 401 else "permission_error"
        assert body["error"]["type"] == expected
        return str(body["error"]["message"])
    if kind == OPENAI_ROUTE:
        assert body["error"]["code"] == ("invalid_api_key" if status == 401 else "forbidden")
        assert body["error"]["type"] == "authentication_error"
        return str(body["error"]["message"])
    assert set(body) == {"error"} and isinstance(body["error"], str)
    return str(body["error"])


async def two_fakes(fakes: Any, proxy_factory: Any, *, token: str | None) -> Any:
    f = await fakes(("claude", "anthropic"), ("grok", "openai"))
    config = build_config(profile_toml("claude", f["claude"], backups=["grok"])
                          + profile_toml("grok", f["grok"]))
    return await proxy_factory(config, fakes=f, token=token)


async def test_every_route_needs_the_token_in_either_header(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await two_fakes(fakes, proxy_factory, token=TOKEN)
    client: httpx.AsyncClient = proxy.client
    refused = await asyncio.gather(*(call(client, method, path, body, bad)
                                     for method, path, body, _, _ in ROUTES
                                     for bad in BAD_CREDENTIALS))
    kinds = [(path, kind) for _, path, _, _, kind in ROUTES for _ in BAD_CREDENTIALS]
    for (path, kind), (status, headers, text) in zip(kinds, refused, strict=True):
        assert status == 401, path
        assert headers["www-authenticate"].startswith("Bearer")
        message = assert_refusal_format(kind, 401, text)
        assert "token" in message and TOKEN not in text and WRONG_SAME_LENGTH not in text
    assert sum(fake.request_count for fake in proxy.fakes.values()) == 0
    for method, path, body, accepted, _ in ROUTES:  # in order: trip, then reset
        answers = await asyncio.gather(*(call(client, method, path, body, good)
                                         for good in GOOD_CREDENTIALS))
        assert [status for status, _, _ in answers] == [accepted] * len(GOOD_CREDENTIALS), path
    # The refusals changed nothing: the breaker was tripped and reset only with the token.
    assert proxy.engine.runtimes["grok"].breaker.state.value == "closed"
    # A model list asked for by an Anthropic client is refused in Anthropic's format.
    status, _, text = await call(client, "GET", "/v1/models", None, {"anthropic-version": "1"})
    assert status == 401 and json.loads(text)["error"]["type"] == "authentication_error"


async def raw_status(port: int, request: bytes) -> int:
    """Send bytes no well-behaved client library would send; the answer's status."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 5)
    finally:
        writer.close()
        await writer.wait_closed()
    return int(status_line.split()[1])


@pytest.mark.parametrize("credential", [
    b"authorization: Bearer \t", b"authorization: Bearer  ", b"x-api-key: \t",
    b"authorization: Bearer " + TOKEN.encode() + b" \t",  # whitespace around: still the token
])
async def test_odd_credentials_on_the_wire(
    fakes: Any, proxy_factory: Any, credential: bytes
) -> None:
    proxy = await two_fakes(fakes, proxy_factory, token=TOKEN)
    host = f"host: 127.0.0.1:{proxy.server.port}".encode()
    request = b"GET /_claudex/status HTTP/1.1\r\n" + host + b"\r\n" + credential + b"\r\n\r\n"
    expected = 200 if TOKEN.encode() in credential else 401
    assert await raw_status(proxy.server.port, request) == expected
    # No Host header at all (HTTP/1.0): refused as not ours.
    request = b"GET /healthz HTTP/1.0\r\nx-api-key: " + TOKEN.encode() + b"\r\n\r\n"
    assert await raw_status(proxy.server.port, request) == 403


async def test_sdk_clients_see_their_own_authentication_error(
    fakes: Any, proxy_factory: Any
) -> None:
    proxy = await two_fakes(fakes, proxy_factory, token=TOKEN)
    ant = anthropic.AsyncAnthropic(base_url=proxy.url, api_key=WRONG_SAME_LENGTH, max_retries=0)
    oai = openai.AsyncOpenAI(base_url=proxy.url + "/v1", api_key=WRONG_SAME_LENGTH,
                             max_retries=0)
    with pytest.raises(anthropic.AuthenticationError, match="claudex token"):
        await ant.messages.create(model="claude-sonnet-4-5", max_tokens=16,
                                  messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.AuthenticationError, match="claudex token"):
        await oai.chat.completions.create(model="gpt-4o",
                                          messages=[{"role": "user", "content": "hi"}])
    # The SDKs send their key as x-api-key (Anthropic) and as a bearer token (OpenAI).
    ant = ant.with_options(api_key=TOKEN)
    oai = oai.with_options(api_key=TOKEN)
    reply = await ant.messages.create(model="claude-sonnet-4-5", max_tokens=16,
                                      messages=[{"role": "user", "content": "hi"}])
    assert reply.content
    chat = await oai.chat.completions.create(model="gpt-4o",
                                             messages=[{"role": "user", "content": "hi"}])
    assert chat.choices
    await ant.close()
    await oai.close()


async def test_the_local_token_never_goes_upstream_even_for_passthrough(
    fakes: Any, proxy_factory: Any
) -> None:
    f = await fakes(("claude", "anthropic"), ("grok", "openai"))
    config = build_config(profile_toml("claude", f["claude"], extra='auth_type = "passthrough"')
                          + profile_toml("grok", f["grok"]))
    proxy = await proxy_factory(config, fakes=f, token=TOKEN)
    own = "client-own-credential-42"
    resp = await proxy.messages(headers={"x-api-key": TOKEN, "authorization": f"Bearer {own}"})
    assert resp.status_code == 200
    sent = f["claude"].requests[-1].headers
    assert sent["authorization"] == f"Bearer {own}" and "x-api-key" not in sent
    resp = await proxy.messages(headers={"authorization": f"Bearer {TOKEN}", "x-api-key": own})
    assert resp.status_code == 200
    sent = f["claude"].requests[-1].headers
    assert sent["x-api-key"] == own and "authorization" not in sent
    resp = await proxy.chat(profile="grok", headers={"x-api-key": TOKEN})
    assert resp.status_code == 200
    assert TOKEN not in json.dumps(f["grok"].requests[-1].headers)


# -- Host and Origin ----------------------------------------------------------------------------


@pytest.mark.parametrize(("header", "name"), [
    (b"127.0.0.1:13456", b"127.0.0.1"), (b"LocalHost:80", b"localhost"), (b"[::1]:1", b"[::1]"),
    (b"localhost", b"localhost"), (b"[::1]evil", b""), (b"127.0.0.1:80@evil.example", b""),
    (b"127.0.0.1:", b""), (b"[::1", b""), (b"evil.example:13456", b"evil.example"),
])
def test_host_header_name(header: bytes, name: bytes) -> None:
    assert host_name(header) == name


BAD_HOSTS = ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example:{port}",
             "localhost.evil.example", "[::1]evil", "127.0.0.1:{port}@evil.example",
             "0.0.0.0:{port}", "192.168.1.10:{port}", ""]
GOOD_HOSTS = ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "LOCALHOST:{port}",
              "127.0.0.1"]


@pytest.mark.parametrize("token", [None, TOKEN])
async def test_a_foreign_host_is_refused_on_every_route(
    fakes: Any, proxy_factory: Any, token: str | None
) -> None:
    proxy = await two_fakes(fakes, proxy_factory, token=token)
    port = proxy.server.port
    auth: dict[str, str | bytes] = {"authorization": f"Bearer {TOKEN}"} if token else {}
    refused = await asyncio.gather(*(
        call(proxy.client, method, path, body, {**auth, "host": host.format(port=port)})
        for method, path, body, _, _ in ROUTES for host in BAD_HOSTS))
    kinds = [(path, kind) for _, path, _, _, kind in ROUTES for _ in BAD_HOSTS]
    for (path, kind), (status, _, text) in zip(kinds, refused, strict=True):
        assert status == 403, path
        assert "DNS-rebinding" in assert_refusal_format(kind, 403, text)
    assert sum(fake.request_count for fake in proxy.fakes.values()) == 0
    accepted = await asyncio.gather(*(
        call(proxy.client, method, path, body, {**auth, "host": host.format(port=port)})
        for host in GOOD_HOSTS
        for method, path, body in (("GET", "/healthz", None),
                                   ("POST", "/v1/messages", anthropic_body()))))
    assert [status for status, _, _ in accepted] == [200] * 2 * len(GOOD_HOSTS)
    assert sum(fake.request_count for fake in proxy.fakes.values()) == len(GOOD_HOSTS)


@pytest.mark.parametrize("token", [None, TOKEN])
async def test_a_browser_origin_is_refused_on_admin_routes_and_from_foreign_pages(
    fakes: Any, proxy_factory: Any, token: str | None
) -> None:
    proxy = await two_fakes(fakes, proxy_factory, token=token)
    auth: dict[str, str | bytes] = {"authorization": f"Bearer {TOKEN}"} if token else {}
    origins = ("https://evil.example", "null", f"http://127.0.0.1:{proxy.server.port}")
    refused = await asyncio.gather(*(
        call(proxy.client, method, path, body, {**auth, "origin": origin})
        for origin in origins for method, path, body, _, _ in ADMIN_ROUTES))
    for (status, _, text) in refused:
        assert status == 403
        assert "Origin" in assert_refusal_format(PLAIN_ROUTE, 403, text)
    assert proxy.engine.runtimes["grok"].breaker.state.value == "closed"  # not tripped
    # Proxy routes take pages served from this machine (the token still applies) ...
    for origin in ("http://localhost:5173", f"http://127.0.0.1:{proxy.server.port}",
                   "https://[::1]:8443"):
        resp = await proxy.messages(headers={**auth, "origin": origin})
        assert resp.status_code == 200, origin
    # ... but not a page on the web, which could otherwise spend the user's quota (CSRF).
    calls_before = sum(fake.request_count for fake in proxy.fakes.values())
    for origin in ("https://app.example", "null", "http://localhost.evil.example",
                   "file://", "http://127.0.0.1@evil.example"):
        resp = await proxy.messages(headers={**auth, "origin": origin})
        assert resp.status_code == 403, origin
        assert resp.json()["error"]["type"] == "permission_error"
        resp = await proxy.chat(headers={**auth, "origin": origin})
        assert resp.status_code == 403 and resp.json()["error"]["code"] == "forbidden"
    assert sum(fake.request_count for fake in proxy.fakes.values()) == calls_before


# -- secrets masked everywhere --------------------------------------------------------------------


@dataclass
class World:
    fakes: dict[str, FakeProvider]
    tokens: FakeTokenServer
    config: Path
    credentials: Path
    port: int


def world_config(fakes: dict[str, FakeProvider], tokens: FakeTokenServer, credentials: Path,
                 port: int) -> str:
    inline, envkey, oauth = fakes["inline"], fakes["envkey"], fakes["oauth"]
    return f"""
[proxy]
port = {port}
auth_token_env = "{LOCAL_ENV}"
connect_timeout = 2
read_timeout = 5

[breaker]
failure_threshold = 100

[health]
enabled = false

[[profiles]]
name = "inline"
provider_type = "DirectAnthropic"
base_url = "{inline.base_url}"
api_key = "{INLINE.value}"
default_model = "claude-sonnet-4-5"
backup_providers = ["envkey"]

[[profiles]]
name = "envkey"
provider_type = "OpenAICompatible"
base_url = "{envkey.base_url}"
api_key_env = "{KEY_ENV}"
default_model = "envkey-model"

[[profiles]]
name = "oauth"
provider_type = "DirectAnthropic"
base_url = "{oauth.base_url}"
auth_type = "oauth"
oauth_provider = "claude"
credentials_file = "{credentials}"
token_url = "{tokens.token_url}"
backup_providers = ["inline"]
"""


@contextlib.asynccontextmanager
async def secret_world(tmp_path: Path, *, config_mode: int) -> AsyncIterator[World]:
    names = (("inline", "anthropic"), ("envkey", "openai"), ("oauth", "anthropic"))
    fakes = {name: FakeProvider(name, protocol, models=served_models(name, protocol))  # type: ignore[arg-type]
             for name, protocol in names}
    tokens = FakeTokenServer()
    servers: list[FakeProvider | FakeTokenServer] = [*fakes.values(), tokens]
    for server in servers:
        await server.start()
    try:
        credentials = tmp_path / "credentials.json"
        credentials.write_text(json.dumps({
            "claudeAiOauth": {"accessToken": OAUTH_ACCESS.value,
                              "refreshToken": OAUTH_REFRESH.value,
                              "expiresAt": 4_102_444_800_000, "subscriptionType": "max"},
            "otherTool": {"keep": True},
        }))
        credentials.chmod(0o644)  # as another tool may have left it; the refresh makes it 0600
        port = free_port()
        config = tmp_path / "profiles.toml"
        config.write_text(world_config(fakes, tokens, credentials, port))
        config.chmod(config_mode)
        yield World(fakes, tokens, config, credentials, port)
    finally:
        for server in servers:
            await server.stop()


async def echo_keys(fake: FakeProvider) -> None:
    """Make `fake`'s error answers quote the key it was sent (its control route)."""
    async with httpx.AsyncClient() as client:
        resp = await client.post(f"http://127.0.0.1:{fake.port}/_fake/echo_key", json={"on": True})
        assert resp.json() == {"echo_key": True}


def seen_text(resp: httpx.Response) -> str:
    headers = "\n".join(f"{k}: {v}" for k, v in resp.headers.items())
    return f"{resp.status_code}\n{headers}\n{resp.text}"


@dataclass
class Traffic:
    seen: list[str]  # every answer the client got: status, headers, body
    status: dict[str, Any]  # GET /_claudex/status afterwards


async def drive_traffic(url: str, world: World) -> Traffic:
    """Successes, failovers, an OAuth 401 with refresh, a refresh that fails, all-failed errors
    and client errors, with every fake quoting the key it got in its error answers."""
    inline, envkey, oauth = world.fakes["inline"], world.fakes["envkey"], world.fakes["oauth"]
    seen: list[str] = []
    sent = 0
    # A block without a type: the provider refuses it (claudex does not look inside a
    # conversation it forwards unchanged).
    untyped_block = {**anthropic_body(), "messages": [{"role": "user", "content": [{"text": "x"}]}]}
    async with httpx.AsyncClient(base_url=url, timeout=20.0) as client:

        async def send(path: str, body: dict[str, Any], expected: int) -> httpx.Response:
            nonlocal sent
            sent += 1  # both ways of presenting the local token, in turn
            auth = ({"authorization": f"Bearer {LOCAL.value}"} if sent % 2
                    else {"x-api-key": LOCAL.value})
            resp = await client.post(path, json=body, headers=auth)
            seen.append(seen_text(resp))
            assert resp.status_code == expected, (path, resp.status_code)
            return resp

        def attempts(resp: httpx.Response) -> str:
            return str(resp.headers.get("x-claudex-attempts", ""))

        await send("/proxy/inline/v1/messages", anthropic_body(), 200)
        await send("/proxy/envkey/v1/chat/completions", openai_body(), 200)
        await send("/proxy/inline/v1/messages", anthropic_body(stream=True), 200)
        for fake in world.fakes.values():
            await echo_keys(fake)
        # Failovers after a server error and a refused key, each quoting the key.
        inline.set_fault("500", times=1)
        resp = await send("/proxy/inline/v1/messages", anthropic_body(), 200)
        assert attempts(resp) == "inline:500,envkey:200"
        inline.set_fault("401", times=1)
        resp = await send("/proxy/inline/v1/messages", anthropic_body(), 200)
        assert attempts(resp) == "inline:401,envkey:200"
        inline.set_fault("stream_error", cut_after_events=0, times=1)
        resp = await send("/proxy/inline/v1/messages", anthropic_body(stream=True), 200)
        assert attempts(resp).endswith("envkey:200")
        # Every provider failing: the error lists each attempt's message.
        inline.set_fault("401")
        envkey.set_fault("500")
        resp = await send("/proxy/inline/v1/messages", anthropic_body(), 502)
        # claudex's words for a refused key, not the upstream's: Claude Code reads "invalid
        # x-api-key" as its own login having failed.
        listed = {a["provider"]: a["message"] for a in resp.json()["error"]["attempts"]}
        assert listed["inline"] == "the provider refused the credentials of claudex profile " \
            "'inline' (401)"
        assert "invalid x-api-key" in listed["envkey"]  # a server error's words, key masked
        await send("/proxy/envkey/v1/chat/completions", openai_body(), 502)
        inline.set_fault("ok")
        envkey.set_fault("ok")
        # The client's own mistakes, passed through with the provider's words.
        resp = await send("/proxy/inline/v1/messages", untyped_block, 400)
        assert resp.headers["x-claudex-provider"] == "inline"
        assert "invalid x-api-key" in resp.text
        resp = await send("/proxy/envkey/v1/chat/completions",
                          {**openai_body(), "messages": [{"role": "user", "content": [{}]}]},
                          400)
        assert "invalid x-api-key" in resp.text
        # OAuth: the provider refuses the file's token; claudex refreshes and retries.
        oauth.faults.valid_tokens = {NEW_ACCESS.value}
        world.tokens.set_next(NEW_ACCESS.value, NEW_REFRESH.value)
        resp = await send("/proxy/oauth/v1/messages", anthropic_body(), 200)
        assert attempts(resp) == "oauth:token_expired,oauth:200"
        # A refresh that fails: needs login, and the request fails over.
        oauth.faults.valid_tokens = {"a-token-nobody-has"}
        world.tokens.set_failing("invalid_grant")
        resp = await send("/proxy/oauth/v1/messages", anthropic_body(), 200)
        assert attempts(resp).endswith("inline:200")
        # Probes and the admin routes the operator reads.
        auth = {"authorization": f"Bearer {LOCAL.value}"}
        for method, path in (("POST", "/_claudex/health"), ("GET", "/_claudex/status"),
                             ("GET", "/metrics"), ("GET", "/v1/models")):
            resp = await client.request(method, path, headers=auth)
            assert resp.status_code == 200, path
            seen.append(seen_text(resp))
            if path == "/_claudex/status":
                status = resp.json()
        resp = await client.get("/_claudex/status", headers={"x-api-key": "wrong-token-1234"})
        seen.append(seen_text(resp))
        assert resp.status_code == 401
    assert world.tokens.call_count == 2
    return Traffic(seen, status)


@contextlib.asynccontextmanager
async def collect_events(url: str, into: list[str], last: str) -> AsyncIterator[None]:
    """Everything `GET /_claudex/events` sends while the block runs, up to the event holding
    `last` (events arrive in order, so every earlier one has arrived too)."""
    connected = asyncio.Event()

    async def read() -> None:
        async with httpx.AsyncClient(timeout=None) as client:
            async with client.stream("GET", url + "/_claudex/events",
                                     headers={"x-api-key": LOCAL.value}) as resp:
                assert resp.status_code == 200
                async for chunk in resp.aiter_text():
                    into.append(chunk)
                    connected.set()

    task = asyncio.create_task(read())
    await asyncio.wait_for(connected.wait(), 10)
    try:
        yield
        await eventually(lambda: last in "".join(into))
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def start_serve(config: Path, *args: str) -> tuple[asyncio.subprocess.Process,
                                                         asyncio.Task[bytes]]:
    proc = await spawn_serve(config, "--debug", *args, env=SECRET_ENV,
                             stdout=asyncio.subprocess.DEVNULL)
    assert proc.stderr is not None
    return proc, asyncio.create_task(proc.stderr.read())  # drained as it comes: no full pipe


def temp_files(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("log_json", [False, True], ids=["text-logs", "json-logs"])
async def test_no_secret_reaches_logs_cli_answers_status_metrics_or_events(
    tmp_path: Path, log_json: bool
) -> None:
    # The text run's config is readable by others: serve and check must say so, once.
    async with secret_world(tmp_path, config_mode=0o600 if log_json else 0o644) as world:
        proc, stderr = await start_serve(world.config, *(["--log-json"] if log_json else []))
        url = f"http://127.0.0.1:{world.port}"
        events: list[str] = []
        try:
            await wait_until_serving(url, proc)
            addresses = listening_addresses(world.port)
            assert addresses in (None, ["0100007F"])  # 127.0.0.1 only: loopback by default
            # The health round drive_traffic asks for near its end is the last event awaited.
            async with collect_events(url, events, last="health round"):
                traffic = await drive_traffic(url, world)
            # The CLI's output does not depend on the log format: asked once.
            cli_env = {**SECRET_ENV, "COLUMNS": "200"}
            cfg = str(world.config)
            cli = [] if log_json else await asyncio.gather(*(
                claudex("--config", cfg, *args, env=cli_env) for args in (
                    ("status", "--json"), ("status",), ("env",), ("env", "oauth"), ("check",))))
        finally:
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), 20) == 0
        logs = (await stderr).decode()

    everything = {"serve logs": logs, "client answers": "\n".join(traffic.seen),
                  "events": "".join(events)}
    commands = ("status --json", "status", "env", "env oauth", "check") if cli else ()
    for (code, out, err), command in zip(cli, commands, strict=True):
        assert code == 0, command
        everything[f"claudex {command}"] = out + err
    for where, text in everything.items():
        assert leaks(text) == [], where

    # What was searched holds what it should: this test can fail.
    assert "token refreshed" in logs and "request anthropic" in logs  # debug level
    assert "invalid x-api-key" in everything["events"]
    profiles = {p["name"]: p for p in traffic.status["profiles"]}
    assert "invalid x-api-key" in profiles["envkey"]["stats"]["last_error"]
    assert profiles["oauth"]["health"]["auth"] == "needs login"
    if log_json:
        assert all(json.loads(line)["level"] for line in logs.splitlines() if line.strip())
        assert "chmod 600" not in logs
    else:
        warning = f"run `chmod 600 {world.config}`"
        assert logs.count(warning) == 1 and "(mode 0644)" in logs
        squeezed_check = "".join(everything["claudex check"].split())
        assert "".join(warning.split()) in squeezed_check  # rich may wrap it
        assert "invalid x-api-key" in everything["claudex status --json"]
        assert "invalid x-api-key" in "".join(everything["claudex status"].split("\n"))
        assert f'export ANTHROPIC_AUTH_TOKEN="${LOCAL_ENV}"' in everything["claudex env"]

    # The refreshed credentials were written back whole, atomically, private.
    doc = json.loads(world.credentials.read_text())
    assert doc["claudeAiOauth"]["accessToken"] == NEW_ACCESS.value
    assert doc["claudeAiOauth"]["refreshToken"] == NEW_REFRESH.value
    assert doc["otherTool"] == {"keep": True}
    assert doc["claudeAiOauth"]["subscriptionType"] == "max"
    assert stat.S_IMODE(world.credentials.stat().st_mode) == 0o600
    assert temp_files(tmp_path) == []


async def test_no_secret_reaches_the_console_screen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRET_ENV.items():
        monkeypatch.setenv(name, value)
    async with secret_world(tmp_path, config_mode=0o644) as world:
        hosted = await host_config(load_config(world.config), health=False)
        try:
            await drive_traffic(hosted.server.url, world)
            app = ConsoleApp(LocalLink(hosted.engine))
            async with app.run_test(size=(160, 50), notifications=True) as pilot:
                for _ in range(2):
                    await pilot.pause()
                    await app.main_screen.refresh_now()
                await pilot.pause()
                svg = app.export_screenshot()
        finally:
            await hosted.close()
    shown = svg_text(svg)
    assert leaks(svg) == [] and leaks(shown) == []
    squeezed = "".join(shown.split())
    assert "inline" in shown and "envkey" in shown and "needslogin" in squeezed
    # The console says once that the config with an inline key is readable by others.
    assert squeezed.count("configfilepermissions") == 1 and "chmod600" in squeezed


# -- files ----------------------------------------------------------------------------------------

PLAIN_PROFILE = """[[profiles]]
name = "grok"
provider_type = "OpenAICompatible"
base_url = "https://api.x.ai/v1"
api_key_env = "XAI_API_KEY"
"""


def watch_replaces(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str | None]]:
    """Record, at each atomic rename, the new file's mode and what the target still holds."""
    seen: list[tuple[int, str | None]] = []
    real_replace = os.replace

    def replace(src: Any, dst: Any) -> None:
        old = Path(dst).read_text() if Path(dst).exists() else None
        seen.append((stat.S_IMODE(os.stat(src).st_mode), old))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    return seen


def test_an_edit_that_adds_a_secret_is_private_before_it_is_visible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text(PLAIN_PROFILE)
    path.chmod(0o644)
    renames = watch_replaces(monkeypatch)
    update_profile(path, "grok", {"api_key_env": None, "api_key": INLINE.value})
    # The whole new text was written, with mode 0600, before it replaced the old file.
    assert renames == [(0o600, PLAIN_PROFILE)]
    assert INLINE.value in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["profiles.toml"]


def test_a_new_config_file_is_created_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "new" / "profiles.toml"
    renames = watch_replaces(monkeypatch)
    add_profile(path, {"name": "a", "provider_type": "DirectAnthropic",
                       "base_url": "http://127.0.0.1:9", "api_key": INLINE.value})
    assert renames == [(0o600, None)]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


@pytest.mark.parametrize(("mode", "who"), [
    (0o644, "group and others"), (0o640, "group"), (0o604, "others"), (0o600, None),
])
def test_a_readable_config_with_an_inline_key_is_reported(
    tmp_path: Path, mode: int, who: str | None
) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text(PLAIN_PROFILE.replace('api_key_env = "XAI_API_KEY"',
                                          f'api_key = "{INLINE.value}"'))
    path.chmod(mode)
    config = load_config(path)
    warning = config_permission_warning(config)
    assert file_permission_warning(path) == warning
    if who is None:
        assert warning is None
        return
    assert warning is not None and leaks(warning) == []
    assert f"readable by {who} (mode {mode:04o})" in warning
    assert str(path) in warning and f"chmod 600 {path}" in warning


def test_no_warning_without_an_inline_key_or_a_file(tmp_path: Path) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text(PLAIN_PROFILE)
    path.chmod(0o644)
    assert config_permission_warning(load_config(path, env={"XAI_API_KEY": "x"})) is None
    assert file_permission_warning(path) is None
    assert config_permission_warning(parse_config(
        PLAIN_PROFILE.replace('api_key_env = "XAI_API_KEY"', f'api_key = "{INLINE.value}"'))) \
        is None  # not from a file
    broken = tmp_path / "broken.toml"
    broken.write_text("[[profiles]\napi_key = 1")
    broken.chmod(0o644)
    assert file_permission_warning(broken) is None
    assert file_permission_warning(None) is None

