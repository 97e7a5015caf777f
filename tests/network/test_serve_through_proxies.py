"""Issue 36's failure rows through a real `claudex serve` and the real proxies: the provider
"claude" is reached only through an upstream proxy (its TLS front has a private CA), the backup
"claude-backup" directly. Each proxy failure sends the request on to the backup and leaves
"claude"'s breaker closed, with no failure counted against it; the proxy carries it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from claudex.demo.fake_provider import FakeProvider
from claudex.demo.tls_front import TlsFront
from tests.network.net_serve import PASSWORD_ENV, NetServe, toml_str
from tests.proxy_servers import PROXY_PASSWORD, PROXY_USER, MitmDump, TinyProxy, WorldPki

Fakes = Callable[..., Awaitable[dict[str, FakeProvider]]]
Fronts = Callable[..., Awaitable[TlsFront]]


class World:
    def __init__(self, claude: FakeProvider, backup: FakeProvider, front: TlsFront,
                 pki: WorldPki, tmp: Path) -> None:
        self.claude, self.backup, self.front, self.pki, self.tmp = claude, backup, front, pki, tmp
        self.served: list[NetServe] = []

    def config(self, proxies: str, *, route: str = '"corp"', claude_extra: str = "",
               claude_url: str | None = None) -> str:
        """[[upstream_proxies]] `proxies`, then "claude" (through `route`, trusting the test CA)
        and "claude-backup" (direct)."""
        return f"""
{proxies}

[[profiles]]
name = "claude"
provider_type = "DirectAnthropic"
base_url = "{claude_url or self.front.base_url}"
api_key_env = "FAKE_KEY"
default_model = "claude-sonnet-4-5"
backup_providers = ["claude-backup"]
upstream_proxy = {route}
ca_bundle = {toml_str(self.pki.ca.cert_path)}
{claude_extra}

[[profiles]]
name = "claude-backup"
provider_type = "DirectAnthropic"
base_url = "{self.backup.base_url}"
api_key_env = "FAKE_KEY"
default_model = "claude-sonnet-4-5"
upstream_proxy = "direct"
"""

    async def serve(self, config_text: str, **kwargs: Any) -> NetServe:
        serve = NetServe(self.tmp, config_text, **kwargs)
        self.served.append(serve)
        await serve.start()
        return serve


@pytest.fixture
async def world(fakes: Fakes, tls_front: Fronts, pki: WorldPki,
                tmp_path: Path) -> AsyncIterator[World]:
    made = await fakes(("claude", "anthropic"), ("claude-backup", "anthropic"))
    front = await tls_front(made["claude"])
    w = World(made["claude"], made["claude-backup"], front, pki, tmp_path)
    yield w
    for serve in w.served:
        await serve.stop()


def corp(url: str, *, extra: str = "") -> str:
    """The proxy "corp"; its password from PASSWORD_ENV when the URL names a user."""
    password = f'password_env = "{PASSWORD_ENV}"' if "@" in url else ""
    return f"""
[[upstream_proxies]]
name = "corp"
url = "{url}"
{password}
{extra}
"""


async def test_tinyproxy_route_serves(world: World, tinyproxy: TinyProxy) -> None:
    serve = await world.serve(world.config(corp(tinyproxy.url_with(PROXY_USER, None))),
                              password=PROXY_PASSWORD)
    response = await serve.ask()
    assert response.status_code == 200, response.text
    assert response.headers["x-claudex-provider"] == "claude"
    assert world.claude.request_count == 1 and world.front.connections == 1
    assert "proxy-authorization" not in world.claude.requests[0].headers
    profile = await serve.assert_provider_untouched()
    assert profile["route"] == {"label": "via corp", "proxies": ["corp"], "trouble": None}
    proxy = await serve.proxy("corp")
    assert proxy["url"] == f"http://{PROXY_USER}:****@127.0.0.1:{tinyproxy.port}"
    assert proxy["requests"] == 1 and proxy["failures"] == 0 and proxy["health"] == "green"
    assert PROXY_PASSWORD not in str(await serve.status())
    assert PROXY_PASSWORD not in await serve.stop()



async def test_a_plain_http_provider_through_tinyproxy_keeps_serving(
        world: World, tinyproxy: TinyProxy) -> None:
    """tinyproxy 1.11 closes the client's connection after every plain-http answer without
    saying so (HTTP/1.1, no `Connection: close`): a pooled connection reused then fails. claudex
    opens one per request to a plain-http provider through an HTTP proxy, so none fails."""
    serve = await world.serve(world.config(corp(tinyproxy.url_with(PROXY_USER, None)),
                                           claude_url=world.claude.base_url),
                              password=PROXY_PASSWORD)
    for _ in range(5):  # rounds of concurrent requests, as wrk found the failure
        answers = await asyncio.gather(*(serve.ask() for _ in range(16)))
        assert [attempts(r) for r in answers] == ["claude:200"] * 16
    assert world.claude.request_count == 80
    await serve.assert_provider_untouched()


def attempts(response: Any) -> str:
    return str(response.headers["x-claudex-attempts"])


async def failed_over(serve: NetServe, outcome: str) -> dict[str, Any]:
    """One request: "claude" failed at its proxy with `outcome`, the backup served it; the
    provider is untouched. The proxy's status row."""
    response = await serve.ask()
    assert response.status_code == 200, response.text
    assert response.headers["x-claudex-provider"] == "claude-backup"
    assert attempts(response) == f"claude:{outcome},claude-backup:200"
    await serve.assert_provider_untouched()
    proxy = await serve.proxy("corp")
    assert proxy["failures"] >= 1 and proxy["last_error"], proxy
    return proxy


