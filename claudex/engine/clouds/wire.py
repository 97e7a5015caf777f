"""What a provider type changes on the one forwarding path: the four small pieces (DESIGN.md
style, "A provider is four small pieces, not a new path").

    url            where the request goes (None: the Anthropic API's own path)
    body           the Anthropic body rewritten for the wire (the exchange builds the Anthropic
                   body first, whatever the client spoke, then hands it here)
    signer         what signs the exact bytes and headers sent (SigV4), or None when the
                   credentials' headers suffice (a Bedrock API key, a Vertex access token)
    stream_codec   the stream decoder in front of the codec the client's protocol needs

and what the answer path needs of the wire: the error a refusal carries (`refusal`, for
`classify.classify_cloud`), that error in the Anthropic API's shape for a client (`error_answer`),
and whether a token count is answered locally. `Wire` is the Anthropic API itself: every piece
as it is. Bedrock's and Vertex's are in `bedrock.py` and `vertex.py`; one wire per provider
runtime, made by `wire_for` (this package's `__init__`), keeps what it learned of the provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from claudex.config.model import Profile
from claudex.engine.core.stream_codec import StreamCodec
from claudex.providers.bedrock.errors import BedrockError
from claudex.providers.vertex.errors import VertexError

__all__ = ["Refusal", "RequestSigner", "Wire", "WireRequest"]

Refusal = BedrockError | VertexError
"""A cloud's error answer, read (its kind for claudex, its words)."""


class RequestSigner(Protocol):
    """Signs one request: the headers to add, computed over exactly what is sent."""

    async def sign(self, method: str, url: str, headers: Mapping[str, str],
                   body: bytes) -> dict[str, str]: ...


@dataclass(frozen=True, slots=True)
class WireRequest:
    """What the wire reads of one request at one provider (the exchange's facts, no more)."""

    model: str | None
    """The model sent (mapped for this profile)."""
    stream: bool
    """The upstream answer is streamed."""
    count_tokens: bool
    beta: str | None
    """The client's `anthropic-beta` header."""


class Wire:
    """The Anthropic API's wire: nothing changes. Subclasses change what their cloud needs."""

    kind = "anthropic"
    refreshes_on_401 = False
    """A 401 means the access token expired: mint another and retry once (Vertex)."""
    counts_locally = False
    """A token count is answered with the local estimate (no counting route)."""
    signer: RequestSigner | None = None

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.unavailable: set[str] = set()
        """The models the provider said it cannot serve (said once each)."""

    def url(self, req: WireRequest) -> str | None:
        return None

    def body(self, body: Mapping[str, Any], req: WireRequest) -> tuple[dict[str, Any],
                                                                        tuple[str, ...]]:
        """The body for the wire, and the short names of what it leaves out (for the trail)."""
        return dict(body), ()

    def headers(self, headers: dict[str, str], req: WireRequest) -> dict[str, str]:
        return headers

    def stream_codec(self, codec: StreamCodec) -> StreamCodec:
        return codec

    def refusal(self, status: int, headers: Mapping[str, str], payload: bytes) -> Refusal | None:
        return None

    def error_answer(self, status: int, payload: bytes) -> tuple[int, bytes]:
        return status, payload

    def learn(self, refusal: Refusal, req: WireRequest) -> str | None:
        """Remember what the provider refused (a field, the betas), so the next body leaves it
        out; the words saying so, or None when nothing more can be left out."""
        return None

    def probe(self) -> tuple[str, bytes] | None:
        """A health probe that costs no tokens, as (URL, JSON body to POST); None when the
        service has none ("probe unsupported": health from traffic alone)."""
        return None

    def status_json(self) -> dict[str, Any]:
        return {"wire": self.kind}
