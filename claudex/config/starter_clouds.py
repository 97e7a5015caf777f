"""`claudex init` for Claude on Bedrock and Vertex: what this machine shows of them, and the
profiles that follow (config/starter.py writes them with the rest).

Bedrock is found by AWS_BEARER_TOKEN_BEDROCK (a Bedrock API key), AWS keys or a profile in the
environment (AWS_ACCESS_KEY_ID, AWS_PROFILE), the AWS CLI's files (~/.aws/credentials,
~/.aws/config, or where AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE point), or Claude Code set
to Bedrock (CLAUDE_CODE_USE_BEDROCK in the environment or in the `env` of Claude Code's
settings: ~/.claude/settings.json, and the managed settings an enterprise installs). Vertex by
GOOGLE_APPLICATION_CREDENTIALS, gcloud's application default credentials
(~/.config/gcloud/application_default_credentials.json, or under CLOUDSDK_CONFIG), or
CLAUDE_CODE_USE_VERTEX. The region comes from AWS_REGION / AWS_DEFAULT_REGION and
CLOUD_ML_REGION (Claude Code's variables), the project from ANTHROPIC_VERTEX_PROJECT_ID,
GOOGLE_CLOUD_PROJECT, or the credentials file's own `project_id` / `quota_project_id`.

Only names are written: variable names, file paths, a region, a project id. No key, token or
private key is read beyond seeing that a variable is not empty, and a credentials file is read
only for its project id.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from claudex.config._secrets import _expand_home
from claudex.config.clouds import BEDROCK_API_KEY_ENV

__all__ = ["CloudsFound", "cloud_profiles", "cloud_report", "discover_clouds"]

BEDROCK: Final = "bedrock"
VERTEX: Final = "vertex"
CLAUDE_SETTINGS: Final = ("~/.claude/settings.json", "/etc/claude-code/managed-settings.json")
_WANTED: Final = ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "AWS_REGION",
                  "AWS_DEFAULT_REGION", "AWS_PROFILE", "CLOUD_ML_REGION",
                  "ANTHROPIC_VERTEX_PROJECT_ID", BEDROCK_API_KEY_ENV)
# Bedrock's inference profiles by the region's geography (AWS: "Supported Regions and models
# for inference profiles"); elsewhere the global one.
_GEOGRAPHY: Final = {"us": "us", "ca": "us", "eu": "eu", "ap": "apac"}
_CLAUDE_BEDROCK: Final = ("claude-haiku-4-5-20251001-v1:0", "claude-sonnet-4-5-20250929-v1:0",
                          "claude-opus-4-1-20250805-v1:0")
_CLAUDE_VERTEX: Final = ("claude-haiku-4-5@20251001", "claude-sonnet-4-5@20250929",
                         "claude-opus-4-1@20250805")


@dataclass(frozen=True)
class CloudsFound:
    bedrock: tuple[str, ...]
    """Why a Bedrock profile is written (what was found), empty for none."""
    region: str
    aws_profile: str | None
    bedrock_key_in_settings: bool
    """AWS_BEARER_TOKEN_BEDROCK is in Claude Code's settings but not in this environment."""
    vertex: tuple[str, ...]
    vertex_region: str
    project: str | None
    credentials_file: str | None
    """GOOGLE_APPLICATION_CREDENTIALS' file (else the chain finds gcloud's)."""

    @property
    def any(self) -> bool:
        return bool(self.bedrock or self.vertex)


