"""A route's TLS context, tried in real handshakes on 127.0.0.1 against a server whose certificate
a private CA (made here with `cryptography`) signed. Every test passes its own environment: the
machine's SSL_CERT_FILE and NODE_EXTRA_CA_CERTS never count."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from claudex.engine.network.tls import TlsChoice, TlsSetupError, ssl_context


@dataclass
class Issued:
    cert: Path
    key: Path


class CA:
    """A private CA writing PEM files into a directory (just enough for these tests)."""

    def __init__(self, folder: Path, name: str) -> None:
        self.folder = folder
        self.name = name
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.subject = subject
        self.cert = (self._builder(subject, self.key.public_key())
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
                     .add_extension(x509.KeyUsage(False, False, False, False, False, True, True,
                                                  False, False), True)
                     .add_extension(x509.SubjectKeyIdentifier.from_public_key(
                         self.key.public_key()), False)
                     .sign(self.key, hashes.SHA256()))
        self.pem = folder / f"{name.replace(' ', '_')}.pem"
        self.pem.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def _builder(self, subject: x509.Name, public_key: ec.EllipticCurvePublicKey
                 ) -> x509.CertificateBuilder:
        now = datetime.datetime.now(datetime.UTC)
        return (x509.CertificateBuilder().subject_name(subject)
                .issuer_name(getattr(self, "subject", subject)).public_key(public_key)
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=1)))

    def issue(self, name: str, *, server: bool, password: bytes | None = None) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = self._builder(subject, key.public_key()).add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), False)
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
                False).add_extension(x509.ExtendedKeyUsage(
                    [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), False)
        else:
            builder = builder.add_extension(x509.ExtendedKeyUsage(
                [x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), False)
        cert = builder.sign(self.key, hashes.SHA256())
        crypt: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password) if password
            else serialization.NoEncryption())
        paths = Issued(self.folder / f"{name}.crt", self.folder / f"{name}.key")
        paths.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        paths.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                serialization.PrivateFormat.PKCS8, crypt))
        return paths


@pytest.fixture
def corp(tmp_path: Path) -> CA:
    return CA(tmp_path, "Corp Root CA")


async def handshake(server: ssl.SSLContext, client: ssl.SSLContext | None) -> str:
    """Connect to a TLS listener on 127.0.0.1: "ok", or the client's SSL error's reason. With
    `client` None, Python's default context (what aiohttp would use) is tried."""
    peers: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        cert = writer.get_extra_info("peercert")
        peers.append(dict(x[0] for x in cert["subject"])["commonName"] if cert else "")
        writer.write(b"hi")
        await writer.drain()
        writer.close()

    listener = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server)
    port = listener.sockets[0].getsockname()[1]
    try:
        context = client if client is not None else ssl.create_default_context()
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=context, server_hostname="127.0.0.1")
            answer = await reader.read(2)
            writer.close()
        except ssl.SSLError as error:
            return str(error.reason)
        if answer != b"hi":
            return "no answer"  # the server refused our certificate after the handshake
        return f"ok {peers[0]}" if peers and peers[0] else "ok"
    finally:
        listener.close()
        await listener.wait_closed()


def server_context(ca: CA, *, require_client_from: CA | None = None) -> ssl.SSLContext:
    issued = ca.issue("provider", server=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(issued.cert, issued.key)
    if require_client_from is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=require_client_from.pem)
    return context


def test_nothing_set_is_the_default_context() -> None:
    assert ssl_context(TlsChoice(), {}) is None
    assert ssl_context(TlsChoice(), {"SSL_CERT_FILE": "/x.pem", "SSL_CERT_DIR": "/d"}) is None
    assert TlsChoice().default and not TlsChoice(ca_bundle="x").default


async def test_ca_bundle_is_added_to_the_default_store(corp: CA) -> None:
    server = server_context(corp)
    assert await handshake(server, None) == "CERTIFICATE_VERIFY_FAILED"
    context = ssl_context(TlsChoice(ca_bundle=str(corp.pem)), {})
    assert context is not None
    assert await handshake(server, context) == "ok"
    # Added, not replacing: the public roots are still there.
    assert len(context.get_ca_certs()) > 1
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED


async def test_node_extra_ca_certs_is_added_without_ca_bundle(corp: CA, tmp_path: Path) -> None:
    server = server_context(corp)
    context = ssl_context(TlsChoice(), {"NODE_EXTRA_CA_CERTS": str(corp.pem)})
    assert context is not None and await handshake(server, context) == "ok"
    # With ca_bundle set, that is what is added (NODE_EXTRA_CA_CERTS is Node's fallback).
    other = CA(tmp_path, "Other CA")
    chosen = ssl_context(TlsChoice(ca_bundle=str(other.pem)),
                         {"NODE_EXTRA_CA_CERTS": str(corp.pem)})
    assert chosen is not None and await handshake(server, chosen) == "CERTIFICATE_VERIFY_FAILED"


