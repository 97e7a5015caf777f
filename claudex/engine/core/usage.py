"""Token usage: read from every answer claudex hands a client, summed per provider and profile.

Where it is read: the bytes that go to the client (the engine wraps every answer stream anyway to
count it in flight), in the client's protocol — after translation they still carry the usage the
translator passed on. Anthropic puts it in `message_start` (`message.usage`) and `message_delta`
(`usage`), OpenAI Chat in the last chunk when `stream_options.include_usage` was asked (claudex
asks every OpenAI-compatible upstream for it on a stream and translators always make that chunk;
the server takes it out again for a client that did not ask, after it was counted here:
`claudex.providers.usage_chunks`), Responses in `response.completed`; a non-streamed answer has
one top-level `usage`.

What it costs a stream: one `bytes.find(b'"usage"')` per chunk (C speed) and the carry of the
chunk's last unfinished line; only a line holding the marker is decoded, and only its usage
object is parsed. The marker cannot match inside a JSON string, where quotes are escaped.

Counts are kept in one convention whatever the protocol: four parts that do not overlap, so they
add up. `input` is the input neither read from nor written to a prompt cache, `cache_read` the
part read from one, `cache_write` the part written to one (Anthropic's
`cache_creation_input_tokens`, billed at 1.25 x input), `output` the output. Anthropic reports
them so; OpenAI's `prompt_tokens` and Responses' `input_tokens` are the whole input, cached part
(`*_tokens_details.cached_tokens`) and written part (`cache_write_tokens` there, OpenRouter's
name, which claudex's Anthropic -> OpenAI translation also sets) included, so those are taken
out of `input`. The whole input, as the OpenTelemetry GenAI conventions and genai-prices count
it, is `input + cache_read + cache_write` (`Usage.all_input`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

MARKER: Final = b'"usage"'
CARRY_MAX: Final = 64 * 1024  # an unfinished line longer than this is not ours to wait for
_DECODER: Final = json.JSONDecoder()


@dataclass(slots=True)  # one kept per request by the event bus's backlog: no __dict__ each
class Usage:
    input_tokens: int = 0        # neither read from nor written to a cache
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0  # Anthropic's cache_creation_input_tokens

    @property
    def all_input(self) -> int:
        """The whole input, cached parts included (OpenAI's and genai-prices' input count)."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def total(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens + \
            self.output_tokens

    def merge_max(self, other: Usage) -> None:
        """One answer reports usage more than once (start and end of a stream): the larger
        count of each kind is the answer's."""
        self.input_tokens = max(self.input_tokens, other.input_tokens)
        self.output_tokens = max(self.output_tokens, other.output_tokens)
        self.cache_read_tokens = max(self.cache_read_tokens, other.cache_read_tokens)
        self.cache_write_tokens = max(self.cache_write_tokens, other.cache_write_tokens)

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens

    def to_json(self) -> dict[str, int]:
        # Once per request: written out, as dataclasses.asdict costs several times more.
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cache_read_tokens": self.cache_read_tokens,
                "cache_write_tokens": self.cache_write_tokens}


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def normalise(raw: Mapping[str, Any]) -> Usage:
    """Any of the three protocols' usage objects as one shape (the module's docstring says
    which): Chat's `prompt_tokens` and Responses' `input_tokens` (told apart from Anthropic's
    by their `*_tokens_details` or `total_tokens`, which Anthropic never sends) hold the cached
    parts; Anthropic's `input_tokens` does not."""
    # Once per answer: a plain positive int or an absent key is read here, anything else by
    # `_count` (the same figure, one call fewer per counter in the usual case).
    output = raw.get("output_tokens")
    if output.__class__ is not int or output <= 0:
        output = _count(output) or _count(raw.get("completion_tokens"))
    prompt = raw.get("prompt_tokens")
    details = raw.get("prompt_tokens_details") if prompt is not None else \
        raw.get("input_tokens_details")
    if prompt is None and details is None and "total_tokens" not in raw:  # Anthropic's
        tin = raw.get("input_tokens")
        read = raw.get("cache_read_input_tokens")
        written = raw.get("cache_creation_input_tokens")
        return Usage(tin if tin.__class__ is int and tin > 0 else _count(tin), output,
                     0 if read is None else _count(read),
                     0 if written is None else _count(written))
    whole = _count(prompt) if prompt is not None else _count(raw.get("input_tokens"))
    if not isinstance(details, Mapping):
        details = {}
    # Some OpenAI-compatible gateways in front of Claude put Anthropic's counters at the top.
    read = _count(details.get("cached_tokens")) or _count(raw.get("cache_read_input_tokens"))
    written = _count(details.get("cache_write_tokens")) or \
        _count(raw.get("cache_creation_input_tokens"))
    return Usage(max(0, whole - read - written), output, read, written)


