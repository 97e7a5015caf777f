"""`[network]`, `[[upstream_proxies]]` and a profile's network keys: loaded into the model, and
every problem reported with file, line and key (files written to tmp_path, read by the same
loader `claudex check` uses). No message ever shows a proxy's password."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from claudex.config import ConfigError, load_config
from claudex.config.loader import check_config
from claudex.config.model import BreakerSettings, NetworkSettings, RetrySettings, UpstreamProxy
from tests.engine.network.test_tls import CA

ENV = {"FAKE_KEY": "sk-test", "CORP_PW": "pw"}
PROFILE = """
[[profiles]]
name = "claude"
provider_type = "DirectAnthropic"
base_url = "https://api.anthropic.com"
api_key_env = "FAKE_KEY"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profiles.toml"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def problems(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> list[str]:
    path = write(tmp_path, text)
    found = [str(issue).removeprefix(f"{path}:") for issue in check_config(path, env or ENV)]
    assert found, "the file loaded"
    return found


def warnings(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> list[str]:
    path = write(tmp_path, text)
    loaded = load_config(path, env or ENV)
    return [str(w).removeprefix(f"{path}:").lstrip() for w in loaded.warnings]


def test_defaults_without_any_network_key(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, PROFILE), ENV)
    assert config.network == NetworkSettings() and config.network.upstream_proxy == ("env",)
    assert config.upstream_proxies == ()
    assert config.profiles[0].upstream_proxy is None and config.profiles[0].ca_bundle is None


def test_everything_loads_into_the_model(tmp_path: Path) -> None:
    ca = CA(tmp_path, "Corp CA")
    client = ca.issue("me", server=False)
    config = load_config(write(tmp_path, f"""
        [breaker]
        failure_threshold = 4
        [retry]
        max_attempts = 3
        [network]
        upstream_proxy = "corp"
        ca_bundle = "{ca.pem}"
        client_cert = "{client.cert}"
        client_key = "{client.key}"

        [[upstream_proxies]]
        name = "corp"
        url = "http://alice@proxy.corp:3128"
        password_env = "CORP_PW"
        recovery_seconds = 5
        initial_delay = 0.25

        [[upstream_proxies]]
        name = "corp-2"
        url = "socks5h://proxy2.corp:1080"
        enabled = false
        {PROFILE}
        upstream_proxy = ["corp-2", "http://p.corp:8080", "env"]
        ca_bundle = "{ca.pem}"
        """), ENV)
    assert config.network == NetworkSettings(("corp",), str(ca.pem), str(client.cert),
                                             str(client.key), None)
    corp, corp2 = config.upstream_proxies
    assert corp == UpstreamProxy("corp", "http://alice@proxy.corp:3128", "CORP_PW", True,
                                 BreakerSettings(failure_threshold=4, recovery_seconds=5),
                                 RetrySettings(initial_delay=0.25, max_attempts=3))
    assert corp2.enabled is False and corp2.breaker == BreakerSettings(failure_threshold=4)
    profile = config.profiles[0]
    assert profile.upstream_proxy == ("corp-2", "http://p.corp:8080", "env")
    assert profile.ca_bundle == str(ca.pem) and profile.client_cert is None
    assert config.warnings == ()


def test_bad_urls_and_schemes_are_errors_with_line_and_key(tmp_path: Path) -> None:
    found = problems(tmp_path, """
        [network]
        upstream_proxy = ["http://ok.corp:1", "socks4://old.corp:1080"]

        [[upstream_proxies]]
        name = "a"
        url = "ftp://files.corp"

        [[upstream_proxies]]
        name = "b"
        url = "http://"

        [[upstream_proxies]]
        name = "c"
        url = "proxy.corp:3128"

        [[upstream_proxies]]
        name = "d"
        url = "http://proxy.corp:3128/path?x=1"

        [[upstream_proxies]]
        name = "e"
        url = "http://proxy.corp:99999"
        """ + PROFILE)
    assert found == [
        "2: network.upstream_proxy: item 1 scheme socks4 is not supported (socks5 or socks5h):"
        " a proxy URL starts with http://, https://, socks5:// or socks5h://",
        "6: upstream_proxies.a.url: scheme ftp is not supported: a proxy URL starts with "
        "http://, https://, socks5:// or socks5h://",
        "10: upstream_proxies.b.url: names no host (http://proxy.corp:3128)",
        "14: upstream_proxies.c.url: must start with http://, https://, socks5:// or socks5h://",
        "18: upstream_proxies.d.url: must be scheme://[user@]host:port, without a path or query",
        "22: upstream_proxies.e.url: is not a valid URL (look at the host and port)",
    ]


