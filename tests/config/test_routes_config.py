"""`[routes]` and `[router]` in a config file (DESIGN.md "Routes"): what loads, and every mistake
named with file, line and key — through the real `claudex check` for the example file."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from claudex.config import ConfigError, ConfigIssue, load_config, parse_config
from claudex.config.editing import delete_profile, references_to, rename_profile
from tests.conftest import TEST_ENV
from tests.paths import EXAMPLE

PROFILES = """
[[profiles]]
name = "main"
provider_type = "DirectAnthropic"
base_url = "https://api.anthropic.com"
api_key = ""

[[profiles]]
name = "big"
provider_type = "OpenAICompatible"
base_url = "https://big.test/v1"
api_key = ""
default_model = "big-1"
max_tokens = 8192
"""


def issues(text: str) -> list[ConfigIssue]:
    with pytest.raises(ConfigError) as caught:
        parse_config(PROFILES + textwrap.dedent(text), "t.toml", env={})
    return caught.value.issues


def line_of(text: str, fragment: str) -> int:
    full = (PROFILES + textwrap.dedent(text)).splitlines()
    return next(n for n, line in enumerate(full, 1) if fragment in line)


def test_the_example_files_routes_and_router_work_once_uncommented(tmp_path: Path) -> None:
    text = EXAMPLE.read_text()
    sections = text[text.index("# [routes]"):text.index("# ------", text.index("# [routes]"))]
    uncommented = "\n".join(re.sub(r"^# (?=\[|[a-z_]+ = )", "", line)
                            for line in sections.splitlines())
    path = tmp_path / "profiles.toml"
    path.write_text(text.replace(sections, uncommented))
    path.chmod(0o600)
    done = subprocess.run([sys.executable, "-m", "claudex.cli", "--config", str(path), "check"],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent",
                               "COLUMNS": "300", **TEST_ENV})
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("routes: long_context → claude, web_search → claude, thinking → deepseek, "
            "background → deepseek (over 60,000 tokens)") in done.stdout
    assert ("router: deepseek (deepseek-chat) classifies each conversation: code → claude, "
            "analysis → deepseek, default → claude") in done.stdout


def test_routes_load_with_their_defaults() -> None:
    config = parse_config(PROFILES + '[routes]\nlong_context = "big"\nbackground = "main"\n',
                          "t.toml", env={})
    assert config.routes.targets() == {"long_context": "big", "background": "main"}
    assert config.routes.long_context_tokens == 60_000
    assert not config.router.active


@pytest.mark.parametrize(("text", "fragment", "key", "message"), [
    ('[routes]\nthinking = "bigg"\n', "thinking", "routes.thinking",
     'unknown profile "bigg" (did you mean "big"?)'),
    ('[routes]\nlong_context = "big"\nlong_context_tokens = "60k"\n', "long_context_tokens",
     "routes.long_context_tokens", "must be an integer, not a string"),
    ('[routes]\nlong_context = "big"\nlong_context_tokens = 10\n', "long_context_tokens",
     "routes.long_context_tokens", "must be from 1000 to 10000000, not 10"),
    ('[routes]\nlong_contexts = "big"\n', "long_contexts", "routes.long_contexts",
     'unknown key (did you mean "long_context"?)'),
    ('[router]\nenabled = true\nprofile = "nope"\n[router.rules]\ncode = "big"\n', "nope",
     "router.profile", 'unknown profile "nope"'),
    ('[router]\nenabled = true\n[router.rules]\ncode = "big"\n', "enabled", "router.enabled",
     "the router needs profile: the profile asked to classify each conversation"),
    ('[router]\nprofile = "big"\nrule = 1\n', "rule =", "router.rule",
     'unknown key (did you mean "rules"?)'),
])
def test_mistakes_are_named_with_file_line_and_key(text: str, fragment: str, key: str,
                                                   message: str) -> None:
    [issue] = issues(text)
    assert (issue.file, issue.line, issue.key, issue.message) == (
        "t.toml", line_of(text, fragment), key, message)


def test_a_router_that_cannot_route_well_is_warned_about() -> None:
    config = parse_config(PROFILES + textwrap.dedent("""
        [router]
        enabled = true
        profile = "big"
        [router.rules]
        default = "main"
        """), "t.toml", env={})
    assert [w.message for w in config.warnings if w.key.startswith("router")] == [
        'the router has no categories ([router.rules] CATEGORY = "profile"): it routes nothing']
    assert not config.router.active


ROUTED = PROFILES + """
[routes]
long_context = "big"   # the long one
background = "main"

[router]
enabled = true
profile = "big"

[router.rules]
code = "big"
default = "main"
"""


def test_renaming_a_profile_renames_it_in_routes_and_the_router(tmp_path: Path) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text(ROUTED)
    assert references_to(ROUTED, "big") == ["routes.long_context", "router.profile",
                                            "router.rules.code"]
    rename_profile(path, "big", "huge")
    text = path.read_text()
    assert 'long_context = "huge"   # the long one' in text
    config = load_config(path, env={})
    assert config.routes.long_context == "huge" and config.router.profile == "huge"
    assert dict(config.router.rules) == {"code": "huge", "default": "main"}


def test_deleting_a_profile_drops_its_routes_and_turns_off_its_router(tmp_path: Path) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text(ROUTED)
    delete_profile(path, "big")
    config = load_config(path, env={})
    assert config.routes.targets() == {"background": "main"}
    assert not config.router.enabled and config.router.profile is None
    assert dict(config.router.rules) == {"default": "main"}