def _usage_at(text: str, marker_at: int) -> Usage | None:
    """The usage object whose key starts at `marker_at` in `text`."""
    brace = text.find("{", marker_at + len('"usage"'))
    if brace < 0 or text[marker_at + len('"usage"'):brace].strip() not in (":", ""):
        return None
    try:
        value, _ = _DECODER.raw_decode(text, brace)
    except ValueError:
        return None
    return normalise(value) if isinstance(value, dict) else None


def usage_in_body(body: bytes) -> Usage | None:
    """The usage a non-streamed answer reports, or None."""
    at = body.rfind(MARKER)  # top-level usage comes after the content in all three protocols
    if at < 0:
        return None
    try:  # only what follows the marker (an ASCII quote, so a character boundary)
        text = body[at:].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return _usage_at(text, 0)


class UsageScanner:
    """Feed it a stream's chunks; `usage` is what they reported (None if nothing). The first
    and last lines that reported it are kept as they were decoded (two references, no copy):
    a trace reads the answer's model and finish reason there at the end
    (engine/addons/answer_facts.py), and nothing else looks at them."""

    def __init__(self) -> None:
        self._carry = b""
        self.usage: Usage | None = None
        self.first_line: str | None = None
        self.last_line: str | None = None

    def feed(self, chunk: bytes) -> None:
        window = self._carry + chunk if self._carry else chunk
        at = window.find(MARKER)
        while at >= 0:
            start = window.rfind(b"\n", 0, at) + 1
            end = window.find(b"\n", at)
            if end < 0:
                break  # the line goes on in the next chunk: carried below
            self._read_line(window[start:end])
            at = window.find(MARKER, end)
        last_line = window.rfind(b"\n") + 1
        tail = window[last_line:]
        self._carry = tail if len(tail) <= CARRY_MAX else b""

    def finish(self) -> None:
        """The last line, if the stream ended without a newline after it."""
        if self._carry and MARKER in self._carry:
            self._read_line(self._carry)
        self._carry = b""

    def _read_line(self, line: bytes) -> None:
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            return
        at = text.find('"usage"')
        while at >= 0:
            found = _usage_at(text, at)
            if found is not None:
                if self.usage is None:
                    self.usage = found
                    self.first_line = text
                else:
                    self.usage.merge_max(found)
                self.last_line = text
            at = text.find('"usage"', at + 1)


class TokenTotals:
    """Sums per provider and per client profile (the engine's status, panels, /metrics)."""

    def __init__(self) -> None:
        self.by_provider: dict[str, Usage] = {}
        self.by_profile: dict[str, Usage] = {}

    def add(self, provider: str | None, profile: str | None, usage: Usage) -> None:
        if provider:
            self.by_provider.setdefault(provider, Usage()).add(usage)
        if profile:
            self.by_profile.setdefault(profile, Usage()).add(usage)

    def of_provider(self, name: str) -> dict[str, int]:
        return (self.by_provider.get(name) or Usage()).to_json()
