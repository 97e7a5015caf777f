"""The ASGI app: proxy routes, admin API and the checks in front of them (DESIGN.md, Interfaces)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from claudex.config.model import MAX_BODY_BYTES, Config, ConfigError, Protocol
from claudex.engine.engine import Engine
from claudex.engine.request import Endpoint, ProxyRequest
from claudex.providers import anthropic, openai
from claudex.server import metrics
from claudex.server.security import SecurityMiddleware, is_loopback_host

log = logging.getLogger("claudex.server")

ConfigLoader = Callable[[], Config]


class BodyTooLarge(Exception):
    pass


def _client_error(protocol: Protocol, status: int, message: str) -> Response:
    body = (anthropic.error_body(status, message) if protocol == "anthropic"
            else openai.error_body(status, message))
    return Response(body, status_code=status, media_type="application/json")


async def _read_body(request: Request, limit: int) -> bytes:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(
    engine: Engine,
    *,
    load_config: ConfigLoader | None = None,
    token: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    manage_engine: bool = True,
) -> Starlette:
    """Build the app around `engine`. `load_config` re-reads the config for `/_claudex/reload`.
    With `manage_engine`, the app's lifespan starts the engine's health task and closes it."""
    registry = metrics.make_registry(engine)

    async def proxy(request: Request, protocol: Protocol, endpoint: Endpoint) -> Response:
        try:
            raw = await _read_body(request, max_body_bytes)
        except BodyTooLarge:
            limit_mb = max_body_bytes // (1024 * 1024)
            return _client_error(protocol, 413, f"Request body over the {limit_mb} MB limit.")
        except ClientDisconnect:
            return Response(status_code=499)
        try:
            body = json.loads(raw)
        except ValueError as exc:
            return _client_error(protocol, 400, f"Request body is not valid JSON: {exc}.")
        if not isinstance(body, dict):
            return _client_error(protocol, 400, "Request body must be a JSON object.")
        headers = request.headers
        req = ProxyRequest(
            protocol=protocol,
            endpoint=endpoint,
            body=body,
            raw=raw,
            headers=headers,
            profile=request.path_params.get("profile"),
            failover=headers.get("x-claudex-failover", "").lower() != "off",
        )
        try:
            result = await engine.forward(req)
        except Exception:  # a claudex bug: answer in the client's format, details in the log
            log.exception("internal error while forwarding")
            return _client_error(protocol, 500, "Internal error in claudex; see its log.")
        if result.stream is not None:
            return StreamingResponse(result.stream, status_code=result.status,
                                     headers=result.headers)
        return Response(result.body or b"", status_code=result.status, headers=result.headers)

    async def messages(request: Request) -> Response:
        return await proxy(request, "anthropic", "messages")

    async def count_tokens(request: Request) -> Response:
        return await proxy(request, "anthropic", "count_tokens")

    async def chat(request: Request) -> Response:
        return await proxy(request, "openai", "chat")

    async def models(request: Request) -> Response:
        config = engine.config
        chosen = request.path_params.get("profile")
        profiles = [p for p in config.profiles
                    if p.enabled and (chosen is None or p.name == chosen)]
        ids: list[str] = []
        for p in profiles:
            for model in (p.default_model, *p.models.values()):
                if model and model not in ids:
                    ids.append(model)
        created = int(engine.started_at)
        if "anthropic-version" in request.headers:
            data: list[dict[str, Any]] = [
                {"type": "model", "id": m, "display_name": m,
                 "created_at": "2025-01-01T00:00:00Z"} for m in ids
            ]
            return JSONResponse({"data": data, "has_more": False,
                                 "first_id": ids[0] if ids else None,
                                 "last_id": ids[-1] if ids else None})
        return JSONResponse({"object": "list", "data": [
            {"id": m, "object": "model", "created": created, "owned_by": "claudex"} for m in ids
        ]})

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True, "profiles": len(engine.runtimes)})

    async def metrics_route(request: Request) -> Response:
        return Response(metrics.render(registry),
                        media_type="text/plain; version=0.0.4; charset=utf-8")

    async def status(request: Request) -> Response:
        return JSONResponse(engine.snapshot())

    async def breaker_action(request: Request) -> Response:
        name = request.path_params["name"]
        action = request.path_params["action"]
        if action not in ("trip", "reset"):
            return JSONResponse({"error": f"unknown action {action!r}"}, status_code=404)
        done = engine.trip(name) if action == "trip" else engine.reset(name)
        if not done:
            return JSONResponse({"error": f"no profile named {name!r}"}, status_code=404)
        rt = engine.runtimes[name]
        return JSONResponse({"name": name, "breaker": rt.breaker.state.value})

    async def reload(request: Request) -> Response:
        if load_config is None:
            return JSONResponse({"error": "this engine was not started from a config file"},
                                status_code=409)
        try:
            config = await asyncio.to_thread(load_config)
        except ConfigError as exc:
            return JSONResponse({"error": "config has problems; the previous config stays live",
                                 "issues": [str(i) for i in exc.issues]}, status_code=400)
        engine.apply_config(config)
        return JSONResponse({"ok": True, "profiles": [p.name for p in config.profiles]})

    async def health_now(request: Request) -> Response:
        await engine.check_health_now()
        return JSONResponse(engine.snapshot())

    async def events(request: Request) -> Response:
        async def stream() -> AsyncIterator[bytes]:
            with engine.events.subscribe() as queue:
                yield b": connected\n\n"
                while True:
                    try:
                        event = await asyncio.wait_for(queue.get(), timeout=15.0)
                    except TimeoutError:
                        yield b": keep-alive\n\n"
                        continue
                    payload = json.dumps(event.to_json())
                    yield f"event: {event.kind}\ndata: {payload}\n\n".encode()

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"cache-control": "no-cache"})

    routes = [
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        Route("/proxy/{profile}/v1/messages", messages, methods=["POST"]),
        Route("/proxy/{profile}/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/proxy/{profile}/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/proxy/{profile}/v1/models", models, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics_route, methods=["GET"]),
        Route("/_claudex/status", status, methods=["GET"]),
        Route("/_claudex/breakers/{name}/{action}", breaker_action, methods=["POST"]),
        Route("/_claudex/reload", reload, methods=["POST"]),
        Route("/_claudex/health", health_now, methods=["POST"]),
        Route("/_claudex/events", events, methods=["GET"]),
    ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if manage_engine:
            await engine.start()
        try:
            yield
        finally:
            if manage_engine:
                await engine.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    proxy_settings = engine.config.proxy
    app.add_middleware(
        SecurityMiddleware,
        check_host=is_loopback_host(proxy_settings.host),
        token=token,
    )
    return app