async def events(serve: NetServe) -> list[str]:
    history = (await serve.client.get("/_claudex/history")).json()
    return [event["message"] for event in history["events"]]


# ---------------------------------------------------------------- refused, unresolvable, timeout

async def test_refused_tinyproxy_killed_then_back(world: World, tinyproxy: TinyProxy) -> None:
    serve = await world.serve(world.config(corp(tinyproxy.url_with(PROXY_USER, None))),
                              password=PROXY_PASSWORD)
    await tinyproxy.kill()
    proxy = await failed_over(serve, "proxy_refused")
    assert "refused" in proxy["last_error"]
    assert world.front.connections == 0  # never a silent bypass: nothing reached it directly
    assert proxy["breaker"]["consecutive_failures"] == 1
    await tinyproxy.start()  # same port: the provider serves again at once
    response = await serve.ask()
    assert response.headers["x-claudex-provider"] == "claude", attempts(response)
    await serve.assert_provider_untouched()


async def test_open_proxy_breaker_skips_the_provider_with_the_reason(
        world: World, fake_proxy: Any) -> None:
    proxy = await fake_proxy()
    serve = await world.serve(world.config(corp(proxy.url, extra="failure_threshold = 1")))
    proxy.set_mode("down")
    await failed_over(serve, "proxy_refused")
    row = await serve.proxy("corp")
    assert row["breaker"]["state"] == "open" and row["health"] == "red"
    profile = await serve.assert_provider_untouched()
    assert profile["route"]["trouble"] == "proxy corp open (connection refused)"
    proxy.set_mode("ok")  # back, but its breaker is open until its recovery time
    response = await serve.ask()
    assert attempts(response) == "claude:no_route,claude-backup:200"
    assert proxy.connects["ok"] == 0
    await serve.assert_provider_untouched()


async def test_provider_down_behind_the_proxy_is_the_providers_failure(
        world: World, tinyproxy: TinyProxy, microsocks: Any) -> None:
    """A proxy saying it could not reach the provider (tinyproxy's CONNECT answer 500 "Unable
    to connect", a SOCKS5 server's reply 5) is the provider's failure, as a refused direct
    connection is: the provider's breaker counts it, the proxy's does not (one dead provider
    must not close a proxy every other provider shares)."""
    await world.front.close()
    for url, password in ((tinyproxy.url_with(PROXY_USER, None), PROXY_PASSWORD),
                          (microsocks.url, None)):
        serve = await world.serve(world.config(corp(url)), password=password)
        response = await serve.ask()
        assert response.headers["x-claudex-provider"] == "claude-backup"
        trail = attempts(response)
        assert trail.startswith("claude:connect_error") and trail.endswith("claude-backup:200")
        profile = await serve.profile("claude")
        assert profile["breaker"]["consecutive_failures"] >= 1, profile["breaker"]
        proxy = await serve.proxy("corp")
        assert proxy["breaker"]["state"] == "closed" and proxy["failures"] == 0, proxy
        assert proxy["health"] == "green", proxy


