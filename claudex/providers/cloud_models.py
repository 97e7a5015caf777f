"""Whether a model name is one a cloud knows Claude by: Bedrock's ids are `anthropic.…-v1:0`
with a geography in front for an inference profile (`us.`, `eu.`, `apac.`, `global.`), or an
ARN (an application inference profile); Vertex's are Anthropic's names with the date after an
`@` (`claude-sonnet-4-5@20250929`). A name the cloud would not know (Claude Code's
`claude-sonnet-4-5-20250929`, the alias `claude-sonnet-4-5`) is not sent there: the profile's
`models` or `default_model` is (`engine/core/addressing.py`); a Vertex model named without a
date is reached through `models`."""

from __future__ import annotations

__all__ = ["cloud_knows"]


def cloud_knows(provider_type: str, model: str) -> bool:
    if provider_type == "Bedrock":
        return "anthropic." in model or model.startswith("arn:")
    if provider_type == "Vertex":
        return "@" in model
    return True
