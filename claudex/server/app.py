"""The ASGI app: proxy routes, admin API and the checks in front of them (DESIGN.md, Interfaces)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from claudex.config.model import MAX_BODY_BYTES, Config, ConfigError
from claudex.config.watch import ConfigWatcher
from claudex.engine.breaker.trips import DurationError, trip_terms
from claudex.engine.engine import Engine
from claudex.engine.history.query import HistoryQueryError, parse_query, read_history
from claudex.server.event_stream import EventStreams
from claudex.server.model_list import anthropic_list, model_ids, openai_list
from claudex.server.proxy_asgi import ProxyRoutes
from claudex.server.security import ASGIApp, SecurityMiddleware, is_loopback_host

log = logging.getLogger("claudex.server")
_TRIP_BODY_MAX = 16 * 1024  # a trip's body is a duration and a sentence

ConfigLoader = Callable[[], Config]


def create_app(
    engine: Engine,
    *,
    load_config: ConfigLoader | None = None,
    token: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    manage_engine: bool = True,
    watcher: ConfigWatcher | None = None,
    event_streams: EventStreams | None = None,
) -> ASGIApp:
    """Build the app around `engine`. `load_config` re-reads the config for `/_claudex/reload`.
    With `manage_engine`, the app's lifespan starts the engine's health task and closes it;
    a `watcher` (the config file's) runs for as long as the app does. The server that runs the
    app calls `event_streams.close()` when it begins to stop (`claudex.server.run`), so that no
    open event stream holds its shutdown."""
    streams = event_streams if event_streams is not None else EventStreams()
    # Built at the first scrape: prometheus_client (~1 MB) is imported only by a server that
    # is scraped (the collector reads the engine at scrape time either way).
    registry: list[Any] = []

    async def models(request: Request) -> Response:
        config = engine.config
        chosen = request.path_params.get("profile")
        if chosen is not None and config.resolve(chosen) is None:
            message = f"No profile named {chosen!r} is configured."
            if "anthropic-version" in request.headers:
                body = {"type": "error", "error": {"type": "not_found_error", "message": message}}
            else:
                body = {"error": {"message": message, "type": "invalid_request_error",
                                  "param": None, "code": "profile_not_found"}}
            return JSONResponse(body, status_code=404)
        ids = model_ids(config, chosen)
        if "anthropic-version" in request.headers:
            return JSONResponse(anthropic_list(ids))
        return JSONResponse(openai_list(ids, int(engine.started_at)))

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True, "profiles": len(engine.runtimes)})

    async def metrics_route(request: Request) -> Response:
        from claudex.server import metrics

        if not registry:
            registry.append(metrics.make_registry(engine))
        return Response(metrics.render(registry[0]),
                        media_type="text/plain; version=0.0.4; charset=utf-8")

    async def status(request: Request) -> Response:
        return JSONResponse(engine.snapshot())

    async def fleet(request: Request) -> Response:
        # Read from what the fleet task last heard: this route never waits on Redis either.
        if engine.fleet is None:
            return JSONResponse({"error": "this instance is not in a fleet: set [fleet] "
                                 "redis_url to share breakers with others"}, status_code=404)
        return JSONResponse(engine.fleet.status_json())

    async def breaker_action(request: Request) -> Response:
        name = request.path_params["name"]
        action = request.path_params["action"]
        if action not in ("trip", "reset"):
            return JSONResponse({"error": f"unknown action {action!r}"}, status_code=404)
        if name not in engine.runtimes and name not in engine.proxies:
            return JSONResponse({"error": f"no profile or upstream proxy named {name!r}"},
                                status_code=404)
        if action == "trip":
            # An optional JSON body: {"for": "20m" | seconds, "reason": "..."} (breaker/trips.py).
            body = await request.body()
            try:
                if len(body) > _TRIP_BODY_MAX:
                    raise DurationError("the body is too long for a trip")
                seconds, reason = trip_terms(body)
            except DurationError as exc:
                return JSONResponse({"error": f"not tripped: {exc}"}, status_code=400)
            engine.trip(name, seconds, reason)
            ended = None
        else:
            ended = engine.reset_provider(name)
        breaker = _breaker_of(engine, name)
        answer = {"name": name, "breaker": breaker["state"], "reason": breaker["reason"],
                  "until": breaker["until"], "retry_in_s": breaker["retry_in_s"]}
        if ended is not None:  # a reset: what it ended, in words (engine/health/spent_windows.py)
            answer["ended"] = ended
        return JSONResponse(answer)

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
        wanted = request.query_params.get("kinds")
        kinds = None if not wanted else {k.strip() for k in wanted.split(",") if k.strip()}
        resume = request.headers.get("last-event-id") or request.query_params.get("since")
        last_seen: int | None = None
        if resume is not None:
            try:
                last_seen = int(resume)
            except ValueError:
                return JSONResponse({"error": "Last-Event-ID and since take an event id "
                                     f"(a whole number), not {resume[:40]!r}"}, status_code=400)

        return StreamingResponse(streams.open(engine.events, kinds, last_seen),
                                 media_type="text/event-stream",
                                 headers={"cache-control": "no-cache"})

    async def history(request: Request) -> Response:
        journal = engine.journal
        if journal is None:
            return JSONResponse({"error": "this engine keeps no history ([history] enabled = "
                                 "false, or not started by claudex serve)"}, status_code=409)
        try:
            query = parse_query(request.query_params, time.time())
        except HistoryQueryError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)

        def read() -> dict[str, Any]:
            journal.flush(2.0)  # what was served a moment ago is in the answer
            return read_history(journal.path, query)

        try:
            found = await asyncio.to_thread(read)
        except sqlite3.Error as exc:
            return JSONResponse({"error": f"the history cannot be read: {exc}",
                                 "history": journal.status()}, status_code=503)
        return JSONResponse({**found, "history": journal.status()})

    routes = [
        Route("/v1/models", models, methods=["GET"]),
        Route("/proxy/{profile}/v1/models", models, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics_route, methods=["GET"]),
        Route("/_claudex/status", status, methods=["GET"]),
        Route("/_claudex/breakers/{name}/{action}", breaker_action, methods=["POST"]),
        Route("/_claudex/reload", reload, methods=["POST"]),
        Route("/_claudex/health", health_now, methods=["POST"]),
        Route("/_claudex/events", events, methods=["GET"]),
        Route("/_claudex/history", history, methods=["GET"]),
        Route("/_claudex/fleet", fleet, methods=["GET"]),
    ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if manage_engine:
            await engine.start()
        if watcher is not None:
            watcher.start()
        try:
            yield
        finally:
            if watcher is not None:
                await watcher.stop()
            if manage_engine:
                await engine.close()

    control = Starlette(routes=routes, lifespan=lifespan)
    # The security checks run before everything; the proxy routes answer before Starlette's
    # middleware and routing ever run (hot path); everything else — and the lifespan — is
    # Starlette's.
    return SecurityMiddleware(
        ProxyRoutes(control, engine, max_body_bytes),
        check_host=is_loopback_host(engine.config.proxy.host),
        token=token,
    )


def _breaker_of(engine: Engine, name: str) -> dict[str, Any]:
    """A profile's or an upstream proxy's breaker, as status shows it (names are unique across
    both, DESIGN.md "Networks")."""
    rt = engine.runtimes.get(name)
    if rt is not None:
        breaker: dict[str, Any] = rt.status_json(engine.clock(), 0.0, engine.wall())["breaker"]
        return breaker
    proxy = next(p for p in engine.proxies.snapshot() if p["name"] == name)
    return {**proxy["breaker"], "until": None}
