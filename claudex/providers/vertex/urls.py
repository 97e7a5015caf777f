"""Where a Vertex AI request for Claude goes.

As anthropic-sdk-python's `lib/vertex/_client.py` builds them: the base is
`https://{region}-aiplatform.googleapis.com/v1`, `https://aiplatform.googleapis.com/v1` for the
`global` region and `https://aiplatform.{us|eu}.rep.googleapis.com/v1` for the `us` and `eu`
multi-regions; a message goes to
`{base}/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict`
(`:streamRawPredict` for a stream), a token count to `…/models/count-tokens:rawPredict`
(Google's "Count tokens for Claude models" page says the same URL). The SDK puts the model in
the path as it is (`claude-sonnet-4-5@20250929`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import quote, unquote

__all__ = [
    "COUNT_TOKENS_MODEL",
    "PredictRoute",
    "count_tokens_url",
    "default_base_url",
    "parse_predict_path",
    "predict_url",
]

COUNT_TOKENS_MODEL: Final = "count-tokens"
_MULTI_REGION_HOSTS: Final = {
    "global": "https://aiplatform.googleapis.com/v1",
    "us": "https://aiplatform.us.rep.googleapis.com/v1",
    "eu": "https://aiplatform.eu.rep.googleapis.com/v1",
}
_PREDICT_PATH: Final = re.compile(
    r"^(?P<prefix>.*?)/projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)"
    r"/publishers/anthropic/models/(?P<model>[^/:]+):(?P<method>rawPredict|streamRawPredict)$")


def default_base_url(region: str) -> str:
    return _MULTI_REGION_HOSTS.get(region, f"https://{region}-aiplatform.googleapis.com/v1")


def _models(base_url: str, project: str, region: str) -> str:
    return (f"{base_url.rstrip('/')}/projects/{quote(project, safe='')}/locations/"
            f"{quote(region, safe='')}/publishers/anthropic/models")


def predict_url(base_url: str, project: str, region: str, model: str, *, stream: bool) -> str:
    method = "streamRawPredict" if stream else "rawPredict"
    return f"{_models(base_url, project, region)}/{quote(model, safe='@')}:{method}"


def count_tokens_url(base_url: str, project: str, region: str) -> str:
    return f"{_models(base_url, project, region)}/{COUNT_TOKENS_MODEL}:rawPredict"


Method = Literal["rawPredict", "streamRawPredict"]


@dataclass(frozen=True, slots=True)
class PredictRoute:
    project: str
    region: str
    model: str
    """`count-tokens` for a token count."""
    method: Method
    prefix: str
    """What came before `/projects` (`/v1` on Google's hosts)."""

    @property
    def stream(self) -> bool:
        return self.method == "streamRawPredict"

    @property
    def count_tokens(self) -> bool:
        return self.model == COUNT_TOKENS_MODEL and self.method == "rawPredict"


def parse_predict_path(raw_path: str) -> PredictRoute | None:
    """A predict request's parts from its path as received (percent-encoded, no query)."""
    match = _PREDICT_PATH.match(raw_path)
    if match is None:
        return None
    method: Method = "streamRawPredict" if match["method"] == "streamRawPredict" else "rawPredict"
    return PredictRoute(unquote(match["project"]), unquote(match["region"]),
                        unquote(match["model"]), method, match["prefix"])
