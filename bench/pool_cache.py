"""The prompt cache through a pool, measured (issue 23, DESIGN.md "Pools").

    python -m bench.pool_cache [--conversations 60] [--turns 8] [--quick]

Many multi-turn conversations (Claude Code's shape: one system prompt shared by all, each
conversation its own first message, each turn adding a user message and an answer, cache
breakpoints on the system prompt and on the last user message) go through an engine whose
default profile is a pool of three fake Anthropic accounts, each with its own prompt cache
(`claudex.demo.prompt_cache`: 5 minutes, the longest cached prefix read). Reported, per
balance: the cache-read share of the prompt tokens (read / (read + written + uncached)) and
how the conversations spread over the members. For comparison the same traffic to one account
(the share a single account reaches), and sticky with one member failing mid-run (tripped
halfway: its conversations move once, then read the new member's cache).

Goal (issue 23): sticky within 2 points of the single account's share, no member above 60 %
of the conversations.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from claudex.config.loader import parse_config
from claudex.demo.fake_provider import FakeProvider
from claudex.demo.prompt_cache import PromptCache
from claudex.engine.core.request import ProxyRequest
from claudex.engine.engine import Engine

MEMBERS = ("acct-a", "acct-b", "acct-c")
SYSTEM = "You are Claude Code, a coding agent. " * 230  # ~2,000 tokens, shared by all
WORKERS = 6  # conversations in progress at once


@dataclass
class Tally:
    read: int = 0
    written: int = 0
    uncached: int = 0
    first_member: Counter[str] = field(default_factory=Counter)
    failed: int = 0

    @property
    def share(self) -> float:
        total = self.read + self.written + self.uncached
        return self.read / total if total else 0.0

    def to_json(self) -> dict[str, Any]:
        conversations = sum(self.first_member.values())
        spread = {m: round(n / conversations, 3) for m, n in sorted(self.first_member.items())}
        return {"cache_read_share": round(self.share, 4), "read": self.read,
                "written": self.written, "uncached": self.uncached,
                "conversations": dict(sorted(self.first_member.items())),
                "conversation_share": spread,
                "max_member_share": max(spread.values()) if spread else 0.0,
                "failed_requests": self.failed}


def _config(fakes: dict[str, FakeProvider], balance: str | None) -> str:
    lines = ["[proxy]", 'default_profile = "pool"' if balance else 'default_profile = "acct-a"',
             "[health]", "enabled = false"]
    for name, fake in fakes.items():
        lines += ["[[profiles]]", f'name = "{name}"', 'provider_type = "DirectAnthropic"',
                  f'base_url = "{fake.base_url}"', 'api_key = "bench"']
    if balance:
        lines += ["[[profiles]]", 'name = "pool"', f"members = {json.dumps(list(MEMBERS))}",
                  f'balance = "{balance}"']
    return "\n".join(lines) + "\n"


def _body(conv: int, turn: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    first = f"Conversation {conv}: refactor module {conv}. " + "Context line. " * 150
    for n in range(turn + 1):
        text = first if n == 0 else f"Turn {n} of {conv}: next step please. " + "detail " * 200
        messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
        if n < turn:
            messages.append({"role": "assistant", "content": [
                {"type": "text", "text": f"Done step {n} of {conv}. " + "ok " * 120}]})
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": messages,
            "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
            "metadata": {"user_id": json.dumps({"session_id": f"session-{conv}"})}}


async def run(balance: str | None, conversations: int, turns: int, *, fail_at: float | None = None,
              seed: int = 7) -> Tally:
    fakes = {name: FakeProvider(name, "anthropic", max_recorded=0) for name in MEMBERS}
    for fake in fakes.values():
        fake.prompt_cache = PromptCache()
        await fake.start()
    engine = Engine(parse_config(_config(fakes, balance), "bench.toml", env={}), env={})
    await engine.start(health=False)
    tally = Tally()
    rng = random.Random(seed)
    queue = list(range(conversations))
    rng.shuffle(queue)
    done = 0
    total = conversations * turns
    tripped = False

    async def one(conv: int) -> None:
        nonlocal done, tripped
        for turn in range(turns):
            if fail_at is not None and not tripped and done >= fail_at * total:
                tripped = True
                engine.trip("acct-b", reason="bench: a member fails mid-run")
            body = _body(conv, turn)
            raw = json.dumps(body).encode()
            result = await engine.forward(ProxyRequest(
                "anthropic", "messages", body, raw, {"anthropic-version": "2023-06-01"}))
            done += 1
            if result.status != 200 or result.body is None:
                tally.failed += 1
                continue
            usage = json.loads(result.body)["usage"]
            tally.read += usage["cache_read_input_tokens"]
            tally.written += usage["cache_creation_input_tokens"]
            tally.uncached += usage["input_tokens"]
            if turn == 0:
                tally.first_member[result.provider or "?"] += 1
            await asyncio.sleep(rng.random() * 0.002)  # turns of others in between

    async def worker() -> None:
        while queue:
            await one(queue.pop())

    try:
        await asyncio.gather(*(worker() for _ in range(WORKERS)))
    finally:
        await engine.close()
        for fake in fakes.values():
            await fake.stop()
    return tally


async def measure(conversations: int = 60, turns: int = 8) -> dict[str, Any]:
    out: dict[str, Any] = {"conversations": conversations, "turns": turns,
                           "members": len(MEMBERS)}
    out["single_account"] = (await run(None, conversations, turns)).to_json()
    for balance in ("sticky", "round_robin", "least_busy"):
        out[balance] = (await run(balance, conversations, turns)).to_json()
    out["sticky_member_fails"] = (await run("sticky", conversations, turns,
                                            fail_at=0.5)).to_json()
    return out


def lines(result: dict[str, Any]) -> list[str]:
    single = result["single_account"]["cache_read_share"]
    rows = [f"{result['conversations']} conversations x {result['turns']} turns, "
            f"{result['members']} accounts",
            f"{'':22} {'cache read':>10} {'vs single':>10}  conversations per member"]
    for key in ("single_account", "sticky", "round_robin", "least_busy", "sticky_member_fails"):
        r = result[key]
        spread = ", ".join(f"{m} {n}" for m, n in r["conversations"].items())
        rows.append(f"{key:22} {r['cache_read_share'] * 100:9.1f}% "
                    f"{(r['cache_read_share'] - single) * 100:+9.1f}  {spread}"
                    f" (max {r['max_member_share'] * 100:.0f}%)")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pool_cache",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--conversations", type=int, default=60)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="24 conversations of 6 turns")
    args = parser.parse_args(argv)
    conversations, turns = (24, 6) if args.quick else (args.conversations, args.turns)
    result = asyncio.run(measure(conversations, turns))
    print("\n".join(lines(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
