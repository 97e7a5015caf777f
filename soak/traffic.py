"""The soak's clients: many concurrent workers sending a seeded mix of requests — both protocols,
streamed and not, to every profile — and recording exactly what each one got back.

Each request carries its id in the prompt text (`soak-<id>`); translation keeps text, so the fake
providers' request logs say which upstream calls belong to which client request.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

import aiohttp

PROFILE_WEIGHTS: Final = (("alpha", 5), ("beta", 3), ("gamma", 2))
# The clients' protocols, equally likely: Claude Code's, Chat Completions', Codex CLI's.
PROTOCOLS: Final = ("anthropic", "openai", "responses")
LONG_SHARE: Final = 0.125
_LONG_TAIL: Final = " Context follows." + " lorem ipsum dolor" * 55  # ~1,000 characters
_PATHS: Final = {"anthropic": "v1/messages", "openai": "v1/chat/completions",
                 "responses": "v1/responses"}


@dataclass(frozen=True)
class RequestSpec:
    id: int
    protocol: str  # the client's: "anthropic" | "openai" | "responses"
    profile: str
    stream: bool
    long: bool = False  # a long prompt (~260 tokens), which a `context_small` fault refuses

    @classmethod
    def draw(cls, seed: int, request_id: int, profile: str | None = None) -> RequestSpec:
        """The request `request_id` of the mix; with `profile`, addressed to that profile
        (the rest drawn as usual)."""
        rng = random.Random(seed * 1_000_003 + request_id)
        profiles = [p for p, _ in PROFILE_WEIGHTS]
        weights = [w for _, w in PROFILE_WEIGHTS]
        drawn = cls(request_id, rng.choice(PROTOCOLS),
                    rng.choices(profiles, weights)[0], rng.random() < 0.5,
                    rng.random() < LONG_SHARE)
        return drawn if profile is None else replace(drawn, profile=profile)

    def think_s(self, mean_ms: float) -> float:
        return random.Random(self.id).uniform(0, 2 * mean_ms) / 1000

    @property
    def path(self) -> str:
        return f"/proxy/{self.profile}/{_PATHS[self.protocol]}"

    def body(self) -> bytes:
        prompt = f"soak-{self.id}: say something short" + (_LONG_TAIL if self.long else "")
        if self.protocol == "anthropic":
            body: dict[str, object] = {"model": "claude-sonnet-4-5", "max_tokens": 64,
                                       "messages": [{"role": "user", "content": prompt}]}
        elif self.protocol == "responses":
            body = {"model": "gpt-4o", "input": prompt, "store": False,
                    "max_output_tokens": 64}
        else:
            body = {"model": "gpt-4o", "messages": [{"role": "user", "content": prompt}]}
        if self.stream:
            body["stream"] = True
        return json.dumps(body).encode()


@dataclass
class Exchange:
    """One request and what came back; times are `time.monotonic()`."""

    spec: RequestSpec
    started: float
    ended: float = 0.0
    headers_at: float | None = None
    status: int | None = None
    headers: dict[str, str] | None = None
    body: bytes = b""
    transport_error: str | None = None
    timed_out: bool = False

    @property
    def latency_s(self) -> float:
        return self.ended - self.started


async def send(session: aiohttp.ClientSession, url: str, spec: RequestSpec,
               time_limit: float) -> Exchange:
    exchange = Exchange(spec, time.monotonic())
    try:
        async with asyncio.timeout(time_limit):
            async with session.post(url + spec.path, data=spec.body(),
                                    headers={"content-type": "application/json"}) as resp:
                exchange.headers_at = time.monotonic()
                exchange.status = resp.status
                exchange.headers = {k.lower(): v for k, v in resp.headers.items()}
                exchange.body = await resp.read()
    except TimeoutError:
        exchange.timed_out = True
    except aiohttp.ClientError as exc:
        exchange.transport_error = f"{type(exc).__name__}: {exc}"
    exchange.ended = time.monotonic()
    return exchange


async def drive(url: str, *, seed: int, clients: int, first_id: int, count: int | None,
                until: float | None, time_limit: float, think_ms: float,
                on_done: Callable[[Exchange], None], profile: str | None = None) -> int:
    """Run `clients` workers sending requests first_id, first_id+1, ... until `count` are sent or
    `time.monotonic()` passes `until`; report each exchange to `on_done`. Returns the next id.

    Each worker pauses 0..2×`think_ms` (seeded) between requests, as a user's tool would; it
    keeps the run long enough, in seconds, for the fault schedule and the breakers' recovery
    times to play out over a given number of requests.

    The client is aiohttp: httpx's pool slows to ~130 req/s at 64 connections on this kind of
    machine (see DESIGN.md), which would make the soak measure its own client."""
    next_id = first_id
    last_id = None if count is None else first_id + count

    def take() -> int | None:
        nonlocal next_id
        if last_id is not None and next_id >= last_id:
            return None
        if until is not None and time.monotonic() >= until:
            return None
        taken, next_id = next_id, next_id + 1
        return taken

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=None)) as session:

        async def worker() -> None:
            while (request_id := take()) is not None:
                spec = RequestSpec.draw(seed, request_id, profile)
                on_done(await send(session, url, spec, time_limit))
                if think_ms > 0:
                    await asyncio.sleep(spec.think_s(think_ms))

        await asyncio.gather(*(worker() for _ in range(clients)))
    return next_id
