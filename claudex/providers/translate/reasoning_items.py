"""A Responses model's reasoning across the tool calls of one conversation, kept with the
provider that produced it.

With `store: false` a Responses provider keeps nothing between requests, so a reasoning model
continues its chain of thought only when the next request carries its earlier `reasoning` items
back, `encrypted_content` included (asked for with `include: ["reasoning.encrypted_content"]`).
Anthropic and Chat clients have no slot for them (and an Anthropic thinking block is not one:
its signature means something to Anthropic only), so claudex keeps them itself: the reasoning
items of an answer are remembered under the call ids of the function calls they led to, and when
a later request to the SAME provider carries one of those calls in its history, the items go back
in front of it. The encrypted content is bound to the provider that made it; another provider
never gets it (the memory is per provider, `claudex.engine.addons.reasoning_memory`).

Pure functions; the memory lives in the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

ENCRYPTED_REASONING = "reasoning.encrypted_content"
# Model names that reason (and so take `include: reasoning.encrypted_content`) on the platform
# API; at the ChatGPT backend every model does.
_REASONING_MODEL_PREFIXES = ("gpt-5", "o1", "o3", "o4", "codex")


def wants_reasoning(model: str | None, *, chatgpt: bool, body: dict[str, Any]) -> bool:
    """Whether to ask this request's provider for encrypted reasoning."""
    if chatgpt or isinstance(body.get("reasoning"), dict):
        return True
    return bool(model) and str(model).lower().startswith(_REASONING_MODEL_PREFIXES)


def ask_for_reasoning(body: dict[str, Any]) -> None:
    include = body.get("include")
    values = list(include) if isinstance(include, list) else []
    if ENCRYPTED_REASONING not in values:
        body["include"] = [*values, ENCRYPTED_REASONING]


def _carried(item: dict[str, Any]) -> dict[str, Any] | None:
    """The reasoning item as it may be sent back: its encrypted content and summary, without
    the id and status (not stored at the provider, so they name nothing there)."""
    if not isinstance(item.get("encrypted_content"), str) or not item["encrypted_content"]:
        return None
    return {key: value for key, value in item.items() if key not in ("id", "status")}


class ReasoningCollector:
    """Pairs the reasoning items of one answer, in order, with the function calls after them."""

    def __init__(self) -> None:
        self._pending: list[dict[str, Any]] = []
        self.pairs: list[tuple[str, tuple[dict[str, Any], ...]]] = []

    def add(self, item: dict[str, Any]) -> None:
        kind = item.get("type")
        if kind == "reasoning":
            carried = _carried(item)
            if carried is not None:
                self._pending.append(carried)
        elif kind == "function_call" and self._pending:
            call_id = item.get("call_id")
            if isinstance(call_id, str) and call_id:
                self.pairs.append((call_id, tuple(self._pending)))
                self._pending = []


def reasoning_pairs(output: Iterable[Any]) -> list[tuple[str, tuple[dict[str, Any], ...]]]:
    collector = ReasoningCollector()
    for item in output:
        if isinstance(item, dict):
            collector.add(item)
    return collector.pairs


def put_back(items: list[Any],
             lookup: Callable[[str], tuple[dict[str, Any], ...] | None]) -> int:
    """Insert the remembered reasoning in front of the function calls it led to (before the
    assistant message directly preceding them, as the provider produced it); returns how many
    items went in. `items` is changed in place."""
    inserted = 0
    index = 0
    while index < len(items):
        item = items[index]
        if isinstance(item, dict) and item.get("type") == "function_call":
            found = lookup(str(item.get("call_id") or ""))
            if found:
                at = index
                previous = items[index - 1] if index else None
                if isinstance(previous, dict) and previous.get("role") == "assistant" and \
                        previous.get("type", "message") == "message":
                    at = index - 1
                items[at:at] = [dict(r) for r in found]
                inserted += len(found)
                index += len(found)
        index += 1
    return inserted
