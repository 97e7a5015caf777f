"""Real proxy servers on 127.0.0.1 for the network tests: Debian's tinyproxy (HTTP CONNECT, Basic
auth), microsocks (SOCKS5, with or without a user) and mitmproxy's mitmdump (a TLS-intercepting
"corporate" proxy with its own CA) — each started on a free port, waited for until it listens,
killed after the test. Never mocks.

They are part of the test setup: `make test` and `.ci/run` install tinyproxy and microsocks with
apt (like redis-server) and mitmproxy with tests/tools/install_mitmproxy.sh (a venv in the user
cache). When one is missing the tests fail with that instruction rather than being skipped.

Fixtures (import them into a conftest.py, as tests/network/conftest.py does):
    tinyproxy         TinyProxy with Basic auth PROXY_USER / PROXY_PASSWORD
    microsocks        MicroSocks without auth;  microsocks_auth: SOCKS_USER / SOCKS_PASSWORD
    mitmdump          MitmDump trusting `pki.ca` upstream; `.ca_cert` is its own CA (PEM)
    fake_proxy        `await fake_proxy(username=..., password=..., retry_after=...)` -> FakeProxy
    pki               WorldPki: a CA, a server cert (127.0.0.1, localhost, ::1,
                      provider.corp.test), a client cert, and a stranger CA with its client cert
    tls_front         `await tls_front(fake, client_cert=False, url_host=None)` -> TlsFront
    clean_network_env autouse: no SSL_CERT_FILE, NODE_EXTRA_CA_CERTS or proxy variables here
Each real proxy has `.url` (no credentials), `.url_with(user, password, scheme=None)`,
`.auth_url`, `.port`, `.log()`, and `start()` / `stop()` / `kill()` / `restart()` (same port).

Every child gets an explicit environment (PATH, a scratch HOME, nothing else): this machine's
SSL_CERT_FILE, NODE_EXTRA_CA_CERTS and proxy variables must not change what a proxy does.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

from claudex.demo.fake_provider import FakeProvider
from claudex.demo.fake_proxy import FakeProxy
from claudex.demo.pki import Authority, CertFiles, new_authority
from claudex.demo.tls_front import TlsFront
from claudex.demo.world import free_port

MITMPROXY_VERSION: Final = "11.0.2"
_START_PATIENCE_S: Final = 20.0
_STOP_PATIENCE_S: Final = 5.0

APT_HINT = ("{binary} is not installed; the network tests need Debian's package: "
            "apt-get update && apt-get install -y {package} (make test and .ci/run do this)")


def mitmproxy_venv() -> Path:
    """Where tests/tools/install_mitmproxy.sh puts mitmproxy (same rule as the script)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "claudex-test-tools" / f"mitmproxy-{MITMPROXY_VERSION}"


