"""In-place profile editing: comments, order and untouched keys survive; bad edits write nothing."""

from __future__ import annotations

import itertools
import os
import re
import stat
from pathlib import Path

import pytest

from claudex.config.editing import (
    ConflictError,
    ProfileNotFoundError,
    add_profile,
    delete_profile,
    file_fingerprint,
    read_profile,
    references_to,
    rename_profile,
    update_profile,
    with_profile_updated,
)
from claudex.config.loader import load_config, parse_config
from claudex.config.model import ConfigError
from tests.paths import EXAMPLE


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "profiles.toml"
    path.write_bytes(EXAMPLE.read_bytes())
    path.chmod(0o644)
    return path


def table_range(lines: list[str], name: str) -> tuple[int, int]:
    """Line indices [start, end) of the [[profiles]] table named `name`: header to next header."""
    headers = [i for i, line in enumerate(lines) if re.match(r"\s*\[", line)] + [len(lines)]
    for start, end in itertools.pairwise(headers):
        if lines[start].strip() == "[[profiles]]" and f'name = "{name}"\n' in lines[start:end]:
            return start, end
    raise AssertionError(f"no table for {name}")


def assert_same_outside(before: str, after: str, name: str, new_name: str | None = None) -> None:
    old_lines, new_lines = before.splitlines(True), after.splitlines(True)
    old_start, old_end = table_range(old_lines, name)
    new_start, new_end = table_range(new_lines, new_name or name)
    assert new_lines[:new_start] == old_lines[:old_start]
    assert new_lines[new_end:] == old_lines[old_end:]


def comments(lines: list[str]) -> list[str]:
    return [line for line in lines if line.lstrip().startswith("#")]


def test_update_keeps_every_byte_outside_the_edited_table(config_file: Path) -> None:
    before = config_file.read_text()
    update_profile(
        config_file,
        "grok",
        {
            "base_url": "https://api.x.ai/v2",
            "default_model": "grok-4",
            "max_tokens": 4096,
            "models": {"haiku": "grok-3-mini", "opus": "grok-4"},
            "read_timeout": None,
        },
    )
    after = config_file.read_text()
    assert_same_outside(before, after, "grok")

    old_lines, new_lines = before.splitlines(True), after.splitlines(True)
    old_table = old_lines[slice(*table_range(old_lines, "grok"))]
    new_table = new_lines[slice(*table_range(new_lines, "grok"))]
    assert comments(new_table) == comments(old_table)
    assert 'api_key_env = "XAI_API_KEY"\n' in new_table
    assert 'backup_providers = ["deepseek"]\n' in new_table
    assert not any(line.startswith("read_timeout") for line in new_table)

    grok = load_config(config_file).profile("grok")
    assert grok is not None
    assert grok.base_url == "https://api.x.ai/v2"
    assert grok.default_model == "grok-4"
    assert grok.max_tokens == 4096
    assert dict(grok.models) == {"haiku": "grok-3-mini", "opus": "grok-4"}
    assert grok.read_timeout == 600.0  # back to the [proxy] value
    assert grok.api_key_env == "XAI_API_KEY"


def test_writing_the_current_values_back_changes_nothing(config_file: Path) -> None:
    before = config_file.read_bytes()
    for name in ("claude", "grok", "deepseek", "claude-oauth"):
        values = read_profile(config_file, name)
        if name == "grok":
            values["read_timeout"] = 900.0  # 900 and 900.0 are the same value
        update_profile(config_file, name, values)
    assert config_file.read_bytes() == before


def test_a_new_key_goes_after_its_commented_example(config_file: Path) -> None:
    update_profile(config_file, "claude", {"max_tokens": 8000, "default_model": "claude-x"})
    lines = config_file.read_text().splitlines()
    assert lines[lines.index("# max_tokens = 8192") + 1] == "max_tokens = 8000"
    assert lines[lines.index('# default_model = "claude-sonnet-4-5"') + 1] == (
        'default_model = "claude-x"'
    )


def test_a_new_key_without_example_goes_after_the_last_key(config_file: Path) -> None:
    update_profile(config_file, "deepseek", {"priority": 100})
    lines = config_file.read_text().splitlines()
    assert lines[lines.index("failure_threshold = 5") + 1] == "priority = 100"


def test_a_new_key_stays_out_of_a_sub_table(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        '[[profiles]]\n  name = "a"\n  provider_type = "OpenAICompatible"\n'
        '  base_url = "http://127.0.0.1:9/v1"\n\n  [profiles.models]\n  haiku = "h"\n'
    )
    update_profile(path, "a", {"max_tokens": 7})
    text = path.read_text()
    assert '  base_url = "http://127.0.0.1:9/v1"\n  max_tokens = 7\n' in text  # indent kept
    profile = load_config(path).profile("a")
    assert profile is not None
    assert profile.max_tokens == 7
    assert dict(profile.models) == {"haiku": "h"}


