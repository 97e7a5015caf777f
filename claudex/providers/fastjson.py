"""JSON on the hot path: orjson, with the standard library behind it for what orjson leaves out.

orjson parses and encodes several times faster than `json`, and the forwarding path reads every
request body (Claude Code's reach a megabyte). Where the two differ, the standard library's
reading of JSON is kept, so no body claudex accepted before is refused or altered now:

- An escaped lone surrogate (`"\\ud800"`) is valid JSON that orjson refuses: `loads` falls back to
  `json`, and `dumps` writes such a string escaped again, as the client wrote it.
- An integer beyond 64 bits (`2**70`) is parsed by orjson as a float, silently losing digits.
  `lossy` finds the floats that may have been such integers, so a body that must be re-encoded
  is parsed again exactly first (`claudex.engine.core.exchange`); orjson cannot encode such an
  integer either, and `dumps` hands it to `json`.
- A number too large for a double (`1e400`) and NaN or Infinity, which `json` turns into
  values no provider accepts: the caller decides (the proxy refuses them with a 400).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

JSONDecodeError = json.JSONDecodeError  # orjson's is a subclass


def loads(data: bytes | str) -> Any:
    """orjson first; the standard library for what orjson refuses (and for its error message)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON (non-ASCII kept as is, like the APIs send it)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        # A lone surrogate has no UTF-8 form: escaped, as the client wrote it. An integer beyond
        # 64 bits: the standard library writes every digit.
        return json.dumps(value, separators=(",", ":")).encode()


_BIG = float(2**63)


def lossy(value: Any) -> bool:
    """True when `value` (as orjson parsed it) holds a float that may have been written as an
    integer too large for 64 bits: integral and at least 2**63 in magnitude. Rare: LLM requests
    carry a few small floats (temperature, top_p) at most."""
    # Parsed JSON holds exact dicts, lists and floats (no subclasses): type() is enough, and
    # containers of nothing but strings and small values are skipped in C.
    stack = [value]
    pop = stack.pop
    while stack:
        node = pop()
        kind = type(node)
        if kind is dict:
            node = node.values()
        elif kind is not list:
            if kind is float and abs(node) >= _BIG and node.is_integer():
                return True
            continue
        for item in node:
            kind = type(item)
            if kind is dict or kind is list:
                stack.append(item)
            elif kind is float and abs(item) >= _BIG and item.is_integer():
                return True
    return False
