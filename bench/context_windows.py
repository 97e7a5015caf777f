"""A context-window skip, measured (issue 22 "Done when": time and upstream requests before and
after the window is learned).

    python -m bench.context_windows [--runs 5] [--requests 20]

A real `claudex serve` (a process of its own, as users run it) in front of fake providers on
127.0.0.1: `primary` (Anthropic, answering 529: down), `small` (OpenAI-compatible, an 8k-like
context window, refusing longer prompts with OpenAI's 400) and `big` (OpenAI-compatible, no
limit). A long Claude Code-like request (~18,000 tokens) goes to `primary`, whose chain is
small -> big. Reported, each over fresh servers:

    before    the first long request: small refuses it (context_exceeded), big serves
    learned   the following ones: small passed over unsent (context_too_small), big serves
    declared  `context_window` configured on small: even the first request skips it
    no small  the same chain without small at all (the floor: primary's 529, then big)

The upstream requests are counted at the fakes; the time is the client's, end to end.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.served import start_serve, stop_serve, summary
from claudex.demo.fake_provider import FakeProvider
from claudex.demo.world import free_port

ANTHROPIC = {"anthropic-version": "2023-06-01"}
LONG = "Refactor the module and keep its tests green. " * 1600  # ~18,000 tokens
WINDOW = 8192


def _profile(name: str, fake: FakeProvider, backups: list[str], extra: str = "") -> str:
    kind = "DirectAnthropic" if fake.protocol == "anthropic" else "OpenAICompatible"
    listed = ", ".join(f'"{b}"' for b in backups)
    return (f'[[profiles]]\nname = "{name}"\nprovider_type = "{kind}"\n'
            f'base_url = "{fake.base_url}"\napi_key = "bench"\ndefault_model = "{name}-model"\n'
            f"max_tokens = 1024\nbackup_providers = [{listed}]\n{extra}\n")




async def _one_run(fakes: dict[str, FakeProvider], requests: int, tmp: Path, *,
                   with_small: bool, declared: bool) -> list[dict[str, Any]]:
    port = free_port()
    chain = ["small", "big"] if with_small else ["big"]
    config = (f'[proxy]\nport = {port}\ndefault_profile = "primary"\n[health]\nenabled = false\n'
              + _profile("primary", fakes["primary"], chain)
              + _profile("small", fakes["small"], [],
                         f"context_window = {WINDOW}" if declared else "")
              + _profile("big", fakes["big"], []))
    proc = await start_serve(config, port, tmp)
    rows: list[dict[str, Any]] = []
    body = {"model": "claude-sonnet-4-5", "max_tokens": 1024,
            "messages": [{"role": "user", "content": LONG}]}
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30.0) as c:
            for _ in range(requests):
                before = {n: len(f.requests) for n, f in fakes.items()}
                started = time.perf_counter()
                resp = await c.post("/v1/messages", json=body, headers=ANTHROPIC)
                ms = (time.perf_counter() - started) * 1000
                if resp.status_code != 200:
                    raise SystemExit(f"unexpected {resp.status_code}: {resp.text[:200]}")
                sent = {n: len(f.requests) - before[n] for n, f in fakes.items()}
                rows.append({"ms": ms, "trail": resp.headers["x-claudex-attempts"],
                             "upstream": sent})
    finally:
        await stop_serve(proc)
    return rows




async def main(runs: int, requests: int) -> None:
    fakes = {"primary": FakeProvider("primary", "anthropic"),
             "small": FakeProvider("small", "openai", strict_models=False),
             "big": FakeProvider("big", "openai", strict_models=False)}
    fakes["small"].context_window = WINDOW
    for fake in fakes.values():
        await fake.start()
    fakes["primary"].set_fault("529")
    before: list[dict[str, Any]] = []
    learned: list[dict[str, Any]] = []
    declared: list[dict[str, Any]] = []
    floor: list[dict[str, Any]] = []
    # A fresh server's first request pays its connections' set-up: compared with its like.
    declared_first: list[dict[str, Any]] = []
    floor_first: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(runs):
                rows = await _one_run(fakes, requests, Path(tmp), with_small=True, declared=False)
                before.append(rows[0])
                learned += rows[1:]
                rows = await _one_run(fakes, requests, Path(tmp), with_small=True, declared=True)
                declared_first.append(rows[0])
                declared += rows[1:]
                rows = await _one_run(fakes, requests, Path(tmp), with_small=False,
                                      declared=False)
                floor_first.append(rows[0])
                floor += rows[1:]
    finally:
        for fake in fakes.values():
            await fake.stop()
    print(f"A ~18,000-token request; primary down (529), chain small ({WINDOW:,} window) -> big; "
          f"{runs} fresh servers x {requests} requests")
    print("first request of a fresh server:")
    print("  " + summary("before", before, 9))
    print("  " + summary("declared", declared_first, 9))
    print("  " + summary("no small", floor_first, 9))
    print("the requests after it:")
    print("  " + summary("learned", learned, 9))
    print("  " + summary("declared", declared, 9))
    print("  " + summary("no small", floor, 9))

    def p50(rows: list[dict[str, Any]]) -> float:
        return statistics.median(r["ms"] for r in rows)

    print(f"before it is learned: one refused request at small, "
          f"{p50(before) - p50(floor_first):+.2f} ms over no small backup; learned: no request "
          f"there, "
          f"{p50(learned) - p50(floor):+.2f} ms; declared: {p50(declared) - p50(floor):+.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.context_windows")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.requests))