async def test_refused_fault_proxy_down_then_up(world: World, fake_proxy: Any) -> None:
    proxy = await fake_proxy()
    serve = await world.serve(world.config(corp(proxy.url)))
    assert (await serve.ask()).headers["x-claudex-provider"] == "claude"
    proxy.set_mode("down")
    await failed_over(serve, "proxy_refused")
    proxy.set_mode("ok")
    assert (await serve.ask()).headers["x-claudex-provider"] == "claude"
    assert proxy.connects["ok"] >= 2
    await serve.assert_provider_untouched()


async def test_unresolvable_proxy(world: World) -> None:
    serve = await world.serve(world.config(corp("http://proxy.invalid:3128")))
    row = await failed_over(serve, "proxy_refused")
    assert "does not resolve" in row["last_error"]
    assert world.front.connections == 0


async def test_proxy_that_never_answers_connect_times_out(world: World, fake_proxy: Any) -> None:
    proxy = await fake_proxy()
    proxy.set_mode("hang")
    serve = await world.serve(world.config(corp(proxy.url)))
    row = await failed_over(serve, "proxy_refused")
    assert row["last_error"] == "connect timeout"
    assert proxy.connects["hang"] == 1


# ---------------------------------------------------------------- 407 / 401

async def test_tinyproxy_wrong_password_401_is_auth_failed(world: World,
                                                           tinyproxy: TinyProxy) -> None:
    serve = await world.serve(world.config(corp(tinyproxy.url_with(PROXY_USER, None))),
                              password="not-the-password")
    proxy = await failed_over(serve, "proxy_auth_failed")
    assert proxy["health"] == "red" and proxy["auth_failed"] is True
    assert "401" in proxy["last_error"]
    # Red until reset: the next request does not try it again (no retry against a bad password).
    response = await serve.ask()
    assert response.headers["x-claudex-provider"] == "claude-backup"
    await serve.assert_provider_untouched()
    assert "not-the-password" not in str(await serve.status())
    assert not any("not-the-password" in words for words in await events(serve))
    log = await serve.stop()
    assert "corp" in log and "not-the-password" not in log


async def test_tinyproxy_without_password_407_is_auth_failed(world: World,
                                                             tinyproxy: TinyProxy) -> None:
    serve = await world.serve(world.config(f"""
[[upstream_proxies]]
name = "corp"
url = "{tinyproxy.url}"
"""))
    proxy = await failed_over(serve, "proxy_auth_failed")
    assert "407" in proxy["last_error"] and proxy["auth_failed"] is True


# ---------------------------------------------------------------- 403 / 502 / 503 / 504

@pytest.mark.parametrize(("mode", "status", "outcome"), [
    ("forbidden", None, "proxy_rejected"),
    ("bad_gateway", 502, "proxy_bad_gateway"),
    ("bad_gateway", 503, "proxy_bad_gateway"),
    ("bad_gateway", 504, "proxy_bad_gateway"),
])
async def test_fault_proxy_refusals(mode: Any, status: int | None, outcome: str, world: World,
                                    fake_proxy: Any) -> None:
    proxy = await fake_proxy()
    proxy.set_mode(mode, status=status)
    serve = await world.serve(world.config(corp(proxy.url)))
    row = await failed_over(serve, outcome)
    assert str(status or 403) in row["last_error"]
    assert proxy.connects[mode] == 1  # no retry at the same proxy
    assert world.claude.request_count == 0


# ---------------------------------------------------------------- 429

async def test_fault_proxy_429_backs_off_escalates_then_next(world: World,
                                                             fake_proxy: Any) -> None:
    proxy = await fake_proxy(retry_after=0)
    proxy.set_mode("rate_limited")
    serve = await world.serve(world.config(corp(
        proxy.url, extra="max_attempts = 3\ninitial_delay = 0.01\nmax_delay = 0.05")))
    response = await serve.ask()
    assert response.status_code == 200
    assert response.headers["x-claudex-provider"] == "claude-backup"
    assert "claude:proxy_rate_limited" in attempts(response)
    assert proxy.connects["rate_limited"] == 3  # max_attempts at that proxy, then the next
    profile = await serve.assert_provider_untouched()
    assert profile["stats"]["rate_limited"] == 0 and profile["cooldown_s"] == 0
    row = await serve.proxy("corp")
    assert row["rate_limited"] >= 1
    said = await events(serve)
    assert any(words.startswith("Repeated rate-limit errors from the upstream proxy corp "
                                f"(127.0.0.1:{proxy.port})") for words in said), said


