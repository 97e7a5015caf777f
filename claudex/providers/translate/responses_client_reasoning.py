"""Reasoning items on the Responses -> Responses path: who produced each one.

A Responses provider's reasoning item carries `encrypted_content` only that provider (that
organisation, that backend) can read; Codex CLI sends every one back in the next turn's input.
After a failover from one Responses provider to another, those items would make the second
refuse the whole request (a 400, which is not failed over). So claudex remembers, like thinking
signatures, which provider's answer carried each encrypted blob (`ReasoningTap` on a relayed
stream, `encrypted_in_answer` on a JSON answer), and `without_foreign_reasoning` leaves out the
items another provider produced; an item claudex never saw is kept (it may predate a restart).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from claudex.providers.translate.wire import EventReader, parse_json_object

_MARKER = "encrypted_content"


def _encrypted(item: Any) -> str | None:
    if isinstance(item, dict) and item.get("type") == "reasoning":
        blob = item.get(_MARKER)
        if isinstance(blob, str) and blob:
            return blob
    return None


def encrypted_in_answer(body: Any) -> Iterator[str]:
    """The encrypted reasoning of a JSON `response` object."""
    output = body.get("output") if isinstance(body, dict) else None
    for item in output if isinstance(output, list) else ():
        blob = _encrypted(item)
        if blob is not None:
            yield blob


class ReasoningTap:
    """Sees a relayed Responses stream: hands each encrypted reasoning blob to `found`, and
    counts the events, so that claudex's own failure event continues their sequence numbers.
    Only events that mention encrypted content are parsed."""

    def __init__(self, found: Callable[[str], None] | None = None) -> None:
        self._reader = EventReader()
        self._found = found
        self.events = 0

    def __call__(self, chunk: bytes) -> None:
        for event in self._reader.feed(chunk):
            self.events += 1
            if self._found is None or _MARKER not in event.data:
                continue
            payload = parse_json_object(event.data)
            if payload is None or payload.get("type") != "response.output_item.done":
                continue
            blob = _encrypted(payload.get("item"))
            if blob is not None:
                self._found(blob)


def without_foreign_reasoning(body: dict[str, Any], target: str,
                              producer: Callable[[str], str | None]) -> dict[str, Any] | None:
    """`body` without the reasoning items another provider produced, or None when it has
    none."""
    items = body.get("input")
    if not isinstance(items, list):
        return None
    kept = []
    for item in items:
        blob = _encrypted(item)
        made_by = producer(blob) if blob is not None else None
        if made_by is not None and made_by != target:
            continue
        kept.append(item)
    if len(kept) == len(items):
        return None
    return {**body, "input": kept}
