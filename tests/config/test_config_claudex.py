"""Files written for Claudex (the Rust project) load in claudex: DESIGN.md "Claudex keys"."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from claudex.config import ConfigError, ConfigIssue, Profile, load_config, parse_config
from claudex.config.paths import default_config_path
from claudex.engine.credentials.cache import Credentials
from tests.conftest import TEST_ENV
from tests.paths import FIXTURES

FIXTURE = FIXTURES / "claudex_config.toml"
NO_HOME = {"HOME": "/nonexistent"}


def toml(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def line_of(text: str, fragment: str) -> int:
    """The 1-based line of the only line of `text` containing `fragment`."""
    hits = [n for n, line in enumerate(text.splitlines(), 1) if fragment in line]
    assert len(hits) == 1, (fragment, hits)
    return hits[0]


def issues_of(text: str) -> list[ConfigIssue]:
    with pytest.raises(ConfigError) as caught:
        parse_config(toml(text), "t.toml", env={})
    return caught.value.issues


def only_issue(text: str) -> ConfigIssue:
    issues = issues_of(text)
    assert len(issues) == 1, [str(issue) for issue in issues]
    return issues[0]


PROFILE = """
[[profiles]]
name = "p"
provider_type = "OpenAICompatible"
base_url = "https://p.test/v1"
api_key = ""
default_model = "m"
max_tokens = 1000
"""


def load(text: str) -> tuple[Profile, ...]:
    config = parse_config(toml(text), "t.toml", env={})
    return tuple(config.profiles)


# --- the whole file -----------------------------------------------------------------------------


def test_claudex_file_loads_with_every_key_used_or_warned() -> None:
    text = FIXTURE.read_text()
    config = load_config(FIXTURE, env=NO_HOME)

    assert (config.proxy.host, config.proxy.port, config.proxy.log_level) == (
        "localhost", 14567, "warning")
    assert config.claude_binary == "/opt/tools/claude"
    assert config.model_aliases == {"quick": "deepseek-chat", "big": "claude-opus-4-1"}

    by_name = {p.name: p for p in config.profiles}
    main, compat, fast, cheap = (by_name[n] for n in ("main", "compat", "fast", "cheap"))
    assert main.priority == 100 and main.problem is None
    assert compat.auth_type == "api-key" and compat.backup_providers == ("main",)
    # Mutual backups: fast -> cheap and cheap -> fast.
    assert fast.backup_providers == ("cheap",) and cheap.backup_providers == ("fast",)
    assert dict(fast.models) == {"haiku": "fast-small", "sonnet": "fast-large",
                                 "opus": "fast-large"}
    assert dict(fast.custom_headers) == {"X-Origin": "claudex-tests"}
    assert dict(fast.extra_env) == {"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "16384"}
    assert fast.strip_params == ("temperature", "top_p")
    assert cheap.strip_params == ()  # "Auto" on a host with nothing known to strip
    # An inline key beside a keyring entry is used; the keyring is never read.
    assert cheap.problem is None

    azure = by_name["azure"]
    assert dict(azure.query_params) == {"api-version": "2024-12-01-preview"}
    assert azure.strip_params == ()
    ollama = by_name["ollama"]
    assert ollama.api_key == "" and ollama.problem is None and ollama.usable

    responses = by_name["responses"]
    assert responses.provider_type == "OpenAIResponses"
    assert responses.oauth_provider == "codex"
    # Served now: only its login is missing (no ~/.codex/auth.json under the test's HOME).
    assert responses.problem == "credentials file ~/.codex/auth.json not found"
    assert responses.protocol == "responses"
    assert responses.strip_params == ("temperature", "top_p", "top_k")  # chatgpt.com, "auto"
    for name, provider in (("gem", "google"), ("pilot", "github"), ("duo", "gitlab")):
        assert by_name[name].problem == (
            f'oauth_provider "{provider}" is not supported by claudex, use token_command')
    assert not by_name["gem"].usable  # enabled, but skipped by failover

    warned = [(w.line, w.key, w.message) for w in config.warnings]
    not_implemented = "not implemented by claudex; ignored"
    assert (line_of(text, "hyperlinks = true"), "hyperlinks", not_implemented) in warned
    # `[router]` is served now (DESIGN.md "Routes"): read, not warned about.
    assert not [w for w in warned if w[1].startswith("router")]
    assert config.router.profile == "ollama" and config.router.model == "qwen2.5:3b"
    assert dict(config.router.rules) == {"code": "fast", "default": "main"}
    assert not config.router.enabled and not config.router.active
    assert (line_of(text, "[context.compression]"), "context", not_implemented) in warned
    # cheap has no max_tokens; gem has none either (it is enabled, if misconfigured).
    assert {key for _, key, _ in warned if key.endswith("max_tokens")} == {
        "profiles.cheap.max_tokens", "profiles.gem.max_tokens", "profiles.ollama.max_tokens"}
    assert all(w.file == str(FIXTURE) for w in config.warnings)


def test_claudex_file_passes_check_through_the_real_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "claudex.cli", "--config", str(FIXTURE), "check"],
        capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "COLUMNS": "200", **TEST_ENV},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "ok " in out and "11 profile(s)" in out
    hyperlinks_line = line_of(FIXTURE.read_text(), "hyperlinks = true")
    assert f"warning: {FIXTURE}:{hyperlinks_line}: hyperlinks: not implemented by claudex" in out
    assert "misconfigured: oauth_provider \"google\" is not supported by claudex" in out
    assert "Traceback" not in out + result.stderr
    assert "placeholder-" not in out + result.stderr  # inline keys are never shown


# --- top-level keys -------------------------------------------------------------------------


def test_proxy_table_wins_over_claudex_top_level_keys_with_a_warning() -> None:
    config = parse_config(toml("""
        proxy_port = 1111
        log_level = "debug"

        [proxy]
        port = 2222
        """), "t.toml", env={})
    assert (config.proxy.port, config.proxy.log_level) == (2222, "debug")
    [warning] = config.warnings
    assert (warning.line, warning.key) == (1, "proxy_port")
    assert warning.message == "ignored: [proxy] sets port, which wins"


@pytest.mark.parametrize(
    ("written", "level"),
    [("trace", "debug"), ("DEBUG", "debug"), ("Info", "info"), ("warn", "warning"),
     ("warning", "warning"), ("error", "error")],
)
def test_log_level_takes_claudex_and_python_names(written: str, level: str) -> None:
    config = parse_config(f'log_level = "{written}"\n', env={})
    assert config.proxy.log_level == level
    assert parse_config(f'[proxy]\nlog_level = "{written}"\n', env={}).proxy.log_level == level


@pytest.mark.parametrize(
    ("text", "line", "key", "message"),
    [
        ('# Claudex\nproxy_port = 0\n', 2, "proxy_port", "must be from 1 to 65535, not 0"),
        ('proxy_port = "80"\n', 1, "proxy_port", "must be an integer, not a string"),
        ('proxy_host = ""\n', 1, "proxy_host", "must not be empty"),
        ('log_level = "loud"\n', 1, "log_level", 'unknown log level "loud"'),
        ("claude_binary = 3\n", 1, "claude_binary", "must be a string, not an integer"),
        ('model_aliases = "x"\n', 1, "model_aliases", "must be a table ([model_aliases])"),
        ('[model_aliases]\nok = "m"\nbad = 3\n', 3, "model_aliases.bad",
         "must be the name of a model, not an integer"),
        ('[model_aliases]\nempty = ""\n', 2, "model_aliases.empty",
         "must be the name of a model, not an empty string"),
        ('[model_aliases]\n"two words" = []\n', 2, 'model_aliases."two words"',
         "not an array"),
        ('proxy_hots = "x"\n', 1, "proxy_hots", 'unknown key (did you mean "proxy_host"?)'),
    ],
)
def test_bad_top_level_claudex_values_name_line_and_key(
    text: str, line: int, key: str, message: str
) -> None:
    issue = only_issue(text)
    assert (issue.file, issue.line, issue.key) == ("t.toml", line, key)
    assert message in issue.message


def test_non_loopback_proxy_host_is_blamed_on_the_top_level_key() -> None:
    issue = only_issue('# Claudex\n\nproxy_host = "0.0.0.0"\n')
    assert (issue.line, issue.key) == (3, "proxy_host")
    assert "auth_token_env" in issue.message


@pytest.mark.parametrize("value", ['"auto"', "false", '"never"', "{ a = 1 }"])
def test_hyperlinks_any_value_is_only_a_warning(value: str) -> None:
    config = parse_config(f"hyperlinks = {value}\n", "t.toml", env={})
    assert [str(w) for w in config.warnings] == [
        "t.toml:1: hyperlinks: not implemented by claudex; ignored"]


def test_context_is_warned_once_at_its_first_line() -> None:
    config = parse_config(toml("""
        [context.rag]
        enabled = true

        [context.sharing]
        enabled = false
        """), "t.toml", env={})
    assert [(w.line, w.key) for w in config.warnings] == [(1, "context")]


def test_router_rules_name_profiles_of_the_file() -> None:
    text = PROFILE + """
        [router.rules]
        code = "p"
        math = "pp"
        """
    issue = only_issue(text)
    assert (issue.line, issue.key) == (line_of(toml(text), 'math = "pp"'), "router.rules.math")
    assert issue.message == 'unknown profile "pp" (did you mean "p"?)'


# --- profile keys ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('"auto"', ()),
        ('"Auto"', ()),
        ('"NONE"', ()),
        ('"false"', ()),
        ('""', ()),
        ('"temperature, top_p"', ("temperature", "top_p")),
        ('["temperature", "top_k"]', ("temperature", "top_k")),
        ("[]", ()),
    ],
)
def test_strip_params_forms(value: str, expected: tuple[str, ...]) -> None:
    [profile] = load(PROFILE + f"strip_params = {value}\n")
    assert profile.strip_params == expected


@pytest.mark.parametrize(
    ("base_url", "stripped"),
    [
        ("https://chatgpt.com/backend-api/codex", ("temperature", "top_p", "top_k")),
        ("https://eu.chatgpt.com/v1", ("temperature", "top_p", "top_k")),
        ("https://notchatgpt.com/v1", ()),
        ("https://api.openai.com/v1", ()),
    ],
)
def test_strip_params_auto_is_the_default_and_decided_by_host(
    base_url: str, stripped: tuple[str, ...]
) -> None:
    [profile] = load(PROFILE.replace("https://p.test/v1", base_url))
    assert profile.strip_params == stripped


def test_profile_claudex_keys_are_kept() -> None:
    [profile] = load(PROFILE + toml("""
        priority = 7
        query_params = { "api-version" = "2024-12-01", flag = "" }
        extra_env = { ANTHROPIC_MODEL = "m", "my-var" = "" }
        """))
    assert profile.priority == 7
    assert dict(profile.query_params) == {"api-version": "2024-12-01", "flag": ""}
    assert dict(profile.extra_env) == {"ANTHROPIC_MODEL": "m", "my-var": ""}


@pytest.mark.parametrize(
    ("extra", "line", "key", "message"),
    [
        ("priority = -1", 8, "profiles.p.priority", "must be at least 0, not -1"),
        ('priority = "high"', 8, "profiles.p.priority", "must be an integer, not a string"),
        ("strip_params = 3", 8, "profiles.p.strip_params",
         'must be "auto", "none" or an array of parameter names, not an integer'),
        ('strip_params = ["a", 1]', 8, "profiles.p.strip_params", "item 1 is an integer"),
        ('query_params = "api-version=1"', 8, "profiles.p.query_params",
         "must be a table of strings, not a string"),
        ("query_params = { v = 1 }", 8, "profiles.p.query_params", '"v" is an integer'),
        ('query_params = { "" = "x" }', 8, "profiles.p.query_params", "needs a name"),
        ('extra_env = ["A=1"]', 8, "profiles.p.extra_env", "must be a table of strings"),
        ("extra_env = { A = true }", 8, "profiles.p.extra_env", '"A" is a boolean'),
        ('extra_env = { "A=B" = "x" }', 8, "profiles.p.extra_env",
         "cannot be the name of an environment variable"),
        ('extra_env = { A = "x\\u0000y" }', 8, "profiles.p.extra_env", "NUL character"),
        ('auth_type = "api_keys"', 8, "profiles.p.auth_type", 'unknown auth_type "api_keys"'),
    ],
)
def test_bad_profile_claudex_values_name_line_and_key(
    extra: str, line: int, key: str, message: str
) -> None:
    issue = only_issue(PROFILE + extra + "\n")
    assert (issue.line, issue.key) == (line, key)
    assert message in issue.message


def test_unknown_provider_type_is_still_an_error_naming_every_known_type() -> None:
    issue = only_issue(PROFILE.replace('"OpenAICompatible"', '"Responses"'))
    assert (issue.line, issue.key) == (3, "profiles.p.provider_type")
    assert issue.message.endswith(
        'expected one of "DirectAnthropic", "OpenAICompatible", "OpenAIResponses", "Bedrock", '
        '"Vertex"')


def test_bad_extra_env_sub_table_is_located_at_its_key() -> None:
    issue = only_issue(PROFILE + '\n[profiles.extra_env]\nGOOD = "1"\nBAD = 2\n')
    assert (issue.line, issue.key) == (11, "profiles.p.extra_env")


def test_api_key_underscore_is_api_key_auth() -> None:
    [profile] = load(PROFILE + 'auth_type = "api_key"\n')
    assert profile.auth_type == "api-key"


def test_empty_api_key_beside_api_key_env_means_the_variable() -> None:
    config = parse_config(
        toml(PROFILE).replace('api_key = ""', 'api_key = ""\napi_key_env = "K"'), env={})
    [profile] = config.profiles
    assert profile.api_key is None and profile.problem == "environment variable K is not set"


def test_no_key_written_at_all_is_still_misconfigured() -> None:
    [profile] = parse_config(toml(PROFILE).replace('api_key = ""\n', ""), env={}).profiles
    assert profile.problem == "no API key configured (set api_key_env)"


def test_keyring_without_a_key_is_misconfigured_with_the_remedy() -> None:
    [profile] = load(PROFILE + 'api_key_keyring = "entry"\n')
    assert profile.problem == (
        "api_key_keyring is not supported by claudex, use token_command (or api_key_env)")


def test_unsupported_oauth_login_with_a_token_command_is_usable() -> None:
    [profile] = load(PROFILE + toml("""
        auth_type = "oauth"
        oauth_provider = "qwen"
        token_command = "print-token"
        """))
    assert profile.oauth_provider == "qwen" and profile.problem is None


@pytest.mark.parametrize("provider", ["google", "github", "gitlab", "qwen", "kimi"])
def test_unsupported_oauth_logins_load_misconfigured(provider: str) -> None:
    [profile] = load(PROFILE + f'auth_type = "oauth"\noauth_provider = "{provider}"\n')
    assert profile.problem == (
        f'oauth_provider "{provider}" is not supported by claudex, use token_command')


def test_responses_profile_with_a_key_is_usable_and_speaks_responses() -> None:
    text = PROFILE.replace("OpenAICompatible", "OpenAIResponses").replace(
        'api_key = ""', 'api_key = "sk-a-real-looking-key"')
    [profile] = parse_config(text, env={}).profiles
    assert profile.problem is None and profile.usable
    assert profile.protocol == "responses"


async def test_empty_api_key_sends_no_credential_header() -> None:
    [profile] = parse_config(PROFILE, env={}).profiles
    auth = await Credentials(profile, env={}).auth_headers()
    assert auth is not None and auth.headers == {}
    anthropic = parse_config(PROFILE.replace("OpenAICompatible", "DirectAnthropic"),
                             env={}).profiles[0]
    auth = await Credentials(anthropic, env={}).auth_headers()
    assert auth is not None and auth.headers == {}


# --- where the file is ----------------------------------------------------------------------


def test_default_path_falls_back_to_claudex_config_toml(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "profiles.toml", tmp_path / "config.toml"
    assert default_config_path({}, tmp_path) == ours  # neither: where `claudex init` writes
    theirs.write_text("")
    assert default_config_path({}, tmp_path) == theirs
    ours.write_text("")
    assert default_config_path({}, tmp_path) == ours  # ours wins when both exist
    chosen = tmp_path / "elsewhere.toml"
    assert default_config_path({"CLAUDEX_CONFIG": str(chosen)}, tmp_path) == chosen