def test_unknown_names_get_a_did_you_mean_on_their_own_line(tmp_path: Path) -> None:
    found = problems(tmp_path, """
        [network]
        upstream_proxy = [
            "corp",
            "crop-2",
        ]

        [[upstream_proxies]]
        name = "corp-2"
        url = "http://p.corp:1"
        """ + PROFILE + 'upstream_proxy = "enf"\n')
    assert found == [
        '3: network.upstream_proxy: unknown proxy "corp" (did you mean "corp-2"?)',
        '4: network.upstream_proxy: unknown proxy "crop-2" (did you mean "corp-2"?)',
        '16: profiles.claude.upstream_proxy: unknown proxy "enf" (did you mean "env"?)',
    ]


def test_route_entries_that_are_no_url_nor_name(tmp_path: Path) -> None:
    found = problems(tmp_path, """
        [network]
        upstream_proxy = "alice:pw@proxy.corp:3128"
        [[upstream_proxies]]
        name = "x"
        url = "http://x.corp:1"
        """ + PROFILE + 'upstream_proxy = ["x", "x"]\n'
                        '[[profiles]]\nname = "b"\nprovider_type = "DirectAnthropic"\n'
                        'base_url = "https://b.example"\napi_key_env = "FAKE_KEY"\n'
                        'upstream_proxy = ["x", "direct"]\n'
                        '[[profiles]]\nname = "c"\nprovider_type = "DirectAnthropic"\n'
                        'base_url = "https://c.example"\napi_key_env = "FAKE_KEY"\n'
                        'upstream_proxy = 3\n')
    assert found[0] == ('2: network.upstream_proxy: is neither "env", "direct", a proxy URL '
                        "(http://, https://, socks5://, socks5h://) nor a proxy's name")
    assert found[1] == '12: profiles.claude.upstream_proxy: "x" is listed twice'
    assert found[2].startswith('18: profiles.b.upstream_proxy: "direct" cannot be listed with '
                               "proxies: a proxy that is out is never replaced")
    assert found[3].startswith("24: profiles.c.upstream_proxy: must be \"env\", \"direct\"")
    assert "pw" not in "\n".join(found)


def test_names_are_unique_across_profiles_pools_and_proxies(tmp_path: Path) -> None:
    found = problems(tmp_path, """
        [[upstream_proxies]]
        name = "claude"
        url = "http://p.corp:1"

        [[upstream_proxies]]
        name = "team"
        url = "http://p.corp:2"

        [[upstream_proxies]]
        name = "team"
        url = "http://p.corp:3"
        """ + PROFILE + '[[profiles]]\nname = "team"\nmembers = ["claude"]\n')
    assert found == [
        '10: upstream_proxies.team.name: duplicate name "team": an upstream proxy has it '
        "(first defined on line 6)",
        '14: profiles.claude.name: duplicate name "claude": an upstream proxy has it '
        "(first defined on line 2)",
        '19: profiles.team.name: duplicate name "team": an upstream proxy has it '
        "(first defined on line 6)",
    ]


def test_env_direct_and_variable_names_are_no_proxy_names(tmp_path: Path) -> None:
    found = problems(tmp_path, """
        [[upstream_proxies]]
        name = "env"
        url = "http://p.corp:1"

        [[upstream_proxies]]
        name = "direct"
        url = "http://p.corp:2"

        [[upstream_proxies]]
        name = "HTTPS_PROXY"
        url = "http://p.corp:3"

        [[upstream_proxies]]
        url = "http://p.corp:4"
        nmae = "x"
        """ + PROFILE)
    assert found[0].startswith('2: upstream_proxies.env.name: "env" means the environment in '
                               "upstream_proxy: a proxy needs another name")
    assert found[1].startswith('6: upstream_proxies.direct.name: "direct" means no proxy')
    assert found[2].startswith('10: upstream_proxies.HTTPS_PROXY.name: "HTTPS_PROXY" names the '
                               "environment's proxy")
    assert found[3:] == ["13: upstream_proxies[3].name: missing required key",
                         '15: upstream_proxies[3].nmae: unknown key (did you mean "name"?)']
    assert problems(tmp_path, "upstream_proxies = 3\n" + PROFILE) == [
        "1: upstream_proxies: must be an array of tables: write [[upstream_proxies]]"]
    assert problems(tmp_path, '[network]\nupstream_proxies = "x"\n' + PROFILE) == [
        '2: network.upstream_proxies: unknown key (did you mean "upstream_proxy"?)']


