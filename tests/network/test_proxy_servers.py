"""The network test world, checked against itself: aiohttp and httpx (the two clients claudex
sends with) through each real proxy and the project's fault proxy to a fake provider, plain and
behind a TLS front with a private CA (and one requiring a client certificate).

What each proxy really answers is asserted here, so the engine's classification is built on
facts rather than guesses:

- tinyproxy 1.11.1 answers a CONNECT without credentials 407 (with Proxy-Authenticate), one with
  a wrong password 401 (with WWW-Authenticate, no Proxy-Authenticate), a CONNECT to a port
  nothing listens on 500 "Unable to connect" (the target's failure, not the proxy's).
- microsocks: SOCKS5 auth failures and a refused target are python-socks `ProxyError`s; the
  target's refusal carries `error_code` 5 (the SOCKS reply), auth failures `error_code` None.
  aiohttp_socks does not accept a `socks5h://` URL (python-socks' parser): rdns=True it is.
- mitmproxy 11 re-signs with its own CA: a client not trusting it gets a certificate
  verification error ("unable to get local issuer certificate"); when mitmproxy itself cannot
  verify the upstream, it still completes TLS with the client and answers 502 inside the
  tunnel, as if the provider had.
- aiohttp 3.14 deprecates `proxy_auth` for `proxy_headers`, but sends `proxy_headers` only with
  a CONNECT: a plain http:// request through an authenticating proxy needs Proxy-Authorization
  in its own headers (or the deprecated proxy_auth).
- aiohttp: a CONNECT answered non-200 is `ClientHttpProxyError` (status, headers); a plain
  http:// request through a proxy gets the proxy's answer as an ordinary response; a refused
  proxy is `ClientProxyConnectionError`; a CONNECT never answered is `ConnectionTimeoutError`;
  a server refusing the missing client certificate (TLS 1.3) surfaces as
  `ServerDisconnectedError`, not as an SSL error.
- httpx: a CONNECT answered non-200 is `ProxyError("407 Proxy Authentication Required")` (status
  only in the words); a CONNECT never answered is `ReadTimeout`.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import httpx
import pytest
from aiohttp_socks import ProxyConnectionError, ProxyConnector, ProxyError
from cryptography import x509

from claudex.demo.fake_provider import FakeProvider
from claudex.demo.fake_proxy import FakeProxy
from claudex.demo.tls_front import TlsFront
from tests.conftest import eventually
from tests.proxy_servers import (
    PROXY_PASSWORD,
    PROXY_USER,
    SOCKS_PASSWORD,
    SOCKS_USER,
    MicroSocks,
    MitmDump,
    TinyProxy,
    WorldPki,
)

Fakes = Callable[..., Awaitable[dict[str, FakeProvider]]]
Fronts = Callable[..., Awaitable[TlsFront]]
FakeProxies = Callable[..., Awaitable[FakeProxy]]


def basic(user: str, password: str) -> dict[str, str]:
    return {"Proxy-Authorization": aiohttp.encode_basic_auth(user, password)}


async def aiohttp_get(url: str, *, connector: aiohttp.BaseConnector | None = None,
                      **kwargs: Any) -> aiohttp.ClientResponse:
    """One GET; the response (body read) or the exception aiohttp raised."""
    async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:
        async with session.get(url, **kwargs) as response:
            await response.read()
            return response


async def httpx_get(url: str, **kwargs: Any) -> httpx.Response:
    async with httpx.AsyncClient(trust_env=False, **kwargs) as client:
        return await client.get(url)


@pytest.fixture
async def provider(fakes: Fakes) -> FakeProvider:
    return (await fakes(("corp-provider", "anthropic")))["corp-provider"]


@pytest.fixture
async def front(provider: FakeProvider, tls_front: Fronts) -> TlsFront:
    return await tls_front(provider)


# ---------------------------------------------------------------- the PKI and the TLS front

def test_pki_server_certificate_names_loopback_and_given_names(pki: WorldPki) -> None:
    cert = x509.load_pem_x509_certificate(pki.server.cert.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(ip) for ip in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "::1"}
    assert set(names.get_values_for_type(x509.DNSName)) == {"localhost", "provider.corp.test"}
    assert cert.issuer.rfc4514_string() == "CN=claudex Test Root CA,O=claudex test PKI"


def test_pki_client_key_can_be_encrypted(pki: WorldPki, tmp_path: Any) -> None:
    files = pki.ca.issue_client(tmp_path, "locked", key_password="open-sesame")
    context = ssl.create_default_context()
    with pytest.raises(ssl.SSLError):
        context.load_cert_chain(files.cert, files.key, password="wrong")
    context.load_cert_chain(files.cert, files.key, password="open-sesame")


async def test_tls_front_serves_the_fake_to_a_client_trusting_the_ca(
        provider: FakeProvider, front: TlsFront, pki: WorldPki) -> None:
    response = await aiohttp_get(front.base_url + "/v1/models", ssl=pki.client_context())
    assert response.status == 200 and provider.request_count == 1
    assert (await httpx_get(front.base_url + "/v1/models",
                            verify=pki.client_context())).status_code == 200


async def test_tls_front_is_untrusted_by_the_default_store(front: TlsFront) -> None:
    with pytest.raises(aiohttp.ClientConnectorCertificateError) as caught:
        await aiohttp_get(front.base_url + "/v1/models")
    error = caught.value.certificate_error
    assert isinstance(error, ssl.SSLCertVerificationError)
    assert error.verify_message == "unable to get local issuer certificate"
    await eventually(lambda: front.handshakes_failed == 1)  # the server's side, a moment later


async def test_tls_front_requiring_a_client_certificate(
        provider: FakeProvider, tls_front: Fronts, pki: WorldPki) -> None:
    front = await tls_front(provider, client_cert=True)
    url = front.base_url + "/v1/models"
    assert (await aiohttp_get(url, ssl=pki.client_context(cert=pki.client))).status == 200
    assert (await httpx_get(url, verify=pki.client_context(cert=pki.client))).status_code == 200
    # TLS 1.3: the client's handshake completes before the server checks its certificate, so
    # the refusal arrives as a closed connection, not as an SSL error on the client's side.
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await aiohttp_get(url, ssl=pki.client_context())
    with pytest.raises(httpx.ReadError):
        await httpx_get(url, verify=pki.client_context(cert=pki.stranger_client))
    await eventually(lambda: front.handshakes_failed >= 2)
    assert provider.request_count == 2


# ---------------------------------------------------------------- tinyproxy

async def test_tinyproxy_tunnels_and_forwards_with_the_right_password(
        provider: FakeProvider, front: TlsFront, tinyproxy: TinyProxy, pki: WorldPki) -> None:
    auth = basic(PROXY_USER, PROXY_PASSWORD)
    tunnelled = await aiohttp_get(front.base_url + "/v1/models", ssl=pki.client_context(),
                                  proxy=tinyproxy.url, proxy_headers=auth)
    # aiohttp sends `proxy_headers` only with a CONNECT: a plain http:// request through the
    # proxy carries them only as the request's own headers (or the deprecated proxy_auth).
    unsent = await aiohttp_get(provider.base_url + "/v1/models", proxy=tinyproxy.url,
                               proxy_headers=auth)
    assert unsent.status == 407
    forwarded = await aiohttp_get(provider.base_url + "/v1/models", proxy=tinyproxy.url,
                                  headers=auth)
    assert tunnelled.status == forwarded.status == 200
    via_httpx = await httpx_get(front.base_url + "/v1/models", verify=pki.client_context(),
                                proxy=tinyproxy.auth_url)
    assert via_httpx.status_code == 200 and provider.request_count == 3


async def test_tinyproxy_without_credentials_answers_connect_407(
        front: TlsFront, tinyproxy: TinyProxy, pki: WorldPki) -> None:
    with pytest.raises(aiohttp.ClientHttpProxyError) as caught:
        await aiohttp_get(front.base_url + "/v1/models", ssl=pki.client_context(),
                          proxy=tinyproxy.url)
    assert caught.value.status == 407
    assert caught.value.headers is not None
    assert caught.value.headers["Proxy-Authenticate"] == 'Basic realm="Tinyproxy"'
    with pytest.raises(httpx.ProxyError, match="407 Proxy Authentication Required"):
        await httpx_get(front.base_url + "/v1/models", verify=pki.client_context(),
                        proxy=tinyproxy.url)


async def test_tinyproxy_with_a_wrong_password_answers_connect_401(
        provider: FakeProvider, front: TlsFront, tinyproxy: TinyProxy, pki: WorldPki) -> None:
    with pytest.raises(aiohttp.ClientHttpProxyError) as caught:
        await aiohttp_get(front.base_url + "/v1/models", ssl=pki.client_context(),
                          proxy=tinyproxy.url, proxy_headers=basic(PROXY_USER, "wrong"))
    assert caught.value.status == 401  # not 407: tinyproxy's own answer to a bad password
    assert caught.value.headers is not None
    assert "Proxy-Authenticate" not in caught.value.headers
    assert caught.value.headers["WWW-Authenticate"] == 'Basic realm="Tinyproxy"'
    with pytest.raises(httpx.ProxyError, match="401 Unauthorized"):
        await httpx_get(front.base_url + "/v1/models", verify=pki.client_context(),
                        proxy=tinyproxy.url_with(PROXY_USER, "wrong"))
    # A plain http:// request gets the 401 as an ordinary response, like the provider's own.
    plain = await httpx_get(provider.base_url + "/v1/models",
                            proxy=tinyproxy.url_with(PROXY_USER, "wrong"))
    assert plain.status_code == 401 and provider.request_count == 0


async def test_tinyproxy_answers_500_when_the_target_refuses(
        tinyproxy: TinyProxy, pki: WorldPki) -> None:
    dead = FakeProvider("dead", "anthropic")
    await dead.start()
    url = f"https://127.0.0.1:{dead.port}/v1/models"
    await dead.stop()
    with pytest.raises(aiohttp.ClientHttpProxyError) as caught:
        await aiohttp_get(url, ssl=pki.client_context(), proxy=tinyproxy.url,
                          proxy_headers=basic(PROXY_USER, PROXY_PASSWORD))
    assert (caught.value.status, caught.value.message) == (500, "Unable to connect")


async def test_tinyproxy_killed_is_refused_then_back_on_the_same_port(
        front: TlsFront, tinyproxy: TinyProxy, pki: WorldPki) -> None:
    url, port = front.base_url + "/v1/models", tinyproxy.port
    await tinyproxy.kill()
    with pytest.raises(aiohttp.ClientProxyConnectionError):
        await aiohttp_get(url, ssl=pki.client_context(), proxy=tinyproxy.url)
    with pytest.raises(httpx.ConnectError):
        await httpx_get(url, verify=pki.client_context(), proxy=tinyproxy.auth_url)
    await tinyproxy.start()
    assert tinyproxy.port == port
    assert (await httpx_get(url, verify=pki.client_context(),
                            proxy=tinyproxy.auth_url)).status_code == 200


# ---------------------------------------------------------------- microsocks

async def test_microsocks_tunnels_for_aiohttp_socks_and_httpx(
        provider: FakeProvider, front: TlsFront, microsocks: MicroSocks, pki: WorldPki) -> None:
    assert microsocks.url.startswith("socks5://127.0.0.1:")
    url = front.base_url + "/v1/models"
    ok = await aiohttp_get(url, connector=ProxyConnector.from_url(microsocks.url),
                           ssl=pki.client_context())
    plain = await aiohttp_get(provider.base_url + "/v1/models",
                              connector=ProxyConnector.from_url(microsocks.url))
    assert ok.status == plain.status == 200
    assert (await httpx_get(url, verify=pki.client_context(),
                            proxy=microsocks.url)).status_code == 200
    # socks5h: the proxy resolves the name. aiohttp_socks reads no socks5h:// URL (ValueError),
    # it takes socks5:// with rdns=True; httpx takes socks5h:// as it is.
    named = url.replace("127.0.0.1", "localhost")
    with pytest.raises(ValueError, match="socks5h"):
        ProxyConnector.from_url(microsocks.url_with(None, None, "socks5h"))
    assert (await aiohttp_get(named, connector=ProxyConnector.from_url(microsocks.url, rdns=True),
                              ssl=pki.client_context())).status == 200
    assert (await httpx_get(named, verify=pki.client_context(),
                            proxy=microsocks.url_with(None, None, "socks5h"))).status_code == 200
    assert provider.request_count == 5


async def test_microsocks_with_a_user(front: TlsFront, microsocks_auth: MicroSocks,
                                      pki: WorldPki) -> None:
    url = front.base_url + "/v1/models"
    assert (await aiohttp_get(url, connector=ProxyConnector.from_url(microsocks_auth.auth_url),
                              ssl=pki.client_context())).status == 200
    assert microsocks_auth.auth_url.endswith(f"{SOCKS_USER}:{SOCKS_PASSWORD}@127.0.0.1:"
                                             f"{microsocks_auth.port}")
    for wrong, words in ((microsocks_auth.url, "No acceptable authentication methods"),
                         (microsocks_auth.url_with(SOCKS_USER, "wrong"),
                          "Username and password authentication failure")):
        with pytest.raises(ProxyError, match=words) as caught:
            await aiohttp_get(url, connector=ProxyConnector.from_url(wrong),
                              ssl=pki.client_context())
        assert caught.value.error_code is None
        assert not isinstance(caught.value, aiohttp.ClientError)  # not aiohttp's family
    with pytest.raises(httpx.ProxyError, match="Invalid username/password"):
        await httpx_get(url, verify=pki.client_context(),
                        proxy=microsocks_auth.url_with(SOCKS_USER, "wrong"))


async def test_microsocks_target_refused_and_proxy_killed(
        microsocks: MicroSocks, pki: WorldPki) -> None:
    with pytest.raises(ProxyError, match="Connection refused by destination host") as caught:
        await aiohttp_get("https://127.0.0.1:1/", connector=ProxyConnector.from_url(microsocks.url),
                          ssl=pki.client_context())
    assert caught.value.error_code == 5  # the SOCKS5 reply: the target's failure, not the proxy's
    await microsocks.kill()
    with pytest.raises(ProxyConnectionError, match="Couldn't connect to proxy"):
        await aiohttp_get("https://127.0.0.1:1/", connector=ProxyConnector.from_url(microsocks.url),
                          ssl=pki.client_context())
    with pytest.raises(httpx.ConnectError):
        await httpx_get("https://127.0.0.1:1/", proxy=microsocks.url)


# ---------------------------------------------------------------- mitmproxy

async def test_mitmdump_intercepts_and_is_trusted_with_its_ca(
        provider: FakeProvider, front: TlsFront, mitmdump: MitmDump) -> None:
    url = front.base_url + "/v1/models"
    trusting = ssl.create_default_context(cafile=str(mitmdump.ca_cert))
    assert (await aiohttp_get(url, ssl=trusting, proxy=mitmdump.url)).status == 200
    assert (await httpx_get(url, verify=trusting, proxy=mitmdump.url)).status_code == 200
    issuer = x509.load_pem_x509_certificate(mitmdump.ca_cert.read_bytes()).subject
    assert issuer.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value == "mitmproxy"
    assert provider.request_count == 2


async def test_mitmdump_untrusted_by_the_client(front: TlsFront, mitmdump: MitmDump,
                                                pki: WorldPki) -> None:
    url = front.base_url + "/v1/models"
    with pytest.raises(aiohttp.ClientConnectorCertificateError) as caught:
        await aiohttp_get(url, ssl=pki.client_context(), proxy=mitmdump.url)
    error = caught.value.certificate_error
    assert isinstance(error, ssl.SSLCertVerificationError)
    assert error.verify_message == "unable to get local issuer certificate"
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        await httpx_get(url, verify=pki.client_context(), proxy=mitmdump.url)
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await aiohttp_get(url, proxy=mitmdump.url)  # the default store does not know it either


async def test_mitmdump_not_trusting_the_upstream_answers_502_inside_the_tunnel(
        provider: FakeProvider, front: TlsFront, tmp_path: Any) -> None:
    server = MitmDump(tmp_path / "mitm-strict")  # its default store: the private CA unknown
    await server.start()
    try:
        trusting = ssl.create_default_context(cafile=str(server.ca_cert))
        response = await aiohttp_get(front.base_url + "/v1/models", ssl=trusting,
                                     proxy=server.url)
        assert response.status == 502  # an answer as if from the provider, not a proxy error
        assert "Certificate verify failed" in (await response.text())
        assert provider.request_count == 0
    finally:
        await server.kill()


# ---------------------------------------------------------------- the fault proxy

async def test_fake_proxy_ok_tunnels_and_forwards(
        provider: FakeProvider, front: TlsFront, fake_proxy: FakeProxies, pki: WorldPki) -> None:
    proxy = await fake_proxy()
    assert (await aiohttp_get(front.base_url + "/v1/models", ssl=pki.client_context(),
                              proxy=proxy.url)).status == 200
    assert (await aiohttp_get(provider.base_url + "/v1/models", proxy=proxy.url)).status == 200
    assert (await httpx_get(front.base_url + "/v1/models", verify=pki.client_context(),
                            proxy=proxy.url)).status_code == 200
    assert (await httpx_get(provider.base_url + "/v1/models", proxy=proxy.url)).status_code == 200
    assert proxy.connects == {"ok": 2} and proxy.forwards == {"ok": 2}
    assert provider.request_count == 4
    assert "proxy-authorization" not in provider.requests[-1].headers


@pytest.mark.parametrize(("mode", "status", "extra"), [
    ("rate_limited", 429, {"retry_after": 7}),
    ("forbidden", 403, {}),
    ("bad_gateway", 502, {}),
    ("bad_gateway", 503, {"status": 503}),
    ("bad_gateway", 504, {"status": 504}),
])
async def test_fake_proxy_answers_connect_by_mode(
        mode: Any, status: int, extra: dict[str, Any], provider: FakeProvider, front: TlsFront,
        fake_proxy: FakeProxies, pki: WorldPki) -> None:
    proxy = await fake_proxy()
    proxy.set_mode(mode, **extra)
    url = front.base_url + "/v1/models"
    with pytest.raises(aiohttp.ClientHttpProxyError) as caught:
        await aiohttp_get(url, ssl=pki.client_context(), proxy=proxy.url)
    assert caught.value.status == status
    assert caught.value.headers is not None
    if mode == "rate_limited":
        assert caught.value.headers["Retry-After"] == "7"
    with pytest.raises(httpx.ProxyError, match=f"^{status} "):
        await httpx_get(url, verify=pki.client_context(), proxy=proxy.url)
    # A plain http:// request gets the proxy's answer as an ordinary response.
    plain = await aiohttp_get(provider.base_url + "/v1/models", proxy=proxy.url)
    assert plain.status == status
    assert proxy.connects == {mode: 2} and proxy.forwards == {mode: 1}
    assert provider.request_count == 0
    proxy.set_mode("ok")
    assert (await aiohttp_get(url, ssl=pki.client_context(), proxy=proxy.url)).status == 200


async def test_fake_proxy_down_refuses_and_comes_back_on_the_same_port(
        front: TlsFront, fake_proxy: FakeProxies, pki: WorldPki) -> None:
    proxy = await fake_proxy()
    url, port = front.base_url + "/v1/models", proxy.port
    async with aiohttp.ClientSession(trust_env=False) as session:
        async with session.get(url, ssl=pki.client_context(), proxy=proxy.url) as response:
            assert response.status == 200  # a pooled tunnel now exists
        proxy.set_mode("down")
        assert not proxy.listening
        # The kept tunnel was dropped with the listener: the next request connects anew.
        with pytest.raises(aiohttp.ClientProxyConnectionError):
            async with session.get(url, ssl=pki.client_context(), proxy=proxy.url):
                pass
    with pytest.raises(httpx.ConnectError):
        await httpx_get(url, verify=pki.client_context(), proxy=proxy.url)
    proxy.set_mode("ok")
    assert proxy.port == port
    assert (await aiohttp_get(url, ssl=pki.client_context(), proxy=proxy.url)).status == 200
    assert proxy.connects == {"ok": 2}


async def test_fake_proxy_hang_times_the_connect_out(
        front: TlsFront, fake_proxy: FakeProxies, pki: WorldPki) -> None:
    proxy = await fake_proxy()
    proxy.set_mode("hang")
    url = front.base_url + "/v1/models"
    with pytest.raises(aiohttp.ConnectionTimeoutError):
        await aiohttp_get(url, ssl=pki.client_context(), proxy=proxy.url,
                          timeout=aiohttp.ClientTimeout(connect=0.3))
    with pytest.raises(httpx.ReadTimeout):
        await httpx_get(url, verify=pki.client_context(), proxy=proxy.url,
                        timeout=httpx.Timeout(5, read=0.3))
    assert proxy.connects == {"hang": 2}


async def test_fake_proxy_basic_auth(front: TlsFront, fake_proxy: FakeProxies,
                                     pki: WorldPki) -> None:
    proxy = await fake_proxy(username="carol", password="fake-proxy-pass-3")
    url = front.base_url + "/v1/models"
    for headers in ({}, basic("carol", "wrong"), {"Proxy-Authorization": "Bearer x"}):
        with pytest.raises(aiohttp.ClientHttpProxyError) as caught:
            await aiohttp_get(url, ssl=pki.client_context(), proxy=proxy.url,
                              proxy_headers=headers)
        assert caught.value.status == 407
        assert caught.value.headers is not None
        assert caught.value.headers["Proxy-Authenticate"].startswith("Basic ")
    proxy.set_mode("rate_limited")  # auth is checked first, whatever the mode
    with pytest.raises(httpx.ProxyError, match=r"^407 "):
        await httpx_get(url, verify=pki.client_context(),
                        proxy=f"http://carol:wrong@127.0.0.1:{proxy.port}")
    proxy.set_mode("ok")
    assert (await aiohttp_get(url, ssl=pki.client_context(), proxy=proxy.url,
                              proxy_headers=basic("carol", "fake-proxy-pass-3"))).status == 200
    assert (await httpx_get(url, verify=pki.client_context(),
                            proxy=f"http://carol:fake-proxy-pass-3@127.0.0.1:{proxy.port}")
            ).status_code == 200
    assert proxy.connects == {"unauthorized": 4, "ok": 2}


async def test_fake_proxy_to_a_client_certificate_front(
        provider: FakeProvider, tls_front: Fronts, fake_proxy: FakeProxies,
        pki: WorldPki) -> None:
    front = await tls_front(provider, client_cert=True)
    proxy = await fake_proxy()
    response = await aiohttp_get(front.base_url + "/v1/models", proxy=proxy.url,
                                 ssl=pki.client_context(cert=pki.client))
    assert response.status == 200 and proxy.connects == {"ok": 1}


def test_fake_proxy_refuses_bad_settings() -> None:
    with pytest.raises(ValueError, match="both username and password"):
        FakeProxy(username="only")
    proxy = FakeProxy()
    with pytest.raises(ValueError, match="502, 503 or 504"):
        proxy.set_mode("bad_gateway", status=500)
    with pytest.raises(ValueError, match="mode must be one of"):
        proxy.set_mode("sideways")  # type: ignore[arg-type]


# ---------------------------------------------------------------- a missing server fails, loudly

def test_a_missing_proxy_binary_fails_with_the_install_hint(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing installed
    with pytest.raises(AssertionError, match=r"apt-get install -y tinyproxy \(make test"):
        TinyProxy(tmp_path)
    with pytest.raises(AssertionError, match="apt-get install -y microsocks"):
        MicroSocks(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    with pytest.raises(AssertionError, match=r"run tests/tools/install_mitmproxy\.sh"):
        MitmDump(tmp_path)
