"""What a fake provider answers, before it is put in either wire format, and the JSON helpers
both formats share.

`claudex.demo.fake_replies` decides the `Reply`; `replies_anthropic` and `replies_openai` turn
it into bodies and SSE bytes (`StreamParts`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@lru_cache(maxsize=4096)
def json_text(text: str) -> str:
    """A JSON string literal; cached because long streams repeat the same few words."""
    return dumps(text)


def dumps_bytes(value: Any) -> bytes:
    return dumps(value).encode()


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str
    """The tool input as JSON text."""


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    """The signed thinking an Anthropic answer starts with (`claudex.demo.thinking_rules`)."""

    kind: str  # "thinking" or "redacted_thinking"
    text: str
    signed: str
    """The `signature` of a thinking block, the `data` of a redacted one."""

    def as_block(self) -> dict[str, str]:
        if self.kind == "redacted_thinking":
            return {"type": "redacted_thinking", "data": self.signed}
        return {"type": "thinking", "thinking": self.text, "signature": self.signed}


@dataclass(frozen=True, slots=True)
class Reply:
    """What to answer, independent of the wire format."""

    id: str
    model: str
    words: tuple[str, ...]
    tool_call: ToolCall | None
    input_tokens: int
    thinking: ThinkingBlock | None = None
    """Anthropic answers only: the block the answer starts with."""
    cache_read: int = 0
    cache_creation: int = 0
    """Anthropic answers with a prompt cache (`claudex.demo.prompt_cache`): the prompt's tokens
    read from it and written to it (`input_tokens` is then the rest)."""

    @property
    def text(self) -> str:
        return " ".join(self.words)

    @property
    def text_deltas(self) -> list[str]:
        """The words as streamed: each after the first keeps its leading space."""
        return [word if index == 0 else " " + word for index, word in enumerate(self.words)]

    @property
    def output_tokens(self) -> int:
        if self.tool_call is not None:
            return max(1, len(self.tool_call.arguments) // 4)
        return len(self.words)

    @property
    def argument_deltas(self) -> list[str]:
        assert self.tool_call is not None
        arguments = self.tool_call.arguments
        return [arguments[start : start + 12] for start in range(0, len(arguments), 12)]


@dataclass(slots=True)
class StreamParts:
    """A stream in four parts, so faults can cut it at the right place.

    `preamble` is not content (Anthropic message_start + ping; OpenAI the role-only first chunk);
    `opening` starts a content block; each of `deltas` is one content event; `closing` ends it.
    """

    preamble: list[bytes]
    opening: list[bytes]
    deltas: list[bytes]
    closing: list[bytes]
    error: bytes
    """The in-stream error event for the "stream_error" fault."""
    everything: bytes = field(init=False)

    def __post_init__(self) -> None:
        self.everything = b"".join((*self.preamble, *self.opening, *self.deltas, *self.closing))