def test_unreadable_files_are_named_with_the_os_reason(tmp_path: Path) -> None:
    (tmp_path / "locked").mkdir()
    junk = tmp_path / "junk.pem"
    junk.write_text("hello\n")
    found = problems(tmp_path, f"""
        [network]
        ca_bundle = "{tmp_path}/missing.pem"
        client_cert = "{tmp_path}/locked"
        {PROFILE}
        ca_bundle = "{junk}"
        """)
    assert found == [
        f"2: network.ca_bundle: cannot read {tmp_path}/missing.pem: No such file or directory",
        f"3: network.client_cert: cannot read {tmp_path}/locked: Is a directory",
        f"11: profiles.claude.ca_bundle: {junk} holds no PEM certificate (no certificate or crl "
        "found)",
    ]


def test_home_is_expanded_from_the_environment(tmp_path: Path) -> None:
    ca = CA(tmp_path, "Corp CA")
    text = f'[network]\nca_bundle = "~/{ca.pem.name}"\n' + PROFILE
    assert load_config(write(tmp_path, text), {**ENV, "HOME": str(tmp_path)}).network.ca_bundle \
        == f"~/{ca.pem.name}"
    assert problems(tmp_path, text, {**ENV, "HOME": str(tmp_path / "nowhere")})[0].startswith(
        f"2: network.ca_bundle: cannot read ~/{ca.pem.name}: No such file")


def test_client_key_without_client_cert_and_a_mismatched_pair(tmp_path: Path) -> None:
    ca = CA(tmp_path, "Corp CA")
    alice, bob = ca.issue("alice", server=False), ca.issue("bob", server=False)
    found = problems(tmp_path, f"""
        [network]
        client_key = "{alice.key}"
        client_key_password_env = "KEY_PW"
        {PROFILE}
        client_cert = "{alice.cert}"
        client_key = "{bob.key}"
        """)
    assert found[0] == ("2: network.client_key: client_key without client_cert (the "
                        "certificate the key belongs to)")
    assert found[1] == "3: network.client_key_password_env: client_key_password_env without " \
                       "client_cert"
    assert found[2].startswith(f"11: profiles.claude.client_cert: cannot use {alice.cert} "
                               f"with {bob.key} (")


def test_an_encrypted_key_is_checked_with_its_password(tmp_path: Path) -> None:
    ca = CA(tmp_path, "Corp CA")
    locked = ca.issue("locked", server=False, password=b"pw")
    text = (f'[network]\nclient_cert = "{locked.cert}"\nclient_key = "{locked.key}"\n'
            'client_key_password_env = "KEY_PW"\n' + PROFILE)
    assert warnings(tmp_path, text, {**ENV, "KEY_PW": "pw"}) == []
    assert warnings(tmp_path, text) == [
        "4: network.client_key_password_env: environment variable KEY_PW is not set: the key "
        "cannot be unlocked"]
    assert problems(tmp_path, text, {**ENV, "KEY_PW": "wrong"})[0].startswith(
        f"2: network.client_cert: cannot use {locked.cert} with {locked.key} (")
    # Without any password variable: an error, never a prompt on the terminal.
    bare = text.replace('client_key_password_env = "KEY_PW"\n', "")
    assert problems(tmp_path, bare)[0].startswith("2: network.client_cert: cannot use")


def test_passwords_in_urls_and_unset_password_variables_are_warnings(tmp_path: Path) -> None:
    found = warnings(tmp_path, """
        [network]
        upstream_proxy = "http://alice:hunter2@p.corp:3128"

        [[upstream_proxies]]
        name = "corp"
        url = "http://bob:hunter3@proxy.corp:3128"

        [[upstream_proxies]]
        name = "corp-2"
        url = "http://carol@proxy2.corp:3128"
        password_env = "UNSET_PW"
        """ + PROFILE)
    assert found == [
        "2: network.upstream_proxy: a password written in the URL is readable by anyone who "
        "can read this file: name an [[upstream_proxies]] entry with password_env instead",
        "6: upstream_proxies.corp.url: a password written in the URL is readable by anyone "
        "who can read this file: use password_env",
        "11: upstream_proxies.corp-2.password_env: environment variable UNSET_PW is not set: "
        "the proxy is asked without a password",
    ]
    assert "hunter" not in "\n".join(found)


