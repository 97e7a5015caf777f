"""`[fleet]` settings: off by default, and every problem named with file, line and key."""

from __future__ import annotations

import textwrap

import pytest

from claudex.config import ConfigError, parse_config
from tests.conftest import TEST_ENV

PROFILE = """
[[profiles]]
name = "p"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "FAKE_KEY"
"""


def issues(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(textwrap.dedent(text) + PROFILE, "t.toml", env=TEST_ENV)
    return [str(i) for i in caught.value.issues]


def test_fleet_settings_load_with_defaults() -> None:
    config = parse_config('[fleet]\nredis_url = "redis://127.0.0.1:6379/2"\n' + PROFILE,
                          env=TEST_ENV)
    assert config.fleet.enabled and config.fleet.key_prefix == "claudex"
    assert config.fleet.name is None  # host:port of the instance, decided at start
    assert not parse_config(PROFILE, env=TEST_ENV).fleet.enabled


def test_fleet_settings_errors_name_file_line_and_key_and_never_echo_a_password() -> None:
    found = issues("""
        [fleet]
        redis_url = "redis://:hunter2@127.0.0.1:6379"
        name = "a b"
        key_prefix = ""
        password_env = "not a name"
        redis = "x"
        """)
    assert found[0].startswith("t.toml:3: fleet.redis_url: must not contain a password")
    assert "hunter2" not in "\n".join(found)
    assert found[1].startswith("t.toml:4: fleet.name:")
    assert found[2].startswith("t.toml:5: fleet.key_prefix: must not be empty")
    assert found[3].startswith("t.toml:6: fleet.password_env:")
    assert found[4].startswith("t.toml:7: fleet.redis: unknown key (did you mean")
    assert issues('[fleet]\nredis_url = "http://127.0.0.1"\n')[0].startswith(
        "t.toml:2: fleet.redis_url: must start with one of redis://")
    assert issues("fleet = 3\n")[0].startswith("t.toml:1: fleet: must be a table")


def test_secret_env_must_hold_a_fernet_key_and_check_never_shows_it() -> None:
    from cryptography.fernet import Fernet

    text = '[fleet]\nredis_url = "redis://127.0.0.1:6379"\nsecret_env = "FLEET_KEY"\n' + PROFILE
    good = Fernet.generate_key().decode()
    config = parse_config(text, "t.toml", env={**TEST_ENV, "FLEET_KEY": good})
    assert config.fleet.secret_env == "FLEET_KEY" and not config.warnings
    for bad in ("not-a-key-at-all-but-secret", good[:-2] + "!=", "A" * 40 + "===="):
        with pytest.raises(ConfigError) as caught:
            parse_config(text, "t.toml", env={**TEST_ENV, "FLEET_KEY": bad})
        found = [str(i) for i in caught.value.issues]
        assert found[0].startswith("t.toml:3: fleet.secret_env: environment variable FLEET_KEY")
        assert "Fernet.generate_key()" in found[0]
        assert bad not in "\n".join(found)
    # Unset: tokens stay out of Redis, which is said as a warning with its line.
    unset = parse_config(text, "t.toml", env=TEST_ENV)
    assert str(unset.warnings[0]).startswith(
        "t.toml:3: fleet.secret_env: environment variable FLEET_KEY is not set")
    assert issues('[fleet]\nsecret_env = "a key"\n')[0].startswith("t.toml:2: fleet.secret_env:")
