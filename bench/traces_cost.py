"""What traces and cost add to a request: CPU µs per non-streamed request with traces off, on
(spans made and dropped by the exporter: the request's own share), and on and exported (OTLP/HTTP
protobuf to a sink in another process, the batch processor's thread included, every run flushed
before its clock stops); and the cost addon's share (always on).

    python -m bench.traces_cost [--requests 4000] [--json]

In-process and without sockets for the proxy (bench/request_cost.py's ASGI runner and memory
transport), so the machine's other processes blur little; the sink is a stdlib HTTP server in a
child process that answers 200 to every POST, so its CPU is not counted here.
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.request_cost import CONFIG, Run, _Memory, addon_costs, cpu_us, runner
from claudex.config.loader import parse_config
from claudex.demo.world import free_port
from claudex.engine.engine import Engine
from claudex.engine.history.journal import Journal


class _Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve_sink(port: int) -> None:
    http.server.ThreadingHTTPServer(("127.0.0.1", port), _Sink).serve_forever()


def _engine(state: Path, telemetry: str) -> Engine:
    config = parse_config(telemetry + CONFIG.format(profile="anth"), "bench.toml", env={})
    return Engine(config, transport=_Memory(), journal=Journal(state / "h.sqlite3"), env={})


class _Discard:
    """An exporter that takes every span and sends nothing: the request's own share."""

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


async def _flushed_us(run: Run, engine: Engine, count: int) -> float:
    """CPU µs per request, the spans' export included (flushed before the clock stops)."""
    traces = engine.traces
    started = time.process_time()
    await run(count)
    if traces is not None:
        await asyncio.to_thread(traces.processor.force_flush)
    return (time.process_time() - started) / count * 1e6


def start_sink() -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    sink = subprocess.Popen([sys.executable, "-c",
                             f"from bench.traces_cost import serve_sink; serve_sink({port})"])
    return sink, port


def direct_us(engine: Engine, addon: Any, count: int = 20_000) -> float:
    """µs one addon's hooks take for a served request of one attempt, called directly on a
    finished flow (steadier than the difference of two whole runs on a busy machine)."""
    from claudex.engine.core.hooks import Flow
    from claudex.engine.core.request import Attempt, ForwardResult, ProxyRequest
    from claudex.engine.core.usage import Usage

    req = ProxyRequest("anthropic", "messages", {"model": "claude-sonnet-4-5", "max_tokens": 64},
                       b"", {}, route="/v1/messages", request_id="bench-1")
    rt = engine.runtimes["anth"]
    attempt = Attempt("anth", "ok", 200, model="claude-sonnet-4-5", latency_ms=1.0)
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        for _ in range(count):
            flow = Flow(req, 0.0, 0.0)
            for hook in ("request_started",):
                if hasattr(addon, hook):
                    getattr(addon, hook)(flow)
            if hasattr(addon, "attempt_sent"):
                addon.attempt_sent(flow, rt, None)
                addon.attempt_ended(flow, rt, attempt, object())
            flow.result = ForwardResult(200, {}, "anth", [attempt], body=b"{}")
            flow.usage = Usage(12, 4, 3000, 20)
            addon.request_ended(flow)
        best = min(best, (time.process_time() - started) / count * 1e6)
    return best


async def measure(count: int, port: int, reps: int = 5) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="claudex-bench-traces-") as state:
        telemetry = f'[telemetry]\notlp_endpoint = "http://127.0.0.1:{port}"\n'
        engines = {"off": _engine(Path(state) / "off", ""),
                   "exported": _engine(Path(state) / "exported", telemetry)}
        for engine in engines.values():
            await engine.start(health=False)
        runs = {name: runner(engine) for name, engine in engines.items()}
        for name, run in runs.items():
            await run(500)  # warm-up
            await _flushed_us(run, engines[name], 200)
        off, exported = [], []
        for _ in range(reps):  # alternating, so both see the same machine
            off.append(await cpu_us(runs["off"], count))
            exported.append(await _flushed_us(runs["exported"], engines["exported"], count))
        # The request's own share: the traces addon's hooks, spans made and discarded.
        traced = engines["exported"]
        assert traced.traces is not None
        from claudex.engine.addons.traces import TracesAddon

        own = TracesAddon(traced.traces.settings, lambda: traced.runtimes,
                          exporter=_Discard())  # type: ignore[arg-type]
        traced.hooks.set([*[a for a in traced.hooks.addons if a is not traced.traces], own])
        hooks = await addon_costs(traced, runs["exported"], count // 2, reps)
        direct = {"traces": direct_us(traced, own),
                  "cost": direct_us(traced, next(a for a in traced.hooks.addons
                                                 if getattr(a, "name", "") == "cost"))}
        exported_ok = traced.traces.exporter.exported
        for engine in engines.values():
            await engine.close()
    off_us, exported_us = statistics.median(off), statistics.median(exported)
    return {
        "requests": count, "reps": reps,
        "off_us": round(off_us, 1),
        "exported_us": round(exported_us, 1),
        "exported_added_us": round(exported_us - off_us, 1),
        "traces_hooks_us": round(hooks.get("traces", float("nan")), 2),
        "cost_addon_us": round(hooks.get("cost", float("nan")), 2),
        "traces_hooks_direct_us": round(direct["traces"], 2),
        "cost_addon_direct_us": round(direct["cost"], 2),
        "spans_exported": exported_ok,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.traces_cost")
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--json", action="store_true", help="one JSON line (make bench)")
    args = parser.parse_args(argv)
    import uvloop

    sink, port = start_sink()
    try:
        result = uvloop.run(measure(args.requests, port))
    finally:
        sink.terminate()
        sink.wait(10)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"traces off: {result['off_us']} µs CPU per request")
    print(f"traces on, exported (batch thread included): {result['exported_us']} µs "
          f"(+{result['exported_added_us']} µs)")
    print(f"traces addon's hooks (spans made, not sent): {result['traces_hooks_us']} µs")
    print(f"cost addon: {result['cost_addon_us']} µs")
    print(f"called directly on a finished flow: traces hooks {result['traces_hooks_direct_us']} "
          f"µs, cost addon {result['cost_addon_direct_us']} µs")
    print(f"spans the sink took: {result['spans_exported']:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
