"""The reasoning items claudex relayed from each Responses provider, by the call id of the
function call they led to (`claudex.providers.translate.reasoning_items` says why and how they
go back). A bounded LRU per engine: a looked-up entry is refreshed, the oldest go first, and
nothing is kept across restarts (a forgotten entry only means the model re-reasons).

Keyed by (provider, call id): a lookup for one provider can never return another's items.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

from claudex.providers.translate import reasoning_items

DEFAULT_CAPACITY: Final = 2048
"""Tool calls remembered; an entry holds a few KB of encrypted reasoning."""


class ReasoningMemory:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        self.capacity = capacity
        self._items: OrderedDict[tuple[str, str], tuple[dict[str, Any], ...]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def remember(self, provider: str, call_id: str,
                 items: tuple[dict[str, Any], ...]) -> None:
        key = (provider, call_id)
        self._items.pop(key, None)
        self._items[key] = items
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def recall(self, provider: str, call_id: str) -> tuple[dict[str, Any], ...] | None:
        key = (provider, call_id)
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found


def carry_reasoning(body: dict[str, Any], memory: ReasoningMemory | None, provider: str, *,
                    model: str | None, chatgpt: bool) -> int:
    """Prepare a translated Responses request to `provider`: ask for encrypted reasoning
    where the model reasons, and put back what this provider reasoned before the function
    calls in the history (`reasoning_items`). Returns how many items went back."""
    if not reasoning_items.wants_reasoning(model, chatgpt=chatgpt, body=body):
        return 0
    reasoning_items.ask_for_reasoning(body)
    items = body.get("input")
    if memory is None or not isinstance(items, list) or not len(memory):
        return 0
    return reasoning_items.put_back(items, lambda call_id: memory.recall(provider, call_id))


def remember_output(memory: ReasoningMemory | None, provider: str, output: Any) -> None:
    """Remember the reasoning of a whole answer from `provider`."""
    if memory is None or not isinstance(output, list):
        return
    for call_id, items in reasoning_items.reasoning_pairs(output):
        memory.remember(provider, call_id, items)


def stream_listener(memory: ReasoningMemory | None,
                    provider: str) -> Callable[[dict[str, Any]], None] | None:
    """A callback for each finished output item of a stream from `provider` (None: no
    memory), remembering reasoning as each function call completes."""
    if memory is None:
        return None
    collector = reasoning_items.ReasoningCollector()

    def on_item(item: dict[str, Any]) -> None:
        collector.add(item)
        while collector.pairs:
            call_id, items = collector.pairs.pop(0)
            memory.remember(provider, call_id, items)

    return on_item
