"""Several `claudex serve` processes sharing one real redis-server, for the fleet tests and the
convergence measurement (bench/fleet_convergence.py)."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from claudex.demo.fake_provider import FakeProvider
from claudex.demo.world import free_port
from tests.cli.test_cli import spawn_serve, wait_until_serving
from tests.conftest import GLOBALS, profile_toml
from tests.redis_server import RedisServer

# Failing over needs the retry wait for a long Retry-After skipped: the 429 cools the provider
# down instead of holding the request.
FLEET_GLOBALS = GLOBALS + "\n[retry]\nmax_retry_after = 1\n"


@dataclass
class Instance:
    name: str
    port: int
    config: Path
    proc: asyncio.subprocess.Process
    log: list[str] = field(default_factory=list)
    drain: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class FleetWorld:
    """Instances `a`, `b`, `c`... with profiles `primary` (backed up by `backup`) and `backup`."""

    def __init__(self, redis: RedisServer, fakes: dict[str, FakeProvider], tmp: Path,
                 redis_url: str | None = None, extra: str = "",
                 profiles: str | Callable[[str], str] | None = None,
                 fleet_extra: str = "", env: Mapping[str, Mapping[str, str]] | None = None,
                 ) -> None:
        self.redis = redis
        self.fakes = fakes
        self.tmp = tmp
        self.redis_url = redis_url or redis.url
        self.extra = extra  # more tables for every instance's config
        self.profiles = profiles  # instead of `primary` and `backup` (or per instance name)
        self.fleet_extra = fleet_extra  # more `[fleet]` keys
        self.env = env or {}  # per instance name: more environment variables
        self.instances: dict[str, Instance] = {}
        self.http = httpx.AsyncClient(timeout=10.0)

    def config_text(self, name: str, port: int) -> str:
        base = FLEET_GLOBALS
        if "[health]" in self.extra:  # the test's own health settings, instead of "off"
            base = base.replace("[health]\nenabled = false\n", "")
        profiles = self.profiles(name) if callable(self.profiles) else self.profiles
        return (base.replace("[proxy]", f"[proxy]\nport = {port}") + self.extra
                + f'\n[fleet]\nredis_url = "{self.redis_url}"\nname = "{name}"\n'
                + self.fleet_extra
                + (profiles if profiles is not None
                   else profile_toml("primary", self.fakes["primary"], backups=["backup"])
                   + profile_toml("backup", self.fakes["backup"])))

    async def spawn(self, name: str, port: int | None = None) -> Instance:
        port = port or free_port()
        path = self.tmp / f"{name}.toml"
        path.write_text(self.config_text(name, port))
        path.chmod(0o600)
        proc = await spawn_serve(path, stdout=asyncio.subprocess.DEVNULL,
                                 env=dict(self.env.get(name, {})))
        inst = Instance(name, port, path, proc)
        inst.drain = asyncio.create_task(_drain(proc, inst.log))
        self.instances[name] = inst
        await wait_until_serving(inst.url, proc)
        return inst

    async def stop(self, name: str, sig: int = signal.SIGTERM, limit_s: float = 20.0) -> None:
        inst = self.instances.pop(name)
        if inst.proc.returncode is None:
            inst.proc.send_signal(sig)
            try:
                await asyncio.wait_for(inst.proc.wait(), limit_s)
            except TimeoutError:
                inst.proc.kill()  # not left running; and the failure says what it was doing
                await inst.proc.wait()
                if inst.drain is not None:
                    await inst.drain
                tail = "\n".join(inst.log[-30:])
                message = f"{name} did not stop within {limit_s:g} s of SIGTERM:\n{tail}"
                raise AssertionError(message) from None
        if inst.drain is not None:
            await inst.drain

    async def close(self) -> None:
        try:
            for name in list(self.instances):
                await self.stop(name)
        finally:
            for name in list(self.instances):  # after a failed stop: kill the rest
                self.instances.pop(name).proc.kill()
            await self.http.aclose()

    async def status(self, name: str) -> dict[str, Any]:
        resp = await self.http.get(self.instances[name].url + "/_claudex/status")
        resp.raise_for_status()
        data: dict[str, Any] = resp.json()
        return data

    async def provider(self, name: str, provider: str) -> dict[str, Any]:
        for profile in (await self.status(name))["profiles"]:
            if profile["name"] == provider:
                found: dict[str, Any] = profile
                return found
        raise AssertionError(f"{name} has no provider {provider}")

    async def breaker(self, name: str, provider: str = "primary") -> str:
        state: str = (await self.provider(name, provider))["breaker"]["state"]
        return state

    async def action(self, name: str, action: str, provider: str = "primary") -> None:
        resp = await self.http.post(
            f"{self.instances[name].url}/_claudex/breakers/{provider}/{action}")
        assert resp.status_code == 200, resp.text

    async def wait_for(self, names: list[str], check: Callable[[dict[str, Any]], bool],
                       limit_s: float = 15.0) -> float:
        """Seconds until `check(status)` holds on every instance named; fails after `limit_s`."""
        started = time.monotonic()
        pending = set(names)
        last: dict[str, dict[str, Any]] = {}
        while pending:
            for name in sorted(pending):
                last[name] = await self.status(name)
                if check(last[name]):
                    pending.discard(name)
            if not pending:
                break
            if time.monotonic() - started > limit_s:
                seen = {n: _summary(last[n]) for n in sorted(pending)}
                logs = "".join(f"\n--- {n}'s log, last lines:\n" + "\n".join(
                    self.instances[n].log[-15:]) for n in sorted(pending))
                raise AssertionError(f"{sorted(pending)} did not converge in {limit_s} s: "
                                     f"{seen}{logs}")
            await asyncio.sleep(0.01)
        return time.monotonic() - started

    async def wait_breaker(self, names: list[str], state: str,
                           provider: str = "primary") -> float:
        return await self.wait_for(names, lambda s: _breaker_of(s, provider) == state)


def _summary(status: dict[str, Any]) -> dict[str, Any]:
    """What a failed wait shows of an instance: its breakers, cooldowns, health and fleet (the
    Redis state and its last fault, the instances it lists, the facts it applied); the wait's
    message adds the instance's last log lines (its fleet's outages and reconnections)."""
    fleet = status.get("fleet") or {}
    return {"profiles": {p["name"]: (p["breaker"]["state"], p.get("cooldown_s"),
                                     p["health"]["color"]) for p in status["profiles"]},
            "redis": fleet.get("redis"), "error": fleet.get("error"),
            "instances": [i.get("name") for i in fleet.get("instances") or []],
            "applied": fleet.get("facts_applied")}


def _breaker_of(status: dict[str, Any], provider: str) -> str | None:
    for profile in status["profiles"]:
        if profile["name"] == provider:
            state: str = profile["breaker"]["state"]
            return state
    return None


def fleet_of(status: dict[str, Any]) -> dict[str, Any]:
    fleet: dict[str, Any] = status["fleet"]
    return fleet


async def _drain(proc: asyncio.subprocess.Process, lines: list[str]) -> None:
    assert proc.stderr is not None
    async for raw in proc.stderr:
        lines.append(raw.decode(errors="replace").rstrip())
