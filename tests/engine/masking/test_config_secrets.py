"""The secrets a config names are the scrubber's: an upstream proxy's password and a client
key's password among them (issue 36), as an api key's."""

from __future__ import annotations

from pathlib import Path

from claudex.demo.pki import new_authority
from claudex.engine.masking.secrets import config_secrets
from tests.conftest import build_config

PROFILE = """
[[upstream_proxies]]
name = "corp"
url = "http://alice@proxy.corp:3128"
password_env = "CORP_PROXY_PASSWORD"

[network]
client_cert = "{cert}"
client_key = "{key}"
client_key_password_env = "NETWORK_KEY_PASSWORD"

[[profiles]]
name = "claude"
provider_type = "DirectAnthropic"
base_url = "https://api.anthropic.com"
api_key_env = "ANTHROPIC_KEY_FOR_TEST"
upstream_proxy = "corp"
client_cert = "{cert2}"
client_key = "{key2}"
client_key_password_env = "PROFILE_KEY_PASSWORD"
"""


def test_proxy_and_client_key_passwords_are_secrets(tmp_path: Path) -> None:
    authority = new_authority(tmp_path, "Test CA")
    client = authority.issue_client(tmp_path, "client", key_password="net-key-secret-2")
    other = authority.issue_client(tmp_path, "other", key_password="profile-key-secret-3")
    text = PROFILE.format(cert=client.cert, key=client.key, cert2=other.cert, key2=other.key)
    env = {"CORP_PROXY_PASSWORD": "proxy-secret-1", "NETWORK_KEY_PASSWORD": "net-key-secret-2",
           "PROFILE_KEY_PASSWORD": "profile-key-secret-3", "ANTHROPIC_KEY_FOR_TEST": "sk-4"}
    found = config_secrets(build_config(text, env=env), env)
    assert {"proxy-secret-1", "net-key-secret-2", "profile-key-secret-3", "sk-4"} <= set(found)
