"""A whole answer leaves claudex in one write (server/one_write.py): head and body together,
where uvicorn alone writes them apart; a stream's head still leaves before its first chunk
arrives, and nothing is held past the loop's turn. The transport is a recording stand-in for
the socket's; the last test serves real requests on 127.0.0.1 and reads them back."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from claudex.server.one_write import OneWriteTransport
from claudex.server.run import start_in_background

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n"


class Recording:
    """What a transport was asked to do, in order: ("write", bytes) or ("writelines", [...])."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.calls.append(("write", bytes(data)))

    def writelines(self, data: Any) -> None:
        self.calls.append(("writelines", [bytes(d) for d in data]))

    def close(self) -> None:
        self.calls.append(("close", None))

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default


async def test_a_head_and_its_body_go_in_one_call() -> None:
    raw = Recording()
    t = OneWriteTransport(raw, asyncio.get_running_loop())  # type: ignore[arg-type]
    t.write(HEAD)
    assert raw.calls == []  # held for the body
    assert t.get_write_buffer_size() == len(HEAD)
    t.write(b"{}")
    assert raw.calls == [("writelines", [HEAD, b"{}"])]
    await asyncio.sleep(0)  # the loop's turn: nothing more to flush
    assert raw.calls == [("writelines", [HEAD, b"{}"])]


async def test_a_lone_head_leaves_at_the_loops_next_turn() -> None:
    """A stream's head: its first chunk may be seconds away; the client hears the head now."""
    raw = Recording()
    t = OneWriteTransport(raw, asyncio.get_running_loop())  # type: ignore[arg-type]
    t.write(HEAD)
    await asyncio.sleep(0)
    assert raw.calls == [("write", HEAD)]
    t.write(b"data: 1\n\n")  # a chunk later is written as it comes
    assert raw.calls[-1] == ("write", b"data: 1\n\n")


async def test_a_large_body_is_not_copied_into_the_head() -> None:
    raw = Recording()
    t = OneWriteTransport(raw, asyncio.get_running_loop())  # type: ignore[arg-type]
    body = b"x" * (1024 * 1024)
    t.write(HEAD)
    t.write(body)
    assert raw.calls == [("write", HEAD), ("write", body)]


async def test_closing_sends_a_held_head_first_and_other_bytes_pass_at_once() -> None:
    raw = Recording()
    t = OneWriteTransport(raw, asyncio.get_running_loop())  # type: ignore[arg-type]
    t.write(b"0\r\n\r\n")  # a chunked stream's end is not a head
    assert raw.calls == [("write", b"0\r\n\r\n")]
    t.write(HEAD)
    t.close()
    assert raw.calls[1:] == [("write", HEAD), ("close", None)]
    assert t.get_extra_info("peername") == ("127.0.0.1", 1)  # the rest passes through


async def test_served_answers_and_streams_arrive_whole() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/stream":
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})
            for i in range(3):
                await asyncio.sleep(0.01)
                await send({"type": "http.response.body", "body": b"data: %d\n\n" % i,
                            "more_body": True})
            await send({"type": "http.response.body", "body": b""})
            return
        body = b'{"ok":true}'
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    server = await start_in_background(app)
    try:
        async with httpx.AsyncClient(base_url=server.url) as client:
            for _ in range(3):  # one keep-alive connection, answer after answer
                resp = await client.get("/whole")
                assert resp.status_code == 200 and resp.json() == {"ok": True}
            async with client.stream("GET", "/stream") as streamed:
                assert streamed.status_code == 200
                text = "".join([part async for part in streamed.aiter_text()])
            assert text == "data: 0\n\ndata: 1\n\ndata: 2\n\n"
    finally:
        await server.stop()
