"""Config loading and validation: typed results, and every problem reported with line and key."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import platformdirs
import pytest
import tomlkit
from hypothesis import given, settings
from hypothesis import strategies as st

from claudex.config import (
    BreakerSettings,
    ConfigError,
    ConfigIssue,
    RetrySettings,
    check_config,
    default_config_path,
    load_config,
    parse_config,
)
from claudex.config.loader import _PROFILE_KEYS, _PROXY_KEYS, _KeyLines, _Scanner
from claudex.config.paths import example_config_path
from tests.paths import EXAMPLE


def toml(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def issues_of(text: str, env: dict[str, str] | None = None) -> list[ConfigIssue]:
    with pytest.raises(ConfigError) as caught:
        parse_config(toml(text), "t.toml", env={} if env is None else env)
    return caught.value.issues


def only_issue(text: str) -> ConfigIssue:
    issues = issues_of(text)
    assert len(issues) == 1, [str(issue) for issue in issues]
    return issues[0]


# --- files that must load -------------------------------------------------------------------


def test_example_file_loads_with_design_defaults() -> None:
    config = parse_config(EXAMPLE.read_text(), str(EXAMPLE), env={"HOME": "/nonexistent"})

    assert config.proxy.host == "127.0.0.1"
    assert config.proxy.port == 13456
    assert config.breaker == BreakerSettings()
    assert config.retry == RetrySettings()
    assert config.health.enabled and config.health.interval_seconds == 30
    assert [p.name for p in config.profiles] == ["claude", "grok", "deepseek", "claude-oauth",
                                                 "codex"]
    assert config.default_profile is not None and config.default_profile.name == "claude"

    claude, grok, deepseek, oauth, codex = config.profiles
    assert (codex.provider_type, codex.protocol, codex.oauth_provider, codex.enabled) == (
        "OpenAIResponses", "responses", "codex", False)
    assert codex.problem == "credentials file ~/.codex/auth.json not found"
    assert claude.auth_type == "passthrough" and claude.problem is None
    assert claude.backup_providers == ("grok", "deepseek")
    assert grok.problem == "environment variable XAI_API_KEY is not set"
    assert deepseek.base_url == "https://api.deepseek.com/v1"
    assert deepseek.problem == "environment variable DEEPSEEK_API_KEY is not set"
    assert oauth.auth_type == "oauth" and oauth.oauth_provider == "claude"
    assert oauth.problem == "credentials file ~/.claude/.credentials.json not found"
    # grok and deepseek back each other up, and the example follows its own advice.
    assert grok.backup_providers == ("deepseek",) and deepseek.backup_providers == ("grok",)
    assert config.warnings == ()


def test_the_packaged_example_is_the_example() -> None:
    """A pip-installed claudex has no checkout at hand: the same file ships in the package."""
    packaged = example_config_path()
    assert packaged.is_file() and packaged != EXAMPLE
    assert packaged.read_bytes() == EXAMPLE.read_bytes()


def test_example_file_documents_only_real_keys() -> None:
    """Every key the example shows, written or commented out (`# key = ...`), is one the loader
    accepts in its table; the tables shown only commented out (`# [fleet]`) load as written
    once their lines are uncommented."""
    from claudex.config._checks import _POOL_KEYS, _TOP_LEVEL_KEYS
    from claudex.docs_gen.config_page import SECTIONS
    from claudex.docs_gen.example_file import parse

    text = EXAMPLE.read_text()
    shown = parse(text).values
    allowed: dict[str, set[str]] = {s.name: set(s.keys) for s in SECTIONS}
    allowed |= {"profiles": set(_PROFILE_KEYS) | set(_POOL_KEYS), "": set(_TOP_LEVEL_KEYS)}
    assert any(table == "profiles" and key == "token_command" for table, key in shown), (
        "the example should show optional keys")
    unknown = [f"{table}.{key}" for table, key in shown
               if table != "model_aliases" and key not in allowed[table]]
    assert not unknown
    commented = re.findall(r"^# \[([a-z_]+)\]$", text, flags=re.MULTILINE)
    assert commented == ["fleet", "telemetry", "model_aliases", "routes", "router", "network"]
    # [network] names files of the reader's machine (ca_bundle, client_cert), which a check
    # reads: its keys are accepted (above) and checked in tests/config/test_network_config.py.
    tables = "".join(f"[{name}]\n" + "".join(f"{key} = {value}\n" for (table, key), value
                                             in shown.items() if table == name)
                     for name in commented if name != "network")
    config = parse_config(text + tables, env={})  # the routes name the example's profiles
    assert config.routes.configured and config.router.active
    assert config.model_aliases == {"fast": "claude-haiku-4-5"}
    assert config.fleet.redis_url == "redis://127.0.0.1:6379/0"
    assert config.telemetry.otlp_endpoint == "http://127.0.0.1:4318"


@pytest.mark.parametrize(("value", "message"), [
    ('"ftp://127.0.0.1:4318"', 'must use http or https, not "ftp"'),
    ('"http://user:secret@127.0.0.1:4318"', "must not contain a user name or password"),
    ("4318", "must be a string, not an integer"),
])
def test_telemetry_endpoint_problems_name_file_line_and_key(value: str, message: str) -> None:
    text = f"[proxy]\nport = 13456\n\n[telemetry]\notlp_endpoint = {value}\n"
    with pytest.raises(ConfigError) as caught:
        parse_config(text, env={})
    [issue] = caught.value.issues
    assert (issue.line, issue.key) == (5, "telemetry.otlp_endpoint")
    assert message in issue.message and "secret" not in str(issue)


def test_an_unknown_telemetry_key_is_named() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config("[telemetry]\notlp_endpiont = \"http://127.0.0.1:4318\"\n", env={})
    assert "telemetry.otlp_endpiont" in str(caught.value)


def test_example_file_with_keys_set_has_no_problems() -> None:
    env = {"XAI_API_KEY": "xai-secret", "DEEPSEEK_API_KEY": "sk-secret", "HOME": "/nonexistent"}
    config = load_config(EXAMPLE, env=env)
    assert config.path == EXAMPLE
    assert [p.name for p in config.profiles if p.usable] == ["claude", "grok", "deepseek"]


def test_claudex_style_profiles_load_as_is() -> None:
    config = parse_config(
        toml(
            """
            [[profiles]]
            name = "grok"
            provider_type = "OpenAICompatible"
            base_url = "https://api.x.ai/v1"
            api_key = "xai-..."
            default_model = "grok-3-beta"
            backup_providers = ["deepseek", "chatgpt"]   # failover chain

            [[profiles]]
            name = "deepseek"
            provider_type = "OpenAICompatible"
            base_url = "https://api.deepseek.com"
            api_key = ""
            api_key_keyring = "deepseek-api-key"
            default_model = "deepseek-chat"
            priority = 100
            enabled = true
            extra_env = { FOO = "bar" }
            custom_headers = {}
            strip_params = "auto"
            query_params = {}
            models = { haiku = "deepseek-chat", sonnet = "deepseek-chat" }

            [[profiles]]
            name = "chatgpt"
            provider_type = "OpenAICompatible"
            base_url = "https://chatgpt.com/backend-api/codex/"
            default_model = "gpt-5"
            auth_type = "oauth"
            oauth_provider = "chatgpt"
            """
        ),
        env={"HOME": "/nonexistent"},
    )
    grok, deepseek, chatgpt = config.profiles
    assert grok.api_key == "xai-..." and grok.problem is None
    assert grok.backup_providers == ("deepseek", "chatgpt")
    assert grok.protocol == "openai"
    assert deepseek.api_key == ""
    assert deepseek.problem is not None and "api_key_keyring" in deepseek.problem
    assert deepseek.models == {"haiku": "deepseek-chat", "sonnet": "deepseek-chat"}
    assert chatgpt.oauth_provider == "codex"
    assert chatgpt.base_url == "https://chatgpt.com/backend-api/codex"
    assert chatgpt.problem == "credentials file ~/.codex/auth.json not found"


def test_per_profile_overrides_merge_over_global_sections() -> None:
    config = parse_config(
        toml(
            """
            [proxy]
            connect_timeout = 5
            read_timeout = 300

            [breaker]
            failure_threshold = 4
            recovery_seconds = 20

            [retry]
            max_attempts = 3

            [[profiles]]
            name = "slow"
            provider_type = "DirectAnthropic"
            base_url = "https://slow.test"
            auth_type = "passthrough"
            failure_threshold = 7
            max_recovery_seconds = 600
            jitter = "none"
            read_timeout = 900

            [[profiles]]
            name = "plain"
            provider_type = "DirectAnthropic"
            base_url = "https://plain.test"
            auth_type = "passthrough"
            """
        ),
        env={},
    )
    slow, plain = config.profiles
    assert config.breaker == BreakerSettings(failure_threshold=4, recovery_seconds=20.0)
    assert slow.breaker == BreakerSettings(
        failure_threshold=7, recovery_seconds=20.0, max_recovery_seconds=600.0
    )
    assert slow.retry == RetrySettings(max_attempts=3, jitter="none")
    assert (slow.connect_timeout, slow.read_timeout) == (5.0, 900.0)
    assert plain.breaker == config.breaker
    assert plain.retry == config.retry
    assert (plain.connect_timeout, plain.read_timeout) == (5.0, 300.0)
    # Integers were accepted where numbers are expected, and stored as floats.
    assert isinstance(config.breaker.recovery_seconds, float)
    assert isinstance(config.proxy.connect_timeout, float)


def test_empty_file_gives_defaults() -> None:
    config = parse_config("", env={})
    assert config.profiles == ()
    assert config.proxy.port == 13456
    assert config.path is None


# --- each problem, with its key and line ----------------------------------------------------

PROBLEMS = [
    (
        "unknown provider_type",
        """
        [[profiles]]
        name = "a"
        provider_type = "OpenAI"
        base_url = "https://a.test/v1"
        """,
        "profiles.a.provider_type",
        3,
        'expected one of "DirectAnthropic", "OpenAICompatible"',
    ),
    (
        "unknown auth_type",
        """
        [[profiles]]
        name = "a"
        provider_type = "OpenAICompatible"
        base_url = "https://a.test/v1"
        auth_type = "bearer"
        """,
        "profiles.a.auth_type",
        5,
        'unknown auth_type "bearer"',
    ),
    (
        "unknown oauth_provider",
        """
        [[profiles]]
        name = "a"
        provider_type = "DirectAnthropic"
        base_url = "https://a.test"
        auth_type = "oauth"
        oauth_provider = "azure"
        """,
        "profiles.a.oauth_provider",
        6,
        'unknown oauth_provider "azure"',
    ),
    (
        "URL without scheme",
        """
        [[profiles]]
        name = "a"
        provider_type = "OpenAICompatible"
        base_url = "api.x.ai/v1"
        """,
        "profiles.a.base_url",
        4,
        "must start with http:// or https://",
    ),
    (
        "URL with another scheme",
        """
        [[profiles]]
        name = "a"
        provider_type = "OpenAICompatible"
        base_url = "ftp://a.test/v1"
        """,
        "profiles.a.base_url",
        4,
        "must use http or https",
    ),
    (
        "URL without host",
        """
        [[profiles]]
        name = "a"
        provider_type = "OpenAICompatible"
        base_url = "https:///v1"
        """,
        "profiles.a.base_url",
        4,
        "with a host",
    ),
    (
        "missing base_url: reported at the table header",
        """
        # comment
        [[profiles]]
        name = "a"
        provider_type = "OpenAICompatible"
        """,
        "profiles.a.base_url",
        2,
        "missing required key",
    ),
    (
        "missing name: the profile is named by position",
        """
        [[profiles]]
        provider_type = "OpenAICompatible"
        base_url = "https://a.test/v1"
        """,
        "profiles[0].name",
        1,
        "missing required key",
    ),
    (
        "unknown backup, in a multi-line array",
        """
        [[profiles]]
        name = "a"
        provider_type = "OpenAICompatible"
        base_url = "https://a.test/v1"
        backup_providers = [
            "nobody",
        ]
        """,
        "profiles.a.backup_providers",
        6,
        'unknown profile "nobody"',
    ),
    (
        "a profile listing itself",
        """
        [[profiles]]
        name = "a"
        provider_type = "OpenAICompatible"
        base_url = "https://a.test/v1"
        backup_providers = ["a"]
        """,
        "profiles.a.backup_providers",
        5,
        "cannot list itself",
    ),
    (
        "unknown key with a suggestion",
        """
        [[profiles]]
        name = "a"
        provider_type = "OpenAICompatible"
        base_url = "https://a.test/v1"
        backup_provider = []
        """,
        "profiles.a.backup_provider",
        5,
        'unknown key (did you mean "backup_providers"?)',
    ),
    (
        "unknown section",
        """
        [proxi]
        port = 1
        """,
        "proxi",
        1,
        'did you mean "proxy"?',
    ),
    (
        "unknown key in a section",
        """
        [breaker]
        failure_treshold = 3
        """,
        "breaker.failure_treshold",
        2,
        'did you mean "failure_threshold"?',
    ),
    (
        "both api_key and api_key_env",
        """
        [[profiles]]
        name = "a"
        provider_type = "OpenAICompatible"
        base_url = "https://a.test/v1"
        api_key_env = "A_KEY"
        api_key = "sk-1"
        """,
        "profiles.a.api_key",
        6,
        "not both",
    ),
    (
        "oauth without oauth_provider or token_command",
        """
        [[profiles]]
        name = "a"
        provider_type = "DirectAnthropic"
        base_url = "https://a.test"
        auth_type = "oauth"
        """,
        "profiles.a.auth_type",
        5,
        "needs oauth_provider",
    ),
    (
        "default_profile naming an unknown profile",
        """
        [proxy]
        default_profile = "grok"
        """,
        "proxy.default_profile",
        2,
        'unknown profile "grok"',
    ),
    (
        "non-loopback host without auth_token_env",
        """
        [proxy]
        port = 8080
        host = "0.0.0.0"
        """,
        "proxy.host",
        3,
        "requires auth_token_env",
    ),
    (
        "port out of range",
        """
        [proxy]
        port = 70000
        """,
        "proxy.port",
        2,
        "must be from 1 to 65535, not 70000",
    ),
    ("port as a string", '[proxy]\nport = "13456"\n', "proxy.port", 2, "must be an integer"),
    ("port as a float", "[proxy]\nport = 13456.0\n", "proxy.port", 2, "not a float"),
    ("port as a boolean", "[proxy]\nport = true\n", "proxy.port", 2, "not a boolean"),
    (
        "failure_threshold below 1",
        "[breaker]\nfailure_threshold = 0\n",
        "breaker.failure_threshold",
        2,
        "at least 1",
    ),
    (
        "half_open_probes below 1",
        "[breaker]\nhalf_open_probes = 0\n",
        "breaker.half_open_probes",
        2,
        "at least 1",
    ),
    (
        "negative delay",
        "[retry]\ninitial_delay = -0.5\n",
        "retry.initial_delay",
        2,
        "at least 0",
    ),
    (
        "a boolean where a number is expected",
        "[retry]\nmax_delay = false\n",
        "retry.max_delay",
        2,
        "must be a number, not a boolean",
    ),
    ("unknown jitter", '[retry]\njitter = "half"\n', "retry.jitter", 2, '"full", "none"'),
    (
        "max_attempts as a dotted key at the top level",
        "# settings\nretry.max_attempts = 0\n",
        "retry.max_attempts",
        2,
        "at least 1",
    ),
    (
        "max_recovery_seconds below recovery_seconds",
        "[breaker]\nrecovery_seconds = 400\n",
        "breaker.recovery_seconds",
        2,
        "must not be less than recovery_seconds",
    ),
    (
        "non-finite number",
        "[health]\ninterval_seconds = inf\n",
        "health.interval_seconds",
        2,
        "finite",
    ),
    (
        "backup_providers not an array",
        """
        [[profiles]]
        name = "a"
        provider_type = "OpenAICompatible"
        base_url = "https://a.test/v1"
        backup_providers = "b"
        """,
        "profiles.a.backup_providers",
        5,
        "must be an array of strings, not a string",
    ),
    (
        "backup_providers with a non-string item",
        """
        [[profiles]]
        name = "a"
        provider_type = "OpenAICompatible"
        base_url = "https://a.test/v1"
        backup_providers = [
          3,
        ]
        """,
        "profiles.a.backup_providers",
        6,
        "item 0 is an integer",
    ),
    (
        "models with a non-string value, in an inline table",
        """
        [[profiles]]
        name = "a"
        provider_type = "OpenAICompatible"
        base_url = "https://a.test/v1"
        models = { haiku = "x", opus = 4 }
        """,
        "profiles.a.models",
        5,
        '"opus" is an integer',
    ),
    (
        "custom_headers in a sub-table",
        """
        [[profiles]]
        name = "a"
        provider_type = "OpenAICompatible"
        base_url = "https://a.test/v1"

        [profiles.custom_headers]
        X-Title = "claudex"
        X-Count = 1
        """,
        "profiles.a.custom_headers",
        8,
        '"X-Count" is an integer',
    ),
    (
        "profiles as a plain table",
        """
        [profiles]
        name = "a"
        """,
        "profiles",
        1,
        "write [[profiles]]",
    ),
    (
        "a profile in an inline array of tables",
        """
        profiles = [
          { name = "a", provider_type = "OpenAICompatible", base_url = "https://a.test/v1" },
          { name = "b", provider_type = "Nope", base_url = "https://b.test/v1" },
        ]
        """,
        "profiles.b.provider_type",
        3,
        'unknown provider_type "Nope"',
    ),
    (
        "profile name with a space",
        """
        [[profiles]]
        name = "my grok"
        provider_type = "OpenAICompatible"
        base_url = "https://a.test/v1"
        """,
        'profiles."my grok".name',
        2,
        "may only contain",
    ),
]


@pytest.mark.parametrize(
    ("text", "key", "line", "fragment"),
    [case[1:] for case in PROBLEMS],
    ids=[case[0] for case in PROBLEMS],
)
def test_problem_is_reported_with_key_and_line(
    text: str, key: str, line: int, fragment: str
) -> None:
    issue = only_issue(text)
    assert (issue.key, issue.line) == (key, line), str(issue)
    assert fragment in issue.message
    assert issue.file == "t.toml"


def test_duplicate_name_points_at_the_second_and_names_the_first() -> None:
    issue = only_issue(
        """
        [[profiles]]
        name = "a"
        provider_type = "OpenAICompatible"
        base_url = "https://a.test/v1"

        [[profiles]]
        name = "a"
        provider_type = "OpenAICompatible"
        base_url = "https://b.test/v1"
        """
    )
    assert (issue.key, issue.line) == ("profiles.a.name", 7)
    assert issue.message == 'duplicate profile name "a" (first defined on line 2)'


def test_mutual_and_circular_backups_are_allowed() -> None:
    # Chains are not transitive (a request never tries a backup's backups): no loop is possible.
    profiles = [("a", '["b", "c"]'), ("b", '["a"]'), ("c", '["a", "b"]')]
    text = "".join(
        f'[[profiles]]\nname = "{name}"\nprovider_type = "OpenAICompatible"\n'
        f'base_url = "https://{name}.test/v1"\nbackup_providers = {backups}\n'
        for name, backups in profiles
    )
    config = parse_config(text, env={})
    assert [p.backup_providers for p in config.profiles] == [("b", "c"), ("a",), ("a", "b")]


def test_a_profile_listing_itself_is_the_only_backup_error() -> None:
    issue = only_issue(
        """
        [[profiles]]
        name = "a"
        provider_type = "OpenAICompatible"
        base_url = "https://a.test/v1"
        backup_providers = [
            "b",
            "a",
        ]

        [[profiles]]
        name = "b"
        provider_type = "OpenAICompatible"
        base_url = "https://b.test/v1"
        backup_providers = ["a"]
        """
    )
    assert (issue.file, issue.line, issue.key) == ("t.toml", 7, "profiles.a.backup_providers")
    assert issue.message == "a profile cannot list itself as a backup"


def test_chains_that_merge_are_not_cycles() -> None:
    # a -> b, a -> c, b -> c: a diamond, no loop.
    text = "".join(
        f'[[profiles]]\nname = "{name}"\nprovider_type = "OpenAICompatible"\n'
        f'base_url = "https://{name}.test/v1"\nauth_type = "passthrough"\n'
        f"backup_providers = {backups}\n"
        for name, backups in [("a", '["b", "c"]'), ("b", '["c"]'), ("c", "[]")]
    )
    assert len(parse_config(text, env={}).profiles) == 3


def test_every_problem_in_a_file_is_reported_in_line_order() -> None:
    issues = issues_of(
        """
        [proxy]
        host = "10.0.0.1"
        port = 0

        [retry]
        jitter = "some"

        [[profiles]]
        name = "grok"
        provider_type = "OpenAI"
        base_url = "api.x.ai"
        backup_providers = ["deepseek", "nobody"]
        enabled = "yes"

        [[profiles]]
        name = "deepseek"
        provider_type = "OpenAICompatible"
        base_url = "https://api.deepseek.com/v1"
        backup_providers = ["grok"]
        """
    )
    assert [(issue.line, issue.key) for issue in issues] == [
        (2, "proxy.host"),
        (3, "proxy.port"),
        (6, "retry.jitter"),
        (10, "profiles.grok.provider_type"),
        (11, "profiles.grok.base_url"),
        (12, "profiles.grok.backup_providers"),  # "nobody"; grok <-> deepseek is fine
        (13, "profiles.grok.enabled"),
    ]
    assert [issue.message for issue in issues if issue.line == 12] == ['unknown profile "nobody"']


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_hosts_need_no_token(host: str) -> None:
    assert parse_config(f'[proxy]\nhost = "{host}"\n', env={}).proxy.host == host


def test_non_loopback_host_with_token_env_is_accepted() -> None:
    config = parse_config('[proxy]\nhost = "0.0.0.0"\nauth_token_env = "CLAUDEX_TOKEN"\n', env={})
    assert config.proxy.auth_token_env == "CLAUDEX_TOKEN"


def test_syntax_error_gives_the_line() -> None:
    issue = only_issue(
        """
        [proxy]
        port = 13456
        host =
        """
    )
    assert (issue.key, issue.line) == ("syntax", 3)
    assert "column" in issue.message


def test_syntax_error_at_end_of_file() -> None:
    issue = only_issue('[proxy]\nhost = "127.0.0.1')
    assert issue.key == "syntax"
    assert issue.line == 2


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("a = " + "[" * 5000 + "]" * 5000, 1, "arrays or tables are nested too deeply"),
        ("# deep\n[proxy]\nx = [\n" + "[\n" * 5000 + "]" * 5000 + "]\n", 103,
         "arrays or tables are nested too deeply"),
        ("port = " + "9" * 5000, 1, "a number is too long to read"),
        ("[proxy]\n\nport = " + "9" * 5000 + "\n", 3, "a number is too long to read"),
    ],
    ids=["nested-one-line", "nested-many-lines", "long-number", "long-number-line-3"],
)
def test_pathological_text_is_an_issue_on_its_line(text: str, line: int, message: str) -> None:
    assert issues_of(text) == [ConfigIssue("t.toml", line, "syntax", message)]


def test_huge_number_is_not_printed() -> None:
    issue = only_issue("[proxy]\nport = 99999999999999999999999\n")
    assert issue.message == "must be from 1 to 65535, not a huge number"


def test_line_numbers_with_crlf_and_multi_line_strings() -> None:
    text = (
        '[[profiles]]\r\nname = "a"\r\nprovider_type = "OpenAICompatible"\r\n'
        'base_url = "https://a.test/v1"\r\ntoken_command = """\r\nline one\r\n'
        'base_url = "x"\r\n"""\r\nmax_tokens = 0\r\n'
    )
    issue = only_issue(text)
    assert (issue.key, issue.line) == ("profiles.a.max_tokens", 9)


