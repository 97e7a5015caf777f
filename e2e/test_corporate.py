"""The real Claude Code as a user behind a corporate network (issue 36), through a real
`claudex serve`.

The provider answers at https://provider.corp.test:PORT with a certificate of a private CA: no
resolver on this machine knows that name, only the corporate proxy does — a real mitmdump that
intercepts TLS and re-signs every certificate with its own CA, as Zscaler does. claudex serve
gets what such a laptop has: `HTTPS_PROXY` at the proxy and `NODE_EXTRA_CA_CERTS` at the proxy's
CA, and a profile that says nothing about networks. Claude Code gets `HTTPS_PROXY` too (the
harness's proxy that refuses everything) and the `NO_PROXY` that `claudex env` prints for it, so
its own requests to claudex on 127.0.0.1 never go to a proxy.

Mid-session a Bash step trips the proxy (`claudex trip env`): the provider behind it has no
route, the direct backup serves the rest, and the provider's own breaker is never touched.
"""

from __future__ import annotations

import json

import httpx

from claudex.cli.clients import loopback_no_proxy
from claudex.demo.pki import new_authority
from claudex.demo.tls_front import TlsFront
from e2e.checks import evidence, served_by
from e2e.harness import World
from tests.proxy_servers import MitmDump

CORP_HOST = "provider.corp.test"


async def test_claude_code_through_a_tls_intercepting_corporate_proxy(world: World) -> None:
    anth = await world.fake("anth", "anthropic")
    backup = await world.fake("backup", "anthropic")
    authority = new_authority(world.root / "pki", "Corp Provider Root CA")
    certificate = authority.issue_server(world.root / "pki", "provider",
                                         hosts=[CORP_HOST, "127.0.0.1", "localhost"])
    front = TlsFront(anth.base_url, certificate, url_host=CORP_HOST)
    await front.start()
    mitm = MitmDump(world.root / "mitm", upstream_ca=authority.cert_path,
                    names_at_proxy=[CORP_HOST])
    await mitm.start()
    try:
        world.profiles.append("\n".join([
            "[[profiles]]", 'name = "anth"', 'provider_type = "DirectAnthropic"',
            f'base_url = "{front.base_url}"', 'api_key_env = "E2E_UPSTREAM_KEY"',
            'backup_providers = ["backup"]']) + "\n")
        world.profile("backup", backup)
        world.serve_env.update({"HTTPS_PROXY": mitm.url, "NODE_EXTRA_CA_CERTS": str(mitm.ca_cert)})
        served = await world.serve()
        # What `claudex env` prints for Claude Code on this laptop: its proxy, and loopback
        # kept off it.
        no_proxy = loopback_no_proxy({"HTTPS_PROXY": world.proxy.url})
        assert "127.0.0.1" in no_proxy["NO_PROXY"] and "::1" in no_proxy["NO_PROXY"]
        run = await world.claude(
            [("Write", str(world.proof_path())), ("Bash", world.claudex_command("trip", "env"))],
            env_over=no_proxy)
        assert run.returncode == 0 and run.proof.read_text() == run.token, evidence(world, run)
        assert f"done {run.token}" in run.stdout, evidence(world, run)
        # Two turns through the proxy (the second one's Bash step trips it), the last on the
        # direct backup.
        assert served_by(world) == ["anth", "anth", "backup"], evidence(world, run)
        assert front.connections >= 1  # the name resolves only at the proxy
        assert world.proxy_attempts() == [], evidence(world, run)  # Claude Code kept off it
        async with httpx.AsyncClient(trust_env=False) as client:
            status = (await client.get(served.url + "/_claudex/status")).json()
        anth_status = next(p for p in status["profiles"] if p["name"] == "anth")
        assert anth_status["route"]["label"] == "via env", anth_status["route"]
        assert anth_status["breaker"]["state"] == "closed", anth_status["breaker"]
        assert anth_status["breaker"]["consecutive_failures"] == 0
        proxies = {p["name"]: p for p in status["upstream_proxies"]}
        assert proxies["env"]["breaker"]["state"] == "forced_open", json.dumps(proxies)
        assert proxies["env"]["requests"] >= 2
    finally:
        await mitm.kill()
        await front.close()
