"""A minimal HTTP/1.1 upstream for the benchmarks, so the upstream is never the bottleneck.

The fake providers in `claudex.demo` are full aiohttp applications with fault injection; for
throughput rows they would cap what a proxy can show. This responder parses requests with
httptools on a uvloop loop and answers from prebuilt bytes:

    POST (any path)   an Anthropic Messages answer (JSON), or with "stream": true an SSE stream
    GET  (any path)   a models list (health probes)

Two knobs in the request body shape a stream (the first matches the fake providers' knob):
    "events:N"        N text deltas (default 8)
    "pace_us:P"       P microseconds between deltas; 0 (default) sends the whole stream at once

Every delta's text is the `time.monotonic_ns()` at which it was written, so a client on the same
machine can measure each event's delivery latency (CLOCK_MONOTONIC is shared by all processes).

    python -m bench.upstream PORT [CERT KEY]

With CERT and KEY it answers over TLS (the network section's provider behind a proxy: a client
reaches an https upstream through the proxy's CONNECT tunnel, as it would reach a real provider).
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import sys
import time
from typing import Final

import httptools

_EVENTS: Final = re.compile(rb"\bevents:(\d+)")
_PACE: Final = re.compile(rb"\bpace_us:(\d+)")
_STREAM: Final = re.compile(rb'"stream"\s*:\s*true')
_MAX_EVENTS: Final = 100_000


def _json_response(payload: object) -> bytes:
    body = json.dumps(payload, separators=(",", ":")).encode()
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nrequest-id: req_bench\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    return head + body


MESSAGE_RESPONSE: Final = _json_response({
    "id": "msg_bench",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "Hello from the bench upstream."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 12, "output_tokens": 7},
})
MODELS_RESPONSE: Final = _json_response({
    "data": [{"type": "model", "id": "claude-sonnet-4-5", "display_name": "claude-sonnet-4-5",
              "created_at": "2025-01-01T00:00:00Z"}],
    "has_more": False,
})
_STREAM_HEAD: Final = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
    b"cache-control: no-cache\r\nrequest-id: req_bench\r\ntransfer-encoding: chunked\r\n\r\n"
)
_PREAMBLE: Final = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_bench",'
    b'"type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],'
    b'"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
)
_CLOSING: Final = (
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
    b'"stop_sequence":null},"usage":{"output_tokens":1}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def _delta() -> bytes:
    return (
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"' + str(time.monotonic_ns()).encode() + b' "}}\n\n'
    )


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class UpstreamProtocol(asyncio.Protocol):
    """One connection: requests answered in order; a stream holds the connection until done."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.body: list[bytes] = []
        self.streaming: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            assert self.transport is not None
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.streaming is not None:
            self.streaming.cancel()

    # httptools callbacks
    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        assert self.transport is not None
        body = b"".join(self.body)
        self.body = []
        if self.parser.get_method() == b"GET":
            self.transport.write(MODELS_RESPONSE)
        elif _STREAM.search(body) is None:
            self.transport.write(MESSAGE_RESPONSE)
        else:
            events = _EVENTS.search(body)
            pace = _PACE.search(body)
            count = min(int(events.group(1)), _MAX_EVENTS) if events else 8
            pace_s = int(pace.group(1)) / 1e6 if pace else 0.0
            if pace_s <= 0:
                payload = _PREAMBLE + b"".join(_delta() for _ in range(count)) + _CLOSING
                self.transport.write(_STREAM_HEAD + _chunk(payload) + b"0\r\n\r\n")
            else:
                self.streaming = asyncio.ensure_future(self._paced(count, pace_s))
        if not self.parser.should_keep_alive():
            self.transport.close()

    async def _paced(self, count: int, pace_s: float) -> None:
        transport = self.transport
        assert transport is not None
        transport.write(_STREAM_HEAD + _chunk(_PREAMBLE))
        for index in range(count):
            if index:
                await asyncio.sleep(pace_s)
            transport.write(_chunk(_delta()))
        transport.write(_chunk(_CLOSING) + b"0\r\n\r\n")
        self.streaming = None


async def serve(port: int, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(UpstreamProtocol, host, port, backlog=2048, ssl=tls)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    import uvloop

    if len(argv) not in (1, 3) or not argv[0].isdigit():
        print("usage: python -m bench.upstream PORT [CERT KEY]", file=sys.stderr)
        return 2
    tls = None
    if len(argv) == 3:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(argv[1], argv[2])
    try:
        uvloop.run(serve(int(argv[0]), tls=tls))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