# ---------------------------------------------------------------- certificates

async def test_mitmproxy_untrusted_certificate(world: World, mitmdump: Any) -> None:
    serve = await world.serve(world.config(corp(mitmdump.url)))  # trusts only the test CA
    proxy = await failed_over(serve, "certificate_untrusted")
    assert proxy["health"] == "red"
    assert proxy["last_error"] == "certificate not trusted: issuer CN=mitmproxy — set ca_bundle"
    assert world.claude.request_count == 0
    # No retry: one certificate refusal, then the backup.
    response = await serve.ask()
    assert response.headers["x-claudex-provider"] == "claude-backup"
    await serve.assert_provider_untouched()


async def test_mitmproxy_trusted_with_its_ca_as_ca_bundle(world: World, mitmdump: Any) -> None:
    text = world.config(corp(mitmdump.url)).replace(
        toml_str(world.pki.ca.cert_path), toml_str(mitmdump.ca_cert))
    serve = await world.serve(text)
    response = await serve.ask()
    assert response.headers["x-claudex-provider"] == "claude", attempts(response)
    assert world.claude.request_count == 1
    await serve.assert_provider_untouched()


# ---------------------------------------------------------------- socks5

async def test_socks5_through_microsocks(world: World, microsocks: Any) -> None:
    serve = await world.serve(world.config(corp(microsocks.url)))
    response = await serve.ask()
    assert response.headers["x-claudex-provider"] == "claude", attempts(response)
    await microsocks.kill()
    await failed_over(serve, "proxy_refused")


async def test_socks5h_with_a_user_resolves_at_the_proxy(world: World, microsocks_auth: Any,
                                                         tls_front: Fronts) -> None:
    named = await tls_front(world.claude, url_host="localhost")
    url = microsocks_auth.url_with(microsocks_auth.username, None, "socks5h")
    serve = await world.serve(world.config(corp(url), claude_url=named.base_url),
                              password=microsocks_auth.password)
    response = await serve.ask()
    assert response.headers["x-claudex-provider"] == "claude", attempts(response)
    assert "connected to localhost:" in microsocks_auth.log()  # the name went to the proxy


async def test_socks5_wrong_password_is_auth_failed(world: World, microsocks_auth: Any) -> None:
    url = microsocks_auth.url_with(microsocks_auth.username, None)
    serve = await world.serve(world.config(corp(url)), password="wrong")
    await failed_over(serve, "proxy_auth_failed")


# ---------------------------------------------------------------- mTLS

async def test_client_certificate_direct_and_through_a_proxy(
        world: World, tls_front: Fronts, tinyproxy: TinyProxy) -> None:
    front = await tls_front(world.claude, client_cert=True)
    pki = world.pki
    key = pki.ca.issue_client(world.tmp / "locked", "locked", key_password="key-pass-4")
    cert_keys = (f"client_cert = {toml_str(key.cert)}\nclient_key = {toml_str(key.key)}\n"
                 'client_key_password_env = "CLIENT_KEY_PASSWORD"')
    serve = await world.serve(
        world.config(corp(tinyproxy.url_with(PROXY_USER, None)), claude_extra=cert_keys,
                     claude_url=front.base_url),
        password=PROXY_PASSWORD, env={"CLIENT_KEY_PASSWORD": "key-pass-4"})
    response = await serve.ask()
    assert response.headers["x-claudex-provider"] == "claude", attempts(response)
    assert front.connections == 1 and front.handshakes_failed == 0
    direct = await world.serve(world.config("", route='"direct"', claude_url=front.base_url,
                                            claude_extra=cert_keys),
                               env={"CLIENT_KEY_PASSWORD": "key-pass-4"})
    response = await direct.ask()
    assert response.headers["x-claudex-provider"] == "claude", attempts(response)
    await direct.assert_provider_untouched()


# ---------------------------------------------------------------- two proxies, and none left

