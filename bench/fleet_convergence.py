"""How long a fleet takes to agree: three `claudex serve` processes and one real redis-server on
127.0.0.1, each fact measured from the moment one instance has it (the answer to the request
that opened its breaker; the trip's or reset's answer) until every other instance's status shows
it.

    python -m bench.fleet_convergence [--reps 10]

Prints a table of median and worst milliseconds for breaker open, trip, reset and cooldown,
and the upstream calls the fleet saved against independent instances.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from claudex.demo.fake_provider import FakeProvider
from tests.conftest import anthropic_body, served_models
from tests.fleet_world import FleetWorld
from tests.redis_server import RedisServer

OTHERS = ["b", "c"]


async def _ask(world: FleetWorld, name: str) -> None:
    resp = await world.http.post(world.instances[name].url + "/v1/messages",
                                 json=anthropic_body(),
                                 headers={"anthropic-version": "2023-06-01"})
    assert resp.status_code == 200, resp.text


async def _since(world: FleetWorld, started: float, check: Any) -> float:
    await world.wait_for(OTHERS, check)
    return (time.monotonic() - started) * 1000.0


def _cooling(status: dict[str, Any]) -> bool:
    return any(p["name"] == "primary" and p["cooldown_s"] > 0 for p in status["profiles"])


def _state(state: str) -> Any:
    return lambda s: any(p["name"] == "primary" and p["breaker"]["state"] == state
                         for p in s["profiles"])


async def measure(reps: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"breaker open": [], "trip": [], "reset": [], "cooldown": []}
    redis = RedisServer()
    await redis.start()
    fakes = {}
    for name in ("primary", "backup"):
        fakes[name] = FakeProvider(name, "anthropic", models=served_models(name, "anthropic"))
        await fakes[name].start()
    with tempfile.TemporaryDirectory() as tmp:
        world = FleetWorld(redis, fakes, Path(tmp))
        try:
            await asyncio.gather(*(world.spawn(n) for n in ("a", "b", "c")))
            await world.wait_for(["a", "b", "c"], lambda s: len(s["fleet"]["instances"]) == 3)
            primary = fakes["primary"]
            calls_saved = 0
            for _ in range(reps):
                primary.set_fault("500")
                for _ in range(3):
                    await _ask(world, "a")
                started = time.monotonic()  # a's breaker is open now
                times["breaker open"].append(await _since(world, started, _state("open")))
                before = primary.request_count
                for name in OTHERS:  # alone, each would pay 3 failures to learn it
                    for _ in range(3):
                        await _ask(world, name)
                calls_saved += 3 * len(OTHERS) - (primary.request_count - before)
                primary.set_fault("ok")
                await world.action("a", "reset")
                await world.wait_breaker(["a", "b", "c"], "closed")

                started = time.monotonic()
                await world.action("a", "trip")
                times["trip"].append(await _since(world, started, _state("forced_open")))
                started = time.monotonic()
                await world.action("a", "reset")
                times["reset"].append(await _since(world, started, _state("closed")))

                primary.set_fault("429", retry_after=30)
                await _ask(world, "a")
                started = time.monotonic()
                times["cooldown"].append(await _since(world, started, _cooling))
                primary.set_fault("ok")
                await world.action("a", "reset")
                await world.wait_for(["a", "b", "c"], lambda s: not _cooling(s))
            times["upstream calls saved"] = [float(calls_saved)]
        finally:
            await world.close()
            for fake in fakes.values():
                await fake.stop()
            await redis.kill()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    times = asyncio.run(measure(args.reps))
    saved = times.pop("upstream calls saved")[0]
    print(f"fleet of 3 instances, one redis-server, {args.reps} repetitions "
          "(ms until both other instances show it)")
    print(f"{'fact':<14}{'median':>10}{'worst':>10}")
    for fact, values in times.items():
        print(f"{fact:<14}{statistics.median(values):>10.1f}{max(values):>10.1f}")
    print(f"upstream calls to the failing provider saved: {saved:.0f} of "
          f"{3 * len(OTHERS) * args.reps} that two independent instances would have made")


if __name__ == "__main__":
    main()