def clean_env(home: Path) -> dict[str, str]:
    """What a child proxy runs with: PATH and a scratch HOME, no CA or proxy variables."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
            "LANG": "C.UTF-8"}


def _apt_binary(binary: str, package: str) -> str:
    found = shutil.which(binary)
    if found is None:
        raise AssertionError(APT_HINT.format(binary=binary, package=package))
    return found


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class RealProxy:
    """A proxy server run as a child process on 127.0.0.1:`port`; its output goes to a log file
    in `workdir` (quoted when it fails to start)."""

    scheme: str = "http"
    name: str = "proxy"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.log_path = workdir / f"{self.name}.log"
        self.proc: asyncio.subprocess.Process | None = None
        self.username: str | None = None
        self.password: str | None = None

    @property
    def url(self) -> str:
        """scheme://127.0.0.1:port, without credentials."""
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def url_with(self, username: str | None, password: str | None,
                 scheme: str | None = None) -> str:
        """The URL with these credentials written in (what a client's proxy setting holds)."""
        auth = ""
        if username is not None:
            auth = username + (f":{password}" if password is not None else "") + "@"
        return f"{scheme or self.scheme}://{auth}127.0.0.1:{self.port}"

    @property
    def auth_url(self) -> str:
        """The URL with the right credentials (the plain URL when there are none)."""
        return self.url_with(self.username, self.password)

    def command(self) -> list[str]:
        raise NotImplementedError

    async def start(self) -> None:
        """Start and wait until the port accepts connections; fail with the log otherwise."""
        if self.proc is not None and self.proc.returncode is None:
            return
        with self.log_path.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                *self.command(), stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log,
                env=clean_env(self.workdir), cwd=self.workdir, start_new_session=True)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _START_PATIENCE_S
        while loop.time() < deadline:
            if self.proc.returncode is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n"
                                     + self.log())
            if await asyncio.to_thread(_listening, self.port):
                return
            await asyncio.sleep(0.02)
        await self.kill()
        raise AssertionError(f"{self.name} did not listen on 127.0.0.1:{self.port} within "
                             f"{_START_PATIENCE_S:.0f} s:\n{self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return "(no log)"

    async def kill(self) -> None:
        """SIGKILL: the proxy dies without a goodbye (connections reset, then refused)."""
        await self._end(signal.SIGKILL)

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers."""
        await self._end(signal.SIGTERM)

    async def restart(self) -> None:
        """Killed, then started again on the same port."""
        await self.kill()
        await self.start()

    async def _end(self, sig: signal.Signals) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.returncode is not None:
            return
        try:
            os.killpg(proc.pid, sig)  # its own session: children (mitmdump's) go too
        except ProcessLookupError:
            return
        try:
            await asyncio.wait_for(proc.wait(), _STOP_PATIENCE_S)
        except TimeoutError:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


class TinyProxy(RealProxy):
    """Debian's tinyproxy: HTTP CONNECT and absolute-URI forwarding, any port, Basic auth when
    `username`/`password` are given. Facts (tinyproxy 1.11.1, tests/network/
    test_proxy_servers.py): a CONNECT without credentials is answered 407 with
    Proxy-Authenticate, one with a wrong password 401 with WWW-Authenticate; a CONNECT to a
    port nothing listens on 500 "Unable to connect"."""

    name = "tinyproxy"

    def __init__(self, workdir: Path, *, username: str | None = None,
                 password: str | None = None) -> None:
        super().__init__(workdir)
        self.binary = _apt_binary("tinyproxy", "tinyproxy")
        self.username, self.password = username, password
        self.config_path = workdir / "tinyproxy.conf"

    def command(self) -> list[str]:
        lines = [f"Port {self.port}", "Listen 127.0.0.1", "Timeout 60", "MaxClients 200",
                 "LogLevel Info", "DisableViaHeader Yes"]
        # No Allow and no ConnectPort line: every client and every port is allowed.
        if self.username is not None:
            lines.append(f"BasicAuth {self.username} {self.password}")
        self.config_path.write_text("\n".join(lines) + "\n")
        self.config_path.chmod(0o600)
        return [self.binary, "-d", "-c", str(self.config_path)]


class MicroSocks(RealProxy):
    """Debian's microsocks: SOCKS5 (CONNECT only), username/password auth when given."""

    name = "microsocks"
    scheme = "socks5"

    def __init__(self, workdir: Path, *, username: str | None = None,
                 password: str | None = None) -> None:
        super().__init__(workdir)
        self.binary = _apt_binary("microsocks", "microsocks")
        self.username, self.password = username, password

    def command(self) -> list[str]:
        command = [self.binary, "-i", "127.0.0.1", "-p", str(self.port)]
        if self.username is not None:
            command += ["-u", self.username, "-P", str(self.password)]
        return command


class MitmDump(RealProxy):
    """mitmproxy's mitmdump: an HTTP proxy that intercepts TLS through CONNECT, re-signing every
    server certificate with its own CA (`ca_cert`, made in a scratch confdir at start), as a
    company's inspecting proxy does. It verifies the upstream's certificate against
    `upstream_ca` (a private CA's PEM) when given, else against its own default store."""

    name = "mitmdump"

    def __init__(self, workdir: Path, *, upstream_ca: Path | None = None,
                 username: str | None = None, password: str | None = None,
                 names_at_proxy: Iterable[str] = ()) -> None:
        super().__init__(workdir)
        self.names_at_proxy = tuple(names_at_proxy)
        """Host names only this proxy can reach (it sends them to 127.0.0.1; nothing else on
        the machine resolves them): a provider reachable only through the company's proxy."""
        binary = mitmproxy_venv() / "bin" / "mitmdump"
        if not binary.exists():
            raise AssertionError(
                f"mitmdump (mitmproxy {MITMPROXY_VERSION}) is not installed at {binary}; run "
                "tests/tools/install_mitmproxy.sh (make test and .ci/run do)")
        self.binary = str(binary)
        self.confdir = workdir / "mitmproxy-conf"
        self.upstream_ca = upstream_ca
        self.username, self.password = username, password

    @property
    def ca_cert(self) -> Path:
        """mitmproxy's CA certificate (PEM): what a client's ca_bundle names to trust it."""
        return self.confdir / "mitmproxy-ca-cert.pem"

    def command(self) -> list[str]:
        command = [self.binary, "--listen-host", "127.0.0.1", "--listen-port", str(self.port),
                   "--set", f"confdir={self.confdir}", "--set", "termlog_verbosity=info",
                   "--set", "flow_detail=1"]
        if self.upstream_ca is not None:
            command += ["--set", f"ssl_verify_upstream_trusted_ca={self.upstream_ca}"]
        if self.username is not None:
            command += ["--proxyauth", f"{self.username}:{self.password}"]
        if self.names_at_proxy:
            # Lazy: connect upstream only once the request (and its rewritten host) is known.
            command += ["--set", "connection_strategy=lazy"]
            for name in self.names_at_proxy:
                command += ["--map-remote", f"|://{re.escape(name)}:|://127.0.0.1:"]
        return command

    async def start(self) -> None:
        await super().start()
        if not self.ca_cert.exists():
            raise AssertionError(f"mitmdump listens but wrote no CA at {self.ca_cert}")


# ---------------------------------------------------------------- pytest fixtures
# Registered by tests/network/conftest.py (which imports them); each starts its server on a free
# port of 127.0.0.1 and kills it after the test.

PROXY_USER: Final = "alice"
PROXY_PASSWORD: Final = "proxy-pass-not-a-secret-1"
SOCKS_USER: Final = "bob"
SOCKS_PASSWORD: Final = "socks-pass-not-a-secret-2"

_PROXY_VARIABLES: Final = (
    "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY",
    "all_proxy", "NO_PROXY", "no_proxy")


@dataclass(frozen=True)
class WorldPki:
    """A private CA with a server certificate (127.0.0.1, localhost, ::1, provider.corp.test)
    and a client certificate; `stranger` is another CA with its own client certificate."""

    ca: Authority
    server: CertFiles
    client: CertFiles
    stranger: Authority
    stranger_client: CertFiles

    def client_context(self, *, cert: CertFiles | None = None) -> ssl.SSLContext:
        """A client context trusting only the private CA, presenting `cert` when given."""
        context = ssl.create_default_context(cafile=str(self.ca.cert_path))
        if cert is not None:
            context.load_cert_chain(cert.cert, cert.key)
        return context


async def _running(server: RealProxy) -> AsyncIterator[Any]:
    await server.start()
    try:
        yield server
    finally:
        await server.kill()


@pytest.fixture(autouse=True)
def clean_network_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process without the machine's CA and proxy variables, so in-process clients
    (aiohttp, httpx, ssl.create_default_context) behave as on a machine without them
    (autouse wherever these fixtures are imported)."""
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def pki(tmp_path: Path) -> WorldPki:
    ca = new_authority(tmp_path / "pki", "claudex Test Root CA")
    stranger = new_authority(tmp_path / "pki-stranger", "Stranger Root CA")
    return WorldPki(
        ca=ca,
        server=ca.issue_server(tmp_path / "pki", "provider",
                               hosts=("127.0.0.1", "localhost", "::1", "provider.corp.test")),
        client=ca.issue_client(tmp_path / "pki", "claudex-client"),
        stranger=stranger,
        stranger_client=stranger.issue_client(tmp_path / "pki-stranger", "stranger-client"))


@pytest.fixture
async def tinyproxy(tmp_path: Path) -> AsyncIterator[TinyProxy]:
    """tinyproxy with Basic auth PROXY_USER / PROXY_PASSWORD."""
    async for server in _running(TinyProxy(tmp_path / "tinyproxy", username=PROXY_USER,
                                           password=PROXY_PASSWORD)):
        yield server


@pytest.fixture
async def microsocks(tmp_path: Path) -> AsyncIterator[MicroSocks]:
    """microsocks without authentication."""
    async for server in _running(MicroSocks(tmp_path / "microsocks")):
        yield server


@pytest.fixture
async def microsocks_auth(tmp_path: Path) -> AsyncIterator[MicroSocks]:
    """microsocks with SOCKS_USER / SOCKS_PASSWORD (-u/-P)."""
    async for server in _running(MicroSocks(tmp_path / "microsocks-auth", username=SOCKS_USER,
                                            password=SOCKS_PASSWORD)):
        yield server


@pytest.fixture
async def mitmdump(tmp_path: Path, pki: WorldPki) -> AsyncIterator[MitmDump]:
    """mitmdump trusting the test PKI's CA upstream (so it intercepts the TLS fronts)."""
    async for server in _running(MitmDump(tmp_path / "mitmdump", upstream_ca=pki.ca.cert_path)):
        yield server


@pytest.fixture
async def fake_proxy() -> AsyncIterator[Callable[..., Awaitable[FakeProxy]]]:
    """`await fake_proxy(username=..., password=...)` -> a started FakeProxy, closed after."""
    started: list[FakeProxy] = []

    async def make(**kwargs: Any) -> FakeProxy:
        proxy = FakeProxy(**kwargs)
        await proxy.start()
        started.append(proxy)
        return proxy

    yield make
    for proxy in started:
        await proxy.close()


@pytest.fixture
async def tls_front(pki: WorldPki) -> AsyncIterator[Callable[..., Awaitable[TlsFront]]]:
    """`await tls_front(fake, client_cert=False)` -> a started TlsFront (the test PKI's server
    certificate) in front of `fake`; with client_cert=True it requires one signed by pki.ca."""
    started: list[TlsFront] = []

    async def make(fake: FakeProvider, *, client_cert: bool = False,
                   url_host: str | None = None) -> TlsFront:
        front = TlsFront(fake.base_url, pki.server,
                         client_ca=pki.ca.cert_path if client_cert else None, url_host=url_host)
        await front.start()
        started.append(front)
        return front

    yield make
    for front in started:
        await front.close()
