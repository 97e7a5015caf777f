"""A small traffic generator for the console demo: a few requests a second through the real proxy.

Mostly Anthropic `POST /v1/messages` to the default profile ("claude"), some of them streaming,
a few OpenAI chat completions to the "grok" profile and a few Responses API requests to the
"codex" profile, so the request log shows every kind of row. Each request runs in its own task
(a slow provider does not slow the pace) up to `max_in_flight`; failures are counted, never
raised. Tests drive it deterministically with `send_one()` instead of the timed loop.

It belongs to the event loop that runs it: call `start`, `toggle` and `close` there (the console
demo runs it on the engine's thread and reaches it through `DemoControls.run_on_world`); reading
`running` or `counts` from another thread is fine.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

import httpx

RequestKind = Literal["messages", "messages_stream", "chat", "responses"]

# Shares of each kind in the generated mix (the rest is plain messages).
STREAM_SHARE: Final = 0.2
CHAT_SHARE: Final = 0.15
CHAT_PROFILE: Final = "grok"
RESPONSES_SHARE: Final = 0.1
RESPONSES_PROFILE: Final = "codex"


@dataclass
class TrafficCounts:
    sent: int = 0
    ok: int = 0
    failed: int = 0


def _anthropic_body(stream: bool) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": stream,
            "messages": [{"role": "user", "content": "Say hello from the claudex demo."}]}


def _openai_body() -> dict[str, Any]:
    return {"model": "grok-3-beta", "stream": False,
            "messages": [{"role": "user", "content": "Say hello from the claudex demo."}]}


class TrafficGenerator:
    def __init__(
        self,
        base_url: str,
        *,
        rate_per_s: float = 3.0,
        max_in_flight: int = 16,
        rand: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        timeout_s: float = 30.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.rate_per_s = rate_per_s
        self.max_in_flight = max_in_flight
        self.counts = TrafficCounts()
        self.in_flight = 0
        self._rand = rand or random.Random()
        self._sleep = sleep
        self._timeout = timeout_s
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[int | None]] = set()

    @property
    def running(self) -> bool:
        return self._loop is not None and not self._loop.done()

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(base_url=self.base_url, timeout=self._timeout)
        return self._client

    def pick_kind(self) -> RequestKind:
        roll = self._rand.random()
        if roll < CHAT_SHARE:
            return "chat"
        if roll < CHAT_SHARE + STREAM_SHARE:
            return "messages_stream"
        if roll < CHAT_SHARE + STREAM_SHARE + RESPONSES_SHARE:
            return "responses"
        return "messages"

    async def send_one(self, kind: RequestKind = "messages") -> int | None:
        """Send one request and wait for its whole answer; the status, or None when the
        proxy could not be reached."""
        client = self._http()
        self.counts.sent += 1
        self.in_flight += 1
        try:
            if kind == "chat":
                resp = await client.post(f"/proxy/{CHAT_PROFILE}/v1/chat/completions",
                                         json=_openai_body())
                status = resp.status_code
            elif kind == "responses":
                resp = await client.post(f"/proxy/{RESPONSES_PROFILE}/v1/responses",
                                         json={"model": "codex-chat",
                                               "input": "Say hello from the claudex demo."})
                status = resp.status_code
            elif kind == "messages_stream":
                async with client.stream("POST", "/v1/messages",
                                         json=_anthropic_body(True)) as streamed:
                    async for _ in streamed.aiter_bytes():
                        pass
                    status = streamed.status_code
            else:
                resp = await client.post("/v1/messages", json=_anthropic_body(False))
                status = resp.status_code
        except httpx.HTTPError:
            self.counts.failed += 1
            return None
        finally:
            self.in_flight -= 1
        if status < 400:
            self.counts.ok += 1
        else:
            self.counts.failed += 1
        return status

    def start(self) -> None:
        if not self.running:
            self._loop = asyncio.create_task(self._run(), name="claudex-demo-traffic")

    async def stop(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.cancel()
            await asyncio.gather(loop, return_exceptions=True)

    def toggle(self) -> bool:
        """Start or stop the timed loop (requests already sent finish on their own)."""
        if self.running:
            assert self._loop is not None
            self._loop.cancel()
            self._loop = None
            return False
        self.start()
        return True

    async def close(self) -> None:
        await self.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _run(self) -> None:
        while True:
            # Jittered spacing looks like real use and keeps rows from arriving in lockstep.
            await self._sleep(self._rand.uniform(0.5, 1.5) / self.rate_per_s)
            if self.in_flight >= self.max_in_flight:
                continue
            task = asyncio.create_task(self.send_one(self.pick_kind()))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
