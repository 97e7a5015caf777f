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

__all__ = ["cloud_knows"]

_DATED: Final = re.compile(r"-\d{8}$")


def cloud_knows(provider_type: str, model: str) -> bool:
    if provider_type == "Bedrock":
        return "anthropic." in model or model.startswith("arn:")
    if provider_type == "Vertex":
        return _DATED.search(model) is None
    return True
