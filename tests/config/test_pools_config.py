"""Pools in the config (DESIGN.md "Pools"): a table with `members` and no `base_url` loads as a
pool; each mistake is named with file, line and key, and none of a provider's keys is asked of
it."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from claudex.config import ConfigError, parse_config
from tests.conftest import TEST_ENV
from tests.paths import EXAMPLE

MEMBERS = """
[[profiles]]
name = "acct-a"
provider_type = "DirectAnthropic"
base_url = "https://api.anthropic.com"
api_key_env = "FAKE_KEY"

[[profiles]]
name = "acct-b"
provider_type = "DirectAnthropic"
base_url = "https://api.anthropic.com"
api_key_env = "FAKE_KEY"

[[profiles]]
name = "spare"
provider_type = "OpenAICompatible"
base_url = "https://api.deepseek.com/v1"
api_key_env = "FAKE_KEY"
backup_providers = ["claude"]
"""


def issues(pool: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(MEMBERS + textwrap.dedent(pool), "t.toml", env={})
    return [str(issue) for issue in caught.value.issues]


def test_a_pool_loads_with_its_defaults_and_is_addressed_like_a_profile() -> None:
    config = parse_config('[proxy]\ndefault_profile = "claude"\n' + MEMBERS + """
[[profiles]]
name = "claude"
members = ["acct-a", "acct-b"]
weights = { acct-a = 3 }
backup_providers = ["spare"]
""", "t.toml", env={})
    (pool,) = config.pools
    assert (pool.name, pool.members, pool.balance) == ("claude", ("acct-a", "acct-b"), "sticky")
    assert pool.weight("acct-a") == 3 and pool.weight("acct-b") == 1
    assert pool.backup_providers == ("spare",)
    assert config.profile("claude") is None and config.pool("claude") is pool
    assert config.default_name == "claude"
    default = config.default_profile  # the pool's first member stands for it
    assert default is not None and default.name == "acct-a"
    assert [p.name for p in config.profiles] == ["acct-a", "acct-b", "spare"]


def test_a_pool_needs_none_of_a_providers_keys() -> None:
    assert issues("""
        [[profiles]]
        name = "claude"
        members = []
        balance = "sticky"
        """) == ["t.toml:23: profiles.claude.members: a pool needs at least one member"]


def test_each_member_mistake_is_named_with_file_line_and_key() -> None:
    found = issues("""
        [[profiles]]
        name = "claude"
        members = [
          "acct-a",
          "acct-c",
          "acct-a",
          "inner",
          "claude",
        ]
        balance = "stiky"
        weights = { spare = 2, acct-a = 0 }

        [[profiles]]
        name = "inner"
        members = ["acct-b"]
        """)
    assert found == [
        't.toml:25: profiles.claude.members: unknown profile "acct-c" (did you mean "acct-b"?)',
        't.toml:26: profiles.claude.members: "acct-a" is listed twice',
        't.toml:27: profiles.claude.members: "inner" is a pool; a pool\'s members are profiles '
        "(list its members here instead)",
        "t.toml:28: profiles.claude.members: a pool cannot be its own member",
        't.toml:30: profiles.claude.balance: unknown balance "stiky" (did you mean "sticky"?); '
        'expected one of "sticky", "round_robin", "least_busy"',
        't.toml:31: profiles.claude.weights: "acct-a": must be from 1 to 1000, not 0',
    ]
    assert not any("provider_type" in issue or "base_url" in issue for issue in found)


def test_weights_name_members_and_a_pool_has_no_base_url() -> None:
    assert issues("""
        [[profiles]]
        name = "claude"
        members = ["acct-a"]
        weights = { acct-b = 2 }
        api_key_env = "X"
        """) == ['t.toml:24: profiles.claude.weights: "acct-b" is not a member of this pool',
                 't.toml:25: profiles.claude.api_key_env: unknown key']
    found = issues("""
        [[profiles]]
        name = "claude"
        provider_type = "DirectAnthropic"
        base_url = "https://api.anthropic.com"
        members = ["acct-a"]
        """)
    assert found == ["t.toml:25: profiles.claude.members: a pool has members and no base_url, "
                     "a provider a base_url and no members: remove one of the two"]


def test_a_routes_target_and_a_backup_may_be_a_pool() -> None:
    config = parse_config(MEMBERS + """
[[profiles]]
name = "claude"
members = ["acct-a", "acct-b"]

[routes]
background = "claude"
""", "t.toml", env={})
    assert config.routes.background == "claude"


def test_the_example_files_pool_works_once_uncommented(tmp_path: Path) -> None:
    text = EXAMPLE.read_text()
    start = text.index("# A pool:")
    block = text[start:]
    uncommented = "\n".join(re.sub(r"^# (?=\[|[a-z_]+ = )", "", line)
                            for line in block.splitlines())
    path = tmp_path / "profiles.toml"
    path.write_text(text[:start] + uncommented + "\n")
    path.chmod(0o600)
    done = subprocess.run([sys.executable, "-m", "claudex.cli", "--config", str(path), "check"],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent",
                               "COLUMNS": "300", **TEST_ENV})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 pool(s)" in done.stdout
    assert re.search(r"claude-team\s+pool\s+\(claude-oauth \| claude\) → codex\s+sticky",
                     done.stdout), done.stdout


POOLED = MEMBERS + """
[[profiles]]
name = "claude"
members = ["acct-a", "acct-b"]  # two accounts
weights = { acct-a = 2 }
"""


def test_renaming_a_member_renames_it_in_the_pool() -> None:
    from claudex.config._edit_text import references_to, with_profile_updated

    assert references_to(POOLED, "acct-a") == ["claude"]
    after = with_profile_updated(POOLED, "acct-a", {"name": "acct-x"})
    assert 'members = ["acct-x", "acct-b"]  # two accounts' in after
    (pool,) = parse_config(after, "t.toml", env={}).pools
    assert pool.members == ("acct-x", "acct-b") and pool.weight("acct-x") == 2


def test_deleting_a_member_takes_it_out_of_the_pool() -> None:
    from claudex.config._edit_text import with_profile_deleted

    after = with_profile_deleted(POOLED, "acct-a")
    (pool,) = parse_config(after, "t.toml", env={}).pools
    assert pool.members == ("acct-b",) and dict(pool.weights) == {}


def test_the_docs_pool_config_loads_as_written() -> None:
    page = (Path(__file__).parents[2] / "docs" / "pools-and-routes.md").read_text()
    section = page[page.index("## Pools {#pools}"):]
    found = re.search(r"```toml\n(.*?)```", section, re.S)
    assert found is not None
    config = parse_config(found.group(1), "doc.toml", env={"DEEPSEEK_API_KEY": "k"})
    (pool,) = config.pools
    assert pool.members == ("acct-work", "acct-home") and config.default_name == "claude"
    assert pool.weight("acct-work") == 2 and pool.backup_providers == ("deepseek",)


async def test_claudex_env_names_a_pool_like_a_profile(tmp_path: Path) -> None:
    from tests.cli.test_cli import claudex

    path = tmp_path / "pool.toml"
    path.write_text("[proxy]\nport = 14000\n" + MEMBERS + """
[[profiles]]
name = "claude"
members = ["acct-a", "acct-b"]
""")
    code, out, err = await claudex("--config", str(path), "env", "claude")
    assert code == 0, err
    assert "export ANTHROPIC_BASE_URL='http://127.0.0.1:14000/proxy/claude'" in out
    code, _, err = await claudex("--config", str(path), "env", "nope")
    assert code == 1 and "claude" in err  # the pools are among the names offered
