"""Hosting the engine and the proxy for the console.

The console owns the process: it starts the engine (and its health worker) and serves the proxy
with uvicorn on the config's host and port, so the proxy keeps serving while the console is open
and stops when it closes. Everything is built on the loop that awaits `host_config`: `claudex
console` awaits it on the engine's own thread (engine_thread.py, launch.py), tests and the
screenshots on their own loop. `host_demo` does the same on the demo world (four fake providers,
one behind the demo's upstream proxy) and adds the traffic generator, which then belong to that
loop too.

Failures a user can cause (port taken, a non-loopback bind without a token) raise `HostError` with
a sentence to show; nothing here prints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from claudex.config.loader import load_config
from claudex.config.model import Config
from claudex.demo.controls import DemoControls
from claudex.demo.traffic import TrafficGenerator
from claudex.demo.world import DEMO_PROXY, DemoWorld, start_demo_world
from claudex.engine.engine import Engine
from claudex.server.app import create_app
from claudex.server.event_stream import EventStreams
from claudex.server.run import RunningServer, start_in_background
from claudex.server.serve import ServeError, listen_token, register_secrets


class HostError(Exception):
    """The console cannot start; the message says why and what to do."""


@dataclass
class Hosted:
    engine: Engine
    server: RunningServer
    world: DemoWorld | None = None
    traffic: TrafficGenerator | None = None
    controls: DemoControls | None = None

    async def close(self) -> None:
        if self.traffic is not None:
            await self.traffic.close()
        await self.server.stop()  # stops accepting; in-flight requests get the graceful window
        await self.engine.close()
        if self.world is not None:
            await self.world.close()


async def host_config(config: Config, *, health: bool = True,
                      **engine_kw: Any) -> Hosted:
    """Start an engine on `config` and serve the proxy on its `[proxy]` host and port."""
    host, port = config.proxy.host, config.proxy.port
    try:
        token = listen_token(config, host)
    except ServeError as exc:
        raise HostError(str(exc)) from None
    path = config.path
    reload: Callable[[], Config] | None = None
    if path is not None:
        def reload() -> Config:
            fresh = load_config(path)
            register_secrets(fresh)
            return fresh

    engine = Engine(config, **engine_kw)
    streams = EventStreams()  # an attached console's stream ends when this one quits
    app = create_app(engine, load_config=reload, token=token, manage_engine=False,
                     event_streams=streams)
    try:
        server = await start_in_background(app, host, port, on_shutdown=streams.close)
    except OSError as exc:
        await engine.close()
        where = f" in {path}" if path else ""
        raise HostError(
            f"Cannot listen on {host}:{port}: {exc.strerror or exc}. Another claudex (or another "
            f"program) may be using it; stop that, or change [proxy] port{where}."
        ) from None
    await engine.start(health=health)
    return Hosted(engine, server)


async def host_demo(port: int | None = None, *, health: bool = True, traffic_rate: float = 3.0,
                    **engine_kw: Any) -> Hosted:
    """The demo world (fake providers, generated config in a temp folder) with the proxy."""
    world = await start_demo_world(port)
    try:
        hosted = await host_config(world.config, health=health, **engine_kw)
    except BaseException:
        await world.close()
        raise
    traffic = TrafficGenerator(hosted.server.url, rate_per_s=traffic_rate)
    hosted.world = world
    hosted.traffic = traffic
    proxies = {DEMO_PROXY: world.proxy} if world.proxy is not None else {}
    hosted.controls = DemoControls(world.fakes, traffic, proxies=proxies)
    return hosted
