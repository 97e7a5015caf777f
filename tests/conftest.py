"""Shared fixtures: fake providers and a claudex proxy served by uvicorn on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from claudex.config.loader import parse_config
from claudex.config.model import Config
from claudex.demo.fake_provider import FakeProvider, default_models
from claudex.demo.world import free_port
from claudex.engine.engine import Engine
from claudex.server.app import create_app
from claudex.server.run import RunningServer, start_in_background
from tests.redis_server import RedisServer

TEST_ENV = {"FAKE_KEY": "sk-test-key-0123456789"}

# `claudex serve` children keep their history journal in the user state dir: during tests that
# is a throwaway one, never the user's.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="claudex-test-state-")


@pytest.fixture(autouse=True)
def own_state_dir(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
                  ) -> None:
    """Each test's `claudex serve` children get a journal of their own: an engine seeds its
    counters and restores trips from the journal at start, so one test's history must never
    reach the next (a module-scoped server keeps the session's dir, set above)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


class RecordingSleep:
    """Stands in for asyncio.sleep in the engine: records each wait and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await asyncio.sleep(0)


@dataclass
class Proxy:
    engine: Engine
    server: RunningServer
    client: httpx.AsyncClient
    sleep: RecordingSleep
    fakes: dict[str, FakeProvider] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.server.url

    async def messages(self, body: dict[str, Any] | None = None, *, profile: str | None = None,
                       headers: dict[str, str] | None = None) -> httpx.Response:
        path = f"/proxy/{profile}/v1/messages" if profile else "/v1/messages"
        return await self.client.post(path, json=body or anthropic_body(), headers=headers)

    async def chat(self, body: dict[str, Any] | None = None, *, profile: str | None = None,
                   headers: dict[str, str] | None = None) -> httpx.Response:
        path = f"/proxy/{profile}/v1/chat/completions" if profile else "/v1/chat/completions"
        return await self.client.post(path, json=body or openai_body(), headers=headers)


def anthropic_body(text: str = "hello", *, stream: bool = False,
                   model: str = "claude-sonnet-4-5") -> dict[str, Any]:
    return {"model": model, "max_tokens": 64, "stream": stream,
            "messages": [{"role": "user", "content": text}]}


def openai_body(text: str = "hello", *, stream: bool = False,
                model: str = "gpt-4o") -> dict[str, Any]:
    return {"model": model, "stream": stream, "messages": [{"role": "user", "content": text}]}


def served_models(name: str, protocol: str) -> tuple[str, ...]:
    """What a test's fake serves (it answers 404 to any other model, as real providers do): its
    defaults, the `default_model` that `profile_toml` gives its profile, and for an OpenAI fake
    the model `openai_body` asks for. An Anthropic fake serves every `claude-` name too."""
    extra = ("gpt-4o",) if protocol in ("openai", "responses") else ()
    return (*default_models(name, protocol), f"{name}-model", *extra)  # type: ignore[arg-type]


def profile_toml(name: str, fake: FakeProvider, *, backups: Iterable[str] = (),
                 extra: str = "") -> str:
    provider_type = {"anthropic": "DirectAnthropic", "openai": "OpenAICompatible",
                     "responses": "OpenAIResponses"}[fake.protocol]
    backup_list = ", ".join(f'"{b}"' for b in backups)
    return f"""
[[profiles]]
name = "{name}"
provider_type = "{provider_type}"
base_url = "{fake.base_url}"
api_key_env = "FAKE_KEY"
default_model = "{name}-model"
backup_providers = [{backup_list}]
{extra}
"""


GLOBALS = """
[proxy]
connect_timeout = 2
read_timeout = 2

[health]
enabled = false
"""


def build_config(text: str, env: dict[str, str] | None = None) -> Config:
    return parse_config(GLOBALS + text, "test.toml", env=env or TEST_ENV)


def primary_backup_config(tmp_path: Path, fakes: dict[str, FakeProvider],
                          extra: str = "") -> tuple[Path, int]:
    """A config for `claudex serve` on a free port: profile primary (backup: backup) over the
    fakes of those names, `extra` TOML after the globals; written to tmp_path, owner-only."""
    port = free_port()
    path = tmp_path / "profiles.toml"
    path.write_text(GLOBALS.replace("[proxy]", f"[proxy]\nport = {port}") + extra
                    + profile_toml("primary", fakes["primary"], backups=["backup"])
                    + profile_toml("backup", fakes["backup"]))
    path.chmod(0o600)
    return path, port


async def eventually(predicate: Callable[[], bool], limit_s: float = 5.0) -> None:
    """Wait until `predicate()` holds (another task's progress), failing after `limit_s`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


ProxyFactory = Callable[..., "asyncio.Future[Proxy]"]


@pytest.fixture
async def fakes() -> AsyncIterator[Callable[..., Any]]:
    """`await fakes(("a", "anthropic"), ("b", "openai"))` -> dict of started fake providers."""
    started: list[FakeProvider] = []

    async def make(*specs: tuple[str, str]) -> dict[str, FakeProvider]:
        out: dict[str, FakeProvider] = {}
        for name, protocol in specs:
            fake = FakeProvider(name, protocol,  # type: ignore[arg-type]
                                models=served_models(name, protocol))
            await fake.start()
            started.append(fake)
            out[name] = fake
        return out

    yield make
    for fake in started:
        await fake.stop()


@pytest.fixture
async def redis() -> AsyncIterator[RedisServer]:
    """A real redis-server on a free port of 127.0.0.1, killed after the test (fleet tests)."""
    server = RedisServer()
    await server.start()
    try:
        yield server
    finally:
        await server.kill()


@pytest.fixture
async def proxy_factory() -> AsyncIterator[Callable[..., Any]]:
    """`await proxy_factory(config, fakes=...)` -> a Proxy served on 127.0.0.1."""
    made: list[Proxy] = []

    async def make(config: Config, *, fakes: dict[str, FakeProvider] | None = None,
                   token: str | None = None, **engine_kw: Any) -> Proxy:
        sleep = RecordingSleep()
        engine_kw.setdefault("env", TEST_ENV)
        engine = Engine(config, sleep=sleep, **engine_kw)
        app = create_app(engine, token=token)
        server = await start_in_background(app)
        client = httpx.AsyncClient(base_url=server.url, timeout=10.0)
        proxy = Proxy(engine, server, client, sleep, dict(fakes or {}))
        made.append(proxy)
        return proxy

    yield make
    for proxy in made:
        await proxy.client.aclose()
        await proxy.server.stop()
