"""Issue 36's failure rows through a real `claudex serve` and the real proxies: the provider
"claude" is reached only through an upstream proxy (its TLS front has a private CA), the backup
"claude-backup" directly. Each proxy failure sends the request on to the backup and leaves
"claude"'s breaker closed, with no failure counted against it; the proxy carries it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from claudex.demo.fake_provider import FakeProvider
from claudex.demo.tls_front import TlsFront
from tests.network.net_serve import PASSWORD_ENV, NetServe, toml_str
from tests.proxy_servers import PROXY_PASSWORD, PROXY_USER, TinyProxy, WorldPki

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
    return f"""
[[upstream_proxies]]
name = "corp"
url = "{url}"
password_env = "{PASSWORD_ENV}"
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

