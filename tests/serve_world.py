"""One `claudex serve` in a process of its own, on a fixed port and config, which a test may kill
and start again (a console attached to it sees the engine go and come back)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.cli.test_cli import spawn_serve, wait_until_serving
from tests.conftest import anthropic_body


@asynccontextmanager
async def serving(config: Path, port: int) -> AsyncIterator[httpx.AsyncClient]:
    """A `claudex serve` on `config` (listening on `port`) for the block, and a client on its
    address; stopped with SIGTERM when the block ends, its exit waited for."""
    proc = await spawn_serve(config)
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_until_serving(url, proc)
        async with httpx.AsyncClient(base_url=url, timeout=10.0) as client:
            yield client
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.communicate(), 20)


class Serve:
    def __init__(self, config: Path, port: int) -> None:
        self.config = config
        self.url = f"http://127.0.0.1:{port}"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.proc = await spawn_serve(self.config, stdout=asyncio.subprocess.DEVNULL)
        await wait_until_serving(self.url, self.proc)

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
            await self.proc.communicate()
        self.proc = None

    async def post(self, path: str) -> httpx.Response:
        async with httpx.AsyncClient(base_url=self.url, timeout=10.0) as client:
            return await client.post(path)

    async def status(self) -> dict[str, Any]:
        async with httpx.AsyncClient(base_url=self.url, timeout=10.0) as client:
            return dict((await client.get("/_claudex/status")).json())

    async def breaker(self, name: str) -> str:
        for p in (await self.status())["profiles"]:
            if p["name"] == name:
                return str(p["breaker"]["state"])
        raise AssertionError(f"no profile {name}")

    async def send(self, expect: str) -> None:
        """One request to profile primary, which `expect` must have served."""
        async with httpx.AsyncClient(timeout=10.0) as client:
            resp = await client.post(self.url + "/proxy/primary/v1/messages",
                                     json=anthropic_body(),
                                     headers={"anthropic-version": "2023-06-01"})
            assert resp.status_code == 200, resp.text
            assert resp.headers["x-claudex-provider"] == expect

    async def flush(self) -> None:
        async with httpx.AsyncClient(timeout=10.0) as client:  # the route flushes the journal
            assert (await client.get(self.url + "/_claudex/history")).status_code == 200
