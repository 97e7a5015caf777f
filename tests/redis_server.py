"""A real redis-server on 127.0.0.1 for the fleet tests: started on a free port, killed, started
again on the same port (empty: nothing is saved), never a mock.

redis-server is part of the test setup (`.ci/run` installs Debian's package when missing); when it
is absent these tests fail with that instruction rather than being skipped.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket

from claudex.demo.world import free_port

INSTALL_HINT = ("redis-server is not installed; the fleet tests need Debian's package: "
                "apt-get update && apt-get install -y redis-server (.ci/run does this)")


class RedisServer:
    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise AssertionError(INSTALL_HINT)
        self.binary = binary
        self.port = free_port()
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--protected-mode", "no",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        for _ in range(500):  # bounded: ~10 s for the server to answer PING
            if self.proc.returncode is not None:
                raise AssertionError(f"redis-server exited with {self.proc.returncode}")
            if await asyncio.to_thread(self._answers_ping):
                return
            await asyncio.sleep(0.02)
        raise AssertionError("redis-server did not start")

    def _answers_ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    async def kill(self) -> None:
        """SIGKILL: no goodbye to the clients, as when a machine dies."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()

    async def restart(self) -> None:
        await self.kill()
        await self.start()
