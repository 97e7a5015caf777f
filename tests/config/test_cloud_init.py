"""`claudex init` finds Claude on Bedrock and Vertex (issue 37): AWS credentials or
AWS_BEARER_TOKEN_BEDROCK, GOOGLE_APPLICATION_CREDENTIALS or gcloud's ADC, Claude Code set to
Bedrock or Vertex; it writes their profiles, first in the Claude profile's chain, and never a
secret."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from claudex.config import parse_config
from claudex.config.starter import discover, report, starter_text

SECRET_KEY = "bedrock-api-key-never-written-0000000000"
PRIVATE = "-----BEGIN PRIVATE KEY-----\nMIIEnever-written\n-----END PRIVATE KEY-----\n"


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), **extra}


def _service_account(home: Path, project: str = "acme-ai") -> Path:
    path = home / "sa.json"
    path.write_text(json.dumps({"type": "service_account", "project_id": project,
                                "private_key": PRIVATE, "client_email": "x@acme.iam"}))
    return path


def test_bedrock_and_vertex_become_profiles_first_in_claudes_chain(tmp_path: Path) -> None:
    account = _service_account(tmp_path)
    env = _env(tmp_path, AWS_BEARER_TOKEN_BEDROCK=SECRET_KEY, AWS_REGION="eu-west-1",
               GOOGLE_APPLICATION_CREDENTIALS=str(account), XAI_API_KEY="xai-k")
    found = discover(env)
    text = starter_text(found, "example.toml")
    config = parse_config(text, env=env)
    claude, bedrock, vertex = (config.profile(n) for n in ("claude", "bedrock", "vertex"))
    assert claude is not None and claude.backup_providers == ("bedrock", "vertex", "grok")
    assert bedrock is not None and (bedrock.provider_type, bedrock.region) == ("Bedrock",
                                                                              "eu-west-1")
    assert bedrock.default_model == "eu.anthropic.claude-sonnet-4-5-20250929-v1:0"
    assert bedrock.backup_providers == ("vertex",) and bedrock.problem is None
    assert vertex is not None and (vertex.project, vertex.region) == ("acme-ai", "global")
    assert vertex.credentials_file == str(account) and vertex.problem is None
    assert SECRET_KEY not in text and "MIIE" not in text
    lines = "\n".join(report(found))
    assert 'AWS_BEARER_TOKEN_BEDROCK is set (a Bedrock API key) -> profile "bedrock"' in lines
    assert 'profile "vertex" (project acme-ai)' in lines
    assert config.warnings == ()


def test_claude_codes_own_settings_say_bedrock_or_vertex(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"env": {
        "CLAUDE_CODE_USE_VERTEX": "1", "ANTHROPIC_VERTEX_PROJECT_ID": "from-settings",
        "CLOUD_ML_REGION": "us-east5", "CLAUDE_CODE_USE_BEDROCK": "true",
        "AWS_REGION": "us-west-2", "AWS_BEARER_TOKEN_BEDROCK": SECRET_KEY}}))
    env = _env(tmp_path)
    found = discover(env)
    text = starter_text(found, "example.toml")
    config = parse_config(text, env=env)
    vertex, bedrock = config.profile("vertex"), config.profile("bedrock")
    assert vertex is not None and (vertex.project, vertex.region) == ("from-settings", "us-east5")
    assert bedrock is not None and bedrock.region == "us-west-2"
    assert SECRET_KEY not in text
    assert any("only: export it where `claudex serve` runs" in line for line in report(found))


def test_vertex_without_a_project_is_written_commented_out(tmp_path: Path) -> None:
    adc = tmp_path / ".config" / "gcloud" / "application_default_credentials.json"
    adc.parent.mkdir(parents=True)
    adc.write_text(json.dumps({"type": "authorized_user", "refresh_token": "1//never"}))
    env = _env(tmp_path)
    text = starter_text(discover(env), "example.toml")
    config = parse_config(text, env=env)
    assert config.profile("vertex") is None and "# name = \"vertex\"" in text
    assert "set project and uncomment" in text and "1//never" not in text
    assert config.profile("claude") is not None


def test_nothing_of_either_cloud_writes_nothing_of_them(tmp_path: Path) -> None:
    env = _env(tmp_path)
    text = starter_text(discover(env), "example.toml")
    assert "Bedrock" not in text and "Vertex" not in text
    assert parse_config(text, env=env).profile("claude") is not None


def test_claudex_init_writes_them_privately(tmp_path: Path) -> None:
    account = _service_account(tmp_path)
    path = tmp_path / "out.toml"
    env = _env(tmp_path, AWS_PROFILE="work", GOOGLE_APPLICATION_CREDENTIALS=str(account),
               XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    done = subprocess.run([sys.executable, "-m", "claudex.cli", "--config", str(path), "init"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert 'AWS_PROFILE=work -> profile "bedrock"' in done.stdout
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert 'aws_profile = "work"' in text and "MIIE" not in text
    checked = subprocess.run([sys.executable, "-m", "claudex.cli", "--config", str(path),
                              "check"], capture_output=True, text=True, env=env, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
