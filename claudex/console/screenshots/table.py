"""`make screenshots`, the provider table: the demo world grown to 60 profiles, in an incident.

The demo's fake providers stay three upstreams; 56 more profiles (named like a real fleet of
accounts and regions) point at them, so every row carries real traffic through the real proxy.
Twelve minutes pass on the engine's clocks (started twelve minutes behind and moved by hand,
so they reach the real time, which events and the console read, at the end), each with a
few requests per profile, some streamed; in the fifth the `grok` fake answers 500s (the profiles
on it fail over, their sparklines show red minutes); in the last the `claude` fake goes down and
the profiles on it open their breakers; one profile is tripped for a maintenance window with a
reason, and one is disabled in the file. Shots: the table at 140x44 sorted by state, the same
sorted by error rate, and the table at 100x30.
"""

from __future__ import annotations

import asyncio
import time

import httpx

from claudex.config.loader import load_config
from claudex.console.app import ConsoleApp
from claudex.console.hosting import Hosted, host_demo
from claudex.console.link import LocalLink
from claudex.console.screenshots.shooter import Shooter
from claudex.demo.world import DEMO_KEY_ENV, DemoWorld

SMALL = (100, 30)
MINUTES = 12  # of traffic before the shots
VENDORS = ("anthropic", "bedrock", "vertex", "openai", "azure", "grok", "deepseek", "mistral",
           "groq", "together", "fireworks", "openrouter", "qwen", "kimi")
REGIONS = ("us", "eu", "ap", "us2")
ON_CLAUDE = frozenset({"anthropic", "bedrock"})   # these point at the fake that goes down
ON_BACKUP = frozenset({"vertex", "mistral", "kimi"})
TRIPPED = "azure-eu"
DISABLED = "qwen-ap"


class MovableClock:
    """The engine's monotonic and wall clocks, pushed forward together by hand."""

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def __call__(self) -> float:
        return time.monotonic() + self.offset

    def wall(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


def fleet_names(count: int = 56) -> list[str]:
    names = [f"{vendor}-{region}" for region in REGIONS for vendor in VENDORS]
    return sorted(names[:count])


def fleet_config_text(world: DemoWorld) -> str:
    """The demo's own config, plus a profile for each fleet name on one of its fakes."""
    text = world.config_path.read_text(encoding="utf-8")
    lines = [text.rstrip(), ""]
    for name in fleet_names():
        vendor = name.rsplit("-", 1)[0]
        fake = ("claude" if vendor in ON_CLAUDE else "claude-backup" if vendor in ON_BACKUP
                else "grok")
        anthropic = fake != "grok"
        lines += [
            "[[profiles]]",
            f'name = "{name}"',
            f'provider_type = "{"DirectAnthropic" if anthropic else "OpenAICompatible"}"',
            f'base_url = "{world.fakes[fake].base_url}"',
            f'api_key_env = "{DEMO_KEY_ENV}"',
            f'default_model = "{"claude-sonnet-4-5" if anthropic else "grok-3-beta"}"',
            'backup_providers = ["claude-backup"]',
        ]
        if name == DISABLED:
            lines.append("enabled = false")
        lines.append("")
    return "\n".join(lines)


async def _send(client: httpx.AsyncClient, name: str, stream: bool) -> None:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": stream,
            "messages": [{"role": "user", "content": "Say hello from the claudex demo."}]}
    async with client.stream("POST", f"/proxy/{name}/v1/messages", json=body) as resp:
        async for _ in resp.aiter_bytes():
            pass


async def _round(hosted: Hosted, names: list[str], minute: int) -> None:
    """One minute's traffic: a few requests per profile, all profiles at once."""

    async def profile(index: int, name: str) -> None:
        for n in range((index * 7 + minute * 3) % 4):
            await _send(client, name, stream=(index + n + minute) % 3 == 0)

    async with httpx.AsyncClient(base_url=hosted.server.url, timeout=30.0) as client:
        await asyncio.gather(*(profile(i, name) for i, name in enumerate(names)))


async def _incident(hosted: Hosted, clock: MovableClock) -> None:
    assert hosted.controls is not None and hosted.world is not None
    fakes = hosted.world.fakes
    for name, ms in (("claude", 420.0), ("claude-backup", 610.0), ("grok", 260.0)):
        fakes[name].set_fault("ok", latency_ms=ms)
    names = [n for n in hosted.engine.runtimes if n not in (DISABLED, "codex")]
    on_claude = [n for n in names if n == "claude" or n.rsplit("-", 1)[0] in ON_CLAUDE]
    for minute in range(MINUTES):
        if minute == 4:
            fakes["grok"].set_fault("500")
        elif minute == 5:
            fakes["grok"].set_fault("ok", latency_ms=260.0)
        await _round(hosted, names, minute)
        clock.advance(60)
    hosted.controls.inject("claude", "down")
    async with httpx.AsyncClient(base_url=hosted.server.url, timeout=30.0) as client:
        await asyncio.gather(*(_send(client, name, stream=False)
                               for name in on_claude for _ in range(3)))
    await hosted.engine.check_health_now()
    hosted.engine.trip(TRIPPED, 20 * 60, "maintenance window")


async def _live(hosted: Hosted) -> None:
    """A few requests while the console watches, so its request log has rows."""
    async with httpx.AsyncClient(base_url=hosted.server.url, timeout=30.0) as client:
        for index, name in enumerate(("anthropic-eu", "grok-us", "claude", "openai-eu",
                                      "bedrock-us", "deepseek-ap", "vertex-us", "claude")):
            await _send(client, name, stream=index % 3 == 1)


async def take_table_screenshots(size: tuple[int, int]) -> dict[str, str]:
    """The table shots' names and SVGs."""
    clock = MovableClock(-MINUTES * 60.0)
    hosted = await host_demo(None, health=False, clock=clock, wall=clock.wall)
    try:
        assert hosted.world is not None
        path = hosted.world.config_path
        path.write_text(fleet_config_text(hosted.world), encoding="utf-8")
        hosted.engine.apply_config(load_config(path))
        await _incident(hosted, clock)
        pictures: dict[str, str] = {}
        app = ConsoleApp(LocalLink(hosted.engine), demo=hosted.controls)
        async with app.run_test(size=size) as pilot:
            shot = Shooter(app, pilot)
            await _live(hosted)
            await shot.shoot("table")
            await pilot.press("s")  # by error rate
            await shot.shoot("table-errors")
            pictures.update(shot.pictures)
        small = ConsoleApp(LocalLink(hosted.engine), demo=hosted.controls)
        async with small.run_test(size=SMALL) as pilot:
            shot = Shooter(small, pilot)
            await _live(hosted)
            await shot.shoot("table-100x30")
            pictures.update(shot.pictures)
        return pictures
    finally:
        await hosted.close()
