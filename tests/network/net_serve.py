"""A real `claudex serve` whose provider "claude" is reached through an upstream proxy, with a
direct backup "claude-backup", for the failure rows of issue 36.

The child gets an explicit environment (PATH, HOME, the state dir, the fake key and the proxy's
password variable): this machine's SSL_CERT_FILE, NODE_EXTRA_CA_CERTS and proxy variables must not
decide the route or the trust store.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import httpx

from claudex.demo.world import free_port
from tests.cli.test_cli import wait_until_serving
from tests.conftest import TEST_ENV, anthropic_body

PASSWORD_ENV = "CORP_PROXY_PASSWORD"


def toml_str(value: str | Path) -> str:
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


class NetServe:
    """`claudex serve` on a free port over `config_text` (globals are added here)."""

    def __init__(self, tmp: Path, config_text: str, *, password: str | None = None,
                 env: dict[str, str] | None = None,
                 health: str = "enabled = false") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.path = tmp / "profiles.toml"
        self.path.write_text(f"""
[proxy]
port = {self.port}
connect_timeout = 1
read_timeout = 5

[health]
{health}
{config_text}""")
        self.path.chmod(0o600)
        state = tmp / "state"
        state.mkdir(exist_ok=True)
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp),
                    "XDG_STATE_HOME": str(state), "LANG": "C.UTF-8", **TEST_ENV,
                    **({PASSWORD_ENV: password} if password is not None else {}),
                    **(env or {})}
        self.proc: asyncio.subprocess.Process | None = None
        self.client = httpx.AsyncClient(base_url=self.url, timeout=30.0, trust_env=False)

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "claudex.cli", "--config", str(self.path), "serve",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=self.env)
        try:
            await wait_until_serving(self.url, self.proc)
        except AssertionError:
            raise AssertionError(await self.stderr()) from None

    async def stderr(self) -> str:
        if self.proc is None or self.proc.stderr is None:
            return ""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(self.proc.communicate(), 20)
        return err.decode(errors="replace")

    async def stop(self) -> str:
        """SIGTERM; what the process wrote on stderr (its log)."""
        await self.client.aclose()
        proc, self.proc = self.proc, None
        if proc is None:
            return ""
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 20)
        return err.decode(errors="replace")

    async def ask(self, profile: str = "claude") -> httpx.Response:
        return await self.client.post(f"/proxy/{profile}/v1/messages", json=anthropic_body(),
                                      headers={"anthropic-version": "2023-06-01"})

    async def status(self) -> dict[str, Any]:
        response = await self.client.get("/_claudex/status")
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def profile(self, name: str) -> dict[str, Any]:
        for profile in (await self.status())["profiles"]:
            if profile["name"] == name:
                return dict(profile)
        raise AssertionError(f"no profile {name}")

    async def proxy(self, name: str) -> dict[str, Any]:
        for proxy in (await self.status())["upstream_proxies"]:
            if proxy["name"] == name:
                return dict(proxy)
        raise AssertionError(f"no upstream proxy {name}")

    async def assert_provider_untouched(self, name: str = "claude") -> dict[str, Any]:
        """The provider behind the proxy: breaker closed, no failure counted (breaker, stats,
        the per-minute errors), not red."""
        profile = await self.profile(name)
        assert profile["breaker"]["state"] == "closed", profile["breaker"]
        assert profile["breaker"]["consecutive_failures"] == 0, profile["breaker"]
        assert profile["stats"]["failures"] == 0, profile["stats"]
        # Nor in the per-minute series the panels draw (a proxy's attempt was never sent).
        assert sum(profile["stats"]["minutes"]["errors"]) == 0, profile["stats"]["minutes"]
        assert profile["stats"]["error_rate"] == 0.0
        assert profile["health"]["color"] != "red", profile["health"]
        return profile