def test_secret_values_are_never_echoed() -> None:
    issues = issues_of(
        """
        [[profiles]]
        name = "a"
        provider_type = "OpenAICompatible"
        base_url = "https://user:hunter2@a.test/v1"
        api_key_env = "sk-live-abcdef1234567890"
        custom_headers = { "X-Secret" = "tok\\nen-hunter2" }
        """
    )
    assert [issue.key for issue in issues] == [
        "profiles.a.base_url",
        "profiles.a.api_key_env",
        "profiles.a.custom_headers",
    ]
    for issue in issues:
        assert "hunter2" not in str(issue)
        assert "abcdef" not in str(issue)


def test_issue_str_is_file_line_key_message() -> None:
    issue = only_issue("[proxy]\nport = 0\n")
    assert str(issue) == "t.toml:2: proxy.port: must be from 1 to 65535, not 0"
    assert str(ConfigIssue("f.toml", None, "file", "file not found")) == (
        "f.toml: file: file not found"
    )


# --- secrets: a missing one marks the profile, never fails the load -------------------------

GROK = """
[[profiles]]
name = "grok"
provider_type = "OpenAICompatible"
base_url = "https://api.x.ai/v1"
api_key_env = "XAI_API_KEY"
"""


def test_unset_env_var_marks_the_profile_misconfigured() -> None:
    (grok,) = parse_config(GROK, env={}).profiles
    assert grok.problem == "environment variable XAI_API_KEY is not set"
    assert not grok.usable


