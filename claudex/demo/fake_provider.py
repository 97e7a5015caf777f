"""Fake LLM providers on 127.0.0.1 with faults that can be switched at run time.

One `FakeProvider` speaks either the Anthropic Messages API or the OpenAI Chat Completions API
(`fake_replies` builds the bodies) and misbehaves as its `FaultState` says (`faults`). The demo,
the proxy's integration tests and the benchmarks all use it, so it starts in a few milliseconds
and its normal path is one small aiohttp handler with no per-request logging.

Routes:
    anthropic   POST /v1/messages (JSON, or SSE with "stream": true)
                POST /v1/messages/count_tokens, GET /v1/models
    openai      POST /v1/chat/completions (JSON or SSE), GET /v1/models
    responses   POST /v1/responses (JSON or SSE; `chatgpt` switches on the ChatGPT backend's
                rules, `claudex.demo.fake_responses`), GET /v1/models
    control     GET /_fake/state, GET /_fake/requests, POST /_fake/fault {"mode": ..., ...},
                POST /_fake/reset

Every request except the control routes is recorded in `requests` (header names lowercased),
with the status it was answered with. Like the real APIs, a fake refuses a model it does not
serve (404; `models`, and for Anthropic any `claude-` name; `strict_models=False` serves any)
and a max_tokens over `max_output_tokens` (400, in the API's own words).
Control routes ignore faults; while "down" nothing is reachable, so a fault set from another process
should carry `duration_s` if it is to end by itself.

What a request gets is decided here. The server underneath — its listener, the faults' switching
and expiry, the connections and the request log — is `fake_server`; how answers are written (JSON,
errors, SSE streams, dropped connections) is `fake_streams`; the control routes are
`fake_control`.

To run fakes in a process of their own (benchmarks, a demo in another terminal), see
`claudex.demo.serve_fakes`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections.abc import Iterable, Sequence
from typing import Any, Final, Literal

from aiohttp import web

from claudex.demo import fake_replies as replies
from claudex.demo import thinking_rules
from claudex.demo.fake_control import control_response
from claudex.demo.fake_oauth import FakeTokenServer, TokenGrant
from claudex.demo.fake_plans import Plan
from claudex.demo.fake_ratelimits import RateLimits
from claudex.demo.fake_replies import BadRequest, Protocol
from claudex.demo.fake_responses import (
    ChatGPTRules,
    as_chat_request,
    chatgpt_refusal,
    foreign_reasoning,
    reasoning_for,
)
from claudex.demo.fake_server import FakeServer
from claudex.demo.fake_streams import ReplyWriter, drop
from claudex.demo.faults import (
    FAULTS_FOR_MODELS,
    Fault,
    FaultConfigError,
    FaultState,
)
from claudex.demo.prompt_cache import PromptCache
from claudex.demo.recording import RecordedRequest, parse_json_body, presented_tokens
from claudex.demo.replies_responses import responses_object

__all__ = [
    "FakeProvider",
    "FakeTokenServer",
    "Fault",
    "FaultConfigError",
    "FaultState",
    "Plan",
    "RecordedRequest",
    "TokenGrant",
    "default_models",
    "start_fakes",
    "stop_fakes",
]

RouteKind = Literal["messages", "count_tokens", "chat", "responses", "models"]
_ANTHROPIC_MODELS: Final = ("claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5")


def default_models(name: str, protocol: Protocol) -> tuple[str, ...]:
    """What a fake serves unless told: three Claude models, or NAME-chat and NAME-mini."""
    return _ANTHROPIC_MODELS if protocol == "anthropic" else (f"{name}-chat", f"{name}-mini")


_ROUTES: Final[dict[str, dict[str, tuple[str, RouteKind]]]] = {
    "anthropic": {
        "/v1/messages": ("POST", "messages"),
        "/v1/messages/count_tokens": ("POST", "count_tokens"),
        "/v1/models": ("GET", "models"),
    },
    "openai": {
        "/v1/chat/completions": ("POST", "chat"),
        "/v1/models": ("GET", "models"),
    },
    "responses": {
        "/v1/responses": ("POST", "responses"),
        "/v1/models": ("GET", "models"),
    },
}


class FakeProvider(FakeServer):
    """One fake provider listening on `host:port` (port 0 picks a free one at start)."""

    def __init__(
        self,
        name: str,
        protocol: Protocol,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        models: Sequence[str] | None = None,
        strict_models: bool = True,
        max_output_tokens: int | None = None,
        stream_delay_ms: float = 0.0,
        max_recorded: int = 10_000,
    ) -> None:
        if protocol not in _ROUTES:
            raise ValueError(
                f"protocol must be 'anthropic', 'openai' or 'responses', not {protocol!r}")
        super().__init__(host, port, max_recorded=max_recorded)
        self.name = name
        self.protocol: Protocol = protocol
        self.models: tuple[str, ...] = tuple(models) if models else default_models(name, protocol)
        self.strict_models = strict_models
        """Refuse a model outside `models` with 404 as real providers do (an Anthropic fake
        serves every `claude-` name too); False: answer whatever model is asked for."""
        if max_output_tokens is not None and max_output_tokens < 1:
            raise ValueError(f"max_output_tokens must be at least 1, not {max_output_tokens}")
        self.max_output_tokens = max_output_tokens
        """A larger max_tokens / max_completion_tokens is refused with 400 in the protocol's
        real wording (OpenAI: DeepSeek's "valid range of max_tokens is [1, N]"); None: the
        fakes' general limit `fake_replies.MAX_OUTPUT_TOKENS`."""
        self.signing_key: bytes | None = (
            thinking_rules.new_signing_key() if protocol == "anthropic" else None)
        """Anthropic fakes keep Anthropic's thinking rules (`claudex.demo.thinking_rules`):
        they sign the thinking they answer with this key and refuse thinking blocks they did
        not sign. None: no thinking rules."""
        self.plan: Plan | None = None
        """A subscription's quota windows (`claudex.demo.fake_plans`): every answer describes
        them in the service's headers, they fill with the tokens served, and a full one is
        refused with the service's "window spent" 429 until it resets. None: an API key."""
        self.prompt_cache: PromptCache | None = None
        """Anthropic fakes: this account's prompt cache (`claudex.demo.prompt_cache`); answers
        then report what they read from it and wrote to it. None: every prompt uncached."""
        self.rate_limits: RateLimits | None = RateLimits.of(
            "anthropic" if protocol == "anthropic" else "openai")
        """An API key's rate limits (`claudex.demo.fake_ratelimits`): every answer of a fake
        without a plan (and not the ChatGPT backend) describes them in the service's headers,
        and an empty bucket is refused with 429. None: no rate-limit headers (a provider that
        sends none, as DeepSeek)."""
        self.context_window: int | None = None
        """The model's context window in the fakes' tokens (a quarter of the body's bytes): a
        longer prompt is refused with 400 in the protocol's real wording (OpenAI's "maximum
        context length is N tokens", Anthropic's "prompt is too long"). None: unlimited."""
        self.context_sized = True
        """False: an OpenAI fake refuses as Groq does, without saying the window's size."""
        self.context_in_stream: str | None = None
        """A Responses fake with this set ("response.failed" or "error") refuses a streamed
        request over its `context_window` as the Responses API can: inside a 200 stream,
        before any content, with that event (`replies_responses.refused_stream`)."""
        self.chatgpt: ChatGPTRules | None = None
        """A Responses fake with these set behaves as the ChatGPT (Codex subscription)
        backend: its account header, `store: false`, streaming only, no output cap or
        sampling settings (`claudex.demo.fake_responses`)."""
        self.stream_delay_ms = stream_delay_ms
        """Pause between SSE events (0: the whole stream in one write)."""
        self.reply_text: str | None = None
        """When set, every answer without a tool call says exactly this (a classifier model's
        one-word answer: claudex's `[router]` tests); None: the usual greeting."""
        self.max_in_flight: int | None = None
        """API requests answered at once; one more gets 429 with `faults.retry_after`, as a
        provider limiting concurrency does. None: no limit."""
        self.over_limit = 0
        """Requests refused by `max_in_flight` so far."""
        self._api_in_flight = 0
        self._routes = _ROUTES[protocol]
        self._writer = ReplyWriter(self, self._pause)

    # ------------------------------------------------------------ public surface

    @property
    def base_url(self) -> str:
        """Anthropic: the host root (clients add /v1/messages); OpenAI: ends in /v1."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        root = f"http://{host}:{self._port}"
        return root if self.protocol == "anthropic" else root + "/v1"

    @property
    def echo_key(self) -> bool:
        """Error answers quote the key they were sent, as some real providers do (tests of
        claudex's secret scrubbing turn this on)."""
        return self._writer.echo_key

    @echo_key.setter
    def echo_key(self, on: bool) -> None:
        self._writer.echo_key = on

    def state(self) -> dict[str, Any]:
        last = self.requests[-1].summary() if self.requests else None
        return {
            "name": self.name,
            "protocol": self.protocol,
            "base_url": self.base_url,
            "listening": self.listening,
            "faults": self._faults.to_json(),
            "request_count": self._request_count,
            "last_request": last,
        }

    def __repr__(self) -> str:
        return (
            f"FakeProvider({self.name!r}, {self.protocol!r}, port={self._port}, "
            f"mode={self._faults.mode!r})"
        )

    # ------------------------------------------------------------ fault bookkeeping

    def _take_fault(self, kind: RouteKind) -> Fault:
        """The fault this request gets, counted against `times`."""
        state = self._faults
        mode = state.mode
        if mode == "ok" or (kind == "models" and mode not in FAULTS_FOR_MODELS):
            return "ok"
        state.consume_one()
        return mode

    # ------------------------------------------------------------ request handling

    async def _control(self, request: web.BaseRequest) -> web.Response:
        return await control_response(self, request)

    async def _serve(self, request: web.BaseRequest) -> web.StreamResponse:
        faults = self._faults
        if faults.mode == "down":
            # Arrived on a connection opened before the switch: a dead server would drop it.
            return drop(request)
        headers = {name.lower(): value for name, value in request.headers.items()}
        raw = await request.read() if request.body_exists else b""
        body = parse_json_body(raw)
        record = self._record(request, headers, body)
        route = self._routes.get(request.path)
        counted = self.max_in_flight is not None and route is not None and route[1] != "models"
        if counted and self.max_in_flight is not None \
                and self._api_in_flight >= self.max_in_flight:
            self.over_limit += 1
            response: web.StreamResponse = self._writer.failure_response("429", faults) \
                or web.Response(status=429)
        else:
            self._api_in_flight += counted
            try:
                response = await self._answer(request, faults, headers, raw, body)
            finally:
                self._api_in_flight -= counted
        if record is not None:
            # A dropped connection had its transport taken away; a stream's status went first.
            answered = response.prepared or request.transport is not None
            record.status = response.status if answered else None
        return response

    async def _answer(self, request: web.BaseRequest, faults: FaultState,
                      headers: dict[str, str], raw: bytes, body: Any) -> web.StreamResponse:
        route = self._routes.get(request.path)
        if route is None:
            message = f"Unknown request URL: {request.method} {request.path}."
            return self._writer.error("not_found", message)
        method, kind = route
        if request.method != method:
            return self._writer.error(
                "method", f"Method {request.method} not allowed on {request.path}."
            )
        if faults.valid_tokens is not None and not any(
            token in faults.valid_tokens for token in presented_tokens(headers)
        ):
            return self._writer.error("auth")
        if kind == "responses" and self.chatgpt is not None:
            refused = chatgpt_refusal(self.chatgpt, headers, body)
            if refused is not None:
                return self._writer.json(*refused)
        if kind == "responses" and (foreign := foreign_reasoning(self.name, body)):
            return self._writer.error("invalid_request", foreign)
        plan = self.plan if kind in ("messages", "chat", "responses") else None
        if plan is not None and (spent := plan.refusal()) is not None:
            return self._writer.json(spent[0], spent[1], spent[2])
        limits = self.key_limits() if kind in ("messages", "chat", "responses") else None
        if limits is not None and (wait := limits.refusal_in()) is not None:
            over = self._writer.error("rate_limit")
            over.headers["retry-after"] = str(max(1, math.ceil(wait)))
            return over
        mode = self._take_fault(kind)
        if faults.latency_ms > 0 and not await self._pause(faults.latency_ms / 1000):
            return drop(request)
        if mode == "hang":
            await self._hang_release.wait()
            return drop(request)
        failure = self._writer.failure_response(mode, faults)
        if failure is not None:
            return failure
        if mode == "down":
            return drop(request)
        if kind == "models":
            return self._writer.models()
        streaming = isinstance(body, dict) and body.get("stream") is True
        if mode in ("cut", "cut_before_content") and not streaming:
            return drop(request)
        if mode == "stall" and not streaming:
            await self.hold()
            return drop(request)
        if mode == "stream_error" and not streaming:
            return self._writer.error("overloaded")
        try:
            # A Responses request is planned from its Chat form (the same knobs and scripts).
            reply = replies.plan_reply(
                "openai" if kind == "responses" else self.protocol,
                self.name,
                as_chat_request(body) if kind == "responses" else body,
                len(raw),
                self._writer.next_id(),
                needs_max_tokens=kind == "messages",
                served_models=self.models if self.strict_models else None,
                max_output_tokens=self.max_output_tokens,
                signing_key=self.signing_key,
                context_window=self.context_window,
                context_sized=self.context_sized,
            )
        except BadRequest as error:
            if (error.kind == "context_length" and streaming and kind == "responses"
                    and self.context_in_stream is not None):
                return await self._writer.refused_stream(request, body, self.context_in_stream)
            return self._writer.error(error.kind, str(error))
        if self.reply_text is not None and reply.tool_call is None:
            reply = dataclasses.replace(reply, words=tuple(self.reply_text.split(" ")))
        if kind == "count_tokens":
            return self._writer.json(200, {"input_tokens": reply.input_tokens})
        if self.prompt_cache is not None and kind == "messages":
            cached = self.prompt_cache.serve(body)
            reply = dataclasses.replace(reply, input_tokens=cached.input_tokens,
                                        cache_read=cached.read, cache_creation=cached.written)
        if plan is not None:
            plan.serve(reply.input_tokens + reply.output_tokens)
        elif limits is not None:
            limits.serve(reply.input_tokens, reply.output_tokens)
        if streaming:
            return await self._writer.stream(request, reply, body, mode)
        if self.protocol == "anthropic":
            return self._writer.json(200, replies.anthropic_message(reply))
        if self.protocol == "responses":
            return self._writer.json(200, responses_object(
                reply, int(time.time()), reasoning_for(self.name, body, reply.id)))
        return self._writer.json(200, replies.openai_completion(reply, int(time.time())))

    def key_limits(self) -> RateLimits | None:
        """The API key's rate limits, when this fake is one (no plan, not the ChatGPT
        backend)."""
        return self.rate_limits if self.plan is None and self.chatgpt is None else None

    def quota_headers(self) -> dict[str, str]:
        """What an answer says of the plan's windows or the key's rate limits."""
        if self.plan is not None:
            return self.plan.headers()
        limits = self.key_limits()
        return limits.headers() if limits is not None else {}

async def start_fakes(
    specs: Sequence[tuple[str, Protocol]], *, host: str = "127.0.0.1"
) -> list[FakeProvider]:
    """Start one fake per (name, protocol), each on a free port, concurrently."""
    fakes = [FakeProvider(name, protocol, host=host) for name, protocol in specs]
    try:
        await asyncio.gather(*(fake.start() for fake in fakes))
    except BaseException:
        await stop_fakes(fakes)
        raise
    return fakes


async def stop_fakes(fakes: Iterable[FakeProvider]) -> None:
    await asyncio.gather(*(fake.stop() for fake in fakes))
