"""Concurrent streams at scale: N streams of S seconds at 20 events/s, ramped over 2 s, through
claudex and through the bare streaming forwarder (bench/reference_proxy.py), one after the other
in the same run, each proxy pinned to its own core as in the rest of the bench.

Every text delta carries the bench upstream's write time (CLOCK_MONOTONIC), so the client measures
each event's delivery latency. Per target and N: errors (a status other than 200, a broken
connection, a stream with fewer deltas than sent, or one unfinished at the deadline), per-event
p50/p99, first-content p50/p99 (request sent to the first content event), the proxy's CPU per
1,000 events/s (the share of a core it used for each 1,000 events a second it relayed) and its peak
RSS.

The client is one uvloop asyncio process on the helper cores (this one): raw sockets, a small
dechunker and one regex per delivered piece, so it stays far below the proxies' cost per event.

    python -m bench.streams_scale [--counts 50,200] [--seconds 10] [--only claudex]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import resource
import sys
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import procs
from bench.httpclient import _Dechunker, build_request
from bench.stats import percentile
from bench.world import ANTHROPIC_HEADERS, World, messages_body

RATE = 20          # events a second per stream
RAMP_S = 2.0       # all streams started within this
COUNTS = (50, 200, 500, 1000, 2000)
QUICK_COUNTS = (50, 200)
_STAMP = re.compile(rb'"text":"(\d+) ')
_CONTENT = b"event: content_block_"


def raise_fd_limit() -> int:
    """The soft open-file limit raised to the hard one (children inherit it); returns it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard and hard != resource.RLIM_INFINITY:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard
    return soft if hard == resource.RLIM_INFINITY else hard


@dataclass
class _Run:
    latencies: array[int] = field(default_factory=lambda: array("q"))
    first_content: list[int] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    events: int = 0

    def fail(self, why: str) -> None:
        self.errors[why] = self.errors.get(why, 0) + 1


