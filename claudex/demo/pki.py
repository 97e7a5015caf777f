"""A private certificate authority for the demo and the tests: a CA, server certificates for
127.0.0.1 / localhost / any names, and client certificates, written as PEM files.

What a company's TLS world looks like from claudex's side: a provider (or an intercepting proxy)
whose certificate no public CA signed, and a provider that wants a client certificate. Keys are
EC P-256 (fast to make); the certificates carry what strict verifiers (Python 3.13's
VERIFY_X509_STRICT, OpenSSL 3) ask for: key usages, subject and authority key identifiers.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Authority", "CertFiles", "new_authority"]

DEFAULT_HOSTS: Final = ("127.0.0.1", "localhost", "::1")
_VALID_DAYS: Final = 30
# A clock a little behind the machine's must still accept a certificate made just now.
_BACKDATE: Final = datetime.timedelta(hours=1)


@dataclass(frozen=True)
class CertFiles:
    """A certificate and its private key, as PEM files."""

    cert: Path
    key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "claudex test PKI"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey, password: str | None) -> None:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password
        else serialization.NoEncryption())
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8, encryption))
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _alt_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


@dataclass(frozen=True)
class Authority:
    """A private CA whose certificate is `files.cert` (what a client's ca_bundle names)."""

    common_name: str
    files: CertFiles
    _cert: x509.Certificate
    _key: ec.EllipticCurvePrivateKey

    @property
    def cert_path(self) -> Path:
        return self.files.cert

    def issue_server(self, directory: Path, name: str,
                     hosts: Iterable[str] = DEFAULT_HOSTS) -> CertFiles:
        """A server certificate for `hosts` (IP literals and DNS names), as NAME.pem and
        NAME-key.pem in `directory`."""
        hosts = tuple(hosts) or DEFAULT_HOSTS
        return self._issue(directory, name, common_name=hosts[0],
                           usage=ExtendedKeyUsageOID.SERVER_AUTH,
                           alt_names=[_alt_name(host) for host in hosts])

    def issue_client(self, directory: Path, name: str, *,
                     key_password: str | None = None) -> CertFiles:
        """A client certificate (CN=name), its key encrypted with `key_password` when given."""
        return self._issue(directory, name, common_name=name,
                           usage=ExtendedKeyUsageOID.CLIENT_AUTH, alt_names=[],
                           key_password=key_password)

    def _issue(self, directory: Path, name: str, *, common_name: str,
               usage: x509.ObjectIdentifier, alt_names: list[x509.GeneralName],
               key_password: str | None = None) -> CertFiles:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=True, key_cert_sign=False,
                crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                self._key.public_key()), critical=False)
        )
        if alt_names:
            builder = builder.add_extension(x509.SubjectAlternativeName(alt_names),
                                            critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        directory.mkdir(parents=True, exist_ok=True)
        files = CertFiles(directory / f"{name}.pem", directory / f"{name}-key.pem")
        _write_cert(files.cert, cert)
        _write_key(files.key, key, key_password)
        return files


def new_authority(directory: Path, common_name: str = "claudex Test Root CA") -> Authority:
    """A new self-signed CA, written as ca.pem / ca-key.pem in `directory` (created)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = _name(common_name)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True,
            crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                       critical=False)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    files = CertFiles(directory / "ca.pem", directory / "ca-key.pem")
    _write_cert(files.cert, cert)
    _write_key(files.key, key, None)
    return Authority(common_name, files, cert, key)
