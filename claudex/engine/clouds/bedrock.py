"""Claude on AWS Bedrock, on the one forwarding path (`wire.Wire`'s pieces; the wire format itself
is `claudex.providers.bedrock`'s):

    url            {base}/model/{model}/invoke, /invoke-with-response-stream for a stream
    body           without `model` and `stream`, `anthropic_version` bedrock-2023-05-31, the
                   client's `anthropic-beta` as the body's `anthropic_beta`; less what Bedrock
                   refused of this model before (`Lessons`)
    headers        only the wire's own (content type, accept, user agent, the profile's
                   custom headers, the credentials): what SigV4 signs is what is sent
    signer         SigV4 for `bedrock` with the AWS credential chain, unless a Bedrock API key
                   (a Bearer token, from the credentials) authenticates
    stream_codec   `EventStreamCodec`: eventstream frames to Anthropic SSE, in front of the
                   codec the client's protocol needs (exception frames become SSE `error`
                   events: before the first content the request fails over, after it the
                   client gets it)

A token count is answered with claudex's local estimate. Bedrock has a CountTokens operation
(botocore's bedrock-runtime model, `POST /model/{modelId}/count-tokens`; AWS: "doesn't incur
charges"), but AWS says some Claude models, those launched with cross-Region inference only,
do not support it on bedrock-runtime, and whether it takes an inference profile's id could not
be verified without AWS: the estimate always answers, at no request.

What Bedrock refuses of the Anthropic API (`invalid beta flag`, `<field>: Extra inputs are not
permitted`) is learned per model: the field is left out from then on, wherever it is in the
body; the betas go to those AWS documents (`DOCUMENTED_BETAS`), then to none (Bedrock does not
say which flag it refused, and models differ: the least lossy order).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from claudex.config.model import Profile
from claudex.engine.clouds.wire import Refusal, RequestSigner, Wire, WireRequest
from claudex.engine.core.stream_codec import StreamCodec
from claudex.providers import anthropic
from claudex.providers.bedrock import (
    DOCUMENTED_BETAS,
    BedrockError,
    BedrockFailure,
    EventStreamError,
    EventStreamToSse,
    FieldPattern,
    bedrock_body,
    betas_from_header,
    field_pattern,
    invoke_url,
    parse_error,
    pattern_name,
    without_patterns,
)

__all__ = ["BedrockWire", "EventStreamCodec", "Lessons"]

log = logging.getLogger("claudex.engine")

BetaStage = Literal["all", "documented", "none"]
_NEXT_STAGE: Final[dict[BetaStage, BetaStage | None]] = {
    "all": "documented", "documented": "none", "none": None}
_KEPT_HEADERS: Final = frozenset({"content-type", "accept", "user-agent", "authorization"})
_MAX_MODELS: Final = 64  # lessons kept per profile: a request cannot grow this without bound
_JSON: Final = "application/json"
_EVENTSTREAM: Final = "application/vnd.amazon.eventstream"


@dataclass
class Lessons:
    """What Bedrock refused of the Anthropic API for one model."""

    fields: set[FieldPattern] = field(default_factory=set)
    betas: BetaStage = "all"

    def apply(self, body: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
        dropped: tuple[str, ...] = ()
        if self.fields:
            body, dropped = without_patterns(body, sorted(self.fields))
        flags = body.get("anthropic_beta")
        if self.betas != "all" and isinstance(flags, list):
            kept = [f for f in flags if self.betas == "documented" and f in DOCUMENTED_BETAS]
            if len(kept) < len(flags):
                body = {k: v for k, v in body.items() if k != "anthropic_beta"}
                if kept:
                    body["anthropic_beta"] = kept
                dropped += ("anthropic_beta" if not kept else "undocumented betas",)
        return body, dropped

    def to_json(self) -> dict[str, Any]:
        return {"dropped_fields": sorted(pattern_name(p) for p in self.fields),
                "betas": self.betas}


class BedrockWire(Wire):
    kind = "bedrock"
    counts_locally = True

    def __init__(self, profile: Profile, signer: RequestSigner | None) -> None:
        super().__init__(profile)
        self.signer = signer
        self.lessons: dict[str, Lessons] = {}

    def url(self, req: WireRequest) -> str:
        return invoke_url(self.profile.base_url, req.model or "", stream=req.stream)

    def body(self, body: Mapping[str, Any], req: WireRequest) -> tuple[dict[str, Any],
                                                                        tuple[str, ...]]:
        rewritten = bedrock_body(body, betas=betas_from_header(req.beta))
        lessons = self.lessons.get(req.model or "") if self.lessons else None
        if lessons is None:
            return rewritten, ()
        return lessons.apply(rewritten)

    def headers(self, headers: dict[str, str], req: WireRequest) -> dict[str, str]:
        custom = self.profile.custom_headers
        kept = {name: value for name, value in headers.items()
                if name in _KEPT_HEADERS or name in custom}
        kept["accept"] = _EVENTSTREAM if req.stream else _JSON
        return kept

    def stream_codec(self, codec: StreamCodec) -> StreamCodec:
        return EventStreamCodec(codec)

    def refusal(self, status: int, headers: Mapping[str, str], payload: bytes) -> Refusal:
        return parse_error(status, headers, payload)

    def error_answer(self, status: int, payload: bytes) -> tuple[int, bytes]:
        error = parse_error(status, {}, payload)
        return status, anthropic.error_body(status, error.message or "Bedrock refused the "
                                            "request.")

    def learn(self, refusal: Refusal, req: WireRequest) -> str | None:
        if not isinstance(refusal, BedrockError):
            return None
        model = req.model or ""
        lessons = self.lessons.get(model)
        if lessons is None:
            if len(self.lessons) >= _MAX_MODELS:
                self.lessons.pop(next(iter(self.lessons)))
            lessons = self.lessons[model] = Lessons()
        if refusal.failure is BedrockFailure.DROP_FIELD:
            new = {field_pattern(path) for path in refusal.fields} - lessons.fields
            if not new:
                return None
            lessons.fields |= new
            names = ", ".join(sorted(pattern_name(p) for p in new))
            return (f"refuses {names} (\"Extra inputs are not permitted\"): left out for "
                    f"{model or 'its model'} from now on")
        if refusal.failure is BedrockFailure.DROP_BETAS:
            stage = _NEXT_STAGE[lessons.betas]
            if stage is None:
                return None
            lessons.betas = stage
            kept = ("only the betas AWS documents are sent" if stage == "documented"
                    else "no betas are sent")
            return (f"refused a beta flag (\"invalid beta flag\"; Bedrock does not say which): "
                    f"{kept} to {model or 'its model'} from now on")
        return None

    def status_json(self) -> dict[str, Any]:
        return {"wire": self.kind, "region": self.profile.region,
                "signed": "sigv4" if self.signer is not None else "bearer",
                "learned": {model or "(default)": lessons.to_json()
                            for model, lessons in self.lessons.items()}}


class EventStreamCodec:
    """Bedrock's eventstream bytes in, the client's stream out: the frames decoded to Anthropic
    SSE (`providers.bedrock.EventStreamToSse`), then fed to `inner`, the codec the client's
    protocol needs (the Anthropic relay, or a translator). A frame that cannot be read ends the
    stream with an SSE error event, as an exception frame would."""

    def __init__(self, inner: StreamCodec) -> None:
        self._frames = EventStreamToSse()
        self._inner = inner
        self._broken: str | None = None

    def feed(self, chunk: bytes) -> bytes:
        if self._broken is not None:
            return b""
        try:
            sse = self._frames.feed(chunk)
        except EventStreamError as error:
            self._broken = f"unreadable Bedrock event stream ({error})"
            return self._inner.feed(anthropic.sse_error(self._broken))
        return self._inner.feed(sse) if sse else b""

    def finish(self) -> bytes:
        try:
            self._frames.finish()
        except EventStreamError:
            pass  # the answer ended properly (`finished`) before a stray partial frame
        return self._inner.finish()

    @property
    def finished(self) -> bool:
        return self._broken is None and self._inner.finished

    @property
    def error(self) -> str | None:
        inner = self._inner.error
        if inner is not None:
            failure = self._frames.error
            return f"{failure.error_type}: {failure.message}" if failure is not None else inner
        return self._broken