def test_empty_env_var_marks_the_profile_misconfigured() -> None:
    (grok,) = parse_config(GROK, env={"XAI_API_KEY": " "}).profiles
    assert grok.problem == "environment variable XAI_API_KEY is empty"


def test_set_env_var_makes_the_profile_usable() -> None:
    (grok,) = parse_config(GROK, env={"XAI_API_KEY": "xai-1234"}).profiles
    assert grok.problem is None and grok.usable
    assert grok.api_key is None  # the key is read later, by the engine


def test_env_defaults_to_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAI_API_KEY", "xai-1234")
    (grok,) = parse_config(GROK).profiles
    assert grok.problem is None


def test_profile_without_any_key_is_misconfigured() -> None:
    text = GROK.replace('api_key_env = "XAI_API_KEY"\n', "")
    (grok,) = parse_config(text, env={}).profiles
    assert grok.problem == "no API key configured (set api_key_env)"


@pytest.mark.parametrize(
    ("provider", "default_path"),
    [("claude", "~/.claude/.credentials.json"), ("codex", "~/.codex/auth.json")],
)
def test_oauth_profile_needs_its_credentials_file(
    tmp_path: Path, provider: str, default_path: str
) -> None:
    text = toml(
        f"""
        [[profiles]]
        name = "sub"
        provider_type = "DirectAnthropic"
        base_url = "https://api.anthropic.com"
        auth_type = "oauth"
        oauth_provider = "{provider}"
        """
    )
    env = {"HOME": str(tmp_path)}
    (missing,) = parse_config(text, env=env).profiles
    assert missing.problem == f"credentials file {default_path} not found"

    credentials = tmp_path / default_path.removeprefix("~/")
    credentials.parent.mkdir(parents=True)
    credentials.write_text("{}")
    (present,) = parse_config(text, env=env).profiles
    assert present.problem is None