def _settings_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables Claude Code's settings set (`env`), the ones wanted here only."""
    found: dict[str, str] = {}
    for shown in CLAUDE_SETTINGS:
        try:
            data: Any = json.loads(_expand_home(shown, env).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        block = data.get("env") if isinstance(data, dict) else None
        if isinstance(block, dict):
            for name in _WANTED:
                value = block.get(name)
                if isinstance(value, str) and value.strip():
                    found[name] = value.strip()
    return found


def _on(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _file(shown: str, env: Mapping[str, str]) -> Path | None:
    try:
        path = _expand_home(shown, env)
        return path if path.is_file() else None
    except (OSError, ValueError):
        return None


def _project_in(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for key in ("project_id", "quota_project_id"):
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def discover_clouds(env: Mapping[str, str]) -> CloudsFound:
    settings = _settings_env(env)

    def var(name: str) -> str | None:
        value = env.get(name, "").strip()
        return value or settings.get(name)

    bedrock: list[str] = []
    if env.get(BEDROCK_API_KEY_ENV, "").strip():
        bedrock.append(f"{BEDROCK_API_KEY_ENV} is set (a Bedrock API key)")
    if env.get("AWS_ACCESS_KEY_ID", "").strip():
        bedrock.append("AWS_ACCESS_KEY_ID is set")
    if var("AWS_PROFILE"):
        bedrock.append(f"AWS_PROFILE={var('AWS_PROFILE')}")
    for variable, default in (("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials"),
                              ("AWS_CONFIG_FILE", "~/.aws/config")):
        shown = env.get(variable) or default
        if _file(shown, env) is not None:
            bedrock.append(f"{shown} exists")
    if _on(var("CLAUDE_CODE_USE_BEDROCK")):
        bedrock.append("Claude Code is set to Bedrock (CLAUDE_CODE_USE_BEDROCK)")
    vertex: list[str] = []
    credentials = env.get("GOOGLE_APPLICATION_CREDENTIALS", "").strip() or None
    if credentials:
        vertex.append(f"GOOGLE_APPLICATION_CREDENTIALS={credentials}")
    gcloud = env.get("CLOUDSDK_CONFIG") or "~/.config/gcloud"
    adc = _file(f"{gcloud.rstrip('/')}/application_default_credentials.json", env)
    if adc is not None:
        vertex.append(f"gcloud's application default credentials ({adc})")
    if _on(var("CLAUDE_CODE_USE_VERTEX")):
        vertex.append("Claude Code is set to Vertex (CLAUDE_CODE_USE_VERTEX)")
    project = (var("ANTHROPIC_VERTEX_PROJECT_ID") or env.get("GOOGLE_CLOUD_PROJECT", "").strip()
               or _project_in(_file(credentials, env) if credentials else None)
               or _project_in(adc))
    return CloudsFound(
        bedrock=tuple(bedrock),
        region=var("AWS_REGION") or var("AWS_DEFAULT_REGION") or "us-east-1",
        aws_profile=var("AWS_PROFILE"),
        bedrock_key_in_settings=BEDROCK_API_KEY_ENV in settings
        and not env.get(BEDROCK_API_KEY_ENV, "").strip(),
        vertex=tuple(vertex), vertex_region=var("CLOUD_ML_REGION") or "global",
        project=project, credentials_file=credentials)


def cloud_report(found: CloudsFound) -> list[str]:
    lines = []
    if found.bedrock:
        lines.append(f'found    {"; ".join(found.bedrock)} -> profile "{BEDROCK}" '
                     f"(region {found.region})")
    else:
        lines.append("missing  AWS credentials, AWS_BEARER_TOKEN_BEDROCK, CLAUDE_CODE_USE_BEDROCK")
    if found.bedrock_key_in_settings:
        lines.append(f"note     {BEDROCK_API_KEY_ENV} is in Claude Code's settings only: export "
                     "it where `claudex serve` runs (it was not copied)")
    if found.vertex:
        where = f"project {found.project}" if found.project else "no project found: set it"
        lines.append(f'found    {"; ".join(found.vertex)} -> profile "{VERTEX}" ({where})')
    else:
        lines.append("missing  GOOGLE_APPLICATION_CREDENTIALS, gcloud application default "
                     "credentials, CLAUDE_CODE_USE_VERTEX")
    return lines


def _bedrock_model(region: str, model: str) -> str:
    geography = _GEOGRAPHY.get(region.split("-", 1)[0], "global")
    return f"{geography}.anthropic.{model}"


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def cloud_profiles(found: CloudsFound, backups: Mapping[str, list[str]]) -> str:
    """The Bedrock and Vertex profiles for `found` (a Vertex one without a project is written
    commented out, saying so); `backups`: each one's backup list."""
    parts: list[str] = []
    if found.bedrock:
        models = dict(zip(("haiku", "sonnet", "opus"),
                          (_bedrock_model(found.region, m) for m in _CLAUDE_BEDROCK),
                          strict=True))
        lines = ["", "# Claude on AWS Bedrock: the same models, on your AWS account (found: "
                 + "; ".join(found.bedrock) + ").",
                 "# Without api_key_env: AWS_BEARER_TOKEN_BEDROCK when set where the proxy runs,",
                 "# else the AWS credential chain, signed SigV4 (pip install 'claudex[bedrock]').",
                 "[[profiles]]", f"name = {_quoted(BEDROCK)}", 'provider_type = "Bedrock"',
                 f"region = {_quoted(found.region)}"]
        if found.aws_profile:
            lines.append(f"aws_profile = {_quoted(found.aws_profile)}")
        lines.append("# Bedrock's model ids: check they are enabled in your account and region.")
        lines.append(f"default_model = {_quoted(models['sonnet'])}")
        lines.append("models = { " + ", ".join(f"{k} = {_quoted(v)}" for k, v in models.items())
                     + " }")
        if backups.get(BEDROCK):
            lines.append("backup_providers = [" + ", ".join(_quoted(b) for b in backups[BEDROCK])
                         + "]")
        parts.append("\n".join(lines) + "\n")
    if found.vertex:
        models = dict(zip(("haiku", "sonnet", "opus"), _CLAUDE_VERTEX, strict=True))
        lines = ["", "# Claude on Google Vertex AI (found: " + "; ".join(found.vertex) + ").",
                 "# Tokens are minted by google-auth (pip install 'claudex[vertex]').",
                 "[[profiles]]", f"name = {_quoted(VERTEX)}", 'provider_type = "Vertex"',
                 f"region = {_quoted(found.vertex_region)}",
                 f"project = {_quoted(found.project or 'YOUR-GCP-PROJECT')}"]
        if found.credentials_file:
            lines.append(f"credentials_file = {_quoted(found.credentials_file)}")
        lines.append(f"default_model = {_quoted(models['sonnet'])}")
        lines.append("models = { " + ", ".join(f"{k} = {_quoted(v)}" for k, v in models.items())
                     + " }")
        if backups.get(VERTEX):
            lines.append("backup_providers = [" + ", ".join(_quoted(b) for b in backups[VERTEX])
                         + "]")
        block = "\n".join(lines) + "\n"
        if not found.project:
            block = ("\n# No Google Cloud project was found (ANTHROPIC_VERTEX_PROJECT_ID): set "
                     "project and uncomment." + "".join(
                         line if not line.strip() or line.startswith("#") else f"# {line}"
                         for line in block.splitlines(keepends=True)))
        parts.append(block)
    return "".join(parts)
