"""A fake Amazon Bedrock runtime on 127.0.0.1: InvokeModel and InvokeModelWithResponseStream for
Claude, refusing what Bedrock refuses, so that the official clients (boto3's bedrock-runtime,
anthropic's AnthropicBedrock) and claudex get the answers they would get from AWS.

    POST /model/{modelId}/invoke                        the Anthropic message as JSON
    POST /model/{modelId}/invoke-with-response-stream   its events in eventstream chunk frames

Authentication, as AWS's: a SigV4 signature for the service `bedrock` in `region`, checked by
recomputing it with botocore (`claudex.demo.aws_signatures`) with the test's keys, or a Bedrock
API key as `Authorization: Bearer` (an unknown key: 403 "Authentication failed: Please make sure
your API Key is valid.", ai4s-research/open-science#53).

The body rules (Bedrock's Anthropic Messages contract, and what it answers when refused):
    anthropic_version must be bedrock-2023-05-31          ValidationException (schema words)
    `model` / `stream` in the body (they go in the path)   ValidationException "#: extraneous
                                                           key [stream] is not permitted"
    a top-level field Bedrock does not take               ValidationException "<field>: Extra
    (context_management without its beta, output_config)   inputs are not permitted"
    an anthropic_beta flag it does not know                ValidationException "invalid beta
                                                           flag" (Bedrock does not say which)
    a model id it does not serve                           ValidationException "The provided
                                                           model identifier is invalid."
and the Messages rules every Anthropic fake keeps (`fake_replies.plan_reply`). The exact schema
wording for a wrong anthropic_version and for `model`/`stream` is modelled on Bedrock's other
schema refusals, not seen for these fields.

Faults (`set_fault`), each as Bedrock answers it (status and type from botocore's model):
throttling 429, model_not_ready 429, quota (ServiceQuotaExceededException) 400, unavailable 503,
internal 500, model_timeout 408, model_error 424; and inside a 200 stream an exception frame
before the first content (exception_before_content) or after `cut_after_events` deltas
(exception_after_content), modelStreamErrorException unless `stream_exception` says another.
Every request is recorded (`requests`), as by the other fakes.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal

from aiohttp import web

from claudex.demo import fake_replies as replies
from claudex.demo import thinking_rules
from claudex.demo.aws_signatures import AuthRefusal, AwsTestKey, check_signature
from claudex.demo.cloud_server import CloudFault, FakeCloudServer, IncomingRequest
from claudex.demo.fake_replies import BadRequest
from claudex.demo.recording import presented_tokens
from claudex.providers.bedrock.body import ANTHROPIC_VERSION
from claudex.providers.bedrock.errors import error_response
from claudex.providers.bedrock.stream import (
    EVENTSTREAM_CONTENT_TYPE,
    chunk_frame,
    exception_frame,
)
from claudex.providers.bedrock.urls import SIGNING_SERVICE, parse_invoke_path
from claudex.providers.sse import split_events

__all__ = [
    "ACCEPTED_FIELDS",
    "DEFAULT_MODELS",
    "FIELDS_WITH_BETA",
    "KNOWN_BETAS",
    "AwsTestKey",
    "BedrockFault",
    "FakeBedrock",
]

BedrockFault = Literal[
    "ok", "throttling", "model_not_ready", "quota", "unavailable", "internal", "model_timeout",
    "model_error", "exception_before_content", "exception_after_content",
]

DEFAULT_MODELS: Final = (
    "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "anthropic.claude-haiku-4-5-20251001-v1:0",
    "us.anthropic.claude-haiku-4-5-20251001-v1:0",
)
ACCEPTED_FIELDS: Final = frozenset({
    # AWS's "Anthropic Claude Messages API" request parameters, and extended thinking.
    "anthropic_version", "anthropic_beta", "max_tokens", "messages", "system", "temperature",
    "top_p", "top_k", "stop_sequences", "tools", "tool_choice", "thinking",
})
FIELDS_WITH_BETA: Final = {"context_management": "context-management-2025-06-27"}
"""Fields Bedrock takes only with their beta flag."""
KNOWN_BETAS: Final = frozenset({
    # The flags AWS documents for Claude on Bedrock (BerriAI/litellm#19875 lists them).
    "computer-use-2024-10-22", "computer-use-2025-01-24", "token-efficient-tools-2025-02-19",
    "interleaved-thinking-2025-05-14", "output-128k-2025-02-19", "dev-full-thinking-2025-05-14",
    "context-1m-2025-08-07", "context-management-2025-06-27", "effort-2025-11-24",
    "tool-search-tool-2025-10-19", "tool-examples-2025-10-29",
})

_FAULT_ERRORS: Final[dict[str, tuple[str, str]]] = {
    "throttling": ("ThrottlingException", "Too many requests, please wait before trying again."),
    "model_not_ready": ("ModelNotReadyException",
                        "The model is not ready to serve inference requests. Try again later."),
    "quota": ("ServiceQuotaExceededException",
              "Your request exceeds the service quota for your account."),
    "unavailable": ("ServiceUnavailableException", "Bedrock is unable to process your request."),
    "internal": ("InternalServerException",
                 "The system encountered an unexpected error during processing. Try your "
                 "request again."),
    "model_timeout": ("ModelTimeoutException",
                      "Model has timed out in processing the request. Try your request again."),
    "model_error": ("ModelErrorException", "The model returned an error."),
}
_BAD_API_KEY: Final = "Authentication failed: Please make sure your API Key is valid."
_AUTH_SERVICE: Final = "com.amazon.coral.service"


def _schema(what: str) -> str:
    return f"Malformed input request: {what}, please reformat your input and try again."


class FakeBedrock(FakeCloudServer):
    """One fake Bedrock region. `keys`: the SigV4 keys it knows; `api_keys`: the Bedrock API
    keys; `clock`: seconds since the epoch, for the signature's five minutes."""

    def __init__(self, name: str = "bedrock", *, region: str = "us-east-1",
                 keys: Iterable[AwsTestKey] = (), api_keys: Iterable[str] = (),
                 models: Sequence[str] = DEFAULT_MODELS,
                 accepted_fields: Iterable[str] = ACCEPTED_FIELDS,
                 known_betas: Iterable[str] = KNOWN_BETAS,
                 clock: Callable[[], float] = time.time,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        self.name = name
        self.region = region
        self.keys: dict[str, AwsTestKey] = {key.access_key_id: key for key in keys}
        self.api_keys = set(api_keys)
        self.models = tuple(models)
        self.accepted_fields = frozenset(accepted_fields)
        self.known_betas = frozenset(known_betas)
        self.clock = clock
        self.fault: CloudFault[BedrockFault] = CloudFault("ok")
        self.cut_after_events = 3
        self.stream_exception = "modelStreamErrorException"
        self.padding = True
        """Chunk payloads carry Bedrock's `p` padding."""
        self.signing_key = thinking_rules.new_signing_key()
        self._ids = secrets.token_hex(4)
        self._seq = 0

    @property
    def base_url(self) -> str:
        return self.root_url

    def set_fault(self, mode: BedrockFault, *, times: int | None = None,
                  cut_after_events: int = 3,
                  stream_exception: str = "modelStreamErrorException") -> None:
        self.fault = CloudFault(mode, times)
        self.cut_after_events = cut_after_events
        self.stream_exception = stream_exception

    # ------------------------------------------------------------ answering

    async def answer(self, request: web.BaseRequest,
                     incoming: IncomingRequest) -> web.StreamResponse:
        refusal = self._authenticate(incoming)
        if refusal is not None:
            return self._error(refusal.error_type, refusal.message, key=refusal.key,
                               service=_AUTH_SERVICE)
        route = parse_invoke_path(incoming.raw_path)
        if route is None or incoming.method != "POST":
            return self._error("UnknownOperationException", "Unknown operation")
        body = incoming.json
        refused = self._body_refusal(body)
        if refused is not None:
            return self._error("ValidationException", refused)
        assert isinstance(body, dict)
        if route.model_id not in self.models:
            return self._error("ValidationException", "The provided model identifier is invalid.")
        mode = self.fault.take("ok")
        if mode in _FAULT_ERRORS:
            return self._error(*_FAULT_ERRORS[mode])
        try:
            reply = replies.plan_reply(
                "anthropic", self.name, {**body, "model": route.model_id}, len(incoming.body),
                self._next_id(), signing_key=self.signing_key)
        except BadRequest as error:
            return self._error("ValidationException", str(error))
        if route.stream:
            return await self._stream(request, reply, mode)
        message = replies.anthropic_message(reply)
        message["id"] = "msg_bdrk_" + reply.id
        return web.Response(status=200, body=json.dumps(message).encode(),
                            headers=self._answer_headers(reply, "application/json"))

    def _authenticate(self, incoming: IncomingRequest) -> AuthRefusal | None:
        authorization = incoming.headers.get("authorization", "")
        if authorization[:7].lower() == "bearer ":
            tokens = presented_tokens(incoming.headers)
            if tokens and tokens[-1] in self.api_keys:
                return None
            return AuthRefusal("AccessDeniedException", _BAD_API_KEY, "Message")
        return check_signature(method=incoming.method, raw_path=incoming.raw_path,
                               query=incoming.query, headers=incoming.headers,
                               body=incoming.body, keys=self.keys, region=self.region,
                               service=SIGNING_SERVICE, now=self.clock())

    def _body_refusal(self, body: object) -> str | None:
        """Bedrock's words for a body it does not take; None when it takes it."""
        if not isinstance(body, dict):
            return _schema("#: expected type: JSONObject, found: not JSON")
        for reserved in ("model", "stream"):
            if reserved in body:
                return _schema(f"#: extraneous key [{reserved}] is not permitted")
        version = body.get("anthropic_version")
        if version is None:
            return _schema("#: required key [anthropic_version] not found")
        if version != ANTHROPIC_VERSION:
            return _schema(f"#/anthropic_version: {version} is not a valid enum value")
        betas = body.get("anthropic_beta", [])
        if not isinstance(betas, list) or not all(isinstance(b, str) for b in betas):
            return _schema("#/anthropic_beta: expected type: JSONArray")
        if any(flag not in self.known_betas for flag in betas):
            return "invalid beta flag"
        extra = [name for name in body if name not in self.accepted_fields
                 and FIELDS_WITH_BETA.get(name) not in betas]
        if extra:
            return ", ".join(f"{name}: Extra inputs are not permitted" for name in extra)
        return None

    async def _stream(self, request: web.BaseRequest, reply: replies.Reply,
                      mode: BedrockFault) -> web.StreamResponse:
        parts = replies.anthropic_stream(reply)
        response = web.StreamResponse(status=200, headers={
            **self._answer_headers(reply, EVENTSTREAM_CONTENT_TYPE),
            "x-amzn-bedrock-content-type": "application/json"})
        await response.prepare(request)
        content = [*parts.opening, *parts.deltas[:self.cut_after_events]]
        failure = exception_frame(self.stream_exception,
                                  "The model stream failed. Retry your request.")
        if mode == "exception_before_content":
            frames = [*self._frames(parts.preamble), failure]
        elif mode == "exception_after_content":
            frames = [*self._frames([*parts.preamble, *content]), failure]
        else:
            frames = self._frames([*parts.preamble, *parts.opening, *parts.deltas,
                                   *parts.closing], reply)
        await response.write(b"".join(frames))
        return response

    def _frames(self, events: Sequence[bytes], reply: replies.Reply | None = None) -> list[bytes]:
        frames: list[bytes] = []
        for event in split_events(bytearray(b"".join(events))):
            data = event.data.encode()
            if reply is not None and event.event == "message_stop":
                # Bedrock's last chunk carries its invocation metrics.
                data = json.dumps({"type": "message_stop", "amazon-bedrock-invocationMetrics": {
                    "inputTokenCount": reply.input_tokens,
                    "outputTokenCount": reply.output_tokens,
                    "invocationLatency": 1, "firstByteLatency": 1}}).encode()
            padding = 1 + (len(frames) * 11) % 40 if self.padding else 0
            frames.append(chunk_frame(data, padding=padding))
        return frames

    def _answer_headers(self, reply: replies.Reply, content_type: str) -> dict[str, str]:
        return {
            "Content-Type": content_type,
            "x-amzn-requestid": self._request_id(),
            "x-amzn-bedrock-invocation-latency": "1",
            "x-amzn-bedrock-input-token-count": str(reply.input_tokens),
            "x-amzn-bedrock-output-token-count": str(reply.output_tokens),
            "x-fake-provider": self.name,
        }

    def _error(self, error_type: str, message: str, *, key: str = "message",
               service: str = "com.amazon.bedrock") -> web.Response:
        status, headers, body = error_response(error_type, message, key=key, service=service)
        return web.Response(status=status, body=body, headers={
            **headers, "x-amzn-requestid": self._request_id(), "x-fake-provider": self.name})

    def _next_id(self) -> str:
        self._seq += 1
        return f"{self._ids}{self._seq:08x}"

    def _request_id(self) -> str:
        return f"{secrets.token_hex(4)}-0000-4000-8000-{secrets.token_hex(6)}"

    def state(self) -> Mapping[str, Any]:
        return {"name": self.name, "region": self.region, "base_url": self.base_url,
                "fault": dataclasses.asdict(self.fault), "request_count": self.request_count}
