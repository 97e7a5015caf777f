"""What "slow is yellow" costs (engine/health/slowness.py, engine/health/slow_watch.py; issue 30),
in-process:

    python -m bench.slowness_cost [--providers 20] [--records 200000] [--rounds 200] [--json]

- **Per answer**: the latency sample the watch is fed by, `ProviderStats.observe_first_content`
  (a stream) and `observe_duration` (a whole answer), as addons/series.py records it at the
  end of every served request: ns per call, the best of five runs of `--records` calls. The
  watch adds nothing else to an answer (it reads these windows, which the panels read too),
  and the forwarding core's one test of `slow.avoided` (empty unless `avoid_slow` is on and a
  provider is slow) is timed beside it.
- **Per round** (every 5 s, off the request path): one `SlowWatch.judge_all` over an engine
  of `--providers` profiles, each with both windows full (512 samples): *busy*, every window
  has a new answer since the last round (each read sorts its window again); *steady*, the
  same with a ring reaching back past the five minutes (the reads filter it first: traffic
  under ~1.7 answers a second); *idle*, no answer since (the windows' cached readings). The
  median of `--rounds` rounds, µs. The two observe calls were there before issue 30 (the
  panels' p95 and `/metrics`' histograms); what the watch costs is its rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from typing import Any

from claudex.config.loader import parse_config
from claudex.engine.addons.latency import CAPACITY, WINDOW_S
from claudex.engine.engine import Engine

PROFILE = """
[[profiles]]
name = "p{i}"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key = "sk-bench-not-a-secret-{i:04d}"
"""


def config(providers: int) -> Any:
    text = "[health]\nenabled = false\n" + "".join(PROFILE.format(i=i)
                                                     for i in range(providers))
    return parse_config(text, "bench.toml", env={})


def _best_ns(func: Any, count: int, runs: int = 5) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter_ns()
        func(count)
        best = min(best, (time.perf_counter_ns() - start) / count)
    return round(best, 1)


def per_answer(engine: Engine, records: int) -> dict[str, float]:
    stats = engine.runtimes["p0"].stats
    now = time.time()

    def first_content(n: int) -> None:
        observe = stats.observe_first_content
        for i in range(n):
            observe(now, 850.0 + (i & 63))

    def duration(n: int) -> None:
        observe = stats.observe_duration
        for i in range(n):
            observe(now, 2100.0 + (i & 63))

    names = ["p0", "p1"]
    watch = engine.slow

    def avoided_test(n: int) -> None:  # failover.py: `avoided and len(names) > 1 and ...`
        for _ in range(n):
            avoided = watch.avoided
            if avoided and len(names) > 1 and names[0] in avoided:
                raise AssertionError("nothing is slow here")

    def empty(n: int) -> None:  # the loop alone, taken off the others
        for _ in range(n):
            pass

    loop = _best_ns(empty, records)
    return {"first_content_ns": round(_best_ns(first_content, records) - loop, 1),
            "duration_ns": round(_best_ns(duration, records) - loop, 1),
            "avoided_test_ns": round(_best_ns(avoided_test, records) - loop, 1),
            "loop_ns": loop}


def _fill(engine: Engine, now: float, span_s: float) -> None:
    """Both windows of every provider full, their samples spread over the last `span_s`."""
    step = span_s / CAPACITY
    for rt in engine.runtimes.values():
        for k in range(CAPACITY):
            at = now - span_s + k * step
            rt.stats.observe_first_content(at, 800.0 + (k * 37) % 400)
            rt.stats.observe_duration(at, 2000.0 + (k * 53) % 900)


def _rounds(engine: Engine, now: float, rounds: int, *, fresh: bool) -> float:
    """The median µs of `rounds` judge rounds. The clock moves by a millisecond a round (a
    judgement learns from the time since the last one: cost alike), so that no sample falls
    out of a window between rounds: what changes is only what `fresh` adds."""
    times = []
    runtimes = list(engine.runtimes.values())
    for r in range(rounds):
        now += 0.001
        if fresh:  # one new answer per window since the last round
            for rt in runtimes:
                rt.stats.observe_first_content(now, 800.0 + r % 300)
                rt.stats.observe_duration(now, 2000.0 + r % 700)
        start = time.perf_counter_ns()
        engine.slow.judge_all(now)
        times.append((time.perf_counter_ns() - start) / 1000)
    return round(statistics.median(times), 1)


def per_round(engine: Engine, rounds: int) -> dict[str, float]:
    now = time.time()
    _fill(engine, now, WINDOW_S / 2)
    engine.slow.judge_all(now)  # the baselines start
    busy = _rounds(engine, now, rounds, fresh=True)
    now += 1.0
    _fill(engine, now, WINDOW_S / 2)
    idle = _rounds(engine, now, rounds, fresh=False)
    now += 1.0
    _fill(engine, now, WINDOW_S * 2)  # the rings reach back past the window
    steady = _rounds(engine, now, rounds, fresh=True)
    slow = sorted(engine.slow.names)
    if slow:
        raise AssertionError(f"steady traffic judged slow: {slow}")
    return {"busy_us": busy, "steady_us": steady, "idle_us": idle}


async def _measure(providers: int, records: int, rounds: int) -> dict[str, Any]:
    engine = Engine(config(providers), judge_slowness_every=None)
    try:
        return {"providers": providers, "records": records, "rounds": rounds,
                "samples_per_window": CAPACITY, **per_answer(engine, records),
                **per_round(engine, rounds)}
    finally:
        await engine.close()


def measure(providers: int = 20, records: int = 200_000, rounds: int = 200) -> dict[str, Any]:
    """What `main` prints (and `make bench` puts in RESULTS.md)."""
    return asyncio.run(_measure(providers, records, rounds))


def lines(m: dict[str, Any]) -> list[str]:
    per_provider = m["busy_us"] / m["providers"]
    return [
        f"per answer: observe_first_content {m['first_content_ns']:.0f} ns, observe_duration "
        f"{m['duration_ns']:.0f} ns (one of the two per served answer); the avoid_slow test "
        f"{m['avoided_test_ns']:.0f} ns a request",
        f"one judge round, {m['providers']} providers, both windows full "
        f"({m['samples_per_window']} samples): busy {m['busy_us']:.0f} µs "
        f"({per_provider:.1f} µs a provider), steady {m['steady_us']:.0f} µs, idle "
        f"{m['idle_us']:.0f} µs; every 5 s: "
        f"{max(m['busy_us'], m['steady_us']) / 5e4:.3f}% of one core at most",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.slowness_cost",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--providers", type=int, default=20)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    m = measure(args.providers, args.records, args.rounds)
    print(json.dumps(m) if args.json else "\n".join(lines(m)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
