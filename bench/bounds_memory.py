"""What each of claudex's bounded structures holds at its bound, in bytes (tracemalloc): the
"plus at most Y per bound" of bench/NOTES.md's "What the soak's memory is" (issue 38).

    python -m bench.bounds_memory

Each structure is filled to its bound with entries shaped as traffic makes them (conversation
keys of 16 hex digits, Claude Code's session/digest keys, a thinking signature's digest, Claude
Code's header set), in-process and deterministic; the event backlog is bench/backlog_memory.py's
figure (2,000 finished requests of the default config through the server's app). What fills
each one, and whether a `claudex serve` under the soak's traffic reaches it, is in the notes.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import tracemalloc
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

KIB = 1024


def held(fill: Callable[[], Any]) -> int:
    """Bytes still allocated after `fill()`, whose result is kept meanwhile."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = fill()
        gc.collect()
        size = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    del kept
    return size


def digest(i: int) -> str:
    """A conversation's prompt digest (engine/core/conversation.py: 16 hex digits)."""
    return hashlib.blake2b(str(i).encode(), digest_size=8).hexdigest()


def session_key(i: int) -> str:
    """Claude Code's conversation key: its session id (a uuid) and the prompt's digest."""
    uid = hashlib.md5(str(i).encode()).hexdigest()
    return f"{uid[:8]}-{uid[8:12]}-{uid[12:16]}-{uid[16:20]}-{uid[20:]}/{digest(i)}"


def conversations(n: int, key: Callable[[int], str]) -> Callable[[], Any]:
    """engine/core/failover.py's `_slow_keys` (`avoid_slow`) and `_reserve_keys` (a plan's
    `reserve`): conversation key -> when, 10,000 at most each."""
    def fill() -> Any:
        keys: OrderedDict[str, float] = OrderedDict()
        for i in range(n):
            keys[key(i)] = 1_700_000_000.0 + i
        return keys
    return fill


def bindings(n: int) -> Callable[[], Any]:
    from claudex.engine.core.bindings import Bindings

    def fill() -> Any:
        kept = Bindings(lambda: 1000.0, limit=n)
        members = ("claude-a", "claude-b", "claude-c")
        for i in range(n):
            kept.bind("pool", session_key(i), members[i % 3])
        return kept
    return fill


def signatures(n: int) -> Callable[[], Any]:
    from claudex.engine.addons.signatures import SignatureMemory

    def fill() -> Any:
        memory = SignatureMemory(n)
        for i in range(n):  # a signature is ~400 base64 characters; a 16-byte digest is kept
            memory.remember(("claude", "bedrock")[i % 2], f"EqQBCkgIARABGAIiQ{i:0>380}")
        return memory
    return fill


def reasoning(n: int, content: int) -> Callable[[], Any]:
    from claudex.engine.addons.reasoning_memory import ReasoningMemory

    def fill() -> Any:
        memory = ReasoningMemory(n)
        for i in range(n):
            item = {"type": "reasoning", "id": f"rs_{i:0>48}", "summary": [],
                    "encrypted_content": f"gAAAA{i:0>{max(content - 5, 1)}}"}
            memory.remember("codex", f"call_{i:0>24}", (item,))
        return memory
    return fill


def decisions(n: int) -> Callable[[], Any]:
    """engine/routing/intents.py: the `[router]` classifier's answer per conversation."""
    from claudex.engine.routing.intents import Decision

    def fill() -> Any:
        known: OrderedDict[str, Decision] = OrderedDict()
        for i in range(n):
            known[session_key(i)] = Decision(("code", "chat", "long")[i % 3], "claude")
        return known
    return fill


def header_names(n: int) -> Callable[[], Any]:
    from claudex.engine.core.answer_headers import _classify

    def fill() -> Any:
        return {f"x-vendor-header-{i}".encode(): _classify(f"x-vendor-header-{i}".encode())
                for i in range(n)}
    return fill


def header_sets(n: int) -> Callable[[], Any]:
    """engine/addons/request_report.py `_HEADER_SETS`: a client's header set per distinct set
    (Claude Code's: ~20 headers; a set differs by its session id)."""
    def fill() -> Any:
        sets = {}
        for i in range(n):
            headers = {"accept": "application/json", "anthropic-beta": "claude-code-20250219,"
                       "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14",
                       "anthropic-dangerous-direct-browser-access": "true",
                       "anthropic-version": "2023-06-01", "content-type": "application/json",
                       "user-agent": "claude-cli/2.0.14 (external, cli)", "x-app": "cli",
                       "x-stainless-arch": "x64", "x-stainless-lang": "js",
                       "x-stainless-os": "Linux", "x-stainless-package-version": "0.60.0",
                       "x-stainless-retry-count": "0", "x-stainless-runtime": "node",
                       "x-stainless-runtime-version": "v22.19.0",
                       "x-stainless-timeout": "600", "x-api-key": "sk-ant-" + "x" * 90,
                       "connection": "keep-alive", "host": "127.0.0.1:13456",
                       "content-length": str(4000 + i),
                       "x-claude-code-session-id": session_key(i)[:36]}
            sets[tuple(headers.items())] = headers
        return sets
    return fill


def latency_window() -> Callable[[], Any]:
    from claudex.engine.addons.latency import LatencyWindow

    def fill() -> Any:
        window = LatencyWindow()
        for i in range(window.capacity):
            window.add(1_700_000_000.0 + i, 0.25 + i / 1000)
        return window
    return fill


def rows() -> list[tuple[str, int, int]]:
    """(structure, bound, bytes at the bound)."""
    from claudex.engine.addons.reasoning_memory import DEFAULT_CAPACITY as REASONING
    from claudex.engine.addons.signatures import DEFAULT_CAPACITY as SIGNATURES
    from claudex.engine.core.bindings import LIMIT as BINDINGS
    from claudex.engine.core.failover import _RESERVED_KEPT
    from claudex.engine.routing.intents import CAPACITY as ROUTER

    return [
        ("avoid_slow / reserve conversations (digest keys)", _RESERVED_KEPT,
         held(conversations(_RESERVED_KEPT, digest))),
        ("avoid_slow / reserve conversations (session keys)", _RESERVED_KEPT,
         held(conversations(_RESERVED_KEPT, session_key))),
        ("pool bindings (session keys)", BINDINGS, held(bindings(BINDINGS))),
        ("thinking signatures", SIGNATURES, held(signatures(SIGNATURES))),
        ("Responses reasoning, 0 B of encrypted content", REASONING, held(reasoning(REASONING, 0))),
        ("Responses reasoning, 4 KB of encrypted content", REASONING,
         held(reasoning(REASONING, 4096))),
        ("[router] decisions (session keys)", ROUTER, held(decisions(ROUTER))),
        ("answer header names classified", 4096, held(header_names(4096))),
        ("client header sets (Claude Code's)", 256, held(header_sets(256))),
        ("latency window, one provider", 512, held(latency_window())),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bounds_memory",
                                     description=(__doc__ or "").split("\n")[0])
    parser.parse_args(argv)
    print(f"{'structure':<52} {'bound':>8} {'at bound':>10} {'a entry':>9}")
    for name, bound, size in rows():
        print(f"{name:<52} {bound:>8,} {size / KIB / KIB:>7.2f} MB {size / bound:>7,.0f} B")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
