"""`claudex check` warns about chain members that would get requests they cannot serve well."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from claudex.config import parse_config
from tests.conftest import TEST_ENV


def profile(name: str, *lines: str, kind: str = "OpenAICompatible") -> str:
    return "\n".join([
        "[[profiles]]",
        f'name = "{name}"',
        f'provider_type = "{kind}"',
        f'base_url = "https://{name}.test/v1"',
        'api_key_env = "FAKE_KEY"',
        *lines,
        "",
    ])


def warnings_of(text: str) -> list[tuple[int | None, str, str]]:
    config = parse_config(text, "t.toml", env=TEST_ENV)
    return [(w.line, w.key, w.message) for w in config.warnings]


def test_openai_profile_without_default_model_or_models_is_warned_at_its_header() -> None:
    text = profile("claude", 'backup_providers = ["grok"]', kind="DirectAnthropic") + "\n" + \
        profile("grok", "max_tokens = 8192", "context_window = 131072")
    [(line, key, message)] = warnings_of(text)
    assert (line, key) == (8, "profiles.grok.default_model")
    assert message.startswith("no default_model, and models maps no haiku, sonnet, opus")
    assert "it is a backup of claude" in message
    assert 'add default_model = "<a model this provider serves>"' in message


def test_models_missing_a_family_is_warned_naming_the_missing_ones() -> None:
    text = profile("grok", 'models = { haiku = "g-mini" }', "max_tokens = 8192")
    [(line, key, message)] = warnings_of(text)
    assert (line, key) == (1, "profiles.grok.default_model")
    assert "models maps no sonnet, opus:" in message
    assert "backup of" not in message


@pytest.mark.parametrize(
    "lines",
    [
        ('default_model = "grok-4"',),
        ('models = { haiku = "a", sonnet = "b", opus = "c" }',),
    ],
)
def test_a_default_model_or_every_family_is_enough(lines: tuple[str, ...]) -> None:
    assert warnings_of(profile("grok", *lines, "max_tokens = 8192")) == []


def test_missing_max_tokens_is_warned_and_says_what_to_add() -> None:
    text = profile("a", 'default_model = "m"', 'backup_providers = ["b"]') + \
        profile("b", 'default_model = "m"', "max_tokens = 4096", 'backup_providers = ["a"]')
    [(line, key, message)] = warnings_of(text)
    assert (line, key) == (1, "profiles.a.max_tokens")
    assert "32,000-128,000 output tokens" in message
    assert "(it is a backup of b)" in message
    assert message.endswith("e.g. max_tokens = 8192")


def test_a_written_key_is_where_the_warning_points() -> None:
    text = profile("grok", "", "", 'models = { haiku = "g" }', "max_tokens = 1")
    [(line, _, _)] = warnings_of(text)
    assert line == 1  # default_model is not written: the profile's header


def test_anthropic_and_disabled_profiles_get_no_advice() -> None:
    text = profile("claude", kind="DirectAnthropic") + profile("off", "enabled = false")
    assert warnings_of(text) == []


def test_a_backup_of_a_disabled_profile_is_not_called_one() -> None:
    text = profile("off", 'backup_providers = ["grok"]', "enabled = false") + \
        profile("grok", 'default_model = "m"')
    [(_, key, message)] = warnings_of(text)
    assert key == "profiles.grok.max_tokens" and "backup of" not in message


def test_check_prints_warnings_with_file_and_line_and_exits_0(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(profile("claude", 'backup_providers = ["grok"]', kind="DirectAnthropic")
                    + profile("grok"))
    result = subprocess.run(
        [sys.executable, "-m", "claudex.cli", "--config", str(path), "check"],
        capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COLUMNS": "300", **TEST_ENV},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 warning(s)" in result.stdout
    assert f"warning: {path}:7: profiles.grok.default_model: no default_model" in result.stdout
    assert f"warning: {path}:7: profiles.grok.max_tokens: not set" in result.stdout
    assert f"warning: {path}:7: profiles.grok.context_window: not set" in result.stdout


def test_an_openai_compatible_backup_of_a_claude_profile_is_advised_a_context_window() -> None:
    text = profile("claude", 'backup_providers = ["grok", "ds"]', kind="DirectAnthropic") + \
        profile("grok", 'default_model = "g"', "max_tokens = 8192") + \
        profile("ds", 'default_model = "d"', "max_tokens = 8192", "context_window = 131072") + \
        profile("solo", 'default_model = "s"', "max_tokens = 8192")
    [(line, key, message)] = warnings_of(text)
    assert (line, key) == (7, "profiles.grok.context_window")
    assert "as a backup of claude it receives Claude Code's whole conversation" in message
    assert message.endswith("e.g. context_window = 131072")
    # Backing up an OpenAI-compatible profile only: its conversations are not Claude Code's.
    other = profile("grok", 'default_model = "g"', "max_tokens = 8192",
                    'backup_providers = ["ds"]') + \
        profile("ds", 'default_model = "d"', "max_tokens = 8192")
    assert warnings_of(other) == []
