"""What the Bedrock and Vertex tests share: made-up AWS keys, a service account with a fresh
key pair, and an environment in which neither SDK finds the machine's own credentials."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from claudex.demo.aws_signatures import AwsTestKey

KEY = AwsTestKey("AKIDCLAUDEXTEST00001", "claudex-test-secret-0000000000000000000000")
TEMPORARY_KEY = AwsTestKey("ASIACLAUDEXTEST00002", "claudex-temp-secret-000000000000000000000",
                           "claudex-session-token-000000000000")
UNKNOWN_KEY = AwsTestKey("AKIDNOBODYKNOWS00003", "claudex-other-secret-00000000000000000000")
API_KEY = "bedrock-api-key-claudex-test-0000000000"
MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
VERTEX_MODEL = "claude-sonnet-4-5@20250929"
PROJECT = "claudex-test"
MESSAGE = {"max_tokens": 64, "messages": [{"role": "user", "content": "hello"}]}


def isolate_cloud_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS or Google credentials of the machine's reach the SDKs (nor any network)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_DEFAULT_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "AWS_REGION",
                 "AWS_DEFAULT_REGION", "ANTHROPIC_BEDROCK_BASE_URL",
                 "GOOGLE_APPLICATION_CREDENTIALS", "ANTHROPIC_VERTEX_PROJECT_ID", "CLOUD_ML_REGION",
                 "ANTHROPIC_VERTEX_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setenv("NO_GCE_CHECK", "True")


@dataclass(frozen=True)
class ServiceAccount:
    email: str
    key: rsa.RSAPrivateKey
    path: Path
    """The service-account JSON file, its token_uri the fake token endpoint."""


def service_account(tmp_path: Path, token_uri: str, *,
                    email: str = f"claudex-test@{PROJECT}.iam.gserviceaccount.com",
                    key: rsa.RSAPrivateKey | None = None) -> ServiceAccount:
    key = key or rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    path = tmp_path / f"{email.split('@')[0]}.json"
    path.write_text(json.dumps({
        "type": "service_account", "project_id": PROJECT, "private_key_id": "test-key-1",
        "private_key": pem, "client_email": email, "client_id": "100000000000000000001",
        "token_uri": token_uri}))
    path.chmod(0o600)
    return ServiceAccount(email, key, path)


def bedrock_toml(name: str, base_url: str, *, backups: tuple[str, ...] = (),
                 auth: str = 'api_key_env = "FAKE_KEY"', model: str = MODEL,
                 extra: str = "") -> str:
    """A Bedrock profile at a fake (`auth`: its key line, or "" for the AWS chain)."""
    backup_list = ", ".join(f'"{b}"' for b in backups)
    return f"""
[[profiles]]
name = "{name}"
provider_type = "Bedrock"
region = "us-east-1"
base_url = "{base_url}"
{auth}
default_model = "{model}"
models = {{ sonnet = "{model}" }}
backup_providers = [{backup_list}]
{extra}
"""


def vertex_toml(name: str, base_url: str, *, backups: tuple[str, ...] = (),
                auth: str = "", model: str = VERTEX_MODEL, region: str = "us-east5",
                extra: str = "") -> str:
    """A Vertex profile at a fake (`auth`: a credentials_file or token_command line)."""
    backup_list = ", ".join(f'"{b}"' for b in backups)
    return f"""
[[profiles]]
name = "{name}"
provider_type = "Vertex"
region = "{region}"
project = "{PROJECT}"
base_url = "{base_url}"
{auth}
default_model = "{model}"
models = {{ sonnet = "{model}" }}
backup_providers = [{backup_list}]
{extra}
"""