def test_values_round_trip_with_quotes_and_unicode(config_file: Path) -> None:
    headers = {"X-Title": 'say "hi" \\ there', "X-Ünï": "ok"}
    models = {"sonnet": 'model/with "quote"', "odd key": "é"}
    with pytest.raises(ConfigError):  # "X-Ünï" is not a valid header name
        update_profile(config_file, "grok", {"custom_headers": headers})
    headers.pop("X-Ünï")
    update_profile(config_file, "grok", {"custom_headers": headers, "models": models})
    grok = load_config(config_file).profile("grok")
    assert grok is not None
    assert dict(grok.custom_headers) == headers
    assert dict(grok.models) == models
    assert read_profile(config_file, "grok")["models"] == models


def test_add_appends_a_table_and_keeps_the_file_before_it(config_file: Path) -> None:
    before = config_file.read_text()
    add_profile(
        config_file,
        {
            "name": "local",
            "provider_type": "OpenAICompatible",
            "base_url": "http://127.0.0.1:8080/v1",
            "api_key_env": "LOCAL_KEY",
            "default_model": None,
            "backup_providers": ["deepseek", "grok"],
        },
    )
    after = config_file.read_text()
    assert after.startswith(before)
    assert after[len(before) :] == (
        "\n[[profiles]]\n"
        'name = "local"\n'
        'provider_type = "OpenAICompatible"\n'
        'base_url = "http://127.0.0.1:8080/v1"\n'
        'api_key_env = "LOCAL_KEY"\n'
        'backup_providers = ["deepseek", "grok"]\n'
    )
    local = load_config(config_file).profile("local")
    assert local is not None
    assert local.backup_providers == ("deepseek", "grok")


def test_add_creates_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "new.toml"
    add_profile(path, {"name": "a", "provider_type": "DirectAnthropic", "base_url": "http://h"})
    assert [p.name for p in load_config(path).profiles] == ["a"]


def test_delete_drops_the_table_and_the_references_to_it(config_file: Path) -> None:
    before = config_file.read_text()
    assert references_to(before, "deepseek") == ["claude", "grok", "claude-oauth"]
    delete_profile(config_file, "deepseek")

    lines = before.splitlines(True)
    start, end = table_range(lines, "deepseek")
    expected = "".join(lines[:start] + lines[end:])
    expected = expected.replace(
        'backup_providers = ["grok", "deepseek"]', 'backup_providers = ["grok"]'
    ).replace('backup_providers = ["deepseek"]', "backup_providers = []")
    assert config_file.read_text() == expected
    assert load_config(config_file).profile("deepseek") is None


def test_deleting_the_default_profile_removes_the_setting(config_file: Path) -> None:
    before = config_file.read_text()
    assert "proxy.default_profile" in references_to(before, "claude")
    delete_profile(config_file, "claude")
    after = config_file.read_text()
    assert 'default_profile = "claude"\n' not in after
    lines = before.splitlines(True)
    start, end = table_range(lines, "claude")
    assert after == "".join(lines[:start] + lines[end:]).replace('default_profile = "claude"\n', "")


def test_delete_without_dropping_references_is_refused(config_file: Path) -> None:
    before = config_file.read_bytes()
    with pytest.raises(ConfigError) as caught:
        delete_profile(config_file, "deepseek", drop_references=False)
    assert any('unknown profile "deepseek"' in issue.message for issue in caught.value.issues)
    assert config_file.read_bytes() == before


def test_rename_rewrites_every_reference_and_nothing_else(config_file: Path) -> None:
    before = config_file.read_text()
    rename_profile(config_file, "grok", "xai")
    # `"grok"` (quoted) appears only as the name and in backup lists in the example.
    assert config_file.read_text() == before.replace('"grok"', '"xai"')
    config = load_config(config_file)
    assert config.profile("xai") is not None
    claude = config.profile("claude")
    assert claude is not None
    assert claude.backup_providers == ("xai", "deepseek")


def test_renaming_the_default_profile_follows_it(config_file: Path) -> None:
    before = config_file.read_text()
    update_profile(config_file, "claude", {"name": "anthropic", "enabled": True})
    after = config_file.read_text()
    assert (
        after.replace('default_profile = "anthropic"', 'default_profile = "claude"').replace(
            'name = "anthropic"', 'name = "claude"'
        )
        == before
    )
    assert load_config(config_file).proxy.default_profile == "anthropic"


