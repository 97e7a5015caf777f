"""How claudex behaves under failure and throttling, measured on 127.0.0.1 (issue 12).

    python -m bench.resilience [--quick] [--seconds 8] [--cap 8] [--latency-ms 200]

Two tables:

- time to failover: one streamed request to a faulty primary with a healthy backup, per fault
  (refused, 500, 529, hung before headers, stalled after message_start, 429 with a long
  Retry-After), with the default settings (--quick: stream timeouts of 2 s and 4 s instead of
  30 s and 60 s, so the run takes seconds);
- a 429 burst: 32 and 64 clients for --seconds against a provider that allows --cap (8)
  requests in flight (--latency-ms, 200 ms each) and answers 429 with `Retry-After: 1` beyond,
  with claudex's adaptive concurrency and with it held off: client answers, upstream requests,
  429s received, the provider's capacity used and the range the limit kept after the first
  second.

The engine, the server and the fakes share one process and loop (counts, not CPU, are measured
here; `make bench` measures the proxy's cost in separate processes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import aiohttp

from claudex.config.loader import parse_config
from claudex.demo.fake_provider import FakeProvider
from claudex.engine.core import concurrency
from claudex.engine.engine import Engine
from claudex.server.app import create_app
from claudex.server.run import start_in_background

ENV = {"BENCH_KEY": "sk-bench-0123456789"}
BODY = {"model": "claude-sonnet-4-5", "max_tokens": 64,
        "messages": [{"role": "user", "content": "Say hello."}]}


def _config(fakes: dict[str, FakeProvider], chain: tuple[str, ...], extra: str = "") -> str:
    text = "[proxy]\n" + extra + "\n[health]\nenabled = false\n"
    for index, name in enumerate(chain):
        backups = ", ".join(f'"{n}"' for n in chain[index + 1:])
        text += (f'\n[[profiles]]\nname = "{name}"\nprovider_type = "DirectAnthropic"\n'
                 f'base_url = "{fakes[name].base_url}"\napi_key_env = "BENCH_KEY"\n'
                 f"backup_providers = [{backups}]\n")
    return text


async def _serve(text: str) -> tuple[Engine, Any]:
    engine = Engine(parse_config(text, "bench.toml", env=ENV), env=ENV)
    await engine.start(health=False)
    server = await start_in_background(create_app(engine))
    return engine, server


async def _stop(engine: Engine, server: Any, fakes: dict[str, FakeProvider]) -> None:
    await server.stop()
    await engine.close()
    for fake in fakes.values():
        await fake.stop()


FAULTS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("connection refused", "down", {}),
    ("500", "500", {}),
    ("529", "529", {}),
    ("hung before headers", "hang", {}),
    ("stalled after message_start", "stall", {"cut_after_events": 0}),
    ("429, Retry-After 120 s", "429", {"retry_after": 120}),
)


async def time_to_failover(quick: bool) -> list[dict[str, Any]]:
    extra = "stream_first_byte_timeout = 2\nstream_commit_timeout = 4\n" if quick else ""
    rows = []
    for label, mode, settings in FAULTS:
        fakes = {n: FakeProvider(n, "anthropic") for n in ("primary", "backup")}
        for fake in fakes.values():
            await fake.start()
        engine, server = await _serve(_config(fakes, ("primary", "backup"), extra))
        fakes["primary"].set_fault(mode, **settings)  # type: ignore[arg-type]
        async with aiohttp.ClientSession() as http:
            started = time.perf_counter()
            async with http.post(f"{server.url}/v1/messages",
                                 json={**BODY, "stream": True}) as resp:
                first = None
                async for _ in resp.content.iter_any():
                    first = first or time.perf_counter()
                attempts = resp.headers.get("x-claudex-attempts", "")
            rows.append({"fault": label, "status": resp.status, "attempts": attempts,
                         "first_content_s": round((first or time.perf_counter()) - started, 3)})
        fakes["primary"].set_fault("ok")
        await _stop(engine, server, fakes)
    return rows


async def burst(clients: int, seconds: float, adaptive: bool, cap: int = 8,
                latency_ms: int = 200) -> dict[str, Any]:
    fake = FakeProvider("solo", "anthropic")
    await fake.start()
    fake.max_in_flight = cap
    fake.set_fault("slow", latency_ms=latency_ms, retry_after=1)
    saved = concurrency.AdaptiveLimit.on_rate_limited
    if not adaptive:  # held off: the limit never goes down
        concurrency.AdaptiveLimit.on_rate_limited = (  # type: ignore[method-assign]
            lambda self, now, in_flight, sent_at=None: False)
    engine, server = await _serve(_config({"solo": fake}, ("solo",)))
    statuses: dict[int, int] = {}
    began = time.perf_counter()
    deadline = began + seconds
    gate = engine.runtimes["solo"].gate
    limits: list[int] = []  # sampled every 50 ms once the first second is over

    async def sample() -> None:
        await asyncio.sleep(1.0)
        while time.perf_counter() < deadline:
            if gate.limit.limit is not None:
                limits.append(gate.limit.limit)
            await asyncio.sleep(0.05)
    try:
        async with aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0)) as http:
            async def client() -> None:
                while time.perf_counter() < deadline:
                    async with http.post(f"{server.url}/v1/messages", json=BODY) as resp:
                        await resp.read()
                        statuses[resp.status] = statuses.get(resp.status, 0) + 1
                        if resp.status == 429:  # as an SDK would: wait what it is told
                            await asyncio.sleep(float(resp.headers.get("retry-after", 1)))
            await asyncio.gather(sample(), *(client() for _ in range(clients)))
    finally:
        concurrency.AdaptiveLimit.on_rate_limited = saved  # type: ignore[method-assign]
    seconds = time.perf_counter() - began  # the last answers arrive after the deadline
    upstream = fake.request_count
    served = upstream - fake.over_limit
    capacity = cap / (latency_ms / 1000) * seconds
    limit = engine.runtimes["solo"].gate.limit.limit
    await _stop(engine, server, {"solo": fake})
    answers = sum(statuses.values())
    return {
        "clients": clients, "adaptive": adaptive, "client_answers": answers,
        "client_200": statuses.get(200, 0),
        "client_200_share": round(statuses.get(200, 0) / answers, 3) if answers else 0.0,
        "upstream_requests": upstream, "upstream_429": fake.over_limit,
        "upstream_429_share": round(fake.over_limit / upstream, 3) if upstream else 0.0,
        "upstream_200_per_s": round(served / seconds, 1),
        "capacity_used": round(served / capacity, 3), "final_limit": limit,
        "limit_after_1s": f"{min(limits)}-{max(limits)}" if limits else "none",
    }


async def main_async(quick: bool, seconds: float, cap: int = 8,
                     latency_ms: int = 200) -> dict[str, Any]:
    results: dict[str, Any] = {"time_to_failover": await time_to_failover(quick), "burst": []}
    for clients in (32, 64):
        for adaptive in (False, True):
            results["burst"].append(await burst(clients, seconds, adaptive, cap, latency_ms))
    return results


def _table(rows: list[dict[str, Any]]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--cap", type=int, default=8, help="the provider's requests in flight")
    parser.add_argument("--latency-ms", type=int, default=200, help="its time per answer")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = asyncio.run(main_async(args.quick, args.seconds, args.cap, args.latency_ms))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print("Time to failover (one streamed request; healthy backup)\n")
    print(_table(results["time_to_failover"]))
    print(f"\n429 burst ({args.seconds:g} s; the provider allows {args.cap} in flight, "
          f"{args.latency_ms / 1000:g} s each)\n")
    print(_table(results["burst"]))


if __name__ == "__main__":
    main()
