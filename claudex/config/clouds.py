"""Claude on clouds (DESIGN.md "Claude on clouds"): what a Bedrock, Vertex or `aws-sigv4` profile
means before any request is sent — its default address, how it authenticates, and what must be
installed for that.

    Bedrock      base_url default https://bedrock-runtime.{region}.amazonaws.com. Auth, first
                 match (the issue's order, and the SDKs'): `api_key_env` (or `api_key`, or a
                 `token_command`) sent as `Authorization: Bearer` (a Bedrock API key);
                 AWS_BEARER_TOKEN_BEDROCK when set; else the AWS credential chain (`aws_profile`
                 or AWS_PROFILE, env keys, SSO, roles) signing SigV4 for the service `bedrock`.
                 `auth_type = "aws-sigv4"` skips the two keys and always signs.
    Vertex       base_url default https://{region}-aiplatform.googleapis.com/v1 (global:
                 https://aiplatform.googleapis.com/v1). Auth: a `token_command` printing an
                 access token, else google-auth with `credentials_file` (a service account's or
                 gcloud's ADC JSON) or the application default credentials.
    aws-sigv4    a DirectAnthropic profile at AWS's Anthropic-wire endpoint (Bedrock Mantle,
                 https://bedrock-mantle.{region}.api.aws/anthropic), signed SigV4 for
                 `aws_service` (default `bedrock-mantle`) in `region` (default: the one its
                 base_url names).

SigV4 needs botocore, Google's credentials google-auth: extras (`claudex[bedrock]`,
`claudex[vertex]`), imported only by a profile that uses them. A Bedrock API key needs neither.
Nothing here imports them: `find_spec` only looks.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "BEDROCK_API_KEY_ENV",
    "INSTALL_BEDROCK",
    "INSTALL_VERTEX",
    "default_base_url",
    "missing_extra",
    "signs_sigv4",
    "sigv4_region",
    "sigv4_service",
    "uses_google_auth",
]

BEDROCK_API_KEY_ENV: Final = "AWS_BEARER_TOKEN_BEDROCK"
"""The variable the SDKs and boto3 read a Bedrock API key from (AWS's "Use an Amazon Bedrock API
key"); botocore's `AWS_BEARER_TOKEN_{signing name}`."""
INSTALL_BEDROCK: Final = "pip install 'claudex[bedrock]'"
INSTALL_VERTEX: Final = "pip install 'claudex[vertex]'"
_DEFAULT_SERVICE: Final = {"Bedrock": "bedrock", "DirectAnthropic": "bedrock-mantle"}
# The region an AWS host names: bedrock-mantle.us-east-1.api.aws, bedrock-runtime.eu-west-3....
_HOST_REGION: Final = re.compile(r"\.([a-z]{2}(?:-gov)?-[a-z]+-\d+)\.")


def default_base_url(provider_type: str, region: str) -> str:
    """Where a Bedrock or Vertex profile without `base_url` sends its requests."""
    if provider_type == "Bedrock":
        from claudex.providers.bedrock.urls import default_base_url as bedrock_base

        return bedrock_base(region)
    from claudex.providers.vertex.urls import default_base_url as vertex_base

    return vertex_base(region)


def _get(profile: Any, key: str) -> Any:
    if isinstance(profile, Mapping):
        return profile.get(key)
    return getattr(profile, key, None)


def signs_sigv4(profile: Any, env: Mapping[str, str]) -> bool:
    """Whether requests of `profile` (a `Profile`, or its checked values) are signed SigV4."""
    if _get(profile, "auth_type") == "aws-sigv4":
        return True
    if _get(profile, "provider_type") != "Bedrock":
        return False
    if _get(profile, "api_key_env") or _get(profile, "api_key") or _get(profile, "token_command"):
        return False
    return not env.get(BEDROCK_API_KEY_ENV, "").strip()


def uses_google_auth(profile: Any) -> bool:
    """Whether a profile's tokens are minted by google-auth (a Vertex profile without a
    token_command)."""
    return _get(profile, "provider_type") == "Vertex" and not _get(profile, "token_command")


def sigv4_service(profile: Any) -> str:
    service = _get(profile, "aws_service")
    if isinstance(service, str) and service:
        return service
    return _DEFAULT_SERVICE.get(str(_get(profile, "provider_type")), "bedrock")


def sigv4_region(profile: Any) -> str | None:
    """The profile's `region`, else the one its base_url's host names."""
    region = _get(profile, "region")
    if isinstance(region, str) and region:
        return region
    found = _HOST_REGION.search(str(_get(profile, "base_url") or ""))
    return found.group(1) if found else None


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_extra(profile: Any, env: Mapping[str, str]) -> str | None:
    """Why `profile` cannot be served on this installation (an extra it needs is missing), with
    the command that installs it; None when nothing is missing."""
    if signs_sigv4(profile, env) and not _installed("botocore"):
        return (f"signing with AWS credentials needs botocore, which is not installed: "
                f"{INSTALL_BEDROCK} (or set api_key_env to a Bedrock API key)")
    if uses_google_auth(profile) and not _installed("google.auth"):
        return (f"Google credentials need google-auth, which is not installed: "
                f"{INSTALL_VERTEX} (or set token_command)")
    return None
