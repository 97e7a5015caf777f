"""Experiment: claudex's engine behind a raw ASGI front for the proxy routes (no Starlette on the
hot path), to size what the Starlette layers cost. Not part of `make bench`.

    python -m bench.experiment_raw_asgi CONFIG PORT [--no-proxy-headers]

POST /v1/messages and /v1/chat/completions (non-streaming and streaming) go straight to
`Engine.forward`; every other route falls through to the real app from `create_app`, behind the
same security middleware. Compare it with `claudex serve` on the same config:

    python -m bench.experiment_raw_asgi /tmp/.../bench.toml 9100 &
    wrk -t1 -c64 -d5s -s bench/wrk_post.lua http://127.0.0.1:9100/v1/messages
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import uvicorn

from claudex.config.loader import load_config
from claudex.engine.core.request import ProxyRequest
from claudex.engine.engine import Engine
from claudex.server.app import create_app
from claudex.server.security import SecurityMiddleware

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_ROUTES = {"/v1/messages": ("anthropic", "messages"),
           "/v1/chat/completions": ("openai", "chat")}


def build(config_path: Path) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    engine = Engine(load_config(config_path))
    fallback = create_app(engine)

    async def front(scope: Scope, receive: Receive, send: Send) -> None:
        route = _ROUTES.get(scope.get("path", "")) if scope["type"] == "http" else None
        if route is None or scope["method"] != "POST":
            await fallback(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        raw = b"".join(chunks)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        req = ProxyRequest(protocol=route[0], endpoint=route[1],  # type: ignore[arg-type]
                           body=json.loads(raw), raw=raw, headers=headers)
        result = await engine.forward(req)
        out = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in result.headers.items()]
        if result.stream is not None:
            await send({"type": "http.response.start", "status": result.status, "headers": out})
            async for piece in result.stream:
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
            return
        body = result.body or b""
        out.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": result.status, "headers": out})
        await send({"type": "http.response.body", "body": body})

    return SecurityMiddleware(front, check_host=True, token=None)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    uvicorn.run(build(Path(argv[0])), host="127.0.0.1", port=int(argv[1]), loop="uvloop",
                http="httptools", lifespan="off", log_config=None, log_level="warning",
                access_log=False, server_header=False, date_header=False,
                proxy_headers="--no-proxy-headers" not in argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
