"""A per-account prompt cache for the fake Anthropic provider, as Anthropic's prompt caching
behaves (docs.anthropic.com "Prompt caching"; confirmed there and in gateways' docs quoting it):

- a request marks breakpoints with `cache_control` on blocks (system, tools, message content);
  the prefix up to a breakpoint is written to the cache (at most 4 breakpoints a request);
- an entry lives 5 minutes (`ttl = "1h"`: an hour), its lifetime refreshed each time it is read;
- a later request reads the longest cached prefix of its own prompt (claudex's simplification of
  Anthropic's lookback, which checks the block boundaries before each breakpoint);
- a prefix shorter than the model's minimum cacheable length (1,024 tokens for Sonnet 4.5 and
  Opus 4.1; 2,048 for the Haiku 3.x models; 4,096 for Haiku 4.5, Opus 4.5/4.6) is not cached;
- usage reports `cache_read_input_tokens` (read), `cache_creation_input_tokens` (written) and
  `input_tokens` (neither).

Caches are per organization/workspace: each fake provider is one account, with its own cache.
Tokens are the fakes' estimate (a quarter of the block's JSON length). Not confirmed: the exact
lookback window (20 blocks) is not modelled, and no cache is shared between models here.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

TTL_S: Final = 300.0
TTL_1H_S: Final = 3600.0
MAX_ENTRIES: Final = 20_000
MAX_BREAKPOINTS: Final = 4


def minimum_tokens(model: str) -> int:
    lower = model.lower()
    if "haiku-4" in lower or "opus-4-5" in lower or "opus-4-6" in lower:
        return 4096
    if "haiku" in lower:
        return 2048
    return 1024


@dataclass(frozen=True)
class CacheUsage:
    input_tokens: int   # neither read nor written
    read: int
    written: int

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.read + self.written


class PromptCache:
    """One account's cache. `clock`: monotonic seconds (injected in tests)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._entries: OrderedDict[str, float] = OrderedDict()  # prefix digest -> expires at
        self.reads = 0
        self.writes = 0

    def serve(self, body: Any) -> CacheUsage:
        """What a Messages request `body` reads and writes here, the cache updated."""
        if not isinstance(body, dict):
            return CacheUsage(0, 0, 0)
        now = self._clock()
        model = str(body.get("model") or "")
        floor = minimum_tokens(model)
        digest = hashlib.blake2b(model.encode(), digest_size=16)
        boundaries: list[tuple[str, int, float | None]] = []  # digest, tokens so far, ttl
        total = 0
        for block, ttl in _blocks(body):
            text = json.dumps(block, sort_keys=True, separators=(",", ":"))
            digest.update(text.encode("utf-8", "surrogatepass"))
            total += max(1, len(text) // 4)
            boundaries.append((digest.copy().hexdigest(), total, ttl))
        breakpoints = [b for b in boundaries if b[2] is not None][-MAX_BREAKPOINTS:]
        if not breakpoints:
            return CacheUsage(total, 0, 0)
        last = boundaries.index(breakpoints[-1])
        read = 0
        for key, tokens, _ in reversed(boundaries[:last + 1]):
            expires = self._entries.get(key)
            if expires is not None and expires > now:
                read = tokens
                self._entries[key] = max(expires, now + TTL_S)  # a read refreshes it
                break
        written = 0
        for key, tokens, ttl in breakpoints:
            if tokens < floor or ttl is None:
                continue
            self._entries[key] = max(self._entries.get(key, 0.0), now + ttl)
            self._entries.move_to_end(key)
            written = max(written, tokens - read)
        while len(self._entries) > MAX_ENTRIES:
            self._entries.popitem(last=False)
        self.reads += read > 0
        self.writes += written > 0
        return CacheUsage(total - read - written, read, written)


def _blocks(body: dict[str, Any]) -> Iterator[tuple[Any, float | None]]:
    """The prompt's blocks in cache order (tools, system, messages), each without its
    `cache_control`, with the TTL its marker asks for (None: no breakpoint there)."""
    tools = body.get("tools")
    if isinstance(tools, list):
        for tool in tools:
            yield _bare(tool)
    system = body.get("system")
    if isinstance(system, str):
        yield system, None
    elif isinstance(system, list):
        for block in system:
            yield _bare(block)
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in messages:
            if not isinstance(message, dict):
                continue
            content = message.get("content")
            role = message.get("role")
            if isinstance(content, str):
                yield {"role": role, "text": content}, None
            elif isinstance(content, list):
                for block in content:
                    bare, ttl = _bare(block)
                    yield {"role": role, "block": bare}, ttl


def _bare(block: Any) -> tuple[Any, float | None]:
    if not isinstance(block, dict) or "cache_control" not in block:
        return block, None
    marker = block["cache_control"]
    ttl = TTL_1H_S if isinstance(marker, dict) and marker.get("ttl") == "1h" else TTL_S
    return {k: v for k, v in block.items() if k != "cache_control"}, ttl
