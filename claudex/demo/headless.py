"""`claudex demo --headless`: fake providers (claude's behind the demo's upstream proxy corp) plus
the proxy, and instructions on stdout."""

from __future__ import annotations

import asyncio
import contextlib
import signal

from claudex.demo.world import DEMO_PROXY, DemoWorld, start_demo_world
from claudex.engine.engine import Engine
from claudex.engine.masking import logs
from claudex.server.app import create_app
from claudex.server.event_stream import EventStreams
from claudex.server.run import start_in_background


def instructions(world: DemoWorld, url: str) -> str:
    fakes = world.fakes
    claude = fakes["claude"]
    body = (
        '{"model":"claude-sonnet-4-5","max_tokens":64,'
        '"messages":[{"role":"user","content":"Hello"}]}'
    )
    return f"""
claudex demo is running — proxy at {url}
  config: {world.config_path}
  fake providers: {", ".join(f"{n} ({f.protocol}) {f.base_url}" for n, f in fakes.items())}

Send a request (served by "claude"; watch x-claudex-provider / x-claudex-attempts):
  curl -si {url}/v1/messages -H 'content-type: application/json' -d '{body}'

Break the primary for 60 s (connections refused), then send the request again:
  curl -s -X POST http://127.0.0.1:{claude.port}/_fake/fault \\
       -d '{{"mode":"down","duration_s":60}}'
Other faults: {{"mode":"500"}}, {{"mode":"429","retry_after":5}},
  {{"mode":"slow","latency_ms":4000}}, {{"mode":"401"}}, {{"mode":"cut"}};
  back to normal: {{"mode":"ok"}} (POST to the same URL).

{_proxy_lines(world, url)}Watch the breakers:  claudex status --url {url}
Trip / reset by hand: claudex trip claude --url {url}   ·   claudex reset claude --url {url}
Point Claude Code at it: ANTHROPIC_BASE_URL={url} ANTHROPIC_AUTH_TOKEN=demo claude

Ctrl-C stops everything.
"""


def _proxy_lines(world: DemoWorld, url: str) -> str:
    """How claude is reached (through the demo's upstream proxy), and how to take the proxy out
    of its route by hand; "" without a proxy."""
    if world.proxy is None or world.front is None:
        return ""
    return (f"claude goes through the upstream proxy {DEMO_PROXY} ({world.proxy.url}) to its fake "
            f"over TLS ({world.front.base_url});\n"
            f"  take the proxy out: claudex trip {DEMO_PROXY} --url {url}  (claude-backup serves, "
            f"claude's breaker untouched)\n"
            f"  (the console demo's keys 7 and 8 take it down and make it answer 429)\n\n")


async def _run(port: int | None) -> int:
    world = await start_demo_world(port)
    engine = Engine(world.config)
    streams = EventStreams()
    app = create_app(engine, event_streams=streams)
    server = await start_in_background(app, world.config.proxy.host, world.config.proxy.port,
                                       on_shutdown=streams.close)
    print(instructions(world, server.url), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        print("stopping…", flush=True)
        await server.stop()
        await world.close()
    return 0


def run_headless_demo(port: int | None = None) -> int:
    logs.setup_stderr()
    try:
        return asyncio.run(_run(port))
    except KeyboardInterrupt:
        return 130
