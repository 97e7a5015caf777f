"""`make bench`: start the fakes, the bench upstream, the reference forwarder and `claudex serve`
as real processes on 127.0.0.1, measure each section, and write bench/RESULTS.md and
bench/results.json.

    python -m bench.run [--quick] [--reps N] [--out DIR] [--only SECTION,...]

Latency, throughput, streaming, failover and translation are repeated N times (3, or 1 with
--quick) and reported as medians; memory, scale, concurrent streams (bench/streams_scale.py:
50 to 2,000 streams of 10 s; --quick: 50 and 200 of 3 s), the console row and resilience
(bench/resilience.py: time to failover per fault, the 429 burst) and the cost of traces and
prices per request (bench/traces_cost.py), a Bedrock or Vertex request beside a
pass-through (bench/cloud_cost.py), and the prompt cache through a pool per balance
(bench/pool_cache.py), what judging slowness costs an answer and a round
(bench/slowness_cost.py) and a provider behind a local proxy beside the forwarder behind the same
proxy (bench/network_cost.py) run once.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import (
    network_cost,
    procs,
    report,
    sections,
    seed_cost,
    slowness_cost,
    streams_scale,
    wrk,
)
from bench.stats import merge_runs
from bench.world import World

REPEATED = ("latency", "throughput", "streaming", "failover", "translation")
ONCE = ("memory", "scale", "streams", "console", "resilience", "traces", "addons", "clouds",
        "network",
        "pools", "seed", "slowness")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return 0.0


def _commit() -> str:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=procs.ROOT, capture_output=True, text=True,
                              check=False)
        return done.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "claudex")
    return head + (" + uncommitted changes under claudex/" if dirty else "")


def meta(quick: bool, reps: int, wrk_version: str) -> dict[str, Any]:
    test_cores, helper_cores = procs.cpu_sets()
    libs = ", ".join(f"{name} {metadata.version(name)}"
                     for name in ("uvicorn", "uvloop", "httptools", "aiohttp", "starlette"))
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
        "libraries": libs + (f", {wrk_version}" if wrk_version else ""),
        "claudex_commit": _commit(),
        "quick": quick,
        "repetitions": reps,
        "placement": (f"proxy under test on CPU {sorted(test_cores)}, upstreams, fakes, wrk "
                      f"and the measuring client on CPU {sorted(helper_cores)}; niceness "
                      f"{procs.NICENESS} for all of them"),
        "loadavg_at_start": round(os.getloadavg()[0], 2),
    }


def _step(label: str, func: Callable[[], Any]) -> Any:
    print(f"bench: {label} ...", end="", flush=True)
    start = time.monotonic()
    value = func()
    print(f" {time.monotonic() - start:.1f} s", flush=True)
    return value


def _pools(quick: bool) -> dict[str, Any]:
    """The cache-read share through a pool per balance (bench/pool_cache.py)."""
    from bench import pool_cache

    return asyncio.run(pool_cache.measure(*((24, 6) if quick else (60, 8))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer samples, one repetition (under a minute)")
    parser.add_argument("--reps", type=int, help="repetitions of the repeated sections")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent,
                        help="where RESULTS.md and results.json go (default: bench/)")
    parser.add_argument("--only", help="comma-separated sections to run "
                        f"({', '.join(REPEATED + ONCE)})")
    parser.add_argument("--render", action="store_true",
                        help="measure nothing: rewrite RESULTS.md from results.json (after "
                             "editing bench/NOTES.md)")
    args = parser.parse_args(argv)
    if args.render:
        saved = json.loads((args.out / "results.json").read_text())
        md, _ = report.write(saved, args.out)
        print(f"bench: rewrote {md}")
        return 0
    settings = sections.Settings.for_mode(args.quick)
    reps = args.reps or (1 if args.quick else 3)
    wanted = set(args.only.split(",")) if args.only else set(REPEATED + ONCE)
    procs.pin_self()
    streams_scale.raise_fd_limit()  # before any server starts: they inherit it

    errors: dict[str, str] = {}
    wrk_bin: str | None
    wrk_version = ""
    try:
        wrk_bin = wrk.ensure_wrk()
        probe = subprocess.run([wrk_bin, "-v"], capture_output=True, text=True, check=False)
        wrk_version = (probe.stdout or probe.stderr).split("\n", 1)[0].split(" [")[0].strip()
    except wrk.WrkMissing as exc:
        wrk_bin = None
        errors["throughput"] = str(exc)

    results: dict[str, Any] = {"meta": meta(args.quick, reps, wrk_version)}
    started = time.monotonic()
    watch = procs.CpuWatch()
    world = World.create()
    try:
        _step("starting upstream, fakes, reference and claudex", world.start)
        sections.trip(world.ports.claudex, "tripped")
        _step("warming up", lambda: sections.warm_up(world, settings, wrk_bin))
        after_warmup = sections.rss_now(world)

        if "memory" in wanted:
            results["memory"] = _step(
                f"memory over {settings.memory_requests:,} requests",
                lambda: sections.memory(world, settings, wrk_bin, after_warmup))

        runs: dict[str, list[Any]] = {name: [] for name in REPEATED}
        for rep in range(reps):
            tag = f"[{rep + 1}/{reps}]"
            jobs: dict[str, Callable[[], Any]] = {
                "latency": lambda: sections.latency(world, settings),
                "throughput": lambda: sections.throughput(world, settings, wrk_bin or ""),
                "streaming": lambda: sections.streaming(world, settings),
                "failover": lambda: sections.failover(world, settings),
                "translation": lambda: sections.translation(world, settings),
            }
            for name, job in jobs.items():
                if name not in wanted or name in errors:
                    continue
                try:
                    runs[name].append(_step(f"{tag} {name}", job))
                except Exception as exc:  # a broken section must not lose the others
                    print(f"\nbench: {name} failed: {exc}", file=sys.stderr)
                    errors[name] = f"{type(exc).__name__}: {exc}"
        for name, values in runs.items():
            if values:
                results[name] = merge_runs(values)
                if len(values) > 1:
                    results[name]["runs"] = values
        if wrk_bin is None:
            results["throughput"] = {"reason": errors["throughput"]}

        counts = streams_scale.QUICK_COUNTS if args.quick else streams_scale.COUNTS
        seconds = 3.0 if args.quick else 10.0
        for name, job in (("scale", lambda: sections.scale(world, settings)),
                          ("streams", lambda: streams_scale.scale_streams(world, counts,
                                                                          seconds)),
                          ("console", lambda: sections.console(world, settings)),
                          ("resilience", lambda: _resilience(args.quick)),
                          ("traces", lambda: sections.traces(world, settings)),
                          ("addons", lambda: sections.addons(world, settings)),
                          ("clouds", lambda: sections.clouds(world, settings)),
                          ("network", lambda: network_cost.measure(
                              world, settings.latency_n, settings.throughput_s, wrk_bin)),
                          ("pools", lambda: _pools(args.quick)),
                          ("seed", lambda: seed_cost.measure(50_000 if args.quick
                                                             else 312_000)),
                          ("slowness", lambda: slowness_cost.measure(
                              20, *((50_000, 50) if args.quick else (200_000, 200))))):
            if name not in wanted:
                continue
            try:
                results[name] = _step(name, job)
            except Exception as exc:
                print(f"\nbench: {name} failed: {exc}", file=sys.stderr)
                errors[name] = f"{type(exc).__name__}: {exc}"
        if "memory" in results:
            end = sections.rss_now(world)
            results["memory"]["rss_end_mb"] = end["claudex"]
            results["memory"]["reference_end_mb"] = end["reference"]
    except Exception as exc:
        traceback.print_exc()
        errors["run"] = f"{type(exc).__name__}: {exc}"
    finally:
        results["meta"]["other_cores"] = watch.others_cores([p.pid for p in world.fleet.procs])
        world.stop(keep_logs=bool(errors))
        if errors:
            print(f"bench: process logs kept in {world.workdir}", file=sys.stderr)
    results["errors"] = errors
    results["meta"]["duration_s"] = round(time.monotonic() - started, 1)
    results["budget"] = report.evaluate(results)
    args.out.mkdir(parents=True, exist_ok=True)
    md, js = report.write(results, args.out)
    print(f"bench: wrote {md} and {js} in {results['meta']['duration_s']:.0f} s")
    others = results["meta"]["other_cores"]
    if others > 0.25:
        print(f"bench: other processes kept {others} cores busy during the run: expect noisy "
              "numbers (p95/p99 most of all); re-run on a quiet machine")
    for row in results["budget"]:
        value = "–" if row["value"] is None else f"{row['value']:.3f} {row['unit']}"
        print(f"  {row['verdict']:>12}  {row['line']}: {value}")
    return 1 if "run" in errors else 0


def _resilience(quick: bool) -> dict[str, Any]:
    """Time to failover per fault and the 429 burst (bench/resilience.py: engine, server and
    fakes in this process; counts, not CPU). Quick: shortened stream timeouts, 3 s bursts."""
    from bench import resilience

    seconds = 3.0 if quick else 8.0
    found = asyncio.run(resilience.main_async(quick, seconds))
    return {**found, "seconds": seconds, "quick": quick}


if __name__ == "__main__":
    sys.exit(main())
