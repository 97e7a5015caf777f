"""The command line behind a corporate proxy (issue 36): `claudex env` / `claudex run` give
Claude Code a NO_PROXY with the loopback names when a proxy variable is set; `claudex init` writes
`[network]` from HTTPS_PROXY, NODE_EXTRA_CA_CERTS and CLAUDE_CODE_CLIENT_CERT/_KEY, never copying
a password, and what it writes passes `claudex check`."""

from __future__ import annotations

import datetime
import stat
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from claudex.cli import main
from claudex.cli.clients import PROXY_VARIABLES, loopback_no_proxy
from claudex.cli.init_network import discover_network, shown_proxy_url
from claudex.config import load_config
from claudex.config.starter import KEY_PROVIDERS

NETWORK_VARIABLES = ("NO_PROXY", "no_proxy", "NODE_EXTRA_CA_CERTS", "CLAUDE_CODE_CLIENT_CERT",
                     "CLAUDE_CODE_CLIENT_KEY", "CLAUDE_CODE_CLIENT_KEY_PASSPHRASE",
                     "SSL_CERT_FILE")


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No proxy or certificate variable of this machine's, an empty HOME, no API keys."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("CLAUDEX_CONFIG", raising=False)
    for variable in (*PROXY_VARIABLES, *NETWORK_VARIABLES,
                     *(p.variable for p in KEY_PROVIDERS)):
        monkeypatch.delenv(variable, raising=False)
    for variable in ("AWS_BEARER_TOKEN_BEDROCK", "AWS_ACCESS_KEY_ID", "AWS_PROFILE",
                     "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "CLAUDE_CODE_USE_BEDROCK",
                     "CLAUDE_CODE_USE_VERTEX", "GOOGLE_APPLICATION_CREDENTIALS",
                     "CLOUDSDK_CONFIG"):
        monkeypatch.delenv(variable, raising=False)
    return home