class _Stream(asyncio.Protocol):
    """One streamed request on its own connection."""

    def __init__(self, raw: bytes, expected: int, run: _Run, done: asyncio.Future[None]) -> None:
        self.raw, self.expected, self.run, self.done = raw, expected, run, done
        self.head = b""
        self.status = 0
        self.decoder: _Dechunker | None = None
        self.text = b""
        self.sent = 0
        self.first = 0
        self.deltas = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.sent = time.monotonic_ns()
        self.transport.write(self.raw)

    def data_received(self, data: bytes) -> None:
        now = time.monotonic_ns()
        if self.decoder is None:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            head, data = self.head[:end], self.head[end + 4:]
            self.status = int(head.split(b" ", 2)[1])
            if self.status != 200:
                self._end(f"status {self.status}")
                return
            self.decoder = _Dechunker()
        self.text += self.decoder.feed(data)
        cut = self.text.rfind(b"\n\n")
        if cut >= 0:
            complete, self.text = self.text[:cut], self.text[cut + 2:]
            if not self.first and _CONTENT in complete:
                self.first = now
            stamps = _STAMP.findall(complete)
            self.deltas += len(stamps)
            self.run.latencies.extend(now - int(s) for s in stamps)
        if self.decoder.done:
            if self.deltas != self.expected:
                self._end(f"{self.deltas} of {self.expected} deltas")
            else:
                self._end(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._end("connection closed early")

    def _end(self, error: str | None) -> None:
        if self.done.done():
            return
        if error is None:
            self.run.first_content.append(self.first - self.sent)
            self.run.events += self.deltas
        else:
            self.run.fail(error)
        self.done.set_result(None)
        self.transport.close()


async def _one(loop: asyncio.AbstractEventLoop, port: int, raw: bytes, expected: int,
               run: _Run, delay: float, deadline: float) -> None:
    await asyncio.sleep(delay)
    done: asyncio.Future[None] = loop.create_future()
    try:
        await loop.create_connection(lambda: _Stream(raw, expected, run, done), "127.0.0.1", port)
        await asyncio.wait_for(done, max(0.1, deadline - loop.time()))
    except (OSError, TimeoutError) as exc:
        if not done.done():
            done.set_result(None)
            run.fail("unfinished at the deadline" if isinstance(exc, TimeoutError)
                     else f"connect: {type(exc).__name__}")


class _Sampler:
    """The proxy's CPU time and peak RSS while a run lasts."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.cpu0 = procs._process_cpu_s(pid)
        self.peak_mb = 0.0

    def rss_mb(self) -> float:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    async def watch(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.peak_mb = max(self.peak_mb, self.rss_mb())
            try:
                await asyncio.wait_for(stop.wait(), 0.25)
            except TimeoutError:
                pass

    def cpu_s(self) -> float:
        return procs._process_cpu_s(self.pid) - self.cpu0


async def measure(port: int, pid: int, count: int, seconds: float) -> dict[str, Any]:
    events = int(seconds * RATE)
    body = messages_body(f"events:{events} pace_us:{1_000_000 // RATE}", stream=True)
    raw = build_request("POST", "/v1/messages", port, body, ANTHROPIC_HEADERS)
    loop = asyncio.get_running_loop()
    run = _Run()
    sampler = _Sampler(pid)
    stop = asyncio.Event()
    watcher = asyncio.ensure_future(sampler.watch(stop))
    started = loop.time()
    client_cpu = time.process_time()
    deadline = started + RAMP_S + seconds + 20.0
    await asyncio.gather(*(_one(loop, port, raw, events, run, RAMP_S * i / count, deadline)
                           for i in range(count)))
    elapsed = loop.time() - started
    client_cpu = time.process_time() - client_cpu
    stop.set()
    await watcher
    cpu = sampler.cpu_s()
    lat_ms = [v / 1e6 for v in run.latencies]
    first_ms = [v / 1e6 for v in run.first_content]
    rate = run.events / elapsed if elapsed > 0 else 0.0
    return {
        "streams": count,
        "errors": sum(run.errors.values()),
        "error_kinds": run.errors,
        "events": run.events,
        "events_per_s": round(rate, 1),
        "event_p50_ms": round(percentile(lat_ms, 50), 3),
        "event_p99_ms": round(percentile(lat_ms, 99), 3),
        "first_content_p50_ms": round(percentile(first_ms, 50), 3),
        "first_content_p99_ms": round(percentile(first_ms, 99), 3),
        "cpu_s": round(cpu, 2),
        "cpu_us_per_event": round(cpu / run.events * 1e6, 1) if run.events else None,
        # The share of one core the proxy used per 1,000 events a second (µs per event / 10).
        "core_pct_per_1000_eps": round(cpu / run.events * 1e5, 2) if run.events else None,
        "rss_peak_mb": round(sampler.peak_mb, 1),
        "elapsed_s": round(elapsed, 1),
        # Near 100: the measuring client, not the proxy, set the pace.
        "client_core_pct": round(100 * client_cpu / elapsed, 1) if elapsed > 0 else None,
    }


def scale_streams(world: World, counts: tuple[int, ...], seconds: float,
                  targets: tuple[str, ...] = ("reference", "claudex")) -> dict[str, Any]:
    """Each target at each count, alternating targets at each count so drifts hit both."""
    import uvloop

    limit = raise_fd_limit()
    assert world.claudex is not None and world.reference is not None
    procs_of = {"claudex": world.claudex, "reference": world.reference}
    out: dict[str, Any] = {"seconds": seconds, "rate": RATE, "ramp_s": RAMP_S,
                           "fd_limit": limit, "runs": {t: {} for t in targets}}
    for count in counts:
        if 3 * count + 100 > limit:
            for target in targets:
                out["runs"][target][str(count)] = {"streams": count, "skipped":
                                                   f"open-file limit {limit}"}
            continue
        for target in targets:
            proc = procs_of[target]
            assert proc.port is not None
            out["runs"][target][str(count)] = uvloop.run(
                measure(proc.port, proc.pid, count, seconds))
            time.sleep(1.0)  # let closed connections drain before the next run
    ratios: dict[str, Any] = {}
    for count in counts:
        c = out["runs"].get("claudex", {}).get(str(count), {})
        r = out["runs"].get("reference", {}).get(str(count), {})
        if c.get("first_content_p99_ms") and r.get("first_content_p99_ms"):
            ratios[str(count)] = {
                "first_content_p99": round(c["first_content_p99_ms"]
                                           / r["first_content_p99_ms"], 2),
                "cpu_per_event": round(c["cpu_us_per_event"] / r["cpu_us_per_event"], 2)
                if c.get("cpu_us_per_event") and r.get("cpu_us_per_event") else None,
            }
    out["claudex_over_reference"] = ratios
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.streams_scale")
    parser.add_argument("--counts", default=",".join(map(str, COUNTS)))
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--only", choices=("claudex", "reference"))
    args = parser.parse_args(argv)
    raise_fd_limit()  # before the proxies start: they inherit it
    procs.pin_self()
    world = World.create()
    try:
        world.start()
        targets = (args.only,) if args.only else ("reference", "claudex")
        result = scale_streams(world, tuple(int(c) for c in args.counts.split(",")),
                               args.seconds, targets)
    finally:
        world.stop()
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
