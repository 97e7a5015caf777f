"""Measuring primitives: interleaved latency sampling and timed SSE streams.

Targets are sampled round-robin (one request each, the order rotating every round) over their own
keep-alive connections, so slow drifts of the machine hit every target alike and the differences
between targets stay meaningful. The garbage collector is off while sampling.
"""

from __future__ import annotations

import gc
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from bench.httpclient import Connection, build_request

_STAMP = re.compile(rb'"text":"(\d+) ')


class BenchError(Exception):
    """A target answered something other than what the measurement needs."""


@dataclass
class Target:
    port: int
    path: str
    body: bytes
    headers: Mapping[str, str]
    method: str = "POST"
    expect: int = 200

    def raw(self) -> bytes:
        return build_request(self.method, self.path, self.port, self.body, dict(self.headers))


@contextmanager
def no_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def check(name: str, target: Target, status: int, body: bytes) -> None:
    if status != target.expect:
        raise BenchError(f"{name}: {target.method} {target.path} answered {status}, expected "
                         f"{target.expect}: {body[:300]!r}")


def paired_extra_ms(samples: Mapping[str, list[int]], target: str, base: str) -> float:
    """Median of the per-round differences target - base (ms): both were sampled in the same
    round, a fraction of a millisecond apart, so drifts of the machine cancel out."""
    pairs = [(t - b) / 1e6 for t, b in zip(samples[target], samples[base], strict=True)]
    pairs.sort()
    return round(pairs[len(pairs) // 2], 4) if pairs else float("nan")


def sample(targets: Mapping[str, Target], count: int, warmup: int = 100) -> dict[str, list[int]]:
    """`count` latencies (ns) per target, one request at a time, interleaved."""
    names = list(targets)
    conns = {name: Connection(t.port) for name, t in targets.items()}
    raws = {name: t.raw() for name, t in targets.items()}
    samples: dict[str, list[int]] = {name: [] for name in names}
    try:
        for name in names:
            for _ in range(warmup):
                status, body = conns[name].request(raws[name])
                check(name, targets[name], status, body)
        clock = time.perf_counter_ns
        with no_gc():
            for round_index in range(count):
                shift = round_index % len(names)
                for name in names[shift:] + names[:shift]:
                    conn, raw = conns[name], raws[name]
                    start = clock()
                    status, body = conn.request(raw)
                    samples[name].append(clock() - start)
                    if status != targets[name].expect:
                        check(name, targets[name], status, body)
    finally:
        for conn in conns.values():
            conn.close()
    return samples


@dataclass
class StreamRun:
    first_content_ns: int
    """From sending the request to the arrival of the first content event."""
    total_ns: int
    """From sending the request to the end of the stream."""
    event_latencies_ns: list[int]
    """Per text delta: arrival at the client minus the upstream's write time (from its stamp)."""


def timed_stream(conn: Connection, raw: bytes, expected_deltas: int) -> StreamRun:
    start = time.monotonic_ns()
    timing = conn.stream(raw)
    if timing.status != 200:
        raise BenchError(f"stream answered {timing.status}")
    first = 0
    latencies: list[int] = []
    for arrived, event in timing.events:
        if not first and event.startswith(b"event: content_block_"):
            first = arrived
        if event.startswith(b"event: content_block_delta"):
            stamp = _STAMP.search(event)
            if stamp is not None:
                latencies.append(arrived - int(stamp.group(1)))
    if len(latencies) != expected_deltas:
        raise BenchError(f"stream carried {len(latencies)} text deltas, expected "
                         f"{expected_deltas}")
    return StreamRun(first - start, timing.done_ns - start, latencies)


def sample_streams(targets: Mapping[str, Target], count: int,
                   expected_deltas: int) -> dict[str, list[StreamRun]]:
    """`count` timed streams per target, interleaved, each on the target's keep-alive connection."""
    names = list(targets)
    conns = {name: Connection(t.port) for name, t in targets.items()}
    raws = {name: t.raw() for name, t in targets.items()}
    runs: dict[str, list[StreamRun]] = {name: [] for name in names}
    try:
        for name in names:  # warm-up: one stream each
            timed_stream(conns[name], raws[name], expected_deltas)
        with no_gc():
            for round_index in range(count):
                shift = round_index % len(names)
                for name in names[shift:] + names[:shift]:
                    runs[name].append(timed_stream(conns[name], raws[name], expected_deltas))
    finally:
        for conn in conns.values():
            conn.close()
    return runs


def request_once(port: int, method: str, path: str, body: bytes = b"",
                 headers: Mapping[str, str] | None = None) -> tuple[int, bytes, dict[bytes, bytes]]:
    with Connection(port) as conn:
        status, answer = conn.request(build_request(method, path, port, body, dict(headers or {})))
        return status, answer, conn.last_headers