def test_a_password_twice_or_without_a_user_is_an_error(tmp_path: Path) -> None:
    found = problems(tmp_path, """
        [[upstream_proxies]]
        name = "corp"
        url = "http://bob:hunter3@proxy.corp:3128"
        password_env = "CORP_PW"

        [[upstream_proxies]]
        name = "corp-2"
        url = "http://proxy2.corp:3128"
        password_env = "CORP_PW"
        """ + PROFILE)
    assert found == [
        "3: upstream_proxies.corp.url: the URL holds a password and password_env names one: "
        "keep password_env and remove it from the URL",
        "9: upstream_proxies.corp-2.password_env: the password needs a user name: write it in "
        "the url (http://alice@proxy.corp:3128)",
    ]
    assert "hunter" not in "\n".join(found)


def test_a_route_of_disabled_proxies_is_a_warning(tmp_path: Path) -> None:
    assert warnings(tmp_path, """
        [[upstream_proxies]]
        name = "corp"
        url = "http://proxy.corp:3128"
        enabled = false
        """ + PROFILE + 'upstream_proxy = "corp"\n') == [
        "11: profiles.claude.upstream_proxy: every proxy named here is disabled: nothing is "
        "sent (never directly instead)"]


def test_a_proxys_breaker_and_retry_keys_are_checked_like_a_profiles(tmp_path: Path) -> None:
    found = problems(tmp_path, """
        [retry]
        max_delay = 10
        [[upstream_proxies]]
        name = "corp"
        url = "http://proxy.corp:3128"
        failure_threshold = 0
        initial_delay = 20
        api_key_env = "X"
        """ + PROFILE)
    assert found == [
        "6: upstream_proxies.corp.failure_threshold: must be at least 1, not 0",
        "7: upstream_proxies.corp.initial_delay: max_delay (10) must not be less than "
        "initial_delay (20)",
        "8: upstream_proxies.corp.api_key_env: unknown key",
    ]


def test_an_environment_proxy_claudex_cannot_use_is_a_warning_where_env_is_read(
        tmp_path: Path) -> None:
    env = {**ENV, "HTTPS_PROXY": "socks4://old.corp:1080", "http_proxy": "http://:pw@/"}
    found = warnings(tmp_path, PROFILE, env)
    assert found == [
        "network.upstream_proxy: environment variable HTTPS_PROXY: scheme socks4 is not "
        "supported (socks5 or socks5h): a proxy URL starts with http://, https://, socks5:// "
        "or socks5h://; a request through it fails (it is never sent directly instead)",
        "network.upstream_proxy: environment variable http_proxy: names no host "
        "(http://proxy.corp:3128); a request through it fails (it is never sent directly "
        "instead)"]
    assert "pw" not in "\n".join(found)
    written = PROFILE + 'upstream_proxy = ["env"]\n'
    assert warnings(tmp_path, written, env)[0].startswith(
        "6: profiles.claude.upstream_proxy: environment variable HTTPS_PROXY:")
    assert warnings(tmp_path, '[network]\nupstream_proxy = "direct"\n' + PROFILE, env) == []


def test_pools_take_no_network_keys(tmp_path: Path) -> None:
    found = problems(tmp_path, PROFILE + '[[profiles]]\nname = "team"\nmembers = ["claude"]\n'
                     'upstream_proxy = "direct"\n')
    assert found == ["9: profiles.team.upstream_proxy: unknown key"]


@pytest.mark.parametrize("value", ['"direct"', '"env"', '["env"]', '"socks5h://s.corp:1080"',
                                   '"https://p.corp"', '["http://[::1]:3128"]'])
def test_good_route_values_load(tmp_path: Path, value: str) -> None:
    config = load_config(write(tmp_path, f"[network]\nupstream_proxy = {value}\n" + PROFILE),
                         ENV)
    assert config.network.upstream_proxy


def test_the_whole_bad_file_raises_one_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, '[network]\nupstream_proxy = "nope"\nca_bundle = 1\n'
                          + PROFILE), ENV)
    assert [issue.line for issue in caught.value.issues] == [2, 3]
