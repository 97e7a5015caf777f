"""Bedrock's and Vertex's routes, served by claudex (issue 37): a client in Bedrock or Vertex mode
(Claude Code with CLAUDE_CODE_USE_BEDROCK / CLAUDE_CODE_USE_VERTEX, its base URL at claudex and
the cloud's own auth skipped; AnthropicBedrock, AnthropicVertex, boto3's bedrock-runtime) gets
claudex's failover, in its own wire.

    POST /model/{modelId}/invoke                           Bedrock, a whole answer
    POST /model/{modelId}/invoke-with-response-stream      Bedrock, eventstream chunk frames
    POST [/v1]/projects/{p}/locations/{r}/publishers/anthropic/models/{m}:rawPredict
    POST …/models/{m}:streamRawPredict                     Vertex, plain Anthropic SSE
    POST …/models/count-tokens:rawPredict                  Vertex, a token count

Each is an Anthropic Messages request underneath (the model from the path, Bedrock's
`anthropic_beta` back into the `anthropic-beta` header, `anthropic_version` out): it is served
exactly as one on /v1/messages — by the default profile, with `[routes]` applying — or, behind
`/proxy/NAME`, by profile NAME; failover, breakers and everything else as usual. The project and
region in a Vertex path are the client's and are not used: claudex's profiles say where requests
go. The answer goes back as the cloud writes it: Bedrock's stream as eventstream frames (the
encoder mirroring the decoder), its errors with `X-Amzn-ErrorType` and `{"message"}` (a rate
limit as ThrottlingException, so the SDKs retry it); Vertex's as they are (Anthropic's shape,
as Vertex itself relays the model's errors).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from claudex.engine.core.hooks import Flow
from claudex.engine.core.request import Endpoint, ForwardResult, ProxyRequest
from claudex.providers import anthropic, bedrock, fastjson, validation, vertex
from claudex.providers.validation_problems import InvalidRequest

log = logging.getLogger("claudex.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Cloud = Literal["bedrock", "vertex"]


class Front(Protocol):
    """What these routes use of the proxy's front (`server/proxy_asgi.py`'s `ProxyRoutes`)."""

    async def read_json(self, receive: Receive,
                        headers: dict[str, str]) -> dict[str, Any] | tuple[int, str] | None: ...

    async def forward(self, req: ProxyRequest) -> tuple[ForwardResult, Flow | None]: ...

    def finish(self, flow: Flow) -> None: ...

    async def answer(self, send: Send, status: int, body: bytes,
                     result: ForwardResult | None = None) -> None: ...

    async def relay(self, result: ForwardResult, stream: AsyncIterator[bytes],
                    receive: Receive, send: Send) -> None: ...

# What a Bedrock client hears for each Anthropic error type claudex answers with.
_BEDROCK_TYPE: Final[dict[str, str]] = {
    "invalid_request_error": "ValidationException",
    "not_found_error": "ResourceNotFoundException",
    "request_too_large": "ValidationException",
    "authentication_error": "AccessDeniedException",
    "permission_error": "AccessDeniedException",
    "rate_limit_error": "ThrottlingException",
    "overloaded_error": "ServiceUnavailableException",
    "api_error": "ServiceUnavailableException",
}


@dataclass(frozen=True, slots=True)
class CloudRoute:
    cloud: Cloud
    model: str
    stream: bool
    endpoint: Endpoint
    profile: str | None


def match_cloud(scope: Scope) -> CloudRoute | None:
    """A Bedrock or Vertex route (behind `/proxy/NAME` or not), from the raw path: a model id
    may hold an encoded `/` (an ARN)."""
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if isinstance(raw, bytes) else str(scope["path"])
    path = path.split("?", 1)[0]
    profile: str | None = None
    if path.startswith("/proxy/"):
        profile, _, rest = path[7:].partition("/")
        if not profile:
            return None
        path = "/" + rest
    invoke = bedrock.parse_invoke_path(path)
    if invoke is not None:
        return CloudRoute("bedrock", invoke.model_id, invoke.stream, "messages", profile)
    predict = vertex.parse_predict_path(path)
    if predict is not None:
        endpoint: Endpoint = "count_tokens" if predict.count_tokens else "messages"
        return CloudRoute("vertex", predict.model, predict.stream, endpoint, profile)
    return None


class CloudRoutes:
    def __init__(self, routes: Front) -> None:
        self.routes = routes

    async def serve(self, route: CloudRoute, scope: Scope, receive: Receive,
                    send: Send) -> None:
        routes = self.routes
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        given = await routes.read_json(receive, headers)
        if given is None:  # the client left
            return
        if isinstance(given, tuple):
            await self._refuse(send, route, *given)
            return
        body = self._anthropic(route, given, headers)
        try:
            validation.check_top_level("anthropic", route.endpoint, body)
        except InvalidRequest as exc:
            await self._refuse(send, route, 400, str(exc))
            return
        req = ProxyRequest(
            protocol="anthropic", endpoint=route.endpoint, body=body,
            raw=fastjson.dumps(body), headers=headers, profile=route.profile,
            failover=headers.get("x-claudex-failover", "").lower() != "off",
            query="", route=str(scope["path"]))
        try:
            result, flow = await routes.forward(req)
        except InvalidRequest as exc:
            await self._refuse(send, route, 400, str(exc))
            return
        except Exception:
            log.exception("internal error while forwarding a %s request", route.cloud)
            await self._refuse(send, route, 500, "Internal error in claudex; see its log.")
            return
        if result.stream is not None:
            stream: AsyncIterator[bytes] = result.stream
            if route.cloud == "bedrock":
                result.headers["content-type"] = bedrock.EVENTSTREAM_CONTENT_TYPE
                result.headers["x-amzn-bedrock-content-type"] = "application/json"
                stream = EventStreamAnswer(result.stream)
            await routes.relay(result, stream, receive, send)
            return
        try:
            status, payload = result.status, result.body or b""
            if route.cloud == "bedrock" and status >= 400:
                status, payload = self._bedrock_error(result, status, payload)
            await routes.answer(send, status, payload, result)
        finally:
            if flow is not None:
                routes.finish(flow)

    @staticmethod
    def _anthropic(route: CloudRoute, given: dict[str, Any],
                   headers: dict[str, str]) -> dict[str, Any]:
        """The Anthropic Messages body of a cloud request (the client's headers get its betas
        and a default `anthropic-version`)."""
        headers.setdefault("anthropic-version", anthropic.DEFAULT_VERSION)
        if route.cloud == "bedrock":
            body, betas = bedrock.anthropic_body(given, model=route.model, stream=route.stream)
            if betas:
                headers["anthropic-beta"] = ",".join(betas)
            return body
        if route.endpoint == "count_tokens":
            return {k: v for k, v in given.items() if k != "anthropic_version"}
        body = vertex.anthropic_body(given, model=route.model)
        if route.stream:
            body["stream"] = True
        return body

    async def _refuse(self, send: Send, route: CloudRoute, status: int, message: str) -> None:
        where = f"profile {route.profile[:64]}" if route.profile else "the default profile"
        log.warning("refused a %s request for %s (%d, no provider asked): %s", route.cloud,
                    where, status, message)
        payload = anthropic.error_body(status, message)
        result = None
        if route.cloud == "bedrock":
            status, payload, result = _bedrock_answer(status, payload)
        await self.routes.answer(send, status, payload, result)

    @staticmethod
    def _bedrock_error(result: ForwardResult, status: int,
                       payload: bytes) -> tuple[int, bytes]:
        code, body, answer = _bedrock_answer(status, payload)
        result.headers.update(answer.headers)
        return code, body


def _bedrock_answer(status: int, payload: bytes) -> tuple[int, bytes, ForwardResult]:
    """An Anthropic error answer as Bedrock writes its errors."""
    try:
        error: Any = json.loads(payload).get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    kind = error.get("type") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    error_type = _BEDROCK_TYPE.get(kind if isinstance(kind, str) else "",
                                   "ServiceUnavailableException" if status >= 500
                                   else "ValidationException")
    code, headers, body = bedrock.error_response(
        error_type, message if isinstance(message, str) else "claudex could not serve this.")
    return code, body, ForwardResult(code, {k.lower(): v for k, v in headers.items()}, None, [])


class EventStreamAnswer:
    """An Anthropic SSE stream (a committed `RelayedStream`) as Bedrock's eventstream: each
    event a chunk frame, an `error` event an exception frame."""

    def __init__(self, stream: AsyncIterator[bytes]) -> None:
        self._stream = stream
        self._encoder = bedrock.SseToEventStream()
        self._done = False

    def __aiter__(self) -> EventStreamAnswer:
        return self

    async def __anext__(self) -> bytes:
        while not self._done:
            try:
                chunk = await self._stream.__anext__()
            except StopAsyncIteration:
                self._done = True
                tail = self._encoder.finish()
                if tail:
                    return tail
                break
            frames = self._encoder.feed(chunk)
            if frames:
                return frames
        raise StopAsyncIteration

    async def aclose(self) -> None:
        aclose = getattr(self._stream, "aclose", None)
        if aclose is not None:
            await aclose()
