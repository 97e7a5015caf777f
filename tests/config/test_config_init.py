"""`claudex init`: a starter config from what the machine has, never a secret, never over a file."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from claudex.cli import main
from claudex.config import load_config
from claudex.config.paths import example_config_path
from claudex.config.starter import KEY_PROVIDERS, KeyProvider

VARIABLES = [p.variable for p in KEY_PROVIDERS]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HOME and config dir, and none of the API-key variables set."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("CLAUDEX_CONFIG", raising=False)
    for variable in VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    for variable in ("AWS_BEARER_TOKEN_BEDROCK", "AWS_ACCESS_KEY_ID", "AWS_PROFILE",
                     "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "CLAUDE_CODE_USE_BEDROCK",
                     "CLAUDE_CODE_USE_VERTEX", "GOOGLE_APPLICATION_CREDENTIALS",
                     "CLOUDSDK_CONFIG"):  # this machine's clouds are not the test's
        monkeypatch.delenv(variable, raising=False)
    return home


def secret_for(variable: str) -> str:
    return f"sk-secret-{variable.lower()}-0123456789"


def claude_login(home: Path) -> None:
    path = home / ".claude" / ".credentials.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"claudeAiOauth": {
        "accessToken": "sk-ant-oat01-secret-access", "refreshToken": "sk-ant-ort01-secret-refresh",
        "expiresAt": 4102444800000}}))


def codex_login(home: Path) -> None:
    path = home / ".codex" / "auth.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"tokens": {"access_token": "codex-secret-access-token"}}))


def init(target: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["--config", str(target), "init"])
    out, err = capsys.readouterr()
    return code, out, err


def test_nothing_found_writes_a_passthrough_profile_that_loads(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "new" / "profiles.toml"
    code, out, _ = init(target, capsys)
    assert code == 0
    config = load_config(target, env={"HOME": str(home)})
    [claude] = config.profiles
    assert (claude.name, claude.auth_type, claude.backup_providers) == (
        "claude", "passthrough", ())
    assert claude.usable and config.warnings == ()
    assert "missing  Claude Code login ~/.claude/.credentials.json" in out
    assert "not set  ANTHROPIC_API_KEY, OPENROUTER_API_KEY" in out
    assert f"Wrote {target} (mode 0600) with 1 profile(s): claude." in out
    # Every provider not found is there to uncomment, and the example's place is named.
    text = target.read_text()
    for provider in KEY_PROVIDERS:
        assert f'# api_key_env = "{provider.variable}"' in text
    assert str(example_config_path()) in text


def test_the_file_is_private(home: Path, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "profiles.toml"
    assert init(target, capsys)[0] == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "profiles.toml"]  # no temp left


def test_claude_code_login_becomes_an_oauth_primary(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    claude_login(home)
    target = tmp_path / "profiles.toml"
    code, out, _ = init(target, capsys)
    assert code == 0
    [claude] = load_config(target, env={"HOME": str(home)}).profiles
    assert (claude.auth_type, claude.oauth_provider, claude.provider_type) == (
        "oauth", "claude", "DirectAnthropic")
    assert claude.problem is None  # it found the file where the loader will look
    assert 'found    Claude Code login ~/.claude/.credentials.json -> profile "claude"' in out
    assert "secret-access" not in target.read_text()


def test_codex_login_becomes_an_enabled_backup_of_claude(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The Responses API is served: the ChatGPT plan is in the Claude profile's chain.
    codex_login(home)
    target = tmp_path / "profiles.toml"
    code, out, _ = init(target, capsys)
    assert code == 0
    config = load_config(target, env={"HOME": str(home)})
    codex = config.profile("codex")
    assert codex is not None and codex.enabled and codex.usable
    assert (codex.provider_type, codex.oauth_provider) == ("OpenAIResponses", "codex")
    assert config.profiles[0].backup_providers == ("codex",)
    # claude is passthrough here (no Claude login): Codex CLI's token must not go there.
    assert codex.backup_providers == ()
    assert 'found    Codex CLI login ~/.codex/auth.json -> profile "codex" (oauth, a backup ' \
           'of "claude")' in out
    assert "codex-secret" not in target.read_text()


@pytest.mark.parametrize("provider", KEY_PROVIDERS, ids=lambda p: p.variable)
def test_each_api_key_variable_becomes_a_backup_profile(
    provider: KeyProvider, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(provider.variable, secret_for(provider.variable))
    target = tmp_path / "profiles.toml"
    code, out, _ = init(target, capsys)
    assert code == 0
    config = load_config(target, env={provider.variable: "set", "HOME": str(home)})
    claude, made = config.profiles
    assert claude.backup_providers == (provider.name,)
    assert (made.name, made.api_key_env, made.base_url, made.provider_type) == (
        provider.name, provider.variable, provider.base_url, provider.provider_type)
    assert made.usable and made.api_key is None
    assert config.warnings == ()  # every OpenAI-compatible one has its model and max_tokens
    assert f'found    {provider.variable} -> profile "{provider.name}"' in out
    assert secret_for(provider.variable) not in target.read_text() + out


def test_everything_found_no_secret_written_and_the_real_check_passes(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    claude_login(home)
    codex_login(home)
    for variable in VARIABLES:
        monkeypatch.setenv(variable, secret_for(variable))
    target = tmp_path / "profiles.toml"
    code, out, err = init(target, capsys)
    assert code == 0, err
    text = target.read_text()
    for variable in VARIABLES:
        assert secret_for(variable) not in text + out + err
    for token in ("secret-access", "secret-refresh"):
        assert token not in text + out + err

    config = load_config(target, env={"HOME": str(home), **{v: "x" for v in VARIABLES}})
    names = [p.name for p in KEY_PROVIDERS]
    assert [p.name for p in config.profiles] == ["claude", *names, "codex"]
    assert config.profiles[0].backup_providers == ("codex", *names)  # the plan, then the keys
    codex = config.profile("codex")
    assert codex is not None and codex.enabled
    assert codex.backup_providers == ("claude", *names[:2])  # claude is a login of its own
    # Each API-key profile backs up onto the next ones found, wrapping round, so the last two
    # back up onto the first: a ring, which chains that are not transitive allow.
    grok = config.profile("grok")
    assert grok is not None and grok.backup_providers == ("deepseek", "mistral")
    groq = config.profile("groq")
    assert groq is not None and groq.backup_providers == ("anthropic", "openrouter")

    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), **{v: secret_for(v) for v in VARIABLES}}
    result = subprocess.run(
        [sys.executable, "-m", "claudex.cli", "--config", str(target), "check"],
        capture_output=True, text=True, timeout=60, env={**env, "COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warning" not in result.stdout
    assert "ready" in result.stdout and "sk-secret" not in result.stdout


def test_an_existing_file_is_never_replaced(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "profiles.toml"
    target.write_text("# mine\n")
    code, out, err = init(target, capsys)
    assert code == 1 and out == ""
    assert f"{target} already exists; `claudex init` never replaces a config" in err
    assert target.read_text() == "# mine\n"
    dangling = tmp_path / "link.toml"
    dangling.symlink_to(tmp_path / "nowhere.toml")
    assert init(dangling, capsys)[0] == 1
    assert not (tmp_path / "nowhere.toml").exists()


def test_default_path_is_the_config_dir_and_a_claudex_file_there_counts(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "xdg" / "claudex"
    assert main(["init"]) == 0
    assert "Wrote " + str(directory / "profiles.toml") in capsys.readouterr().out
    (directory / "profiles.toml").unlink()
    (directory / "config.toml").write_text("proxy_port = 14000\n")
    assert main(["init"]) == 1
    assert f"{directory / 'config.toml'} already exists" in capsys.readouterr().err
    assert not (directory / "profiles.toml").exists()


def test_without_a_config_every_command_suggests_init_and_names_the_example(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none.toml"
    for command in (["check"], ["serve"], ["console"]):
        assert main(["--config", str(missing), *command]) == 1
        err = capsys.readouterr().err
        assert f"No config at {missing}. Run `claudex init`" in err, command
        assert str(example_config_path()) in err
        assert "Copy profiles.example.toml" not in err
    assert example_config_path().is_file()
