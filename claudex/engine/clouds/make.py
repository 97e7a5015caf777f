"""A profile's wire and, where its cloud needs them, its own credentials (config/clouds.py says
which profile authenticates how):

    Bedrock, a Bedrock API key   BedrockWire without a signer; the key is the profile's
                                 (api_key_env, api_key, token_command) or AWS_BEARER_TOKEN_BEDROCK,
                                 sent as a Bearer token by the usual `Credentials`
    Bedrock, the AWS chain       BedrockWire with an `AwsSigner` for `bedrock`; `SignedCredentials`
    aws-sigv4 DirectAnthropic    the Anthropic wire with an `AwsSigner` (`bedrock-mantle`)
    Vertex, google-auth          VertexWire; `GoogleCredentials` over a `GoogleTokenSource`
    Vertex, token_command        VertexWire; the usual `Credentials` (re-run on a 401)

botocore and google-auth are imported by the sources themselves, when the first request or
probe needs a key or a token: a config without such a profile never loads them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from claudex.config.clouds import (
    BEDROCK_API_KEY_ENV,
    signs_sigv4,
    sigv4_region,
    sigv4_service,
    uses_google_auth,
)
from claudex.config.model import Profile
from claudex.engine.clouds.bedrock import BedrockWire
from claudex.engine.clouds.credentials import AwsSigner, GoogleCredentials, SignedCredentials
from claudex.engine.clouds.vertex import VertexWire
from claudex.engine.clouds.wire import Wire
from claudex.engine.credentials.aws_sigv4 import AwsCredentialSource
from claudex.engine.credentials.google_tokens import GoogleTokenSource
from claudex.engine.credentials.upstream import UpstreamCredentials
from claudex.engine.events import Event

__all__ = ["cloud_credentials", "credentials_profile", "is_cloud", "make_wire"]


def is_cloud(profile: Profile) -> bool:
    return profile.provider_type in ("Bedrock", "Vertex") or profile.auth_type == "aws-sigv4"


def _signer(profile: Profile) -> AwsSigner:
    return AwsSigner(profile.name, AwsCredentialSource(profile=profile.aws_profile),
                     service=sigv4_service(profile), region=sigv4_region(profile) or "us-east-1")


def make_wire(profile: Profile, env: Mapping[str, str]) -> Wire | None:
    """The profile's wire; None for a profile that speaks its protocol's own."""
    if profile.provider_type == "Bedrock":
        return BedrockWire(profile, _signer(profile) if signs_sigv4(profile, env) else None)
    if profile.provider_type == "Vertex":
        return VertexWire(profile)
    if profile.auth_type == "aws-sigv4":
        wire = Wire(profile)
        wire.kind = "aws-sigv4"
        wire.signer = _signer(profile)
        return wire
    return None


def cloud_credentials(profile: Profile, env: Mapping[str, str], *,
                      on_event: Callable[[Event], None] | None = None,
                      ) -> UpstreamCredentials | None:
    """The profile's credentials when they are a cloud's own; None when the usual `Credentials`
    serve (over `credentials_profile(profile, env)`)."""
    if signs_sigv4(profile, env):
        return SignedCredentials(profile)
    if uses_google_auth(profile):
        source = GoogleTokenSource(credentials_file=_expanded(profile.credentials_file, env))
        return GoogleCredentials(profile, source, on_event=on_event)
    return None


def credentials_profile(profile: Profile, env: Mapping[str, str]) -> Profile:
    """The profile as the usual `Credentials` read it: a Bedrock profile with no key of its own
    reads AWS_BEARER_TOKEN_BEDROCK, as the SDKs do."""
    if profile.provider_type == "Bedrock" and not (
            profile.api_key_env or profile.api_key or profile.token_command):
        return dataclasses.replace(profile, api_key_env=BEDROCK_API_KEY_ENV)
    return profile


def _expanded(path: str | None, env: Mapping[str, str]) -> str | None:
    if not path:
        return None
    home = env.get("HOME")
    if home and (path == "~" or path.startswith("~/")):
        return home + path[1:]
    import os.path

    return os.path.expanduser(path)
