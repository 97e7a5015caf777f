"""Requests through upstream proxies, end to end: claudex's server and engine with real aiohttp,
small proxies of the tests' own on 127.0.0.1 (local_proxies.py) and fake providers. Each proxy
failure leaves the provider's breaker closed with no failure counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from claudex.engine.network.routes import Hop, Route
from tests.conftest import Proxy, build_config, eventually, profile_toml
from tests.engine.network.local_proxies import (
    ConnectProxy,
    closed_port,
    private_ca,
    socks5_tunnel,
    tls_front,
)
from tests.engine.network.static_network import http_hop, network


async def _pair(fakes: Any, proxy_factory: Any, routes: dict[str, Route],
                base_url: str | None = None, **kw: Any) -> Proxy:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    text = profile_toml("primary", f["primary"], backups=["backup"]) + profile_toml(
        "backup", f["backup"])
    if base_url is not None:
        text = text.replace(f["primary"].base_url, base_url, 1)
    proxy: Proxy = await proxy_factory(build_config(text), fakes=f,
                                       resolve_network=network(routes, **kw))
    return proxy


def _attempts(resp: Any) -> str:
    return str(resp.headers["x-claudex-attempts"])


def _provider_untouched(proxy: Proxy, name: str = "primary") -> None:
    rt = proxy.engine.runtimes[name]
    snap = rt.breaker.snapshot()
    assert snap.state.value == "closed" and snap.consecutive_failures == 0
    assert rt.stats.failures == 0
    stats = next(p for p in proxy.engine.snapshot()["profiles"] if p["name"] == name)["stats"]
    assert sum(stats["minutes"]["errors"]) == 0 and stats["error_rate"] == 0.0, stats
    assert not rt.health.live_failure_since_probe and not rt.health.auth_failing
    assert snap.probes_in_flight == 0


async def test_a_request_goes_through_the_proxy_with_its_credentials(
        fakes: Any, proxy_factory: Any) -> None:
    corp = await ConnectProxy(auth="Basic YWxpY2U6czNjcmV0").start()  # alice:s3cret
    try:
        proxy = await _pair(fakes, proxy_factory, {
            "primary": Route((http_hop("corp", corp.port, "alice", "s3cret"),))})
        resp = await proxy.messages()
        assert resp.status_code == 200, resp.text
        assert resp.headers["x-claudex-provider"] == "primary"
        assert corp.forwarded == 1 and corp.seen_auth == ["Basic YWxpY2U6czNjcmV0"]
        status = proxy.engine.snapshot()
        [corp_status] = status["upstream_proxies"]
        assert corp_status["url"] == f"http://alice:****@127.0.0.1:{corp.port}"
        assert corp_status["requests"] == 1 and corp_status["health"] == "green"
        assert "s3cret" not in str(status)
        routes = {p["name"]: p["route"] for p in status["profiles"]}
        assert routes["primary"] == {"label": "via corp", "proxies": ["corp"],
                                     "trouble": None}
        assert routes["backup"]["label"] == "direct"
    finally:
        await corp.close()


async def test_a_refused_proxy_fails_over_without_touching_the_provider(
        fakes: Any, proxy_factory: Any) -> None:
    proxy = await _pair(fakes, proxy_factory, {
        "primary": Route((http_hop("corp", closed_port()),))}, threshold=1)
    resp = await proxy.messages()
    assert resp.status_code == 200
    assert _attempts(resp) == "primary:proxy_refused,backup:200"
    assert proxy.fakes["primary"].request_count == 0
    _provider_untouched(proxy)
    events = [e.message for e in proxy.engine.events.since(0, {"proxy"})]
    assert "proxy corp opened (connection refused)" in events
    # The proxy is open now: the provider is skipped like an open breaker, naming it.
    resp = await proxy.messages()
    assert _attempts(resp) == "primary:no_route,backup:200"
    body = resp.json() if resp.status_code != 200 else None
    assert body is None
    status = proxy.engine.snapshot()
    route = next(p["route"] for p in status["profiles"] if p["name"] == "primary")
    assert route["trouble"] == "proxy corp open (connection refused)"
    _provider_untouched(proxy)


async def test_the_next_proxy_of_the_route_is_tried_at_once(
        fakes: Any, proxy_factory: Any) -> None:
    corp2 = await ConnectProxy().start()
    try:
        proxy = await _pair(fakes, proxy_factory, {"primary": Route((
            http_hop("corp", closed_port()), http_hop("corp-2", corp2.port)))})
        resp = await proxy.messages()
        assert resp.status_code == 200
        assert _attempts(resp) == "primary:proxy_refused,primary:200"
        assert corp2.forwarded == 1
        _provider_untouched(proxy)
    finally:
        await corp2.close()


async def test_when_every_provider_fails_for_the_proxy_the_client_hears_of_the_proxy(
        fakes: Any, proxy_factory: Any) -> None:
    dead = http_hop("corp", closed_port())
    proxy = await _pair(fakes, proxy_factory, {"primary": Route((dead,)),
                                               "backup": Route((dead,))})
    resp = await proxy.messages()
    assert resp.status_code == 502
    message = resp.json()["error"]["message"]
    assert f"upstream proxy corp (127.0.0.1:{dead.where.split(':')[1]})" in message
    assert "connection refused" in message
    _provider_untouched(proxy, "primary")
    _provider_untouched(proxy, "backup")


async def test_a_proxy_429_backs_off_then_escalates_naming_the_proxy(
        fakes: Any, proxy_factory: Any) -> None:
    corp = await ConnectProxy(429, {"Retry-After": "2"}).start()
    try:
        proxy = await _pair(fakes, proxy_factory, {"primary": Route((
            Hop("corp", f"http://127.0.0.1:{corp.port}", "http"),))},
            base_url="https://127.0.0.1:9", max_attempts=3)
        resp = await proxy.messages()
        assert resp.status_code == 200
        assert _attempts(resp) == ("primary:proxy_rate_limited,primary:proxy_rate_limited,"
                                   "primary:proxy_rate_limited,backup:200")
        assert corp.connects == 3
        assert proxy.sleep.waits == [2.0, 2.0]  # its Retry-After, honoured
        escalations = [e.message for e in proxy.engine.events.since(0, {"escalation"})]
        assert escalations == [
            f"Repeated rate-limit errors from the upstream proxy corp (127.0.0.1:{corp.port}) "
            "— pausing retries here; consider reducing concurrent requests or retrying later."]
        board = proxy.engine.proxies.get("corp")
        assert board is not None and board.breaker.snapshot().consecutive_failures == 0
        assert proxy.engine.proxies.out_reason("corp", proxy.engine.clock()) is not None
        _provider_untouched(proxy)
    finally:
        await corp.close()


async def test_an_intercepting_proxy_is_untrusted_until_its_ca_is_given(
        tmp_path: Path, fakes: Any, proxy_factory: Any) -> None:
    import ssl

    ca, server_tls = private_ca(tmp_path)
    corp = await ConnectProxy().start()
    f = await fakes(("p", "anthropic"))
    try:
        async with tls_front(server_tls, int(f["p"].base_url.rsplit(":", 1)[1])) as port:
            hop = Hop("corp", f"http://127.0.0.1:{corp.port}", "http")
            proxy = await _pair(fakes, proxy_factory, {"primary": Route((hop,))},
                                base_url=f"https://127.0.0.1:{port}")
            resp = await proxy.messages()
            assert resp.status_code == 200
            assert _attempts(resp) == "primary:certificate_untrusted,backup:200"
            _provider_untouched(proxy)
            [corp_status] = proxy.engine.snapshot()["upstream_proxies"]
            assert corp_status["health"] == "red"
            assert corp_status["last_error"] == (
                "certificate not trusted: issuer CN=Zscaler Root CA — set ca_bundle")
            trusting = ssl.create_default_context(cafile=str(ca))
            proxy2 = await _pair(fakes, proxy_factory, {"primary": Route((hop,), trusting)},
                                 base_url=f"https://127.0.0.1:{port}")
            resp = await proxy2.messages()
            assert resp.status_code == 200 and _attempts(resp) == "primary:200"
    finally:
        await corp.close()


async def test_socks5h_tunnels_and_lets_the_proxy_resolve(fakes: Any,
                                                           proxy_factory: Any) -> None:
    async with socks5_tunnel("alice", "pw") as (port, asked):
        hop = Hop("sock", f"socks5h://127.0.0.1:{port}", "socks5h", "alice", "pw")
        f = await fakes(("x", "anthropic"))
        fake_port = f["x"].base_url.rsplit(":", 1)[1]
        proxy = await _pair(fakes, proxy_factory, {"primary": Route((hop,))},
                            base_url=f"http://localhost:{fake_port}")
        resp = await proxy.messages()
        assert resp.status_code == 200 and _attempts(resp) == "primary:200"
        assert asked == ["localhost"]  # the name, not an address: rdns
        wrong = Hop("sock", f"socks5h://127.0.0.1:{port}", "socks5h", "alice", "nope")
        proxy = await _pair(fakes, proxy_factory, {"primary": Route((wrong,))})
        resp = await proxy.messages()
        assert _attempts(resp) == "primary:proxy_auth_failed,backup:200"
        _provider_untouched(proxy)


async def test_trip_and_reset_work_on_a_proxy_name(fakes: Any, proxy_factory: Any) -> None:
    corp = await ConnectProxy().start()
    try:
        proxy = await _pair(fakes, proxy_factory, {
            "primary": Route((http_hop("corp", corp.port),))})
        assert proxy.engine.trip("corp")
        resp = await proxy.messages()
        assert _attempts(resp) == "primary:no_route,backup:200"
        assert corp.forwarded == 0
        assert proxy.engine.reset_provider("corp") == ["breaker"]
        await eventually(lambda: bool(proxy.engine.events.since(0, {"reset"})))
        resp = await proxy.messages()
        assert _attempts(resp) == "primary:200"
        _provider_untouched(proxy)
    finally:
        await corp.close()


async def test_metrics_count_tries_through_each_proxy(fakes: Any, proxy_factory: Any) -> None:
    corp = await ConnectProxy().start()
    try:
        proxy = await _pair(fakes, proxy_factory, {"primary": Route((
            http_hop("dead", closed_port()), http_hop("corp", corp.port)))})
        assert (await proxy.messages()).status_code == 200
        text = (await proxy.client.get("/metrics")).text
        assert 'claudex_upstream_proxy_requests_total{outcome="ok",proxy="corp"} 1.0' in text
        assert ('claudex_upstream_proxy_requests_total{outcome="refused",proxy="dead"} 1.0'
                in text)
        assert 'claudex_upstream_proxy_state{proxy="corp"} 0.0' in text
    finally:
        await corp.close()


async def test_health_probes_take_the_route_and_a_dead_proxy_is_no_word_on_the_provider(
        fakes: Any, proxy_factory: Any) -> None:
    corp = await ConnectProxy().start()
    try:
        proxy = await _pair(fakes, proxy_factory, {"primary": Route((http_hop("corp",
                                                                              corp.port),))})
        await proxy.engine.check_health_now()
        assert corp.forwarded == 1  # the probe went through the proxy
        assert proxy.engine.runtimes["primary"].health.last_ok is True
    finally:
        await corp.close()
    proxy = await _pair(fakes, proxy_factory, {"primary": Route((http_hop("corp",
                                                                          closed_port()),))})
    await proxy.engine.check_health_now()
    await proxy.engine.check_health_now()
    health = proxy.engine.runtimes["primary"].health
    assert health.probe_failures == 0 and health.last_checked is None
    _provider_untouched(proxy)


async def test_an_oauth_refresh_goes_through_the_profiles_proxy(
        fakes: Any, proxy_factory: Any) -> None:
    corp = await ConnectProxy().start()
    try:
        proxy = await _pair(fakes, proxy_factory, {"primary": Route((http_hop("corp",
                                                                              corp.port),))})
        engine = proxy.engine
        rt = engine.runtimes["primary"]
        http_for = getattr(rt.credentials, "http_for", None)
        assert http_for is not None
        client = http_for()
        assert client is not None and client is not engine.http
        answer = await client.get(f"{proxy.fakes['backup'].base_url}/v1/models",
                                  headers={"x-api-key": "k"})
        assert answer.status_code in (200, 401, 404) and corp.forwarded == 1
        assert engine.runtimes["backup"].route is None  # direct: no client of its own
    finally:
        await corp.close()


async def test_proxy_credentials_go_on_the_connect_never_into_the_tunnel(
        tmp_path: Path, fakes: Any, proxy_factory: Any) -> None:
    import ssl

    ca, server_tls = private_ca(tmp_path)
    corp = await ConnectProxy(auth="Basic YWxpY2U6czNjcmV0").start()  # alice:s3cret
    f = await fakes(("p", "anthropic"))
    try:
        async with tls_front(server_tls, int(f["p"].base_url.rsplit(":", 1)[1])) as port:
            hop = http_hop("corp", corp.port, "alice", "s3cret")
            trusting = ssl.create_default_context(cafile=str(ca))
            proxy = await _pair(fakes, proxy_factory, {"primary": Route((hop,), trusting)},
                                base_url=f"https://127.0.0.1:{port}")
            for _ in range(2):  # the second on the pooled tunnel
                resp = await proxy.messages()
                assert resp.status_code == 200 and _attempts(resp) == "primary:200"
            assert corp.connects >= 1 and set(corp.seen_auth) == {"Basic YWxpY2U6czNjcmV0"}
            seen = f["p"].requests
            assert len(seen) == 2
            assert all("proxy-authorization" not in r.headers for r in seen)
    finally:
        await corp.close()


async def test_an_https_proxy_is_reached_over_tls_with_the_routes_certificates(
        tmp_path: Path, fakes: Any, proxy_factory: Any) -> None:
    import ssl

    ca, server_tls = private_ca(tmp_path)
    corp = await ConnectProxy().start()
    f = await fakes(("p", "anthropic"))
    try:
        async with tls_front(server_tls, corp.port) as proxy_port, \
                tls_front(server_tls, int(f["p"].base_url.rsplit(":", 1)[1])) as port:
            hop = Hop("corp", f"https://127.0.0.1:{proxy_port}", "https")
            trusting = ssl.create_default_context(cafile=str(ca))
            proxy = await _pair(fakes, proxy_factory, {"primary": Route((hop,), trusting)},
                                base_url=f"https://127.0.0.1:{port}")
            resp = await proxy.messages()
            assert _attempts(resp) == "primary:200" and corp.connects == 1
    finally:
        await corp.close()
