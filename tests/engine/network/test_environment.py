"""The environment's proxy for a provider's URL: which variable, curl's NO_PROXY rules, and the
loopback rule. Every test passes its own environment: the machine's never counts."""

from __future__ import annotations

import pytest

from claudex.engine.network.environment import bypasses, is_loopback, proxy_from_environment

API = "https://api.anthropic.com/v1/messages"
PLAIN = "http://llm.corp.example:8080/v1"


def test_nothing_set_means_no_proxy() -> None:
    assert proxy_from_environment(API, {}) is None
    assert proxy_from_environment(API, {"HTTPS_PROXY": "", "https_proxy": "  "}) is None


def test_https_targets_read_https_proxy_lowercase_first_then_all_proxy() -> None:
    both = {"https_proxy": "http://low:1", "HTTPS_PROXY": "http://up:2",
            "all_proxy": "http://all:3", "ALL_PROXY": "http://ALL:4"}
    assert proxy_from_environment(API, both) == ("https_proxy", "http://low:1")
    del both["https_proxy"]
    assert proxy_from_environment(API, both) == ("HTTPS_PROXY", "http://up:2")
    del both["HTTPS_PROXY"]
    assert proxy_from_environment(API, both) == ("all_proxy", "http://all:3")
    del both["all_proxy"]
    assert proxy_from_environment(API, both) == ("ALL_PROXY", "http://ALL:4")
    # An http proxy variable is not for https targets.
    assert proxy_from_environment(API, {"HTTP_PROXY": "http://p:1"}) is None


def test_http_targets_read_http_proxy_then_all_proxy() -> None:
    env = {"HTTPS_PROXY": "http://s:1", "HTTP_PROXY": "http://h:2", "ALL_PROXY": "http://a:3"}
    assert proxy_from_environment(PLAIN, env) == ("HTTP_PROXY", "http://h:2")
    assert proxy_from_environment(PLAIN, {"http_proxy": "http://h:2", "HTTP_PROXY": "x"}) == (
        "http_proxy", "http://h:2")
    assert proxy_from_environment(PLAIN, {"HTTPS_PROXY": "http://s:1", "ALL_PROXY": "socks5h://a:3"}
                                  ) == ("ALL_PROXY", "socks5h://a:3")


@pytest.mark.parametrize("value", [
    "https://proxy.corp:443",  # aiohttp's trust_env drops https:// proxies
    "socks5://proxy.corp:1080",  # and never reads socks ones
    "socks5h://proxy.corp:1080",
    "proxy.corp:3128",  # scheme-less: returned as written (resolve reads it as http://)
    "http://alice:s3cret@proxy.corp:3128",
])
def test_the_value_is_returned_as_written_whatever_its_scheme(value: str) -> None:
    assert proxy_from_environment(API, {"HTTPS_PROXY": f"  {value} "}) == ("HTTPS_PROXY", value)


@pytest.mark.parametrize("target", [
    "http://127.0.0.1:9000", "https://127.0.0.1", "http://127.8.9.10:1", "http://[::1]:8080",
    "http://localhost:4000", "http://LOCALHOST.:4000", "http://app.localhost", "http://[::ffff:127.0.0.1]:80",
])
def test_a_loopback_target_never_goes_through_an_environment_proxy(target: str) -> None:
    env = {"HTTPS_PROXY": "http://p:1", "HTTP_PROXY": "http://p:1", "ALL_PROXY": "http://p:1"}
    assert proxy_from_environment(target, env) is None


def test_loopback_words() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("[::1]") and is_loopback("a.b.localhost")
    assert not is_loopback("localhost.corp") and not is_loopback("10.0.0.1")
    assert not is_loopback("notlocalhost") and not is_loopback("::2")


def test_no_proxy_lowercase_wins_over_uppercase_as_in_curl() -> None:
    env = {"HTTPS_PROXY": "http://p:1", "no_proxy": "other.com", "NO_PROXY": "anthropic.com"}
    assert proxy_from_environment(API, env) == ("HTTPS_PROXY", "http://p:1")
    del env["no_proxy"]
    assert proxy_from_environment(API, env) is None


@pytest.mark.parametrize(("host", "no_proxy", "expected"), [
    # A name matches itself and its sub-domains, on a label boundary only.
    ("api.anthropic.com", "anthropic.com", True),
    ("anthropic.com", "anthropic.com", True),
    ("notanthropic.com", "anthropic.com", False),
    ("anthropic.com", "api.anthropic.com", False),
    # A leading dot is ignored: `.corp.com` matches corp.com itself too (curl's rule).
    ("corp.com", ".corp.com", True),
    ("a.b.corp.com", ".corp.com", True),
    # Commas and/or spaces separate; blanks around entries do not matter.
    ("x.org", "a.com, x.org", True),
    ("x.org", "a.com x.org", True),
    ("x.org", " ,a.com,,  x.org , ", True),
    # Case and a trailing dot do not matter.
    ("API.Anthropic.COM", "anthropic.com", True),
    ("api.anthropic.com.", "ANTHROPIC.com.", True),
    # `*` as the whole value: everything. Among other entries it matches nothing (curl).
    ("anything.example", "*", True),
    ("anything.example", " * ", True),
    ("anything.example", "a.com,*", False),
    # No wildcard inside names: `*.corp.com` is not a pattern in curl.
    ("x.corp.com", "*.corp.com", False),
    # A port in an entry is ignored (curl does not compare ports).
    ("llm.corp.com", "llm.corp.com:8080", True),
    # IP literals: exact, and networks in CIDR; only hosts written as addresses match them.
    ("10.1.2.3", "10.1.2.3", True),
    ("10.1.2.3", "10.1.2.4", False),
    ("10.1.2.3", "10.0.0.0/8", True),
    ("11.1.2.3", "10.0.0.0/8", False),
    ("192.168.5.5", "192.168.0.0/16,example.com", True),
    ("10.1.2.3", "10.1.2.3/32", True),
    ("2001:db8::5", "2001:db8::/32", True),
    ("[2001:db8::5]", "2001:db8::/32", True),
    ("2001:db9::5", "2001:db8::/32", False),
    ("2001:db8::5", "[2001:db8::5]", True),
    ("2001:db8::5", "2001:DB8::5", True),
    ("10.1.2.3", "10.0.0.0/8bad", False),
    # A name is never compared with an address (nothing is resolved), nor the reverse.
    ("internal.corp", "10.0.0.0/8", False),
    ("10.1.2.3", "corp.com", False),
    ("10.1.2.3", "2.3", False),
    ("", "", False),
])
def test_no_proxy_follows_curl(host: str, no_proxy: str, expected: bool) -> None:
    assert bypasses(host, no_proxy) is expected


def test_no_proxy_applies_to_the_target_of_the_url() -> None:
    env = {"HTTP_PROXY": "http://p:1", "NO_PROXY": "10.0.0.0/8, .corp.example"}
    assert proxy_from_environment("http://10.9.9.9:8000/v1", env) is None
    assert proxy_from_environment(PLAIN, env) is None
    assert proxy_from_environment("http://llm.other.example/v1", env) == ("HTTP_PROXY",
                                                                          "http://p:1")
    v6 = {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "fd00::/8"}
    assert proxy_from_environment("https://[fd00::1]:8443/v1", v6) is None
    assert proxy_from_environment("https://[fe80::1]:8443/v1", v6) == ("HTTPS_PROXY",
                                                                       "http://p:1")
