"""A fake Vertex AI for Claude on 127.0.0.1: rawPredict, streamRawPredict and
count-tokens:rawPredict, refusing what Vertex refuses, so that anthropic's AnthropicVertex and
claudex get the answers Google would give.

    POST /v1/projects/{p}/locations/{r}/publishers/anthropic/models/{model}:rawPredict
    POST …/models/{model}:streamRawPredict          plain Anthropic SSE
    POST …/models/count-tokens:rawPredict            {"input_tokens": n}

Every route wants `Authorization: Bearer <token>` with a token the fake token endpoint minted and
that is still alive (`fake_google_token`; or one of `valid_tokens`): otherwise 401 UNAUTHENTICATED
with Google's body ("Request had invalid authentication credentials. Expected OAuth 2 access
token, ...") and `WWW-Authenticate: Bearer realm="https://accounts.google.com/"`. A project the
fake does not know: 403 PERMISSION_DENIED ("Permission 'aiplatform.endpoints.predict' denied on
resource ... (or it may not exist)."). A model it does not know: 404 NOT_FOUND; one not enabled
for the project: 400 FAILED_PRECONDITION "Project `p` is not allowed to use Publisher Model `…`"
(yym68686/uni-api#41, in a JSON array as seen there).

The body: `anthropic_version` must be vertex-2023-10-16 and a message's body has no `model`
(the path says it); refused in Anthropic's shape, as the model's own validation answers
(the exact words for these two are not confirmed); a count's body names its model.

Faults (`set_fault`): resource_exhausted 429 (Google's quota sentence, cline/cline#651),
unavailable 503, internal 500, permission_denied 403, model_not_enabled 400.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Sequence
from typing import Final, Literal

from aiohttp import web

from claudex.demo import fake_replies as replies
from claudex.demo import thinking_rules
from claudex.demo.cloud_server import CloudFault, FakeCloudServer, IncomingRequest
from claudex.demo.fake_google_token import FakeGoogleTokenServer
from claudex.demo.fake_replies import BadRequest
from claudex.demo.recording import presented_tokens
from claudex.providers.vertex.body import ANTHROPIC_VERSION
from claudex.providers.vertex.errors import error_response
from claudex.providers.vertex.urls import PredictRoute, parse_predict_path

__all__ = ["DEFAULT_MODELS", "FakeVertex", "VertexFault"]

VertexFault = Literal["ok", "resource_exhausted", "unavailable", "internal", "permission_denied",
                      "model_not_enabled"]

DEFAULT_MODELS: Final = ("claude-sonnet-4-5@20250929", "claude-haiku-4-5@20251001",
                         "claude-opus-4-1@20250805")
_UNAUTHENTICATED: Final = (
    "Request had invalid authentication credentials. Expected OAuth 2 access token, login "
    "cookie or other valid authentication credential. See "
    "https://developers.google.com/identity/sign-in/web/devconsole-project.")


def _anthropic_error(status: int, error_type: str, message: str) -> web.Response:
    body = {"type": "error", "error": {"type": error_type, "message": message}}
    return web.Response(status=status, body=json.dumps(body).encode(),
                        headers={"Content-Type": "application/json"})


class FakeVertex(FakeCloudServer):
    """`tokens`: the fake token endpoint whose tokens are accepted; `valid_tokens`: more.
    `enabled`: the models enabled for the projects (None: all of `models`)."""

    def __init__(self, name: str = "vertex", *, tokens: FakeGoogleTokenServer | None = None,
                 valid_tokens: Iterable[str] = (), projects: Iterable[str] = ("claudex-test",),
                 models: Sequence[str] = DEFAULT_MODELS, enabled: Iterable[str] | None = None,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        self.name = name
        self.token_server = tokens
        self.valid_tokens = set(valid_tokens)
        self.projects = set(projects)
        self.models = tuple(models)
        self.enabled = set(self.models if enabled is None else enabled)
        self.fault: CloudFault[VertexFault] = CloudFault("ok")
        self.signing_key = thinking_rules.new_signing_key()
        self._ids = secrets.token_hex(4)
        self._seq = 0

    @property
    def base_url(self) -> str:
        """What AnthropicVertex and claudex take as the base (`…/v1`)."""
        return self.root_url + "/v1"

    def set_fault(self, mode: VertexFault, *, times: int | None = None) -> None:
        self.fault = CloudFault(mode, times)

    def _token_ok(self, token: str) -> bool:
        if token in self.valid_tokens:
            return True
        return self.token_server is not None and self.token_server.valid(token)

    def _google(self, status: str, message: str, *, in_array: bool = False,
                details: list[dict[str, object]] | None = None,
                headers: dict[str, str] | None = None) -> web.Response:
        code, base, body = error_response(status, message, in_array=in_array, details=details)
        return web.Response(status=code, body=body, headers={**base, **(headers or {})})

    async def answer(self, request: web.BaseRequest,
                     incoming: IncomingRequest) -> web.StreamResponse:
        route = parse_predict_path(incoming.raw_path)
        if route is None or route.prefix != "/v1" or incoming.method != "POST":
            return self._google("NOT_FOUND", f"The requested URL {incoming.raw_path} was not "
                                "found on this server.")
        tokens = presented_tokens(incoming.headers)
        if not incoming.headers.get("authorization", "").lower().startswith("bearer ") \
                or not tokens or not self._token_ok(tokens[-1]):
            reason = "ACCESS_TOKEN_EXPIRED" if tokens else "CREDENTIALS_MISSING"
            return self._google(
                "UNAUTHENTICATED", _UNAUTHENTICATED,
                details=[{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                          "reason": reason, "domain": "googleapis.com"}],
                headers={"WWW-Authenticate": 'Bearer realm="https://accounts.google.com/"'})
        resource = (f"projects/{route.project}/locations/{route.region}/publishers/anthropic/"
                    f"models/{route.model}")
        mode = self.fault.take("ok")
        if route.project not in self.projects or mode == "permission_denied":
            return self._google("PERMISSION_DENIED", "Permission 'aiplatform.endpoints.predict' "
                                f"denied on resource '//aiplatform.googleapis.com/{resource}' "
                                "(or it may not exist).")
        body = incoming.json
        if not isinstance(body, dict):
            return self._google("INVALID_ARGUMENT", "Invalid JSON payload received.")
        model = body.get("model") if route.count_tokens else route.model
        if not isinstance(model, str) or model not in self.models:
            return self._google("NOT_FOUND", f"Publisher Model `{resource}` not found.")
        if model not in self.enabled or mode == "model_not_enabled":
            return self._google("FAILED_PRECONDITION", f"Project `{route.project}` is not allowed "
                                f"to use Publisher Model `{resource}`", in_array=True)
        if mode == "resource_exhausted":
            return self._google(
                "RESOURCE_EXHAUSTED", "Quota exceeded for aiplatform.googleapis.com/"
                "online_prediction_requests_per_base_model with base model: anthropic-"
                f"{model.split('@')[0]}. Please submit a quota increase request. "
                "https://cloud.google.com/vertex-ai/docs/generative-ai/quotas-genai.",
                in_array=route.stream)
        if mode == "unavailable":
            return self._google("UNAVAILABLE", "The service is currently unavailable.")
        if mode == "internal":
            return self._google("INTERNAL", "Internal error encountered.")
        return await self._predict(request, incoming, route, body, model)

    async def _predict(self, request: web.BaseRequest, incoming: IncomingRequest,
                       route: PredictRoute, body: dict[str, object],
                       model: str) -> web.StreamResponse:
        version = body.get("anthropic_version")
        if not route.count_tokens and version != ANTHROPIC_VERSION:
            return _anthropic_error(400, "invalid_request_error",
                                    f"anthropic_version: Input should be '{ANTHROPIC_VERSION}'")
        if not route.count_tokens and "model" in body:
            return _anthropic_error(400, "invalid_request_error",
                                    "model: Extra inputs are not permitted")
        try:
            reply = replies.plan_reply(
                "anthropic", self.name, {**body, "model": model}, len(incoming.body),
                self._next_id(), needs_max_tokens=not route.count_tokens,
                signing_key=self.signing_key)
        except BadRequest as error:
            status, payload = replies.error_reply("anthropic", error.kind, str(error))
            return web.Response(status=status, body=json.dumps(payload).encode(),
                                headers={"Content-Type": "application/json"})
        if route.count_tokens:
            return web.json_response({"input_tokens": reply.input_tokens})
        if route.stream or body.get("stream") is True:
            response = web.StreamResponse(status=200, headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "x-fake-provider": self.name})
            await response.prepare(request)
            await response.write(replies.anthropic_stream(reply).everything)
            return response
        message = replies.anthropic_message(reply)
        message["id"] = "msg_vrtx_" + reply.id
        return web.Response(status=200, body=json.dumps(message).encode(), headers={
            "Content-Type": "application/json", "x-fake-provider": self.name})

    def _next_id(self) -> str:
        self._seq += 1
        return f"{self._ids}{self._seq:08x}"
