"""Latency and throughput with Claude-Code-sized bodies (bench/bodies.py) beside the small one.

Real requests carry a long system prompt, two dozen tool schemas and the whole conversation:
tens of KB at a session's start, a megabyte later. What the proxy does per byte (reading the
body, parsing it, forwarding it) only shows at those sizes.
"""

from __future__ import annotations

from typing import Any

from bench import wrk
from bench.bodies import SIZES, claude_code_body
from bench.measure import BenchError, Target, paired_extra_ms, sample
from bench.stats import summary_ms
from bench.world import ANTHROPIC_HEADERS, World


def _targets(world: World, body: bytes) -> dict[str, Target]:
    p = world.ports
    return {name: Target(port, "/v1/messages", body, ANTHROPIC_HEADERS)
            for name, port in (("direct", p.upstream), ("reference", p.reference),
                               ("claudex", p.claudex))}


def _count(base: int, size: int) -> int:
    """Fewer samples for bigger bodies: a 1 MB round costs ~30 ms over the three targets."""
    if size >= 500_000:
        return max(50, base // 10)
    if size >= 50_000:
        return max(100, base // 4)
    return max(100, base // 2)


def latency(world: World, latency_n: int) -> dict[str, Any]:
    """One keep-alive client, round-robin over direct, reference and claudex, per body size."""
    out: dict[str, Any] = {}
    for label, size in SIZES.items():
        body = claude_code_body(size)
        samples = sample(_targets(world, body), _count(latency_n, size), warmup=20)
        stats = {name: summary_ms(values) for name, values in samples.items()}
        added = {name: {q: round(stats[name][q] - stats["direct"][q], 4)
                        for q in ("p50", "p99")} for name in ("reference", "claudex")}
        for name in added:
            added[name]["paired_p50"] = paired_extra_ms(samples, name, "direct")
        out[label] = {"bytes": len(body), "ms": stats, "added_ms": added}
    return out


def throughput(world: World, wrk_bin: str, seconds: int,
               connections: tuple[int, ...] = (16,)) -> dict[str, Any]:
    """wrk at each connection count, per body size: requests/s and claudex / reference."""
    p = world.ports
    ports = {"direct": p.upstream, "reference": p.reference, "claudex": p.claudex}
    out: dict[str, Any] = {}
    for label, size in SIZES.items():
        body = claude_code_body(size)
        rows: dict[str, Any] = {}
        for conns in connections:
            row: dict[str, Any] = {}
            for name, port in ports.items():
                result = wrk.run(wrk_bin, port, "/v1/messages", body, connections=conns,
                                 seconds=seconds)
                if result.errors:
                    raise BenchError(f"wrk against {name} with a {label} body at {conns} "
                                     f"connections: {result.errors} errors of "
                                     f"{result.requests} requests")
                row[name] = result.to_json()
            row["claudex_over_reference"] = round(row["claudex"]["rps"]
                                                  / row["reference"]["rps"], 3)
            rows[str(conns)] = row
        out[label] = {"bytes": len(body), "connections": rows}
    return out
