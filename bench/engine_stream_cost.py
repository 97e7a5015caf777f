"""claudex's own Python cost per stream and per chunk, in-process, without sockets: the engine
forwards through a transport that answers from memory, so neither the kernel nor a busy machine's
other processes blur what the forwarding path itself costs (the scale section measures the whole).

    python -m bench.engine_stream_cost [--streams 3000] [--chunks 5] [--app] [--profile]

Reports µs per stream with `--chunks` content deltas (engine.forward, the commit, the relay to
its end, the request's report) and µs per extra chunk (the difference from a 200-chunk stream,
divided); `--app` drives the server's ASGI app instead of `engine.forward` (the security checks,
reading and parsing the body, the checks of its fields, the relay task and its disconnect
watcher: all of claudex's own work for a stream but the sockets), on uvloop as `claudex serve`
runs; `--profile` adds cProfile's top functions by own time.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import pstats
import sys
import time
from collections.abc import AsyncIterator, Mapping, MutableMapping, Sequence
from typing import Any

from claudex.config.loader import parse_config
from claudex.engine.core.request import ProxyRequest
from claudex.engine.core.transport import UpstreamResponse
from claudex.engine.engine import Engine

CONFIG = """
[proxy]
default_profile = "fast"

[health]
enabled = false

[[profiles]]
name = "fast"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key = "sk-bench-not-a-secret-0000"
"""
_START = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_b",'
          b'"type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],'
          b'"stop_reason":null,"usage":{"input_tokens":12,"output_tokens":1}}}\n\n'
          b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
          b'"content_block":{"type":"text","text":""}}\n\n')
_DELTA = (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
          b'"delta":{"type":"text_delta","text":"1234567890123456789 "}}\n\n')
_END = (b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
        b'"usage":{"output_tokens":5}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n')
_HEADERS = ((b"Content-Type", b"text/event-stream"), (b"request-id", b"req_b"))


class _Answer:
    def __init__(self, chunks: int) -> None:
        self._chunks = chunks

    @property
    def status(self) -> int:
        return 200

    @property
    def headers(self) -> Mapping[str, str]:
        return {"content-type": "text/event-stream"}

    @property
    def raw_headers(self) -> Sequence[tuple[bytes, bytes]]:
        return _HEADERS

    async def read(self) -> bytes:
        return b""

    async def chunks(self) -> AsyncIterator[bytes]:
        yield _START
        for _ in range(self._chunks):
            yield _DELTA
        yield _END

    def close(self) -> None:
        pass


class _Memory:
    def __init__(self, chunks: int) -> None:
        self.chunks = chunks

    async def send(self, provider: str, method: str, url: str, headers: Mapping[str, str],
                   body: bytes | None, *, connect_timeout: float,
                   read_timeout: float | None) -> UpstreamResponse:
        return _Answer(self.chunks)

    async def close(self) -> None:
        pass


RAW = (b'{"model":"claude-sonnet-4-5","max_tokens":256,"stream":true,'
       b'"messages":[{"role":"user","content":"hi"}]}')
HEADERS = {"host": "127.0.0.1:13456", "user-agent": "claude-cli/2.0.0", "x-app": "cli",
           "content-type": "application/json", "anthropic-version": "2023-06-01",
           "anthropic-beta": "claude-code-20250219", "x-api-key": "sk-client-0000",
           "accept": "application/json", "content-length": str(len(RAW))}


async def _streams(engine: Engine, count: int) -> float:
    import orjson

    started = time.perf_counter()
    for _ in range(count):
        req = ProxyRequest(protocol="anthropic", endpoint="messages", body=orjson.loads(RAW),
                           raw=RAW, headers=HEADERS)
        result = await engine.forward(req)
        assert result.stream is not None, result.status
        async for _chunk in result.stream:
            pass
        aclose = getattr(result.stream, "aclose", None)
        if aclose is not None:
            await aclose()
    return (time.perf_counter() - started) / count * 1e6


async def _through_app(engine: Engine, count: int) -> float:
    """`count` streams through the ASGI app, as uvicorn would call it (the client never leaves:
    its `receive` waits, like uvicorn's, until the app is done)."""
    from claudex.server.app import create_app

    app = create_app(engine, manage_engine=False)
    scope = {"type": "http", "method": "POST", "path": "/v1/messages", "query_string": b"",
             "headers": [(k.encode(), v.encode()) for k, v in HEADERS.items()]}
    parked = asyncio.Event()
    request = {"type": "http.request", "body": RAW, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        pass

    started = time.perf_counter()
    for _ in range(count):
        asked = False

        async def receive() -> MutableMapping[str, Any]:
            nonlocal asked
            if not asked:
                asked = True
                return request
            await parked.wait()
            return {"type": "http.disconnect"}

        await app(dict(scope), receive, send)
    return (time.perf_counter() - started) / count * 1e6


async def measure(streams: int, chunks: int, profile: bool, through_app: bool = False) -> str:
    config = parse_config(CONFIG, "bench.toml", env={})
    short = Engine(config, transport=_Memory(chunks))
    long = Engine(config, transport=_Memory(200))
    run = _through_app if through_app else _streams
    await run(short, 200)  # warm-up
    await run(long, 20)
    gc.collect()
    per_stream = min([await run(short, streams) for _ in range(3)])
    per_long = min([await run(long, max(50, streams // 20)) for _ in range(3)])
    per_chunk = (per_long - per_stream) / (200 - chunks)
    out = [f"per stream of {chunks} deltas: {per_stream:.1f} µs; per further chunk: "
           f"{per_chunk:.2f} µs"]
    if profile:
        prof = cProfile.Profile()
        prof.enable()
        await run(short, streams)
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(30)
        out.append(text.getvalue())
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engine_stream_cost")
    parser.add_argument("--streams", type=int, default=3000)
    parser.add_argument("--chunks", type=int, default=5)
    parser.add_argument("--app", action="store_true",
                        help="through the server's ASGI app, on uvloop")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    if args.app:
        import uvloop

        print(uvloop.run(measure(args.streams, args.chunks, args.profile, through_app=True)))
    else:
        print(asyncio.run(measure(args.streams, args.chunks, args.profile)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
