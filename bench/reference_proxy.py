"""The reference forwarder: the least a Python proxy can do, to compare claudex against.

uvicorn (httptools, uvloop) serves a raw ASGI app that reads the body, parses the JSON, sets
`model`, re-encodes it and forwards it through one shared aiohttp `ClientSession`; a non-streamed
answer is read whole and returned, a streamed one is relayed chunk by chunk as it arrives. No
routing, breaker, retry, logging or statistics: whatever claudex costs above this is the price of
its features (or waste).

    python -m bench.reference_proxy --port 8100 --upstream http://127.0.0.1:8200 [--model M]
        [--proxy http://127.0.0.1:8888]

`--proxy`: every request goes through that HTTP proxy (aiohttp's own `proxy=`), the least a
forwarder behind a corporate proxy can do, beside which claudex behind the same proxy is judged
(bench/network_cost.py).

Requests keep their path: POST /v1/messages goes to {upstream}/v1/messages.
"""

from __future__ import annotations

import argparse
import json
import re
import ssl
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import aiohttp
import uvicorn

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_STREAM = re.compile(rb'"stream"\s*:\s*true')
# Upstream headers passed back; the server adds its own framing (length or chunked).
_PASS = frozenset({b"content-type", b"request-id", b"x-request-id"})


class ReferenceForwarder:
    def __init__(self, upstream: str, model: str | None, proxy: str | None = None,
                 ca: str | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.model = model
        self.proxy = proxy
        self.ca = ca
        self.session: aiohttp.ClientSession | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._forward(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.session = aiohttp.ClientSession(
                    # No pool limit: the scale section runs thousands of streams at once.
                    connector=aiohttp.TCPConnector(limit=0, ssl=self._tls()),
                    skip_auto_headers=("User-Agent",),
                    timeout=aiohttp.ClientTimeout(total=None),
                )
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.session is not None:
                    await self.session.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _tls(self) -> ssl.SSLContext | bool:
        """True (aiohttp's default verification), or a context trusting `--ca` besides."""
        if self.ca is None:
            return True
        context = ssl.create_default_context()
        context.load_verify_locations(cafile=self.ca)
        return context

    async def _forward(self, scope: Scope, receive: Receive, send: Send) -> None:
        chunks: list[bytes] = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        raw = b"".join(chunks)
        if self.model is None:
            # --model "": the bytes as they came, unparsed: the floor of what forwarding a
            # body costs (two more socket hops), beside which parsing it can be judged.
            payload, stream = raw, _STREAM.search(raw) is not None
        else:
            body = json.loads(raw)
            body["model"] = self.model
            payload = json.dumps(body, separators=(",", ":")).encode()
            stream = body.get("stream") is True
        headers = {"content-type": "application/json"}
        for name, value in scope["headers"]:
            if name == b"anthropic-version":
                headers["anthropic-version"] = value.decode()
        assert self.session is not None
        url = self.upstream + scope["path"]
        async with self.session.post(url, data=payload, headers=headers, proxy=self.proxy) as resp:
            out = [(k.lower(), v) for k, v in resp.raw_headers if k.lower() in _PASS]
            if stream:
                await send({"type": "http.response.start", "status": resp.status, "headers": out})
                async for piece in resp.content.iter_any():
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
                return
            data = await resp.read()
            out.append((b"content-length", str(len(data)).encode()))
            await send({"type": "http.response.start", "status": resp.status, "headers": out})
            await send({"type": "http.response.body", "body": data})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reference_proxy")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="upstream root, e.g. http://127.0.0.1:8200")
    parser.add_argument("--model", default="claude-sonnet-4-5",
                        help='model set on every request; "": forward the body unparsed')
    parser.add_argument("--proxy", default=None, help="an HTTP proxy every request goes through")
    parser.add_argument("--ca", default=None,
                        help="a CA certificate (PEM) the upstream is verified with")
    args = parser.parse_args(argv)
    uvicorn.run(
        ReferenceForwarder(args.upstream, args.model or None, args.proxy, args.ca),
        host=args.host,
        port=args.port,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        log_config=None,
        log_level="warning",
        access_log=False,
        server_header=False,
        date_header=False,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
