"""Which provider produced each thinking signature claudex relayed (DESIGN.md "Portable
conversations").

A bounded LRU: a 16-byte hash of the signature (or of a redacted_thinking block's `data`) ->
the profile name that answered with it. Looking a signature up refreshes it, so the blocks of a
conversation in use stay while old ones are evicted; memory stays under `capacity` entries
(~150 bytes each) whatever the traffic. Nothing is kept across restarts: a signature claudex
does not know is treated as the target's own.

The memory also counts entries per provider, so a request to a provider can skip every lookup
when no other provider signed anything — the common case of a chain that never failed over.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Final

from claudex.engine.addons.reasoning_memory import ReasoningMemory
from claudex.providers.signature_scan import SignatureScanner, signatures_in_answer

DEFAULT_CAPACITY: Final = 32_768
"""Thinking blocks remembered: a long Claude Code session makes a few hundred to a few
thousand; this holds dozens of them."""


def _key(signature: str) -> bytes:
    return hashlib.blake2b(signature.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class SignatureMemory:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        self.capacity = capacity
        self._signers: OrderedDict[bytes, str] = OrderedDict()
        self._per_provider: dict[str, int] = {}
        # The Responses providers' counterpart of signatures: their encrypted reasoning, kept
        # per provider for the next turn at the same provider (`reasoning_memory`).
        self.reasoning = ReasoningMemory()

    def __len__(self) -> int:
        return len(self._signers)

    def remember(self, provider: str, signature: str) -> None:
        key = _key(signature)
        old = self._signers.pop(key, None)
        if old is not None:
            self._count(old, -1)
        self._signers[key] = provider
        self._count(provider, +1)
        while len(self._signers) > self.capacity:
            _, evicted = self._signers.popitem(last=False)
            self._count(evicted, -1)

    def signer(self, signature: str) -> str | None:
        """The provider that produced `signature`, or None when claudex never relayed it."""
        key = _key(signature)
        provider = self._signers.get(key)
        if provider is not None:
            self._signers.move_to_end(key)
        return provider

    def signed_by_others(self, provider: str) -> bool:
        """Whether any remembered signature comes from a provider other than `provider`."""
        return any(name != provider for name in self._per_provider)

    def remember_answer(self, provider: str, payload: bytes) -> None:
        """Every signature in a non-streamed Messages answer from `provider`."""
        for signature in signatures_in_answer(payload):
            self.remember(provider, signature)

    def tap(self, provider: str) -> StreamTap:
        return StreamTap(self, provider)

    def _count(self, provider: str, delta: int) -> None:
        left = self._per_provider.get(provider, 0) + delta
        if left > 0:
            self._per_provider[provider] = left
        else:
            self._per_provider.pop(provider, None)


class StreamTap:
    """Sees a relayed Messages stream from one provider and remembers its signatures."""

    def __init__(self, memory: SignatureMemory, provider: str) -> None:
        self._memory = memory
        self._provider = provider
        self._scanner = SignatureScanner()

    def __call__(self, chunk: bytes) -> None:
        found = self._scanner.feed(chunk)
        if found:
            for signature in found:
                self._memory.remember(self._provider, signature)
