"""A local token estimate for `count_tokens` when the target has no such endpoint.

Rough by design: about four characters a token for ASCII text (English and code), one token per
other character (CJK scripts run near that), a fixed amount per image and PDF, and a few tokens
of framing per message and tool. Claude Code uses the figure to decide when to compact the
conversation, so being in the right range matters more than precision.
"""

from __future__ import annotations

import json
import math
from typing import Any

from claudex.providers.validation_messages import check_anthropic_contents
from claudex.providers.validation_problems import InvalidRequest, Problem

IMAGE_TOKENS = 1600       # Anthropic's ceiling for a ~1.15 megapixel image
DOCUMENT_TOKENS = 3000    # a PDF of a few pages; the real figure depends on its pages
MESSAGE_OVERHEAD = 4
TOOL_OVERHEAD = 8


def text_tokens(text: str) -> float:
    if text.isascii():  # most text
        return len(text) / 4
    # The ASCII characters counted at C speed (encoding drops the others), not one at a time:
    # 20 ms for a 400 KB prompt became 0.3 ms.
    ascii_chars = len(text.encode("ascii", "ignore"))
    return ascii_chars / 4 + (len(text) - ascii_chars)


def _content_tokens(content: Any) -> float:
    if isinstance(content, str):
        return text_tokens(content)
    if not isinstance(content, list):
        return 0.0
    total = 0.0
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            total += text_tokens(str(block.get("text", "")))
        elif kind == "image":
            total += IMAGE_TOKENS
        elif kind == "document":
            source = block.get("source")
            total += text_tokens(str(source.get("data", ""))) \
                if isinstance(source, dict) and source.get("type") == "text" else DOCUMENT_TOKENS
        elif kind == "tool_use":
            total += text_tokens(str(block.get("name", "")))
            total += text_tokens(json.dumps(block.get("input") or {}, ensure_ascii=False))
        elif kind == "tool_result":
            total += _content_tokens(block.get("content"))
        elif kind in ("thinking", "redacted_thinking"):
            total += text_tokens(str(block.get("thinking") or block.get("data") or ""))
        else:
            total += text_tokens(json.dumps(block, ensure_ascii=False))
    return total


def estimate_input_tokens(body: dict[str, Any]) -> int:
    """An Anthropic count_tokens request body -> its approximate input token count.
    Raises InvalidRequest when the body is malformed, as Anthropic's own endpoint would."""
    check_anthropic_contents(body)
    try:
        return _estimate(body)
    except RecursionError:
        # JSON nested close to the parser's limit parses, but re-encoding a part of it one
        # call deeper does not.
        raise InvalidRequest(Problem((), "nesting")) from None


def _estimate(body: dict[str, Any]) -> int:
    total = _content_tokens(body.get("system"))
    messages, tools = body.get("messages"), body.get("tools")
    for message in messages if isinstance(messages, list) else ():
        if isinstance(message, dict):
            total += MESSAGE_OVERHEAD + _content_tokens(message.get("content"))
    for tool in tools if isinstance(tools, list) else ():
        if isinstance(tool, dict):
            total += TOOL_OVERHEAD + text_tokens(json.dumps(tool, ensure_ascii=False))
    return max(1, math.ceil(total))
