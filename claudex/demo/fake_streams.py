"""How a fake provider writes its answers: JSON bodies, protocol errors, SSE streams (cut or
broken as the fault says) and dropped connections.

`FakeProvider` (`claudex.demo.fake_provider`) decides what a request gets; its `ReplyWriter`
puts that on the wire in the provider's protocol (`fake_replies` builds the bodies). The writer
reads the provider's `faults` and `stream_delay_ms` when it writes, so a change made meanwhile
applies to the stream under way. It knows the provider by what it reads of it (`WrittenFake`),
so this module does not import the provider's.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from aiohttp import web

from claudex.demo import fake_replies as replies
from claudex.demo.fake_plans import Plan
from claudex.demo.fake_replies import ErrorKind
from claudex.demo.fake_replies import Protocol as ApiProtocol
from claudex.demo.fake_responses import reasoning_for
from claudex.demo.faults import Fault, FaultState
from claudex.demo.recording import RecordedRequest, presented_tokens
from claudex.demo.replies_responses import refused_stream, responses_stream


class WrittenFake(Protocol):
    """What the writer reads of the fake provider it writes for (`FakeProvider` is one)."""

    name: str
    protocol: ApiProtocol
    models: tuple[str, ...]
    plan: Plan | None
    stream_delay_ms: float
    requests: list[RecordedRequest]

    @property
    def faults(self) -> FaultState: ...

    def quota_headers(self) -> dict[str, str]: ...

    async def hold(self) -> None: ...


Pause = Callable[[float], Awaitable[bool]]
"""Sleep that many seconds; False if the provider is stopping meanwhile."""


def _seconds_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def drop(
    request: web.BaseRequest, response: web.StreamResponse | None = None
) -> web.StreamResponse:
    """Close the connection without (finishing) an answer; what was written is flushed."""
    request.protocol.force_close()
    return response if response is not None else web.Response()


class ReplyWriter:
    """Writes one fake provider's answers; also numbers its replies and request ids."""

    def __init__(self, provider: WrittenFake, pause: Pause) -> None:
        self._provider = provider
        self._pause = pause
        self._id_prefix = secrets.token_hex(4)
        self._id_seq = 0
        self._request_id_header = (
            "request-id" if provider.protocol == "anthropic" else "x-request-id"
        )
        self.echo_key = False
        """Error answers quote the credential the request presented, as some real providers
        do ("invalid x-api-key sk-..."); tests of claudex's secret scrubbing turn it on."""

    def failure_response(self, mode: Fault, faults: FaultState) -> web.Response | None:
        """The error answer the fault `mode` calls for; None when it is not an error status."""
        if mode == "500":
            return self.error("server")
        if mode == "529":
            return self.error("overloaded")
        if mode == "401":
            return self.error("auth")
        if mode == "429":
            response = self.error("rate_limit")
            if faults.retry_after is not None:
                value = faults.retry_after
                response.headers["retry-after"] = (
                    value if isinstance(value, str) else _seconds_text(value)
                )
            if faults.retry_after_ms is not None:
                response.headers["retry-after-ms"] = _seconds_text(faults.retry_after_ms)
            return response
        return None

    async def stream(
        self, request: web.BaseRequest, reply: replies.Reply, body: dict[str, Any], mode: Fault
    ) -> web.StreamResponse:
        provider = self._provider
        if provider.protocol == "anthropic":
            parts = replies.anthropic_stream(reply)
        elif provider.protocol == "responses":
            parts = responses_stream(reply, int(time.time()),
                                     reasoning_for(provider.name, body, reply.id))
            if provider.plan is not None and provider.plan.kind == "chatgpt":
                parts = dataclasses.replace(parts, preamble=[
                    provider.plan.rate_limits_event(), *parts.preamble])
        else:
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and options.get("include_usage") is True
            parts = replies.openai_stream(reply, int(time.time()), include_usage)
        response = web.StreamResponse(
            status=200,
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
                "x-fake-provider": provider.name,
                self._request_id_header: "req_" + reply.id,
                **provider.quota_headers(),
            },
        )
        await response.prepare(request)
        # The first content delta brings its block's opening with it, so with
        # cut_after_events=0 the failure comes before any content event (the commit point).
        cut_at = provider.faults.cut_after_events
        content = [*parts.opening, *parts.deltas[:cut_at]] if cut_at > 0 else []
        if mode == "cut_before_content":
            await self.send(response, parts.preamble)
            return drop(request, response)
        if mode == "cut":
            await self.send(response, [*parts.preamble, *content])
            return drop(request, response)
        if mode == "stall":
            # A stuck upstream: the connection stays open and nothing more arrives.
            if await self.send(response, [*parts.preamble, *content]):
                await provider.hold()
            return drop(request, response)
        if mode == "stream_error":
            events = [*parts.preamble, *content, parts.error]
        elif provider.stream_delay_ms > 0:
            events = [*parts.preamble, *parts.opening, *parts.deltas, *parts.closing]
        else:
            events = [parts.everything]
        if not await self.send(response, events):
            return drop(request, response)
        return response  # aiohttp ends the chunked body

    async def refused_stream(self, request: web.BaseRequest, body: dict[str, Any],
                             how: str) -> web.StreamResponse:
        """A Responses request over the context window refused inside its 200 stream."""
        reply_id = self.next_id()
        model = body.get("model")
        response = web.StreamResponse(status=200, headers={
            "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache",
            "x-fake-provider": self._provider.name, self._request_id_header: "req_" + reply_id})
        await response.prepare(request)
        events = refused_stream(reply_id, model if isinstance(model, str) else "",
                                int(time.time()), how)
        if not await self.send(response, events):
            return drop(request, response)
        return response

    async def send(self, response: web.StreamResponse, events: list[bytes]) -> bool:
        """Write the events, pausing `stream_delay_ms` between them; False if stopping."""
        provider = self._provider
        if provider.stream_delay_ms <= 0:
            await response.write(b"".join(events))
            return True
        for index, event in enumerate(events):
            if index and not await self._pause(provider.stream_delay_ms / 1000):
                return False
            await response.write(event)
        return True

    def models(self) -> web.Response:
        provider = self._provider
        if provider.protocol == "anthropic":
            return self.json(200, replies.anthropic_models(provider.models))
        return self.json(200, replies.openai_models(provider.models, provider.name))

    def error(self, kind: ErrorKind, message: str | None = None) -> web.Response:
        status, payload = replies.error_reply(self._provider.protocol, kind, message)
        if self.echo_key:
            self._quote_key(payload)
        return self.json(status, payload)

    def _quote_key(self, payload: dict[str, Any]) -> None:
        # The request being answered is the last one recorded: nothing awaits in between.
        recorded = self._provider.requests
        tokens = presented_tokens(recorded[-1].headers) if recorded else ()
        if tokens:
            error = payload["error"]
            error["message"] = f"{error['message']} (invalid x-api-key {tokens[0]})"

    def json(self, status: int, payload: dict[str, Any],
             extra: dict[str, str] | None = None) -> web.Response:
        """`extra`: headers of the answer's own (a plan's refusal); a plan's windows, or an API
        key's rate limits, are on every other answer."""
        return web.Response(
            status=status,
            body=replies.dumps_bytes(payload),
            headers={
                "Content-Type": "application/json",
                "x-fake-provider": self._provider.name,
                self._request_id_header: "req_" + self.next_id(),
                **(extra if extra is not None else self._provider.quota_headers()),
            },
        )

    def next_id(self) -> str:
        self._id_seq += 1
        return f"{self._id_prefix}{self._id_seq:08x}"
