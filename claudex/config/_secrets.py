"""Whether a profile's secret is available: an API key, an OAuth credentials file, or neither.

A missing secret is not a problem of the file: the profile still loads, with `Profile.problem`
set to the reason returned here, and failover skips it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from claudex.config._cloud_checks import cloud_secret_problem
from claudex.config.clouds import signs_sigv4, uses_google_auth
from claudex.config.model import CLOUD_PROVIDER_TYPES, UNSERVED_PROVIDER_TYPES

DEFAULT_CREDENTIALS_FILES: Mapping[str, str] = {
    "claude": "~/.claude/.credentials.json",
    "codex": "~/.codex/auth.json",
}


# What every unsupported way of getting a secret tells the user to use instead.
USE_TOKEN_COMMAND = "not supported by claudex, use token_command"


def _profile_problem(
    values: Mapping[str, Any], env: Mapping[str, str], *, uses_keyring: bool = False
) -> str | None:
    """Why a profile that passed its checks still cannot be used, or None.

    Something claudex does not serve (a provider type, an OAuth login) comes first: a secret
    would not make such a profile usable.
    """
    unserved = UNSERVED_PROVIDER_TYPES.get(values["provider_type"])
    if unserved is not None:
        return unserved
    if values["provider_type"] in CLOUD_PROVIDER_TYPES or values.get("auth_type") == "aws-sigv4":
        cloud = cloud_secret_problem(values, env)
        own_key = any(values.get(k) for k in ("api_key", "api_key_env", "token_command"))
        if cloud is not None or signs_sigv4(values, env) or uses_google_auth(values) or (
                values["provider_type"] == "Bedrock" and not own_key):
            # AWS_BEARER_TOKEN_BEDROCK, the AWS chain, Google's credentials: read when needed
            return cloud
    return _secret_problem(values, env, uses_keyring=uses_keyring)


def _secret_problem(
    values: Mapping[str, Any], env: Mapping[str, str], *, uses_keyring: bool = False
) -> str | None:
    """Why the profile's secret is unavailable, or None. Never raises, never shows a secret."""
    auth_type = values.get("auth_type", "api-key")
    if auth_type == "passthrough" or values.get("token_command"):
        return None
    if auth_type == "oauth":
        provider = values["oauth_provider"]
        if provider not in DEFAULT_CREDENTIALS_FILES:
            return f'oauth_provider "{provider}" is {USE_TOKEN_COMMAND}'
        shown = (
            values.get("credentials_file") or DEFAULT_CREDENTIALS_FILES[provider]
        )
        try:
            exists = _expand_home(shown, env).is_file()
        except (OSError, ValueError) as error:
            return f"credentials file {shown} cannot be read ({type(error).__name__})"
        return None if exists else f"credentials file {shown} not found"
    if values.get("api_key"):
        return None
    variable = values.get("api_key_env")
    if variable is None:
        if uses_keyring:
            return f"api_key_keyring is {USE_TOKEN_COMMAND} (or api_key_env)"
        if values.get("api_key") == "":
            # Written out empty: a local server (Ollama, LM Studio) that wants no key.
            return None
        return "no API key configured (set api_key_env)"
    secret = env.get(variable)
    if secret is None:
        return f"environment variable {variable} is not set"
    if not secret.strip():
        return f"environment variable {variable} is empty"
    return None


def _expand_home(path: str, env: Mapping[str, str]) -> Path:
    home = env.get("HOME")
    if home and (path == "~" or path.startswith(("~/", "~" + os.sep))):
        return Path(home + path[1:])
    return Path(os.path.expanduser(path))
