"""Whether a model name is one a cloud knows Claude by: Bedrock's ids are `anthropic.…` (`-v1:0`
for most) with a geography in front for an inference profile (`us.`, `eu.`, `apac.`, `global.`),
or an ARN (an application inference profile); Vertex's are Anthropic's names, dated ones with
the date after an `@` (`claude-sonnet-4-5@20250929`; newer models undated, `claude-opus-4-6`:
Anthropic's "Claude on Vertex AI" page lists both). A name the cloud would not know (Claude
Code's `claude-sonnet-4-5-20250929`) is not sent there: the profile's `models` or
`default_model` is (`engine/core/addressing.py`). An undated alias of an older model
(`claude-sonnet-4-5`) cannot be told from a newer model's id: it goes as it is, unless `models`
maps its family."""

from __future__ import annotations

import re
from typing import Final

__all__ = ["anthropic_name", "cloud_knows", "is_cloud_id"]

_DATED: Final = re.compile(r"-\d{8}$")
# us.anthropic.claude-sonnet-4-5-20250929-v1:0 -> claude-sonnet-4-5-20250929
_BEDROCK_ID: Final = re.compile(
    r"^(?:[a-z-]+\.)?anthropic\.(claude-[A-Za-z0-9.-]+?)(?:-v\d+(?::\d+)?)?$")
_VERTEX_ID: Final = re.compile(r"^(claude-[A-Za-z0-9.-]+)@(\d{8})$")


def is_cloud_id(model: str) -> bool:
    """A Bedrock or Vertex way of naming a Claude model (what a client in Bedrock or Vertex
    mode asks for)."""
    return "anthropic." in model or "@" in model or model.startswith("arn:")


def cloud_knows(provider_type: str, model: str) -> bool:
    if provider_type == "Bedrock":
        return "anthropic." in model or model.startswith("arn:")
    if provider_type == "Vertex":
        return _DATED.search(model) is None and "anthropic." not in model and \
            not model.startswith("arn:")
    return True


def anthropic_name(model: str) -> str | None:
    """The Anthropic API's name for a Bedrock or Vertex model id, when it can be told from the
    id (not from an ARN): `us.anthropic.claude-sonnet-4-5-20250929-v1:0` and
    `claude-sonnet-4-5@20250929` are `claude-sonnet-4-5-20250929`."""
    bedrock = _BEDROCK_ID.match(model)
    if bedrock is not None:
        return bedrock.group(1)
    vertex = _VERTEX_ID.match(model)
    return f"{vertex.group(1)}-{vertex.group(2)}" if vertex is not None else None