@pytest.mark.parametrize(
    ("name", "values", "key", "message"),
    [
        ("grok", {"backup_providers": ["nope"]}, "profiles.grok.backup_providers", "unknown"),
        ("grok", {"base_url": "ftp://x"}, "profiles.grok.base_url", "http"),
        ("grok", {"name": "deepseek"}, "profiles.deepseek.name", "duplicate"),
        ("grok", {"provider_type": None}, "profiles.grok.provider_type", "missing"),
        ("deepseek", {"backup_providers": ["deepseek"]}, "profiles.deepseek.backup_providers",
         "itself"),
        ("grok", {"api_key": "xai-secret-value"}, "profiles.grok.api_key", "not both"),
    ],
)
def test_an_invalid_edit_raises_and_leaves_the_file_untouched(
    config_file: Path, name: str, values: dict[str, object], key: str, message: str
) -> None:
    before = config_file.read_bytes()
    mtime = config_file.stat().st_mtime_ns
    with pytest.raises(ConfigError) as caught:
        update_profile(config_file, name, values)
    assert any(i.key == key and message in i.message for i in caught.value.issues), caught.value
    assert "xai-secret-value" not in str(caught.value)
    assert config_file.read_bytes() == before
    assert config_file.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in config_file.parent.iterdir()) == ["profiles.toml"]


def test_unknown_profile(config_file: Path) -> None:
    with pytest.raises(ProfileNotFoundError):
        update_profile(config_file, "nope", {"enabled": False})
    with pytest.raises(ProfileNotFoundError):
        read_profile(config_file, "nope")


def test_external_edit_conflicts_and_overwrite_keeps_both(config_file: Path) -> None:
    seen = file_fingerprint(config_file)
    external = config_file.read_text().replace(
        'default_model = "deepseek-chat"', 'default_model = "deepseek-v3"'
    )
    config_file.write_text(external)

    with pytest.raises(ConflictError) as caught:
        update_profile(config_file, "grok", {"max_tokens": 1234}, expected_digest=seen.digest)
    assert config_file.read_text() == external  # nothing written

    # "Overwrite": the same values again, on top of the file as it is now.
    update_profile(
        config_file, "grok", {"max_tokens": 1234}, expected_digest=caught.value.current.digest
    )
    config = load_config(config_file)
    deepseek, grok = config.profile("deepseek"), config.profile("grok")
    assert deepseek is not None and grok is not None
    assert deepseek.default_model == "deepseek-v3"
    assert grok.max_tokens == 1234


def test_conflict_by_mtime_when_no_digest_is_given(config_file: Path) -> None:
    seen = file_fingerprint(config_file)
    os.utime(config_file, ns=(seen.mtime_ns + 10**9, seen.mtime_ns + 10**9))
    with pytest.raises(ConflictError):
        update_profile(config_file, "grok", {"max_tokens": 1}, expected_mtime_ns=seen.mtime_ns)
    # With the digest, a touched but unchanged file is no conflict: no edit can be lost.
    update_profile(
        config_file,
        "grok",
        {"max_tokens": 1},
        expected_mtime_ns=seen.mtime_ns,
        expected_digest=seen.digest,
    )


def test_returned_fingerprint_matches_the_file(config_file: Path) -> None:
    written = update_profile(config_file, "grok", {"max_tokens": 5})
    assert written == file_fingerprint(config_file)
    update_profile(config_file, "grok", {"max_tokens": 6}, expected_digest=written.digest)


def test_an_inline_secret_makes_the_file_private(config_file: Path) -> None:
    config_file.chmod(0o640)
    update_profile(config_file, "deepseek", {"max_tokens": 10})
    assert stat.S_IMODE(config_file.stat().st_mode) == 0o640  # no secret: mode kept

    update_profile(config_file, "grok", {"api_key_env": None, "api_key": "xai-0123456789abcdef"})
    assert stat.S_IMODE(config_file.stat().st_mode) == 0o600
    assert sorted(p.name for p in config_file.parent.iterdir()) == ["profiles.toml"]


def test_a_byte_order_mark_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_bytes(
        b'\xef\xbb\xbf[[profiles]]\nname = "a"\nprovider_type = "DirectAnthropic"\n'
        b'base_url = "http://h"\n'
    )
    update_profile(path, "a", {"enabled": False})
    assert path.read_bytes().startswith(b'\xef\xbb\xbf[[profiles]]\nname = "a"\n')
    assert path.read_bytes().endswith(b"enabled = false\n")


def test_pure_transform_matches_the_validator(config_file: Path) -> None:
    text = config_file.read_text()
    new_text = with_profile_updated(text, "grok", {"enabled": False})
    grok = parse_config(new_text).profile("grok")
    assert grok is not None and grok.enabled is False
    assert config_file.read_text() == text


def test_an_edit_that_changes_nothing_does_not_write(config_file: Path) -> None:
    seen = file_fingerprint(config_file)
    os.utime(config_file, ns=(1_000_000_000, 1_000_000_000))
    unchanged = file_fingerprint(config_file)
    assert update_profile(config_file, "grok", {"read_timeout": 900}) == unchanged
    assert config_file.stat().st_mtime_ns == 1_000_000_000
    assert unchanged.digest == seen.digest
