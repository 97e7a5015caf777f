"""What choosing a route costs a request (DESIGN.md "Routes"), in-process, per request:

    python -m bench.routing_cost [--repeat 200]

For Claude Code bodies of 20 KB to 1 MB (bench/bodies.py): `[routes]` with every route set
(long_context at its 60,000-token default: bodies under ~240 KB are never estimated; over it the
prompt is), and `[router]` on a conversation it already knows (the conversation's digest and a
lookup; the classifier itself is a request of its own, once per conversation). Without `[routes]`
and `[router]` the engine has no routing at all: nothing to measure. Prints µs per request, the
median of `--repeat` calls.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import orjson

from bench.bodies import claude_code_body
from claudex.config.model import RouterSettings, RoutesSettings
from claudex.engine.core.conversation import conversation_of
from claudex.engine.core.request import ProxyRequest
from claudex.engine.routing import Routing
from claudex.engine.routing.intents import Decision, IntentRouter

SIZES = (20_000, 100_000, 400_000, 1_000_000)
ROUTES = RoutesSettings(long_context="big", web_search="search", thinking="reasoner",
                        background="cheap")
ROUTER = RouterSettings(enabled=True, profile="clf", rules={"code": "coder", "default": "main"})


async def _never(question: str, credentials: Any) -> str:  # the conversations are all known
    raise AssertionError("the classifier was asked")


def _request(raw: bytes) -> ProxyRequest:
    body = orjson.loads(raw)
    body.pop("thinking", None)  # else the thinking route matches first, before any estimate
    raw = orjson.dumps(body)
    return ProxyRequest("anthropic", "messages", body, raw,
                        {"x-claude-code-session-id": "bench-session"})


async def _median_us(routing: Routing, req: ProxyRequest, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        await routing.choose(req)
        times.append((time.perf_counter_ns() - start) / 1000)
    return round(statistics.median(times), 1)


async def measure(repeat: int) -> list[tuple[int, float, float]]:
    rows = []
    for size in SIZES:
        req = _request(claude_code_body(size))
        router = IntentRouter(ROUTER, _never)
        # The bench conversation is known, as after its first classification.
        key = conversation_of(req.protocol, req.headers, req.body).key
        router._known[key] = Decision("code", "coder")
        rows.append((len(req.raw), await _median_us(Routing(ROUTES, None), req, repeat),
                     await _median_us(Routing(RoutesSettings(), router), req, repeat)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    print(f"{'body':>10}  {'[routes] µs':>12}  {'[router], known µs':>18}")
    for size, routes_us, router_us in asyncio.run(measure(args.repeat)):
        print(f"{size / 1000:>8.0f}KB  {routes_us:>12}  {router_us:>18}")


if __name__ == "__main__":
    main()
