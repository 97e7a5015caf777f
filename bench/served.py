"""A real `claudex serve` for the bench scripts that measure through one (a process of its own,
as users run it: bench/spent_window.py, bench/context_windows.py), and the line they print for
each case they time."""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import sys
from pathlib import Path
from typing import Any

import httpx


async def start_serve(config: str, port: int, tmp: Path) -> asyncio.subprocess.Process:
    """`claudex serve` on `config` (written 0600 under `tmp`), once it answers `/healthz`. Its
    state (the journal, saved trips) goes to `tmp`, never to the user's state dir."""
    path = tmp / f"profiles-{port}.toml"
    path.write_text(config)
    path.chmod(0o600)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "claudex.cli", "--config", str(path), "serve",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "XDG_STATE_HOME": str(tmp / f"state-{port}")})
    async with httpx.AsyncClient() as client:
        for _ in range(1000):  # bounded: ~20 s to start
            if proc.returncode is not None:
                raise SystemExit(f"claudex serve exited with {proc.returncode}")
            try:
                await client.get(f"http://127.0.0.1:{port}/healthz")
                return proc
            except httpx.TransportError:
                await asyncio.sleep(0.02)
    raise SystemExit("claudex serve did not start")


async def stop_serve(proc: asyncio.subprocess.Process) -> None:
    proc.send_signal(signal.SIGTERM)
    await proc.wait()


def summary(label: str, rows: list[dict[str, Any]], width: int = 9) -> str:
    """One case's line: requests, p50 and max of the client's time, the upstream requests one
    request made (counted at the fakes) and its trail. Each row: `ms`, `trail`, `upstream`."""
    times = sorted(r["ms"] for r in rows)
    upstream = rows[0]["upstream"]
    sent = ", ".join(f"{n} {k}" for n, k in upstream.items() if k)
    return (f"{label:<{width}} {len(rows):>4} req  p50 {statistics.median(times):7.2f} ms  "
            f"max {times[-1]:7.2f} ms  upstream/request {sum(upstream.values())} ({sent})  "
            f"trail {rows[0]['trail']}")
