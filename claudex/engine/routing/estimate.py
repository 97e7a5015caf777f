"""A rough count of a request's prompt tokens, in any of the three protocols, for the
`long_context` route.

The same arithmetic as the local `count_tokens` estimate (`claudex.providers.translate.tokens`):
about four characters a token for ASCII text, one token a character for other scripts, a
fixed amount per image or document. What is read: the text of the system prompt / instructions,
of every message or input item (tool calls' arguments and tool results included), and of the
tools offered. Ids, signatures, `cache_control` and other framing are not prompt.

`could_be_long` decides from the body's bytes alone whether the estimate could pass a
threshold, so a request that is obviously short costs one length check: every character is one
byte or more, an ASCII one a quarter of a token, any other one token at most (two bytes or more
in UTF-8). Images are the exception (a fixed 1,600 tokens however small their data); a small image
costs few real tokens, so missing one there is harmless.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from claudex.config.model import Protocol
from claudex.providers.translate.tokens import DOCUMENT_TOKENS, IMAGE_TOKENS, text_tokens

# Blocks that stand for a picture or a file, whatever their payload's size.
_IMAGE_TYPES: Final = frozenset({"image", "image_url", "input_image"})
_DOCUMENT_TYPES: Final = frozenset({"document", "input_file", "file"})
# Keys whose values are framing, not prompt.
_FRAMING_KEYS: Final = frozenset({
    "type", "role", "id", "signature", "cache_control", "tool_use_id", "call_id",
    "tool_call_id", "status", "encrypted_content", "data", "media_type",
})
_PROMPT_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    "anthropic": ("system", "messages", "tools"),
    "openai": ("messages", "tools", "functions"),
    "responses": ("instructions", "input", "tools"),
}


_ASCII: Final = bytes(range(128))


def could_be_long(raw: bytes, threshold: int) -> bool:
    """Whether a body of these bytes could be estimated over `threshold` tokens: at most a
    quarter of a token per ASCII byte, half a token per other byte (a character outside ASCII
    takes two bytes or more in UTF-8). The cheapest bound first: most bodies stop at a length
    check, the rest at a C-speed pass over their bytes (~70 µs a MB to see that they are all
    ASCII, ~640 µs to count the others)."""
    if len(raw) / 2 <= threshold:
        return False
    if raw.isascii():
        return len(raw) / 4 > threshold
    other = len(raw.translate(None, _ASCII))
    return (len(raw) - other) / 4 + other / 2 > threshold


def estimated_prompt_tokens(protocol: Protocol, body: Mapping[str, Any]) -> int:
    """The approximate number of prompt tokens in `body`."""
    total = 0.0
    stack: list[Any] = [body.get(key) for key in _PROMPT_KEYS[protocol]]
    while stack:  # a loop, not recursion: the body may be nested as deep as JSON allows
        value = stack.pop()
        if isinstance(value, str):
            total += text_tokens(value)
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, dict):
            kind = value.get("type")
            if kind in _IMAGE_TYPES:
                total += IMAGE_TOKENS
            elif kind in _DOCUMENT_TYPES:
                total += DOCUMENT_TOKENS
            else:
                stack.extend(item for key, item in value.items() if key not in _FRAMING_KEYS)
    return math.ceil(total)
