"""What each header of an upstream answer is to claudex, looked up by its name as it came.

Every answer's headers are walked on the request's path (what passes to the client,
engine/core/answers.py; what describes quota windows, engine/addons/windows.py) and again by the
journal (which keeps a plan's windows only). A provider names its headers the same way answer
after answer, so each distinct raw name is classified once — lowered, matched against the pass
list and the window prefixes — and every walk costs one dictionary lookup a header, where it
had been a `lower()` and a prefix test per walk (an Anthropic API-key answer carries a dozen
rate-limit headers).
"""

from __future__ import annotations

from typing import Final, TypeAlias

from claudex.providers.windows import PREFIX_BYTES

# Flags of a header name.
PASSED: Final = 1        # to the client on every path (its type, the provider's request ids)
PASSED_SAME: Final = 2   # to the client unless translating: the provider's own rate limits
WINDOW: Final = 4        # describes a quota window (claudex/providers/windows.py reads it)
PLAN: Final = 8          # a plan's window (a subscription's), as the journal keeps them

# Upstream response headers worth passing to the client; everything else (hop-by-hop, length,
# encoding, cookies) is the proxy's business.
_PASS_HEADERS: Final = frozenset(
    {b"content-type", b"request-id", b"x-request-id", b"openai-processing-ms"}
)
_PASS_PREFIXES: Final = (b"anthropic-ratelimit-", b"x-ratelimit-")
# A subscription's windows (Anthropic's unified headers, ChatGPT's x-codex-*), not an API key's.
_PLAN_PREFIXES: Final = (b"anthropic-ratelimit-unified", b"x-codex-")

Kind: TypeAlias = tuple[int, str]  # (flags, the name lowered, decoded)

# Raw name -> its kind. Bounded: a server that invented a name per answer would only make it
# start over. Read by the engine's loop and the journal's thread; a dict's get and set are
# atomic under the GIL, and a lost entry is only classified again.
KNOWN: Final[dict[bytes, Kind]] = {}
_KNOWN_MAX: Final = 4096


def kind(name: bytes) -> Kind:
    """`name`'s flags and lowered text (classified on first sight, then remembered). Hot
    loops inline the lookup: `KNOWN.get(name) or kind(name)`."""
    known = KNOWN.get(name)
    if known is None:
        known = _classify(name)
        if len(KNOWN) >= _KNOWN_MAX:
            KNOWN.clear()
        KNOWN[name] = known
    return known


def _classify(name: bytes) -> Kind:
    lower = name.lower()
    flags = 0
    if lower in _PASS_HEADERS:
        flags |= PASSED
    elif lower.startswith(_PASS_PREFIXES):
        flags |= PASSED_SAME
    if lower.startswith(PREFIX_BYTES):
        flags |= WINDOW
        if lower.startswith(_PLAN_PREFIXES):
            flags |= PLAN
    return flags, lower.decode("latin-1")