def test_node_extra_ca_certs_naming_the_stores_own_file_changes_nothing(corp: CA) -> None:
    same = {"SSL_CERT_FILE": str(corp.pem), "NODE_EXTRA_CA_CERTS": str(corp.pem)}
    assert ssl_context(TlsChoice(), same) is None
    system = ssl.get_default_verify_paths().openssl_cafile
    assert ssl_context(TlsChoice(), {"NODE_EXTRA_CA_CERTS": system}) is None


def test_an_unreadable_node_extra_ca_certs_is_skipped_as_node_skips_it(tmp_path: Path) -> None:
    assert ssl_context(TlsChoice(), {"NODE_EXTRA_CA_CERTS": str(tmp_path / "gone.pem")}) is None


async def test_ssl_cert_file_of_the_given_environment_replaces_the_store(corp: CA,
                                                                          tmp_path: Path) -> None:
    server = server_context(corp)
    other = CA(tmp_path, "Other CA")
    # The store is SSL_CERT_FILE's alone, plus the extra file.
    context = ssl_context(TlsChoice(ca_bundle=str(other.pem)), {"SSL_CERT_FILE": str(corp.pem)})
    assert context is not None and await handshake(server, context) == "ok"
    assert len(context.get_ca_certs()) == 2


async def test_the_process_ssl_cert_file_is_not_read_for_another_environment(
        corp: CA, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = server_context(corp)
    monkeypatch.setenv("SSL_CERT_FILE", str(corp.pem))
    other = CA(tmp_path, "Other CA")
    context = ssl_context(TlsChoice(ca_bundle=str(other.pem)), {})
    assert context is not None
    assert await handshake(server, context) == "CERTIFICATE_VERIFY_FAILED"


def test_an_unusable_ca_bundle_is_an_error_naming_the_file(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(TlsSetupError, match=r"ca_bundle .*junk\.pem"):
        ssl_context(TlsChoice(ca_bundle=str(junk)), {})
    with pytest.raises(TlsSetupError, match="No such file"):
        ssl_context(TlsChoice(ca_bundle=str(tmp_path / "gone.pem")), {})


async def test_a_client_certificate_is_presented(corp: CA, tmp_path: Path) -> None:
    clients = CA(tmp_path, "Client CA")
    server = server_context(corp, require_client_from=clients)
    alice = clients.issue("alice", server=False)
    without = ssl_context(TlsChoice(ca_bundle=str(corp.pem)), {})
    assert not (await handshake(server, without)).startswith("ok")
    context = ssl_context(TlsChoice(ca_bundle=str(corp.pem), client_cert=str(alice.cert),
                                    client_key=str(alice.key)), {})
    assert await handshake(server, context) == "ok alice"


async def test_an_encrypted_key_is_unlocked_with_its_password(corp: CA, tmp_path: Path) -> None:
    clients = CA(tmp_path, "Client CA")
    server = server_context(corp, require_client_from=clients)
    bob = clients.issue("bob", server=False, password=b"open sesame")
    choice = TlsChoice(ca_bundle=str(corp.pem), client_cert=str(bob.cert), client_key=str(bob.key),
                       key_password="open sesame")
    assert "open sesame" not in repr(choice)
    assert await handshake(server, ssl_context(choice, {})) == "ok bob"


@pytest.mark.timeout(10)
def test_an_encrypted_key_without_its_password_fails_and_never_prompts(corp: CA) -> None:
    """OpenSSL prompts on the terminal when no password is given: a server would hang."""
    bob = corp.issue("bob", server=False, password=b"open sesame")
    for password in (None, "wrong"):
        with pytest.raises(TlsSetupError, match=r"client_cert .*bob\.crt"):
            ssl_context(TlsChoice(client_cert=str(bob.cert), client_key=str(bob.key),
                                  key_password=password), {})


def test_a_key_that_is_not_the_certificates_is_an_error(corp: CA) -> None:
    alice, bob = corp.issue("alice", server=False), corp.issue("bob", server=False)
    with pytest.raises(TlsSetupError, match="client_cert"):
        ssl_context(TlsChoice(client_cert=str(alice.cert), client_key=str(bob.key)), {})


def test_choices_are_hashable_and_equal_by_value() -> None:
    assert hash(TlsChoice("a", "b", "c", "d")) == hash(TlsChoice("a", "b", "c", "d"))
    assert len({TlsChoice("a"), TlsChoice("a"), TlsChoice("b")}) == 2