async def test_next_proxy_of_the_route(world: World, fake_proxy: Any,
                                       tinyproxy: TinyProxy) -> None:
    down = await fake_proxy()
    down.set_mode("down")
    serve = await world.serve(world.config(
        corp(down.url) + f"""
[[upstream_proxies]]
name = "corp-2"
url = "{tinyproxy.url_with(PROXY_USER, None)}"
password_env = "{PASSWORD_ENV}"
""", route='["corp", "corp-2"]'), password=PROXY_PASSWORD)
    response = await serve.ask()
    assert response.status_code == 200
    assert response.headers["x-claudex-provider"] == "claude", attempts(response)
    assert world.claude.request_count == 1
    await serve.assert_provider_untouched()
    assert (await serve.proxy("corp"))["failures"] == 1
    assert (await serve.proxy("corp-2"))["failures"] == 0


async def test_every_provider_behind_one_dead_proxy_names_it(world: World,
                                                             fake_proxy: Any) -> None:
    proxy = await fake_proxy()
    proxy.set_mode("down")
    text = world.config(corp(proxy.url)).replace('upstream_proxy = "direct"',
                                                 'upstream_proxy = "corp"')
    serve = await world.serve(text)
    response = await serve.ask()
    assert response.status_code >= 500
    assert "corp" in response.text, response.text
    await serve.assert_provider_untouched("claude")
    await serve.assert_provider_untouched("claude-backup")
    assert world.claude.request_count == world.backup.request_count == 0


# ---------------------------------------------------------------- the corporate laptop

CORP_HOST = "provider.corp.test"  # resolved by nothing on this machine but the proxy


@pytest.fixture
async def corp_world(world: World, tls_front: Fronts,
                     tmp_path: Path) -> AsyncIterator[tuple[World, TlsFront, MitmDump]]:
    """The provider at https://provider.corp.test:PORT, reachable only through mitmdump (which
    re-signs its certificate with mitmproxy's CA)."""
    front = await tls_front(world.claude, url_host=CORP_HOST)
    proxy = MitmDump(tmp_path / "corp-mitm", upstream_ca=world.pki.ca.cert_path,
                     names_at_proxy=[CORP_HOST])
    await proxy.start()
    try:
        yield world, front, proxy
    finally:
        await proxy.kill()


async def test_corporate_laptop_https_proxy_and_node_extra_ca_certs(
        corp_world: tuple[World, TlsFront, MitmDump]) -> None:
    """HTTPS_PROXY and NODE_EXTRA_CA_CERTS as Claude Code users behind Zscaler set them, the
    profile saying nothing about networks: claudex takes the environment's route and trust."""
    world, front, proxy = corp_world
    text = world.config("", route='"env"', claude_url=front.base_url).replace(
        f"ca_bundle = {toml_str(world.pki.ca.cert_path)}\n", "")
    serve = await world.serve(text, env={"HTTPS_PROXY": proxy.url,
                                         "NODE_EXTRA_CA_CERTS": str(proxy.ca_cert)})
    response = await serve.ask()
    assert response.status_code == 200, response.text
    assert response.headers["x-claudex-provider"] == "claude", attempts(response)
    assert world.claude.request_count == 1
    profile = await serve.assert_provider_untouched()
    assert profile["route"]["label"] == "via env"
    assert front.connections == 1  # through mitmdump: nothing else resolves the name


async def test_corporate_host_without_the_proxy_is_unreachable(
        corp_world: tuple[World, TlsFront, MitmDump]) -> None:
    """The same provider with no proxy: the name resolves nowhere (the world is closed)."""
    world, front, _ = corp_world
    serve = await world.serve(world.config("", route='"direct"', claude_url=front.base_url))
    response = await serve.ask()
    assert response.headers["x-claudex-provider"] == "claude-backup"
    assert world.claude.request_count == 0 and front.connections == 0


# ---------------------------------------------------------------- the control plane

async def test_health_probes_take_the_profiles_route(world: World, fake_proxy: Any) -> None:
    proxy = await fake_proxy()
    serve = await world.serve(world.config(corp(proxy.url)),
                              health="enabled = true\ninterval_seconds = 0.2")
    for _ in range(200):  # bounded: ~10 s for the first round of probes
        health = (await serve.profile("claude"))["health"]
        if health["last_checked"] is not None or health["error"] is not None:
            break
        await asyncio.sleep(0.05)
    assert health["error"] is None, health  # it reached the provider, trusting its ca_bundle
    assert proxy.connects["ok"] >= 1  # through corp, not around it
    assert any(r.path == "/v1/models" for r in world.claude.requests)
