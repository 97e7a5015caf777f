"""The keys of a Bedrock, Vertex or `aws-sigv4` profile, checked together (config/clouds.py says
what they mean): which of them a profile needs, which make no sense for its type, and why its
secret may be missing. Each problem is (key, sentence); `_validate.py` locates it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from claudex.config.clouds import missing_extra, sigv4_region

_REQUIRED = ("name", "provider_type", "base_url")
_CLOUD_REQUIRED = {"Bedrock": ("name", "provider_type", "region"),
                   "Vertex": ("name", "provider_type", "region", "project")}
_EXAMPLE_REGION = {"Bedrock": '"us-east-1"', "Vertex": '"us-east5" or "global"'}


def required_profile_keys(provider_type: object) -> tuple[str, ...]:
    """A Bedrock or Vertex profile's address comes from its region (base_url is optional)."""
    return _CLOUD_REQUIRED.get(provider_type, _REQUIRED) if isinstance(provider_type, str) \
        else _REQUIRED


def missing_key_words(provider_type: object, key: str) -> str:
    if key == "region" and isinstance(provider_type, str) and provider_type in _EXAMPLE_REGION:
        return (f"missing required key: a {provider_type} profile's address and credentials "
                f"name its region ({_EXAMPLE_REGION[provider_type]})")
    if key == "project":
        return "missing required key: the Google Cloud project whose Vertex AI serves Claude"
    return "missing required key"


def cloud_key_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What is wrong with the combination of a profile's (checked) keys, cloud-wise."""
    kind = values.get("provider_type")
    auth = values.get("auth_type", "api-key")
    problems: list[tuple[str, str]] = []
    signed = auth == "aws-sigv4"
    if signed and kind not in ("DirectAnthropic", "Bedrock"):
        problems.append(("auth_type", '"aws-sigv4" signs requests with AWS credentials: only '
                         "for Bedrock profiles and DirectAnthropic ones at AWS's Anthropic "
                         "endpoint (Bedrock Mantle)"))
    if kind in ("Bedrock", "Vertex") and auth in ("oauth", "passthrough"):
        way = ("a Bedrock API key (api_key_env) or AWS credentials" if kind == "Bedrock"
               else "Google credentials (credentials_file, the application default "
               "credentials, or token_command)")
        problems.append(("auth_type", f"a {kind} profile authenticates with {way}, not "
                         f'auth_type "{auth}"'))
    aws = kind == "Bedrock" or (signed and kind == "DirectAnthropic")
    if "region" in values and kind not in ("Bedrock", "Vertex") and not aws:
        problems.append(("region", 'only Bedrock, Vertex and auth_type "aws-sigv4" profiles '
                         "have a region"))
    if signed and kind == "DirectAnthropic" and sigv4_region(values) is None:
        problems.append(("region", "needed to sign the requests: the base_url names no AWS "
                         'region (add region = "us-east-1", say)'))
    if "project" in values and kind != "Vertex":
        problems.append(("project", "only Vertex profiles have a project"))
    for key in ("aws_profile", "aws_service"):
        if key in values and not aws:
            problems.append((key, 'only Bedrock and auth_type "aws-sigv4" profiles use AWS '
                             "credentials"))
    if kind == "Vertex":
        for key in ("api_key", "api_key_env", "oauth_provider"):
            if values.get(key):
                problems.append((key, "a Vertex profile takes Google credentials: "
                                 "credentials_file (a service account's or gcloud's JSON), the "
                                 "application default credentials, or token_command"))
    if kind == "Bedrock":
        for key in ("oauth_provider", "credentials_file"):
            if key in values:
                problems.append((key, "a Bedrock profile takes a Bedrock API key (api_key_env) "
                                 "or AWS credentials (aws_profile, the AWS credential chain)"))
    return problems


def cloud_secret_problem(values: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """Why a cloud profile that passed its checks cannot be used here, or None: an extra that
    is not installed, a credentials file that is not there. Credentials found at run time
    (the AWS chain, Google's application default credentials) are not looked for here: a
    missing one is said when the first request needs it."""
    missing = missing_extra(values, env)
    if missing is not None:
        return missing
    shown = values.get("credentials_file")
    if values.get("provider_type") == "Vertex" and shown and not values.get("token_command"):
        path = Path(shown)
        home = env.get("HOME")
        if home and (shown == "~" or shown.startswith("~/")):
            path = Path(home + shown[1:])
        try:
            exists = path.expanduser().is_file()
        except (OSError, ValueError, RuntimeError) as error:
            return f"credentials file {shown} cannot be read ({type(error).__name__})"
        if not exists:
            return f"credentials file {shown} not found"
    return None


def cloud_model_advice(profile: Any, families: tuple[str, ...], role: str) -> str | None:
    """A Bedrock or Vertex profile names its models its own way (`us.anthropic.claude-…-v1:0`,
    `claude-…@20250929`): without default_model, a request whose family `models` does not map
    would carry an Anthropic model name the cloud does not know."""
    kind = profile.provider_type
    if kind not in ("Bedrock", "Vertex") or profile.default_model is not None:
        return None
    missing = [family for family in families if family not in profile.models]
    if not missing:
        return None
    example = ('"us.anthropic.claude-sonnet-4-5-20250929-v1:0"' if kind == "Bedrock"
               else '"claude-sonnet-4-5@20250929"')
    return (f"no default_model, and models maps no {', '.join(missing)}: {kind} names Claude "
            f"models its own way, so a request for one of those would have no model here{role}; "
            f"add default_model = {example} or map haiku, sonnet and opus in models")
