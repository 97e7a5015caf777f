"""A proxy's 429s narrow its own adaptive concurrency limit (issue 36, seed 001), end to end:
claudex's server and engine, real aiohttp, a CONNECT proxy on 127.0.0.1 that answers 429 and
then tunnels again, a TLS provider behind it; the engine's clock injected."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

from claudex.engine.network.routes import Hop, Route
from tests.conftest import build_config, eventually, profile_toml
from tests.engine.network.local_proxies import ConnectProxy, private_ca, tls_front
from tests.engine.network.static_network import network


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_proxys_429s_shrink_its_limit_and_successes_through_it_grow_it_back(
        tmp_path: Path, fakes: Any, proxy_factory: Any) -> None:
    ca, server_tls = private_ca(tmp_path)
    corp = await ConnectProxy(429, {"Retry-After": "2"}).start()
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    clock = Clock()
    try:
        async with tls_front(server_tls, int(f["primary"].base_url.rsplit(":", 1)[1])) as port:
            text = profile_toml("primary", f["primary"], backups=["backup"]) + profile_toml(
                "backup", f["backup"])
            text = text.replace(f["primary"].base_url, f"https://127.0.0.1:{port}", 1)
            hop = Hop("corp", corp.url, "http")
            route = Route((hop,), ssl.create_default_context(cafile=str(ca)))
            proxy = await proxy_factory(build_config(text), fakes=f, clock=clock,
                                        resolve_network=network({"primary": route}))
            resp = await proxy.messages()
            assert resp.status_code == 200
            assert resp.headers["x-claudex-attempts"] == (
                "primary:proxy_rate_limited,primary:proxy_rate_limited,"
                "primary:proxy_rate_limited,backup:200")
            [corp_status] = proxy.engine.snapshot()["upstream_proxies"]
            assert corp_status["limit"] == 1  # a burst of 429s to claudex's only tunnel there
            assert corp_status["concurrency"]["reason"] == "limited: 3 × 429 in 10 s"
            metrics = (await proxy.client.get("/metrics")).text
            assert 'claudex_upstream_proxy_concurrency_limit{proxy="corp"} 1.0' in metrics
            primary = next(p for p in proxy.engine.snapshot()["profiles"]
                           if p["name"] == "primary")
            assert primary["concurrency"]["limit"] is None  # the provider's own: untouched
            await eventually(lambda: any(
                e.message == "proxy corp: reducing concurrency to 1 (limited: 3 × 429 in 10 s)"
                for e in proxy.engine.events.since(0, {"limit"})))

            corp.status = None  # the proxy tunnels again
            clock.now += 11     # its cooldown and the 429s' window are over
            resp = await proxy.messages()
            assert resp.status_code == 200
            assert resp.headers["x-claudex-attempts"] == "primary:200"
            [corp_status] = proxy.engine.snapshot()["upstream_proxies"]
            assert corp_status["limit"] is None  # grew back past the burst: unlimited again
            assert corp_status["concurrency"]["in_flight"] == 0  # the slot went back
            assert corp_status["health"] == "green"
    finally:
        await corp.close()
