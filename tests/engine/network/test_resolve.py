"""Routes resolved from a loaded config and a given environment: which hops, named how, with
which settings and TLS context."""

from __future__ import annotations

from pathlib import Path

from claudex.config import parse_config
from claudex.config.model import BreakerSettings
from claudex.engine.network.resolve import Network, resolve_network
from claudex.engine.network.routes import DIRECT, Hop
from tests.engine.network.test_tls import CA

ENV = {"FAKE_KEY": "sk-test"}


def profile(name: str, base_url: str = "https://api.example.com", extra: str = "") -> str:
    return (f'\n[[profiles]]\nname = "{name}"\nprovider_type = "DirectAnthropic"\n'
            f'base_url = "{base_url}"\napi_key_env = "FAKE_KEY"\n{extra}\n')


def network(text: str, environ: dict[str, str] | None = None,
            config_env: dict[str, str] | None = None) -> Network:
    config = parse_config(text, "t.toml", env={**ENV, **(config_env or {})})
    return resolve_network(config, {**ENV, **(environ or {})})


def test_without_proxies_every_route_is_plain_direct() -> None:
    found = network(profile("a") + profile("b", "http://127.0.0.1:9000"))
    assert found.route("a") is DIRECT and found.route("b") is DIRECT
    assert found.route("a").plain and found.route("a").label == "direct"
    assert found.proxies == {}
    assert found.route("no such profile") is DIRECT


def test_one_environment_proxy_is_the_hop_env_with_the_global_settings() -> None:
    text = "[breaker]\nfailure_threshold = 7\n" + profile("a") + profile("b", "http://h.corp")
    proxy = "http://alice:s3cret@proxy.corp:3128"
    found = network(text, {"HTTPS_PROXY": proxy, "HTTP_PROXY": proxy})
    hop = found.route("a").hops[0]
    assert hop == Hop("env", "http://proxy.corp:3128", "http", "alice", "s3cret")
    assert found.route("b").hops == (hop,)
    assert hop.shown == "http://alice:****@proxy.corp:3128" and "s3cret" not in repr(hop)
    spec = found.proxies["env"]
    assert spec.breaker == BreakerSettings(failure_threshold=7) and spec.enabled
    assert spec.profiles == ("a", "b") and spec.problem is None
    assert found.route("a").label == "via env"


def test_several_environment_proxies_are_named_by_their_variable() -> None:
    found = network(profile("s") + profile("p", "http://h.corp"),
                    {"HTTPS_PROXY": "https://secure.corp:8443", "http_proxy": "plain.corp:3128"})
    assert found.route("s").hops == (Hop("https_proxy", "https://secure.corp:8443", "https"),)
    # Scheme-less means http://; no port: the scheme's usual one.
    assert found.route("p").hops == (Hop("http_proxy", "http://plain.corp:3128", "http"),)
    socks = network(profile("s"), {"ALL_PROXY": "socks5h://s.corp"})
    assert socks.route("s").hops == (Hop("env", "socks5h://s.corp:1080", "socks5h"),)


def test_a_loopback_provider_skips_the_environment_but_not_a_named_proxy() -> None:
    text = ('[[upstream_proxies]]\nname = "relay"\nurl = "http://127.0.0.1:3128"\n'
            + profile("local", "http://127.0.0.1:9000")
            + profile("named", "http://localhost:9001", 'upstream_proxy = "relay"'))
    found = network(text, {"HTTP_PROXY": "http://proxy.corp:3128"})
    assert found.route("local") is DIRECT
    assert found.route("named").label == "via relay"


def test_no_proxy_excludes_a_provider() -> None:
    found = network(profile("a") + profile("b", "https://llm.corp.example"),
                    {"HTTPS_PROXY": "http://p.corp:1", "NO_PROXY": ".corp.example"})
    assert found.route("a").label == "via env" and found.route("b") is DIRECT


def test_named_proxies_take_their_password_and_own_settings() -> None:
    text = ('[retry]\nmax_attempts = 4\n'
            '[[upstream_proxies]]\nname = "corp"\nurl = "http://alice@proxy.corp:3128"\n'
            'password_env = "CORP_PW"\nfailure_threshold = 2\n'
            '[[upstream_proxies]]\nname = "corp-2"\nurl = "socks5://proxy2.corp:1080"\n'
            'enabled = false\n'
            '[[upstream_proxies]]\nname = "spare"\nurl = "http://spare.corp:8080"\n'
            '[network]\nupstream_proxy = ["corp", "corp-2"]\n'
            + profile("a") + profile("b"))
    found = network(text, {"CORP_PW": "pw1"})
    assert found.route("a").hops == found.route("b").hops
    corp, corp2 = found.route("a").hops
    assert corp == Hop("corp", "http://proxy.corp:3128", "http", "alice", "pw1")
    assert corp2.name == "corp-2" and corp2.scheme == "socks5"
    assert found.route("a").label == "via corp, corp-2"
    assert found.proxies["corp"].breaker.failure_threshold == 2
    assert found.proxies["corp"].retry.max_attempts == 4
    # A disabled proxy stays in the route (skipped by failover, never bypassed).
    assert found.proxies["corp-2"].enabled is False
    assert found.proxies["corp"].profiles == ("a", "b")
    # A proxy no route names is listed too, so status, trip and reset find it.
    assert found.proxies["spare"].profiles == ()
    # password_env unset: no password (the file loads with a warning).
    assert network(text).route("a").hops[0].password is None


