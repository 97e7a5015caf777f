"""Claude on Google Vertex AI, on the one forwarding path (`wire.Wire`'s pieces; the wire format is
`claudex.providers.vertex`'s):

    url            {base}/projects/{project}/locations/{region}/publishers/anthropic/models/
                   {model}:rawPredict (:streamRawPredict for a stream); a token count to
                   …/models/count-tokens:rawPredict (Google: "There is no cost for using the
                   count-tokens endpoint")
    body           without `model` (a count keeps it), `anthropic_version` vertex-2023-10-16;
                   betas stay in the `anthropic-beta` header, as anthropic-sdk-python sends them
    signer         none: the credentials' header carries the access token google-auth minted
                   (or a token_command printed); a 401 mints another and the request is tried
                   once more (`refreshes_on_401`, the OAuth refresh-then-retry path)
    stream_codec   none: streamRawPredict answers plain Anthropic SSE

Google's errors (`{"error": {"code", "message", "status"}}`, sometimes in an array) are read by
`refusal` for `classify.classify_cloud`, and reach a client in the Anthropic API's shape.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from claudex.config.clouds import uses_google_auth
from claudex.config.model import Profile
from claudex.engine.clouds.wire import Refusal, Wire, WireRequest
from claudex.providers import anthropic
from claudex.providers.vertex import (
    ANTHROPIC_VERSION,
    count_tokens_body,
    count_tokens_url,
    parse_error,
    predict_url,
    vertex_body,
)

__all__ = ["VertexWire"]


class VertexWire(Wire):
    kind = "vertex"

    def __init__(self, profile: Profile) -> None:
        super().__init__(profile)
        self.refreshes_on_401 = uses_google_auth(profile)

    def _place(self) -> tuple[str, str, str]:
        profile = self.profile
        return profile.base_url, profile.project or "", profile.region or ""

    def url(self, req: WireRequest) -> str:
        base, project, region = self._place()
        if req.count_tokens:
            return count_tokens_url(base, project, region)
        return predict_url(base, project, region, req.model or "", stream=req.stream)

    def body(self, body: Mapping[str, Any], req: WireRequest) -> tuple[dict[str, Any],
                                                                        tuple[str, ...]]:
        if req.count_tokens:
            counted = count_tokens_body(body)
            if req.model:
                counted["model"] = req.model
            return counted, ()
        return vertex_body(body), ()

    def refusal(self, status: int, headers: Mapping[str, str], payload: bytes) -> Refusal:
        return parse_error(status, payload)

    def error_answer(self, status: int, payload: bytes) -> tuple[int, bytes]:
        error = parse_error(status, payload)
        if error.anthropic:
            return status, payload  # the model's own refusal, already in Anthropic's shape
        words = error.message or "Vertex AI refused the request."
        return status, anthropic.error_body(status, f"{error.status}: {words}"
                                            if error.status else words)

    def probe(self) -> tuple[str, bytes] | None:
        """count-tokens:rawPredict for the profile's model: free (Google's count-tokens page),
        and it proves the token, the project and the model's enablement."""
        model = self.profile.default_model or next(iter(self.profile.models.values()), None)
        if model is None:
            return None
        body = {"anthropic_version": ANTHROPIC_VERSION, "model": model,
                "messages": [{"role": "user", "content": "ping"}]}
        return count_tokens_url(*self._place()), json.dumps(body).encode()

    def status_json(self) -> dict[str, Any]:
        return {"wire": self.kind, "region": self.profile.region,
                "project": self.profile.project,
                "tokens": "google-auth" if self.refreshes_on_401 else "token_command"}
