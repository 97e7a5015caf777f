"""Where a Bedrock request goes: the runtime's base, the invoke paths, the model id in them.

As anthropic-sdk-python's `lib/bedrock/_client.py` builds them: base
`https://bedrock-runtime.{region}.amazonaws.com`; `POST /model/{modelId}/invoke` for a whole
answer, `/model/{modelId}/invoke-with-response-stream` for a stream (botocore's bedrock-runtime
model, `requestUri`); the model id percent-encoded with `urllib.parse.quote(model, safe=":")`,
so an inference profile's ARN keeps its colons and its `/` becomes `%2F`. boto3 encodes the
colons too (`%3A`): a server reading these paths (`parse_invoke_path`) decodes either.

Bedrock Mantle, AWS's Anthropic-wire endpoint (the SDK's `lib/bedrock/_mantle.py`):
`https://bedrock-mantle.{region}.api.aws/anthropic`, the Anthropic Messages API under it,
signed SigV4 for the service `bedrock-mantle`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote

__all__ = [
    "MANTLE_SIGNING_SERVICE",
    "SIGNING_SERVICE",
    "InvokeRoute",
    "default_base_url",
    "invoke_url",
    "mantle_base_url",
    "model_path_segment",
    "parse_invoke_path",
]

SIGNING_SERVICE: Final = "bedrock"
"""SigV4's service name for bedrock-runtime (the model's `signingName`), and its Bearer
token's environment variable suffix: `AWS_BEARER_TOKEN_BEDROCK`."""
MANTLE_SIGNING_SERVICE: Final = "bedrock-mantle"

_INVOKE_PATH: Final = re.compile(r"^/model/([^/]+)/(invoke|invoke-with-response-stream)$")


def default_base_url(region: str) -> str:
    return f"https://bedrock-runtime.{region}.amazonaws.com"


def mantle_base_url(region: str) -> str:
    return f"https://bedrock-mantle.{region}.api.aws/anthropic"


def model_path_segment(model_id: str) -> str:
    """The model id as the SDK puts it in the path."""
    return quote(model_id, safe=":")


def invoke_url(base_url: str, model_id: str, *, stream: bool) -> str:
    action = "invoke-with-response-stream" if stream else "invoke"
    return f"{base_url.rstrip('/')}/model/{model_path_segment(model_id)}/{action}"


@dataclass(frozen=True, slots=True)
class InvokeRoute:
    model_id: str
    """Decoded: `us.anthropic.claude-sonnet-4-5-20250929-v1:0`, an ARN with its `/`."""
    stream: bool


def parse_invoke_path(raw_path: str) -> InvokeRoute | None:
    """The model and the kind of an invoke request from its path as received (still
    percent-encoded, without the query); None for any other path."""
    match = _INVOKE_PATH.match(raw_path)
    if match is None:
        return None
    model_id = unquote(match.group(1))
    if not model_id:
        return None
    return InvokeRoute(model_id, match.group(2) == "invoke-with-response-stream")