def write_pki(folder: Path) -> tuple[Path, Path, Path]:
    """A self-signed CA (ca.pem) and a client certificate with its key (EC P-256)."""
    now = datetime.datetime.now(datetime.UTC)

    def cert(name: str, key: ec.EllipticCurvePrivateKey, ca: bool) -> x509.Certificate:
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(days=1))
                .not_valid_after(now + datetime.timedelta(days=30))
                .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
                .sign(key, hashes.SHA256()))

    ca_key, client_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(
        ec.SECP256R1())
    ca_path, cert_path, key_path = folder / "ca.pem", folder / "client.pem", folder / "client.key"
    ca_path.write_bytes(cert("Corp Root CA", ca_key, True).public_bytes(
        serialization.Encoding.PEM))
    cert_path.write_bytes(cert("alice", client_key, False).public_bytes(
        serialization.Encoding.PEM))
    key_path.write_bytes(client_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return ca_path, cert_path, key_path


# -- NO_PROXY for Claude Code -------------------------------------------------------------------

def test_no_proxy_unchanged_without_a_proxy_variable() -> None:
    assert loopback_no_proxy({"NO_PROXY": "corp.example"}) == {}
    assert loopback_no_proxy({"HTTPS_PROXY": "  "}) == {}


@pytest.mark.parametrize("variable", PROXY_VARIABLES)
def test_any_proxy_variable_adds_the_loopback_names(variable: str) -> None:
    assert loopback_no_proxy({variable: "http://proxy.corp:3128"}) == {
        "NO_PROXY": "127.0.0.1,localhost,::1", "no_proxy": "127.0.0.1,localhost,::1"}


def test_existing_entries_are_kept_once_in_order() -> None:
    env = {"HTTPS_PROXY": "http://proxy.corp:3128", "NO_PROXY": ".corp.example, LOCALHOST",
           "no_proxy": "10.0.0.0/8,.corp.example"}
    value = "corp.example,LOCALHOST,10.0.0.0/8,127.0.0.1,::1".replace("corp", ".corp", 1)
    assert loopback_no_proxy(env) == {"NO_PROXY": value, "no_proxy": value}


def test_a_star_already_exempts_everything() -> None:
    assert loopback_no_proxy({"https_proxy": "http://p:1", "no_proxy": "*"}) == {}


def test_claudex_env_prints_no_proxy_behind_a_proxy(
        clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "absent.toml"
    assert main(["--config", str(config), "env"]) == 0
    assert "NO_PROXY" not in capsys.readouterr().out
    monkeypatch.setenv("HTTPS_PROXY", "http://alice:s3cret@proxy.corp:3128")
    monkeypatch.setenv("NO_PROXY", "internal.corp")
    assert main(["--config", str(config), "env"]) == 0
    out = capsys.readouterr().out
    assert "export NO_PROXY='internal.corp,127.0.0.1,localhost,::1'" in out
    assert "export no_proxy='internal.corp,127.0.0.1,localhost,::1'" in out
    assert "s3cret" not in out


def test_claudex_run_gives_the_command_the_loopback_no_proxy(
        clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A real `claudex serve`-like listener is not needed: `run` only asks /healthz, answered
    here by a tiny server on 127.0.0.1 (the HTTPS_PROXY must not be used for it)."""
    import http.server
    import threading

    class Healthz(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Healthz)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # nothing listens there
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
        out_file = tmp_path / "seen.txt"
        config = tmp_path / "profiles.toml"
        config.write_text(f"[proxy]\nport = {server.server_address[1]}\n\n[[profiles]]\n"
                          'name = "claude"\nprovider_type = "DirectAnthropic"\n'
                          'base_url = "https://api.anthropic.com"\nauth_type = "passthrough"\n')
        code = main(["--config", str(config), "run", "--",
                     sys.executable, "-c",
                     "import os,sys; open(sys.argv[1],'w').write(os.environ['NO_PROXY'] + ' ' "
                     "+ os.environ['no_proxy'])", str(out_file)])
    finally:
        server.shutdown()
        server.server_close()
    assert code == 0, capsys.readouterr()
    assert out_file.read_text() == "127.0.0.1,localhost,::1 127.0.0.1,localhost,::1"


# -- claudex init's [network] -------------------------------------------------------------------

def test_proxy_url_shown_without_its_password() -> None:
    assert shown_proxy_url("http://alice:s3cret@proxy.corp:3128") == (
        "http://alice:****@proxy.corp:3128")
    assert shown_proxy_url("proxy.corp:3128") == "http://proxy.corp:3128"
    assert shown_proxy_url("socks5h://[::1]:1080") == "socks5h://[::1]:1080"
    assert "sk-" not in shown_proxy_url("sk-not-a-url-at-all")


def test_nothing_set_no_network_section() -> None:
    assert not discover_network({}).any


def test_a_key_without_its_certificate_is_only_mentioned(tmp_path: Path) -> None:
    found = discover_network({"CLAUDE_CODE_CLIENT_KEY": str(tmp_path / "k.pem")})
    assert not any(line.startswith("client_key") for line in found.lines)


def init_and_check(target: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    assert main(["--config", str(target), "init"]) == 0
    init_out = capsys.readouterr().out
    code = main(["--config", str(target), "check"])
    check = capsys.readouterr()
    assert code == 0, check
    return init_out, check.out + check.err


def test_init_writes_network_from_the_environment_and_check_passes(
        clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    ca, cert, key = write_pki(tmp_path)
    monkeypatch.setenv("HTTPS_PROXY", "http://alice:s3cret-pw@proxy.corp:3128")
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(ca))
    monkeypatch.setenv("CLAUDE_CODE_CLIENT_CERT", str(cert))
    monkeypatch.setenv("CLAUDE_CODE_CLIENT_KEY", str(key))
    target = tmp_path / "cfg" / "profiles.toml"
    init_out, check_out = init_and_check(target, capsys)
    text = target.read_text()
    assert "s3cret-pw" not in text + init_out + check_out
    assert "[network]" in text and 'upstream_proxy = "env"' in text
    assert "HTTPS_PROXY was set (http://alice:****@proxy.corp:3128)" in text
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    config = load_config(target)
    assert config.network.upstream_proxy == ("env",)
    assert config.network.ca_bundle == str(ca)
    assert (config.network.client_cert, config.network.client_key) == (str(cert), str(key))
    assert "HTTPS_PROXY: http://alice:****@proxy.corp:3128" in init_out
    # [network] comes before the first profile (the starter's profiles still load).
    assert text.index("[network]") < text.index("[[profiles]]")
    assert [p.name for p in config.profiles] == ["claude"]


def test_init_comments_out_what_would_not_load(
        clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello")
    monkeypatch.setenv("https_proxy", "proxy.corp:3128")
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(tmp_path / "missing.pem"))
    monkeypatch.setenv("CLAUDE_CODE_CLIENT_CERT", str(not_pem))
    target = tmp_path / "profiles.toml"
    init_out, _ = init_and_check(target, capsys)
    text = target.read_text()
    assert f'# ca_bundle = "{tmp_path / "missing.pem"}"   # not loadable here: ' in text
    assert f'# client_cert = "{not_pem}"' in text
    assert "commented out" in init_out
    config = load_config(target)
    assert config.network.ca_bundle is None and config.network.client_cert is None


# -- claudex's own calls to an engine on this machine -------------------------------------------

@pytest.mark.parametrize(("url", "trusted"), [
    ("http://127.0.0.1:13456", False), ("http://localhost:13456", False),
    ("http://[::1]:13456", False), ("http://127.1.2.3:80", False),
    ("http://claudex.localhost:1", False), ("http://engine.corp:13456", True),
])
def test_admin_calls_take_no_environment_proxy_to_this_machine(url: str, trusted: bool) -> None:
    from claudex.cli.common import trust_env_for
    from claudex.console.http_link import HttpLink

    assert trust_env_for(url) is trusted
    if "claudex.localhost" not in url:  # (the console's rule is is_local_url's)
        assert HttpLink(url)._http().trust_env is trusted
