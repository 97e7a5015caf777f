"""A spent plan window, measured (issue 22 "Done when": time and upstream requests from a spent
window to the answer; goal: one request to the spent provider, under 50 ms added).

    python -m bench.spent_window [--runs 5] [--requests 20]

A real `claudex serve` (a process of its own, as users run it) in front of fake providers on
127.0.0.1: `sub`, a subscription (claudex/demo/fake_plans.py: a Claude plan answering with the
unified headers, or a ChatGPT plan answering `usage_limit_reached`, both without Retry-After),
whose chain is `sub -> backup` (Anthropic, an API key). Each run warms the server on `sub`, then
spends its window (reset in an hour) and sends the requests:

    spent     the first request after the window is spent: sub's 429, backup serves
    skipped   the following ones: sub passed over unsent (window_spent), backup serves
    floor     the same server, a profile addressing backup directly (nothing to fail over)

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
from claudex.demo.fake_plans import Plan
from claudex.demo.fake_provider import FakeProvider
from claudex.demo.world import free_port

ANTHROPIC = {"anthropic-version": "2023-06-01"}
BODY = {"model": "claude-sonnet-4-5", "max_tokens": 256,
        "messages": [{"role": "user", "content": "Say hello."}]}


def _profile(name: str, fake: FakeProvider, backups: list[str]) -> str:
    kind = {"anthropic": "DirectAnthropic", "responses": "OpenAIResponses"}[fake.protocol]
    listed = ", ".join(f'"{b}"' for b in backups)
    model = "" if fake.protocol == "anthropic" else f'default_model = "{name}-chat"\n'
    return (f'[[profiles]]\nname = "{name}"\nprovider_type = "{kind}"\n'
            f'base_url = "{fake.base_url}"\napi_key = "bench"\n{model}'
            f"backup_providers = [{listed}]\n")




async def _send(c: httpx.AsyncClient, fakes: dict[str, FakeProvider],
                profile: str) -> dict[str, Any]:
    before = {n: f.request_count for n, f in fakes.items()}
    started = time.perf_counter()
    resp = await c.post(f"/proxy/{profile}/v1/messages", json=BODY, headers=ANTHROPIC)
    ms = (time.perf_counter() - started) * 1000
    if resp.status_code != 200:
        raise SystemExit(f"unexpected {resp.status_code}: {resp.text[:200]}")
    return {"ms": ms, "trail": resp.headers["x-claudex-attempts"],
            "upstream": {n: f.request_count - before[n] for n, f in fakes.items()}}


async def _one_run(kind: str, requests: int, tmp: Path) -> dict[str, list[dict[str, Any]]]:
    fakes = {"sub": FakeProvider("sub", "anthropic" if kind == "claude" else "responses",
                                 strict_models=False),
             "backup": FakeProvider("backup", "anthropic")}
    for fake in fakes.values():
        await fake.start()
    plan = fakes["sub"].plan = Plan.claude() if kind == "claude" else Plan.chatgpt()
    port = free_port()
    config = (f'[proxy]\nport = {port}\n[health]\nenabled = false\n'
              + _profile("sub", fakes["sub"], ["backup"])
              + _profile("backup", fakes["backup"], []))
    proc = await start_serve(config, port, tmp)
    out: dict[str, list[dict[str, Any]]] = {"spent": [], "skipped": [], "floor": []}
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30.0) as c:
            for _ in range(3):  # warm: connections to both, the server's first-request costs
                await _send(c, fakes, "sub")
                out["floor"].append(await _send(c, fakes, "backup"))
            out["floor"].clear()
            plan.spend(3600)
            out["spent"].append(await _send(c, fakes, "sub"))
            for _ in range(requests - 1):
                out["skipped"].append(await _send(c, fakes, "sub"))
                out["floor"].append(await _send(c, fakes, "backup"))
    finally:
        await stop_serve(proc)
        for fake in fakes.values():
            await fake.stop()
    return out




async def main(runs: int, requests: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("claude", "chatgpt"):
            rows: dict[str, list[dict[str, Any]]] = {"spent": [], "skipped": [], "floor": []}
            for _ in range(runs):
                for key, got in (await _one_run(kind, requests, Path(tmp))).items():
                    rows[key] += got
            print(f"{kind} plan spent (no Retry-After), chain sub -> backup; {runs} fresh "
                  f"servers x {requests} requests")
            for key in ("spent", "skipped", "floor"):
                print("  " + summary(key, rows[key], 8))

            p50 = {key: statistics.median(r["ms"] for r in got) for key, got in rows.items()}
            print(f"  spent: one request to sub, {p50['spent'] - p50['floor']:+.2f} ms over "
                  f"backup alone; skipped: none, {p50['skipped'] - p50['floor']:+.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.spent_window")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.requests))
