"""The proxy routes as a bare ASGI handler, in front of the Starlette app.

The forwarding path is the hot path: Starlette's request/response objects and routing cost about
a sixth of the proxy's CPU under load (bench/RESULTS.md), so POSTs to the proxy routes are parsed
and answered here directly, and everything else (models, admin, metrics) falls through to
Starlette.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import orjson

from claudex.config.model import MAX_BODY_BYTES, Protocol
from claudex.engine.core.hooks import Flow
from claudex.engine.core.request import Endpoint, ForwardResult, ProxyRequest
from claudex.engine.engine import Engine
from claudex.providers import anthropic, fastjson, openai, validation
from claudex.providers.usage_chunks import WithoutUsage, asked_for_usage
from claudex.providers.validation_problems import InvalidRequest
from claudex.server.cloud_routes import CloudRoutes, match_cloud

log = logging.getLogger("claudex.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

ROUTES: dict[str, tuple[Protocol, Endpoint]] = {
    "v1/messages": ("anthropic", "messages"),
    "v1/messages/count_tokens": ("anthropic", "count_tokens"),
    "v1/chat/completions": ("openai", "chat"),
    "v1/responses": ("responses", "responses"),  # Codex CLI, the openai SDK's client.responses
}


def match(path: str) -> tuple[Protocol, Endpoint, str | None] | None:
    """`/v1/messages` -> (anthropic, messages, None); `/proxy/grok/v1/...` -> (..., "grok")."""
    if path.startswith("/proxy/"):
        profile, _, tail = path[7:].partition("/")
        route = ROUTES.get(tail)
        if route is None or not profile:
            return None
        return route[0], route[1], profile
    route = ROUTES.get(path[1:])
    return (route[0], route[1], None) if route is not None else None


class _TooLarge(Exception):
    pass


class _Unreadable(Exception):
    """The body is not a JSON object; the message says why, in a sentence for the client."""


def _refuse_constant(name: str) -> Any:
    raise _Unreadable(f"Request body is not valid JSON: {name} is not a JSON value.")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Unreadable(f"Request body has a number out of range ({text[:40]}).")
    return value


# One decoder for every request: json.loads with options would build a new one each time.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite)


def _parse(raw: bytes) -> dict[str, Any]:
    """The request body as a JSON object. Strict: UTF-8 only (as both APIs require), no
    NaN/Infinity, which Python accepts but no provider does, and no number beyond a double.

    orjson reads it (1.3 ms for a 1 MB conversation on the bench machine, the standard library
    2.1 ms); what orjson refuses goes to the standard library, which accepts what JSON allows and
    orjson does not (an escaped lone surrogate) and words the error for the client. orjson reads
    an integer beyond 64 bits as a float: one among the top-level fields (which the checks and
    the engine read) has the body read exactly; deeper ones are the exchange's to notice when it
    re-encodes (`claudex.providers.fastjson`)."""
    if not raw or raw.isspace():
        raise _Unreadable("Request body is empty; expected a JSON object.")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = _parse_strictly(raw)
    else:
        if isinstance(body, dict) and fastjson.lossy(
                [v for v in body.values() if isinstance(v, float)]):
            body = _parse_strictly(raw)
    if not isinstance(body, dict):
        raise _Unreadable("Request body must be a JSON object.")
    return body


def _parse_strictly(raw: bytes) -> Any:
    try:
        return _DECODER.decode(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _Unreadable(f"Request body is not valid UTF-8 (byte {exc.start}).") from None
    except json.JSONDecodeError as exc:
        raise _Unreadable(f"Request body is not valid JSON: {exc}.") from None
    except ValueError:  # Python's cap on the digits of an integer
        raise _Unreadable("Request body has a number with too many digits.") from None
    except RecursionError:
        raise _Unreadable("Request body is nested too deeply to be valid JSON.") from None


class _Disconnected(Exception):
    pass


def _log_refusal(protocol: Protocol, endpoint: Endpoint, profile: str | None, status: int,
                 reason: str) -> None:
    """One WARNING line per request claudex refuses itself, so that a `claudex serve` user sees
    why a client got a 4xx no provider sent. The reason names the field, never the body."""
    where = f"profile {profile[:64]}" if profile else "the default profile"
    log.warning("refused a %s %s request for %s (%d, no provider asked): %s",
                protocol, endpoint, where, status, reason)


def _error_body(protocol: Protocol, status: int, message: str) -> bytes:
    if protocol == "anthropic":
        return anthropic.error_body(status, message)
    return openai.error_body(status, message)


_JSON = [(b"content-type", b"application/json")]


class ProxyRoutes:
    def __init__(self, app: ASGIApp, engine: Engine, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.engine = engine
        self.limit = max_body_bytes
        # `Engine.forward`, one coroutine frame less a request (the forwarder is made once,
        # with the engine), and the whole answer's bookkeeping left until the client has it.
        self._forward = engine.forwarder.answer
        self._finish = engine.forwarder.finish
        self._clouds = CloudRoutes(self)

    # -- what a cloud's routes use (server/cloud_routes.py's `Front`) -----------------------------

    async def read_json(self, receive: Receive, headers: dict[str, str]
                        ) -> dict[str, Any] | tuple[int, str] | None:
        """The request's JSON object; or (status, why) refusing it; None: the client left."""
        try:
            return _parse(await self._read_body(receive, headers))
        except _TooLarge:
            return 413, f"Request body over the {self.limit // (1024 * 1024)} MB limit."
        except _Unreadable as exc:
            return 400, str(exc)
        except _Disconnected:
            return None

    async def forward(self, req: ProxyRequest) -> tuple[ForwardResult, Flow | None]:
        return await self._forward(req)

    def finish(self, flow: Flow) -> None:
        self._finish(flow)

    async def answer(self, send: Send, status: int, body: bytes,
                     result: ForwardResult | None = None) -> None:
        await self._answer(send, status, body, result)

    async def relay(self, result: ForwardResult, stream: AsyncIterator[bytes],
                    receive: Receive, send: Send) -> None:
        await self._stream(result, stream, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        route = match(scope["path"])
        if route is None:
            cloud = match_cloud(scope)  # Bedrock's and Vertex's routes (server/cloud_routes.py)
            if cloud is not None:
                await self._clouds.serve(cloud, scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        protocol, endpoint, profile = route
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            raw = await self._read_body(receive, headers)
        except _TooLarge:
            limit_mb = self.limit // (1024 * 1024)
            _log_refusal(protocol, endpoint, profile, 413, f"body over the {limit_mb} MB limit")
            await self._answer(send, 413, _error_body(
                protocol, 413, f"Request body over the {limit_mb} MB limit."))
            return
        except _Disconnected:
            return
        try:
            body = _parse(raw)
        except _Unreadable as exc:
            _log_refusal(protocol, endpoint, profile, 400, str(exc))
            await self._answer(send, 400, _error_body(protocol, 400, str(exc)))
            return
        try:
            validation.check_top_level(protocol, endpoint, body)
        except InvalidRequest as exc:
            _log_refusal(protocol, endpoint, profile, 400, str(exc))
            await self._answer(send, 400, validation.error_body(protocol, exc.problem))
            return
        req = ProxyRequest(
            protocol=protocol, endpoint=endpoint, body=body, raw=raw, headers=headers,
            profile=profile,
            failover=headers.get("x-claudex-failover", "").lower() != "off",
            query=scope.get("query_string", b"").decode("latin-1"),
            route=scope["path"],
        )
        try:
            result, flow = await self._forward(req)
        except InvalidRequest as exc:  # found deeper, e.g. by a local token count
            _log_refusal(protocol, endpoint, profile, 400, str(exc))
            await self._answer(send, 400, validation.error_body(protocol, exc.problem))
            return
        except Exception:  # a claudex bug: answer in the client's format, details in the log
            log.exception("internal error while forwarding")
            await self._answer(send, 500, _error_body(
                protocol, 500, "Internal error in claudex; see its log."))
            return
        if result.stream is not None:
            stream: AsyncIterator[bytes] = result.stream
            if protocol == "openai" and not asked_for_usage(body):
                stream = WithoutUsage(stream)  # claudex asked for it, to count the tokens
            await self._stream(result, stream, receive, send)
        else:
            try:
                await self._answer(send, result.status, result.body or b"", result)
            finally:
                if flow is not None:  # the client has its answer: now the bookkeeping
                    self._finish(flow)

    async def _read_body(self, receive: Receive, headers: dict[str, str]) -> bytes:
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            raise _TooLarge
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected
            chunk = message.get("body", b"")
            if chunk:
                size += len(chunk)
                if size > self.limit:
                    raise _TooLarge
                chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    @staticmethod
    def _raw_headers(result: ForwardResult | None) -> list[tuple[bytes, bytes]]:
        if result is None:
            return list(_JSON)
        return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in result.headers.items()]

    async def _answer(self, send: Send, status: int, body: bytes,
                      result: ForwardResult | None = None) -> None:
        headers = self._raw_headers(result)
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _stream(self, result: ForwardResult, stream: AsyncIterator[bytes],
                      receive: Receive, send: Send) -> None:
        """Relay chunks as they come; stop reading upstream as soon as the client goes away.

        The relay runs in this task; one small task waits for the client's disconnect and, while
        the relay runs, cancels it (one task a stream, not two and an `asyncio.wait`)."""
        relay = asyncio.current_task()
        assert relay is not None
        relaying, left = True, False

        async def client_gone() -> None:
            nonlocal left
            while (await receive())["type"] != "http.disconnect":
                pass
            if relaying:  # only while this task waits inside the relay below
                left = True
                relay.cancel()

        watcher = asyncio.ensure_future(client_gone())
        try:
            await send({"type": "http.response.start", "status": result.status,
                        "headers": self._raw_headers(result)})
            async for chunk in stream:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            relaying = False
            await send({"type": "http.response.body", "body": b""})
        except asyncio.CancelledError:
            if not left:
                raise
            relay.uncancel()  # the client left: nothing more to send, and no error
        finally:
            relaying = False
            if not watcher.done():
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()  # releases the breaker permit if the stream did not finish
