"""Reading a provider's output-token limit out of the 400 it answers when `max_tokens` is too
large (DESIGN.md failure table: "400 stating the provider's max_tokens range").

Claude Code asks for 32,000-128,000 output tokens; many OpenAI-compatible providers cap at
8,192 and refuse the request instead of clamping it. Each provider words the refusal its own
way; these are the wordings seen from real providers (the number captured is the largest
value the provider accepts):

    DeepSeek     Invalid max_tokens value, the valid range of max_tokens is [1, 8192]
    OpenAI       max_tokens is too large: 100000. This model supports at most 16384 completion
                 tokens, whereas you provided 100000.
    Anthropic    max_tokens: 64000 > 32000, which is the maximum allowed number of output tokens
                 for claude-...
    Groq         `max_tokens` must be less than or equal to `8192`, the maximum value for
                 `max_tokens` is less than the `context_window` for this model
    generic      max_tokens must be at most 8192 / ... must be <= 8192 / maximum ... is 8192

A message about the context window as a whole (prompt plus completion) is not a max_tokens
limit: lowering max_tokens to a number read from it could still fail, so it is not matched.
"""

from __future__ import annotations

import re

_FIELD = r"(?:max_tokens|max_completion_tokens|max_output_tokens)"
_PATTERNS = (
    re.compile(rf"valid range of `?{_FIELD}`? is \[\s*\d+\s*,\s*(\d+)\s*\]", re.IGNORECASE),
    re.compile(r"supports at most (\d+) (?:completion|output) tokens", re.IGNORECASE),
    re.compile(rf"{_FIELD}`?:?\s*\d+\s*>\s*(\d+), which is the maximum", re.IGNORECASE),
    re.compile(rf"`?{_FIELD}`? must be (?:less than or equal to|at most|<=)\s*`?(\d+)`?",
               re.IGNORECASE),
    re.compile(rf"maximum (?:value )?(?:for|of) `?{_FIELD}`? is `?(\d+)`?", re.IGNORECASE),
)
# Below this a "limit" is more likely a misread number than a real model's output cap.
_SMALLEST_CAP = 16


def stated_max_tokens(message: str) -> int | None:
    """The largest max_tokens the provider says it accepts, or None when the message states
    no such limit."""
    if "token" not in message.lower():
        return None
    for pattern in _PATTERNS:
        found = pattern.search(message)
        if found:
            value = int(found.group(1))
            return value if value >= _SMALLEST_CAP else None
    return None