def test_oauth_credentials_file_setting_is_used(tmp_path: Path) -> None:
    credentials = tmp_path / "creds.json"
    text = toml(
        f"""
        [[profiles]]
        name = "sub"
        provider_type = "DirectAnthropic"
        base_url = "https://api.anthropic.com"
        auth_type = "oauth"
        oauth_provider = "claude"
        credentials_file = "{credentials}"
        """
    )
    (missing,) = parse_config(text, env={}).profiles
    assert missing.problem == f"credentials file {credentials} not found"
    credentials.write_text("{}")
    assert parse_config(text, env={}).profiles[0].problem is None


@pytest.mark.parametrize(
    "auth_lines",
    [
        'auth_type = "passthrough"',
        'token_command = "pass show llm/grok"',
        'auth_type = "oauth"\ntoken_command = "print-token"',
    ],
)
def test_passthrough_and_token_command_profiles_are_not_checked(auth_lines: str) -> None:
    text = (
        '[[profiles]]\nname = "a"\nprovider_type = "DirectAnthropic"\n'
        f'base_url = "https://a.test"\n{auth_lines}\n'
    )
    (profile,) = parse_config(text, env={"HOME": "/nonexistent"}).profiles
    assert profile.problem is None


# --- files and paths ------------------------------------------------------------------------