def test_a_profile_overrides_the_network_and_direct_is_direct() -> None:
    text = ('[network]\nupstream_proxy = "http://p.corp:3128"\n' + profile("a")
            + profile("b", extra='upstream_proxy = "direct"')
            + profile("c", extra='upstream_proxy = ["http://q.corp:1", "env"]'))
    found = network(text, {"HTTPS_PROXY": "http://env.corp:8080"})
    assert found.route("a").hops == (Hop("p.corp:3128", "http://p.corp:3128", "http"),)
    assert found.route("b") is DIRECT
    assert [hop.name for hop in found.route("c").hops] == ["q.corp:1", "env"]
    assert found.proxies["p.corp:3128"].profiles == ("a",)


def test_an_inline_url_keeps_its_password_and_two_profiles_share_it() -> None:
    url = "http://bob:pw@p.corp:3128"
    found = network(profile("a", extra=f'upstream_proxy = "{url}"')
                    + profile("b", extra=f'upstream_proxy = "{url}"'))
    assert found.route("a").hops[0].password == "pw"
    assert found.route("a").hops[0] is found.route("b").hops[0]
    assert found.proxies["p.corp:3128"].profiles == ("a", "b")


def test_an_environment_proxy_claudex_cannot_use_is_out_never_bypassed() -> None:
    found = network(profile("a"), {"HTTPS_PROXY": "socks4://old.corp:1080"})
    (hop,) = found.route("a").hops
    assert hop.name == "env" and hop.scheme == "socks4"
    problem = found.proxies["env"].problem
    assert problem is not None and problem.startswith("HTTPS_PROXY: scheme socks4 is not supported")


def test_tls_contexts_are_made_once_per_choice_and_only_for_https(tmp_path: Path) -> None:
    ca = CA(tmp_path, "Corp CA")
    text = (f'[network]\nca_bundle = "{ca.pem}"\n' + profile("a") + profile("b")
            + profile("plain", "http://llm.corp:8000"))
    found = network(text)
    context = found.route("a").ssl
    assert context is not None and found.route("b").ssl is context
    assert not found.route("a").plain and found.route("a").direct
    assert found.route("plain") is DIRECT
    # An https proxy in front of an http provider still needs the context (the proxy's TLS).
    via = network(text.replace("[network]\n", '[network]\nupstream_proxy = "https://p.corp"\n'))
    assert via.route("plain").ssl is not None


def test_node_extra_ca_certs_reaches_https_routes(tmp_path: Path) -> None:
    ca = CA(tmp_path, "Corp CA")
    found = network(profile("a") + profile("local", "http://127.0.0.1:9"),
                    {"NODE_EXTRA_CA_CERTS": str(ca.pem)})
    assert found.route("a").ssl is not None and found.route("local") is DIRECT


def test_a_profiles_client_cert_takes_none_of_the_networks_key(tmp_path: Path) -> None:
    ca = CA(tmp_path, "Corp CA")
    shared = ca.issue("shared", server=False, password=b"pw")
    own = ca.issue("own", server=False)
    text = (f'[network]\nclient_cert = "{shared.cert}"\nclient_key = "{shared.key}"\n'
            'client_key_password_env = "KEY_PW"\n'
            + profile("a")
            + profile("b", extra=f'client_cert = "{own.cert}"\nclient_key = "{own.key}"'))
    found = network(text, {"KEY_PW": "pw"}, config_env={"KEY_PW": "pw"})
    a, b = found.route("a").ssl, found.route("b").ssl
    assert a is not None and b is not None and a is not b


def test_a_config_built_in_code_with_a_bad_entry_gets_a_hop_that_is_out() -> None:
    from dataclasses import replace

    config = parse_config(profile("a"), "t.toml", env=ENV)
    bad = replace(config, profiles=(replace(config.profiles[0],
                                            upstream_proxy=("ghost", "ftp://u:pw@x:1")),))
    found = resolve_network(bad, ENV)
    ghost, ftp = found.route("a").hops
    assert ghost.name == "ghost" and ghost.scheme == "unknown"
    assert found.proxies["ghost"].problem == "no [[upstream_proxies]] entry is named ghost"
    assert ftp.name == "url" and ftp.scheme == "ftp" and "pw" not in ftp.url
    assert (found.proxies["url"].problem or "").startswith("upstream_proxy URL scheme ftp")
