"""Experiment: what the HTTP server costs per request, and whether another one pays. Not part of
`make bench` (granian is not a dependency: `pip install granian` into the venv to run it).

    python -m bench.experiment_servers [--seconds 5] [--rounds 5] [--servers uvicorn,granian]
                                       [--unpinned] [--json FILE]

Two apps, each under five servers, all pinned to core 0 (bench/procs.py), one process each:

    apps     reference   bench/reference_proxy.py's ASGI app (the bare forwarder)
             claudex     claudex's real app, built as serve.py builds it (create_app: ProxyRoutes
                         in front of Starlette, SecurityMiddleware, the history journal on, the
                         bench's default config from bench/world.py, gc.freeze + threshold)
    servers  uvicorn     claudex.server.run.make_server (httptools, uvloop), as `claudex serve`
             granian     granian 2.x embedded (granian.server.embed.Server), ASGI interface,
                         HTTP/1 only, one Rust runtime thread, on the same uvloop loop
             granian-mp  granian's own process model: a supervisor and one worker process
                         (runtime_mode st, uvloop, HTTP/1); CPU and RSS summed over both
             granian-rt  granian-mp with task_impl rust (granian's Rust asyncio tasks)
             aiohttp     aiohttp.web's low-level Server with a small ASGI adapter (below): the
                         body read whole, the answer as one web.Response or a StreamResponse

wrk (one thread, helper cores) POSTs the bench's small /v1/messages body through each to the bench
upstream, at 1 and 64 connections, the variants interleaved (round 1: every variant, round 2: every
variant, ...). CPU per request is the server process's utime+stime (/proc/PID/stat, all threads)
over the run divided by wrk's request count: on a shared machine it moves far less than req/s.
RSS is VmRSS after the last round.

Measured on the 2-core bench machine (2026-12-02, at 897def5; granian 2.8.9, uvicorn 0.54.0,
aiohttp 3.14.5), --seconds 5, medians of the rounds. Run 1, --rounds 5 (all five servers):

    server     app        req/s c=1  req/s c=64  us/req c=1  us/req c=64  RSS MB  x ref c=64
    uvicorn    reference       2460        5993         311          166    49.0       1.00
    uvicorn    claudex         1723        3190         420          313    90.1       0.53
    granian    reference       2017        5506         370          179    59.7       1.00
    granian    claudex         1511        3289         491          302   101.1       0.60
    granian-mp reference       1907        6188         353          160   103.2       1.00
    granian-mp claudex         1522        3266         538          305   148.4       0.53
    granian-rt reference       2050        4413         397          224   408.2       1.00
    granian-rt claudex         1288        2808         665          351   337.9       0.64
    aiohttp    reference       2291        5189         330          191    47.6       1.00
    aiohttp    claudex         1787        2886         443          344    89.6       0.56

CPU us/request minus uvicorn's in the same round: median at c=1 | median (min..max) at c=64:

                          run 1 (5 rounds)      run 2 (6 rounds)      run 3 (--unpinned, 4 rounds)
    granian    reference  +131 | +14 (+5..+33)    +116 | +39 (-26..+60)   +207 | +30 (+27..+45)
    granian    claudex     +96 |  -4 (-42..+48)   +142 | +65 (-36..+71)   +223 | +89 (+44..+119)
    granian-mp reference  +124 | +26 (-39..+42)   +143 | +38 (-3..+89)    +279 | +22 (+12..+39)
    granian-mp claudex    +149 | +42 (-103..+153) +242 | +59 (-53..+88)   +235 | +58 (+31..+87)
    granian-rt reference  +169 | +86 (+16..+164)  (not run)               (not run)
    granian-rt claudex    +183 | +83 (-56..+147)
    aiohttp    reference   +63 | +39 (-22..+111)   +40 | +58 (+16..+178)  (not run)
    aiohttp    claudex      +9 | +53 (-110..+71)   -29 | +81 (+2..+171)

No server is cheaper than uvicorn: at 64 connections granian costs the same to ~+60 us a request
(its Rust I/O thread hands every request to the Python loop across threads), at one connection
~+100-200 us (a thread wake-up per request), and its own process model (granian-mp) adds a
~45 MB supervisor process; the Rust task implementation (granian-rt) is worse still and grew to
~400 MB. aiohttp's server behind an ASGI adapter costs +40-80 us. claudex's gap to the forwarder
(~150 us a request at 64 connections, 0.53-0.60x) is the same under every server: it is claudex's
own code and aiohttp's client, not the server. Streams (SSE) and the Host check work unchanged
under granian and the adapter (checked by hand with curl). Keep uvicorn.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from bench import procs, wrk
from bench.world import KEY, KEY_ENV, Ports, http_ok, main_config, messages_body

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

APPS = ("reference", "claudex")
SERVERS = ("uvicorn", "granian", "granian-mp", "granian-rt", "aiohttp")


# ------------------------------------------------------------------ the served process


def build_app(name: str, config: Path | None, upstream: str) -> ASGIApp:
    if name == "reference":
        from bench.reference_proxy import ReferenceForwarder
        return ReferenceForwarder(upstream, "claude-sonnet-4-5")
    assert config is not None
    from claudex.config.loader import load_config
    from claudex.engine.engine import Engine
    from claudex.engine.history.journal import journal_from_settings
    from claudex.server.app import create_app
    from claudex.server.event_stream import EventStreams
    from claudex.server.serve import listen_token

    cfg = load_config(config)
    token = listen_token(cfg, cfg.proxy.host)
    engine = Engine(cfg, journal=journal_from_settings(cfg.history))
    return create_app(engine, token=token, event_streams=EventStreams())


class Lifespan:
    """The ASGI lifespan protocol driven by hand, for a server (aiohttp's) that has none."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.inbox: asyncio.Queue[Message] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None
        self.replies: asyncio.Queue[Message] = asyncio.Queue()

    async def _send(self, message: Message) -> None:
        await self.replies.put(message)

    async def startup(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
        self.task = asyncio.ensure_future(self.app(scope, self.inbox.get, self._send))
        await self.inbox.put({"type": "lifespan.startup"})
        reply = await self.replies.get()
        if reply["type"] != "lifespan.startup.complete":
            raise RuntimeError(f"lifespan startup: {reply}")

    async def shutdown(self) -> None:
        await self.inbox.put({"type": "lifespan.shutdown"})
        await self.replies.get()


def aiohttp_handler(app: ASGIApp, port: int) -> Callable[..., Awaitable[Any]]:
    """One aiohttp low-level handler that runs an ASGI app for each request. What it does per
    request is about what uvicorn's httptools protocol does: a scope, two callables, headers
    turned into the server's own types."""
    from aiohttp import web

    server = ("127.0.0.1", port)

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        body = await request.read()
        transport = request.transport
        peer = transport.get_extra_info("peername") if transport else None
        scope: Scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": request.method, "scheme": "http", "path": request.path,
            "raw_path": request.raw_path.encode(), "root_path": "",
            "query_string": request.query_string.encode(),
            "headers": [(k.lower(), v) for k, v in request.raw_headers],
            "client": peer[:2] if peer else None, "server": server,
        }
        sent = False
        done = asyncio.get_running_loop().create_future()

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done  # a stream's disconnect watcher: wait until the answer is over
            return {"type": "http.disconnect"}

        status = 500
        headers: list[tuple[str, str]] = []
        answer: web.StreamResponse | None = None

        async def send(message: Message) -> None:
            nonlocal status, headers, answer
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [(k.decode("latin-1"), v.decode("latin-1"))
                           for k, v in message.get("headers", ())
                           if k.lower() != b"content-length"]
                return
            chunk = message.get("body", b"")
            if answer is None and not message.get("more_body", False):
                answer = web.Response(status=status, body=chunk, headers=headers)
                return
            if answer is None:
                answer = web.StreamResponse(status=status, headers=headers)
                await answer.prepare(request)
            if chunk:
                await answer.write(chunk)
            if not message.get("more_body", False):
                await answer.write_eof()

        try:
            await app(scope, receive, send)
        finally:
            done.set_result(None)
        return answer if answer is not None else web.Response(status=500)

    return handle


async def serve(server: str, app_name: str, port: int, config: Path | None,
                upstream: str) -> None:
    app = build_app(app_name, config, upstream)
    if app_name == "claudex":  # as serve.py does, before it serves
        gc.collect()
        gc.freeze()
        gc.set_threshold(20_000, 20, 20)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    if server == "uvicorn":
        from claudex.server.run import bind_socket, make_server
        uv = make_server(app, loop="uvloop")
        uv.config.setup_event_loop = lambda: None  # type: ignore[method-assign]
        await uv.serve(sockets=[bind_socket("127.0.0.1", port)])  # SIGTERM: uvicorn's own stop
        return
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if server == "granian":
        from granian.constants import HTTPModes, Interfaces
        from granian.server.embed import Server as Granian
        gr = Granian(app, address="127.0.0.1", port=port, interface=Interfaces.ASGI,
                     http=HTTPModes.http1, runtime_threads=1, log_enabled=False,
                     backlog=2048)
        task = asyncio.ensure_future(gr.serve())
        await stop.wait()
        gr.stop()
        await task
        return
    from aiohttp import web
    life = Lifespan(app)
    await life.startup()
    low = web.Server(aiohttp_handler(app, port), access_log=None)
    from claudex.server.run import bind_socket
    srv = await loop.create_server(low, sock=bind_socket("127.0.0.1", port), backlog=2048)
    await stop.wait()
    srv.close()
    await low.shutdown(5)
    await life.shutdown()


def serve_granian_mp(server: str, app_name: str, port: int, config: Path,
                     upstream: str) -> None:
    """Granian's own process model: this process supervises, one worker process serves (its
    app from `granian_factory`); one Rust runtime thread, the single-threaded runtime."""
    from granian.constants import HTTPModes, Interfaces, Loops, RuntimeModes, TaskImpl
    from granian.server import Server as Granian

    os.environ.update(EXP_APP=app_name, EXP_CONFIG=str(config), EXP_UPSTREAM=upstream)
    Granian("bench.experiment_servers:granian_factory", address="127.0.0.1", port=port,
            interface=Interfaces.ASGI, workers=1, factory=True, http=HTTPModes.http1,
            runtime_threads=1, runtime_mode=RuntimeModes.st, loop=Loops.uvloop,
            log_enabled=False, backlog=2048,
            task_impl=TaskImpl.rust if server == "granian-rt" else TaskImpl.asyncio).serve()


def granian_factory() -> ASGIApp:
    """The app in granian's worker process (granian-mp, granian-rt)."""
    name = os.environ["EXP_APP"]
    app = build_app(name, Path(os.environ["EXP_CONFIG"]) if name == "claudex" else None,
                    os.environ["EXP_UPSTREAM"])
    if name == "claudex":
        gc.collect()
        gc.freeze()
        gc.set_threshold(20_000, 20, 20)
    return app


# ------------------------------------------------------------------ the measuring process


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants (granian-mp's worker is a child process)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        out.append(todo.pop())
        todo.extend(children.get(out[-1], ()))
    return out


def _cpu_s(pids: list[int]) -> float:
    """utime + stime of every thread of `pids`, in seconds."""
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # so that `finally` stops the servers


def measure(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    procs.pin_self()
    wrk_bin = wrk.ensure_wrk()
    servers = [s for s in args.servers.split(",") if s]
    workdir = Path(tempfile.mkdtemp(prefix="claudex-servers-"))
    fleet = procs.Fleet(workdir)
    ports = Ports()
    sock, refusing = procs.refusing_port()
    body = messages_body()
    upstream_url = f"http://127.0.0.1:{ports.upstream}"
    variants: dict[tuple[str, str], procs.Proc] = {}
    try:
        fleet.start("upstream", procs.python("-m", "bench.upstream", str(ports.upstream)),
                    under_test=False, port=ports.upstream,
                    ready=lambda: http_ok(ports.upstream, "POST", "/v1/messages", body))
        for server in servers:
            for app in APPS:
                port = procs_free_port()
                config = workdir / f"{server}-{app}.toml"
                config.write_text(main_config(ports, refusing, port))
                env = {KEY_ENV: KEY, "XDG_STATE_HOME": str(workdir / f"state-{server}-{app}")}
                argv = procs.python("-m", "bench.experiment_servers", "serve", server, app,
                                    str(port), str(config), upstream_url)
                variants[(server, app)] = fleet.start(
                    f"{server}-{app}", argv, under_test=True, port=port, env=env, timeout=30.0,
                    ready=lambda p=port: http_ok(p, "POST", "/v1/messages", body))
        if args.unpinned:  # every thread of every server process may use every core
            for proc in variants.values():
                for pid in _tree(proc.pid):
                    for task in Path(f"/proc/{pid}/task").iterdir():
                        os.sched_setaffinity(int(task.name), procs._ALL_CORES)
        for proc in variants.values():  # warm: pools open, code paths taken, caches filled
            assert proc.port is not None
            wrk.run(wrk_bin, proc.port, "/v1/messages", body, connections=64, seconds=2)
        rows: dict[tuple[str, str, int], list[tuple[float, float, float]]] = {}
        for round_ in range(args.rounds):
            for conns in (1, 64):
                for key, proc in variants.items():
                    assert proc.port is not None
                    pids = _tree(proc.pid)
                    live = [p for f in fleet.procs for p in _tree(f.pid)]
                    ours0, busy0, t0 = _cpu_s(live), procs._machine_busy_s(), time.monotonic()
                    ours0 += procs._own_cpu_s()
                    before = _cpu_s(pids)
                    result = wrk.run(wrk_bin, proc.port, "/v1/messages", body,
                                     connections=conns, seconds=args.seconds)
                    used = _cpu_s(pids) - before
                    ours = _cpu_s(live) + procs._own_cpu_s() - ours0
                    others = round((procs._machine_busy_s() - busy0 - ours)
                                   / (time.monotonic() - t0), 2)
                    if result.errors:
                        raise RuntimeError(f"{key} at {conns}: {result.errors} errors")
                    us = used / result.requests * 1e6
                    rows.setdefault((*key, conns), []).append((result.rps, us, result.p50_ms))
                    print(f"round {round_ + 1} {key[0]:10} {key[1]:9} c={conns:<3} "
                          f"{result.rps:8.0f} req/s {us:6.0f} us/req p50 {result.p50_ms} ms "
                          f"(others {others} cores)",
                          flush=True)
        rss = {key: _rss_mb(_tree(proc.pid)) for key, proc in variants.items()}
        print(table(rows, rss, servers))
        if args.json:
            Path(args.json).write_text(json.dumps(
                {f"{k[0]}/{k[1]}/{k[2]}": v for k, v in rows.items()}, indent=1))
    finally:
        fleet.stop_all()
        sock.close()
    return 0


def procs_free_port() -> int:
    from claudex.demo.world import free_port
    return free_port()


def table(rows: dict[tuple[str, str, int], list[tuple[float, float, float]]],
          rss: dict[tuple[str, str], float], servers: list[str]) -> str:
    def med(key: tuple[str, str, int], index: int) -> float:
        return statistics.median(r[index] for r in rows[key])

    lines = ["server     app        req/s c=1  req/s c=64  us/req c=1  us/req c=64  "
             "p50 c=1 ms  RSS MB  x ref c=64"]
    for server in servers:
        ref = med((server, "reference", 64), 0)
        for app in APPS:
            lines.append(
                f"{server:10} {app:9} {med((server, app, 1), 0):10.0f} "
                f"{med((server, app, 64), 0):11.0f} {med((server, app, 1), 1):11.0f} "
                f"{med((server, app, 64), 1):12.0f} {med((server, app, 1), 2):11.3f} "
                f"{rss[(server, app)]:7.1f} {med((server, app, 64), 0) / ref:10.2f}")
    base = servers[0]
    lines.append(f"CPU us/request minus {base}'s in the same round (median, min..max):")
    for server in servers[1:]:
        for app in APPS:
            cells = []
            for conns in (1, 64):
                deltas = [a[1] - b[1] for a, b in zip(rows[(server, app, conns)],
                                                      rows[(base, app, conns)], strict=True)]
                cells.append(f"c={conns}: {statistics.median(deltas):+5.0f} "
                             f"({min(deltas):+.0f}..{max(deltas):+.0f})")
            lines.append(f"  {server:10} {app:9} " + "   ".join(cells))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        server, app, port, config, upstream = argv[1:6]
        if server in ("granian-mp", "granian-rt"):
            serve_granian_mp(server, app, int(port), Path(config), upstream)
            return 0
        import uvloop
        uvloop.run(serve(server, app, int(port), Path(config), upstream))
        return 0
    parser = argparse.ArgumentParser(prog="python -m bench.experiment_servers")
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--servers", default=",".join(SERVERS))
    parser.add_argument("--unpinned", action="store_true",
                        help="servers on all cores (default: core 0 only, as `make bench`)")
    parser.add_argument("--json", default="", help="write every run's numbers here")
    started = time.monotonic()
    code = measure(parser.parse_args(argv))
    print(f"({time.monotonic() - started:.0f} s)")
    return code


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main(sys.argv[1:]))