def test_load_config_sets_path_and_check_config_is_quiet(tmp_path: Path) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text(GROK)
    assert load_config(path, env={}).path == path
    assert load_config(str(path), env={}).path == path
    assert check_config(path, env={}) == []


def test_check_config_lists_the_issues(tmp_path: Path) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text("[proxy]\nport = 0\n")
    (issue,) = check_config(path)
    assert (issue.file, issue.line, issue.key) == (str(path), 2, "proxy.port")


def test_missing_file_is_one_issue(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.issues == [ConfigIssue(str(path), None, "file", "file not found")]
    assert check_config(path) == caught.value.issues


def test_unreadable_file_is_one_issue(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)  # a directory
    (issue,) = caught.value.issues
    assert issue.key == "file" and issue.message.startswith("cannot read")


def test_non_utf8_file_reports_the_line(tmp_path: Path) -> None:
    path = tmp_path / "profiles.toml"
    path.write_bytes(b'[proxy]\nhost = "\xff"\n')
    (issue,) = check_config(path)
    assert (issue.line, issue.key, issue.message) == (2, "file", "not valid UTF-8 text")


def test_byte_order_mark_is_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "profiles.toml"
    path.write_bytes(b"\xef\xbb\xbf[proxy]\nport = 9000\n")
    assert load_config(path).proxy.port == 9000


def test_default_config_path_prefers_the_environment_variable(tmp_path: Path) -> None:
    chosen = tmp_path / "mine.toml"
    assert default_config_path({"CLAUDEX_CONFIG": str(chosen)}) == chosen
    fallback = platformdirs.user_config_path("claudex") / "profiles.toml"
    assert default_config_path({}) == fallback
    assert default_config_path({"CLAUDEX_CONFIG": "  "}) == fallback


def test_default_config_path_reads_the_process_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CLAUDEX_CONFIG", str(tmp_path / "env.toml"))
    assert default_config_path() == tmp_path / "env.toml"


# --- properties -----------------------------------------------------------------------------


def _accepts_or_reports(text: str) -> None:
    try:
        parse_config(text, "t.toml", env={})
    except ConfigError as error:
        assert error.issues
        last_line = text.count("\n") + 1
        for issue in error.issues:
            assert issue.line is None or 1 <= issue.line <= last_line


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_arbitrary_text_never_raises_anything_but_config_error(text: str) -> None:
    _accepts_or_reports(text)


_PROFILE_KEY_NAMES = sorted(_PROFILE_KEYS)
_scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.sampled_from(["grok", "a", "OpenAICompatible", "oauth", "https://a.test/v1", "claude"]),
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
_profiles = st.dictionaries(
    st.sampled_from([*_PROFILE_KEY_NAMES, "backup_provider", "priority"]), _values, max_size=6
)
_documents = st.fixed_dictionaries(
    {"profiles": st.lists(_profiles, max_size=3)},
    optional={
        "proxy": st.dictionaries(st.sampled_from(sorted(_PROXY_KEYS)), _values, max_size=3),
        "retry": st.dictionaries(st.sampled_from(["jitter", "max_attempts"]), _values),
    },
)


@settings(max_examples=150, deadline=None)
@given(_documents)
def test_structured_documents_are_located_and_never_crash(document: dict[str, Any]) -> None:
    text = tomlkit.dumps(document)
    scanner = _Scanner(text)
    scanner.run()  # must not trip over any valid TOML
    lines = _KeyLines(scanner.lines)
    source = text.split("\n")  # not splitlines(): TOML ends lines only at a newline
    for index, profile in enumerate(document["profiles"]):
        for key in profile:
            line = lines.line_of(("profiles", index, key))
            assert line is not None and key in source[line - 1]
    _accepts_or_reports(text)


def test_context_window_is_read_and_a_bad_one_named_with_its_line() -> None:
    config = parse_config(
        '[[profiles]]\nname = "a"\nprovider_type = "OpenAICompatible"\n'
        'base_url = "https://a.test/v1"\napi_key = ""\ncontext_window = 131072\n', "t.toml")
    assert config.profiles[0].context_window == 131072
    issue = only_issue('[[profiles]]\nname = "a"\nprovider_type = "OpenAICompatible"\n'
                       'base_url = "https://a.test/v1"\ncontext_window = "128k"\n')
    assert (issue.key, issue.line) == ("profiles.a.context_window", 5)
    assert "integer" in issue.message
    issue = only_issue('[[profiles]]\nname = "a"\nprovider_type = "OpenAICompatible"\n'
                       'base_url = "https://a.test/v1"\ncontext_window = 100\n')
    assert issue.message == "must be at least 1024, not 100"


def test_reserve_is_a_share_below_one_and_a_bad_one_is_named_with_its_line() -> None:
    head = ('[[profiles]]\nname = "a"\nprovider_type = "DirectAnthropic"\n'
            'base_url = "https://a.test"\napi_key = ""\n')
    assert parse_config(head, "t.toml").profiles[0].reserve == 0.0
    assert parse_config(head + "reserve = 0.05\n", "t.toml").profiles[0].reserve == 0.05
    issue = only_issue(head + "reserve = 5\n")
    assert (issue.key, issue.line) == ("profiles.a.reserve", 6)
    assert issue.message == "must be below 1 (a share of the window: 0.05 is 5%), not 5"
    assert only_issue(head + 'reserve = "5%"\n').message == "must be a number, not a string"
