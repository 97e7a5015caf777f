"""A provider reached directly whose certificate does not verify (issue 36's failure table,
"the route's" row when there is no proxy): no retry, the next provider at once, a failure of the
provider's breaker, the provider red with the issuer's name and the hint. A real TLS listener
on 127.0.0.1 with a private CA the profile does not trust; claudex's server and engine."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

from claudex.engine.network.routes import Route
from tests.conftest import build_config, profile_toml
from tests.engine.network.local_proxies import private_ca, tls_front
from tests.engine.network.static_network import network

WORDS = "certificate not trusted: issuer CN=Corp Private CA — set ca_bundle"


async def test_an_untrusted_certificate_fails_over_at_once_and_turns_the_provider_red(
        tmp_path: Path, fakes: Any, proxy_factory: Any) -> None:
    ca, server_tls = private_ca(tmp_path, issuer="Corp Private CA")
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    async with tls_front(server_tls, int(f["primary"].base_url.rsplit(":", 1)[1])) as port:
        text = profile_toml("primary", f["primary"], backups=["backup"]) + profile_toml(
            "backup", f["backup"])
        config = build_config(text.replace(f["primary"].base_url,
                                           f"https://127.0.0.1:{port}", 1))
        proxy = await proxy_factory(config, fakes=f)
        resp = await proxy.messages()
        assert resp.status_code == 200
        assert resp.headers["x-claudex-provider"] == "backup"
        # One try at primary (no retry), then the backup at once.
        assert resp.headers["x-claudex-attempts"] == "primary:certificate_untrusted,backup:200"
        assert f["primary"].request_count == 0
        rt = proxy.engine.runtimes["primary"]
        assert rt.breaker.snapshot().consecutive_failures == 1  # the provider's: no proxy
        assert rt.stats.failures == 1
        primary = next(p for p in proxy.engine.snapshot()["profiles"]
                       if p["name"] == "primary")
        assert (primary["health"]["color"], primary["health"]["reason"]) == ("red", WORDS)
        # The attempt carries the words: a request that may not fail over gets them back.
        resp = await proxy.messages(headers={"x-claudex-failover": "off"})
        assert resp.status_code == 502
        attempts = resp.json()["error"]["attempts"]
        assert [(a["provider"], a["outcome"], a["message"]) for a in attempts] == [
            ("primary", "certificate_untrusted", WORDS)]

        # Given the CA (the route's TLS, as `ca_bundle` makes it), it serves and is green.
        trusting = ssl.create_default_context(cafile=str(ca))
        proxy2 = await proxy_factory(config, fakes=f,
                                     resolve_network=network({"primary": Route((), trusting)}))
        resp = await proxy2.messages()
        assert resp.status_code == 200 and resp.headers["x-claudex-attempts"] == "primary:200"
        primary = next(p for p in proxy2.engine.snapshot()["profiles"]
                       if p["name"] == "primary")
        assert primary["health"]["color"] == "green"
