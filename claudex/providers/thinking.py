"""Portable conversations: make an Anthropic request valid at the provider it is sent to after
other providers served some of its turns (DESIGN.md "Portable conversations").

Two rewrites, both pure (the caller supplies who signed what):

1. A `thinking` or `redacted_thinking` block signed by another provider is dropped — its
   `signature` (or `data`) means nothing to the target, which answers 400 "Invalid `signature`
   in `thinking` block". A block whose signer is unknown (claudex never relayed it: from before
   a restart, or the client's own direct use) is kept: it most likely came from the target.
   Dropping is deterministic, so every provider keeps seeing the same history for the blocks
   it produced (newer models check that nothing before a block changed).
2. When thinking is on and the conversation is in a tool-use loop whose last assistant turn
   does not start with a thinking block (its block was just dropped, or it never had one:
   another provider served it, or the client keeps no thinking in its history), thinking is
   turned off for the request as the model allows (`claudex.providers.thinking_models`), and
   the note says which of the two was found. Only the final assistant turn needs the block:
   earlier turns may lack one.

`make_portable` returns None when there is nothing to say, and a `Portable` whose body is the
input itself when there are only notes, so the caller can forward the client's bytes untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from claudex.providers.thinking_models import ThinkingOff, thinking_model

THINKING_KINDS: Final = ("thinking", "redacted_thinking")
# What binds each kind to its provider.
_SIGNED_FIELD: Final = {"thinking": "signature", "redacted_thinking": "data"}
# Context-management edits that need thinking on (they clear thinking blocks).
_THINKING_EDIT_PREFIX: Final = "clear_thinking"
_EFFORT_ORDER: Final = ("low", "medium", "high", "xhigh", "max")

SERVED_ELSEWHERE: Final = "last tool-use turn served elsewhere"
"""Why thinking goes off when the last tool-use turn's thinking block was signed by another
provider (and so was just dropped)."""
NO_THINKING_BLOCK: Final = "the history has no thinking block before the last tool use"
"""Why it goes off when that turn has no thinking block at all: another provider may have served
it, or the client sends its history without thinking blocks (qwen-code does, with thinking on
and one provider serving every turn): what was found is said, not guessed."""

Signer = Callable[[str], str | None]
"""The provider that produced a signature, or None when claudex never saw it."""


@dataclass(frozen=True)
class Portable:
    body: dict[str, Any]     # the input object itself when only `notes` has something to say
    notes: tuple[str, ...]   # for the request log: "dropped: thinking (signed by b)", ...

    def changed(self, original: dict[str, Any]) -> bool:
        return self.body is not original


def signed_value(block: Any) -> str | None:
    """The provider-bound string of a thinking or redacted_thinking block, else None."""
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if not isinstance(kind, str):
        return None
    field = _SIGNED_FIELD.get(kind)
    value = block.get(field) if field else None
    return value if isinstance(value, str) and value else None


def signed_values(content: Any) -> Iterator[str]:
    """The signatures and redacted data in a message's (or an answer's) content list."""
    if isinstance(content, list):
        for block in content:
            value = signed_value(block)
            if value is not None:
                yield value


def make_portable(body: dict[str, Any], *, target: str, model: str | None,
                  signer: Signer | None) -> Portable | None:
    """The request for `target`, or None when it needs no change. `model` is the model the
    target is asked for; `signer` None means no signature can be foreign (nothing to look up)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    notes: list[str] = []
    if signer is not None:
        kept = _drop_foreign(messages, target, signer, notes)
        if kept is not None:
            messages = kept
    changes: dict[str, Any] = {}
    if notes:
        changes["messages"] = messages
    if _final_tool_turn_unthought(messages):
        # Its block was there before the foreign ones went (`messages` is then a new list).
        why = SERVED_ELSEWHERE if messages is not body["messages"] \
            and not _final_tool_turn_unthought(body["messages"]) else NO_THINKING_BLOCK
        _thinking_off(body, model, changes, notes, why)
    if not notes:
        return None
    if not changes:
        return Portable(body, tuple(notes))
    out = {**body, **changes}
    for key, value in changes.items():
        if value is None:
            del out[key]
    return Portable(out, tuple(notes))


# -- 1: foreign signatures ---------------------------------------------------------------------


def _drop_foreign(messages: list[Any], target: str, signer: Signer,
                  notes: list[str]) -> list[Any] | None:
    """The messages without blocks another provider signed, or None when there are none.
    Untouched messages are shared with the input, not copied."""
    out: list[Any] | None = None
    counts: dict[str, dict[str, int]] = {}  # signer -> kind -> blocks dropped
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list) or message.get("role") != "assistant":
            if out is not None:
                out.append(message)
            continue
        kept_blocks: list[Any] | None = None
        for number, block in enumerate(content):
            value = signed_value(block)
            who = signer(value) if value is not None else None
            if who is None or who == target:
                if kept_blocks is not None:
                    kept_blocks.append(block)
                continue
            if kept_blocks is None:
                kept_blocks = list(content[:number])
            per_kind = counts.setdefault(who, {})
            per_kind[block["type"]] = per_kind.get(block["type"], 0) + 1
        if kept_blocks is None:
            if out is not None:
                out.append(message)
            continue
        if out is None:
            out = list(messages[:index])
        # A message of nothing but foreign thinking goes entirely: the API joins the user
        # turns either side of it, and an empty content list is refused.
        if kept_blocks:
            out.append({**message, "content": kept_blocks})
    for who, per_kind in counts.items():
        kinds = ", ".join(kind if n == 1 else f"{kind} x{n}" for kind, n in per_kind.items())
        notes.append(f"dropped: {kinds} (signed by {who})")
    return out


# -- 2: the final tool-use turn without thinking ---------------------------------------------


def _final_tool_turn_unthought(messages: list[Any]) -> bool:
    """The conversation is in a tool-use loop (the last assistant turn called a tool and a
    tool result follows it) and that turn does not start with a thinking block."""
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        if position == len(messages) - 1:
            return False  # a prefill, not a tool-use loop
        content = message.get("content")
        if not isinstance(content, list) or not any(_is(b, "tool_use") for b in content):
            return False
        if not any(_has_tool_result(m) for m in messages[position + 1:]):
            return False
        return not (content and _is(content[0], *THINKING_KINDS))
    return False


def _is(block: Any, *kinds: str) -> bool:
    return isinstance(block, dict) and block.get("type") in kinds


def _has_tool_result(message: Any) -> bool:
    if not isinstance(message, dict) or message.get("role") != "user":
        return False
    content = message.get("content")
    return isinstance(content, list) and any(_is(b, "tool_result") for b in content)


def _thinking_off(body: dict[str, Any], model: str | None, changes: dict[str, Any],
                  notes: list[str], why: str) -> None:
    """Turn thinking off in `changes` (None: remove the key) the way `model` accepts; `why`
    ends the note."""
    info = thinking_model(model)
    thinking = body.get("thinking")
    if thinking is None:
        on = info.default_on
    else:
        on = isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
    if not on:
        return
    if info.off is ThinkingOff.IMPOSSIBLE:
        notes.append(f"thinking kept on: {model} cannot turn it off ({why})")
        return
    if info.off is ThinkingOff.BETWEEN_TOOLS:
        changes["thinking"] = {"type": "between_tools"}
        notes.append(f"thinking between_tools: {why}")
        return
    changes["thinking"] = None if info.off is ThinkingOff.OMIT else {"type": "disabled"}
    notes.append(f"thinking off: {why}")
    _cap_effort(body, info.off_max_effort, changes, notes)
    _without_thinking_edits(body, changes)


def _cap_effort(body: dict[str, Any], cap: str | None, changes: dict[str, Any],
                notes: list[str]) -> None:
    config = body.get("output_config")
    if cap is None or not isinstance(config, dict):
        return
    effort = config.get("effort")
    if effort in _EFFORT_ORDER and _EFFORT_ORDER.index(effort) > _EFFORT_ORDER.index(cap):
        changes["output_config"] = {**config, "effort": cap}
        notes.append(f"effort {effort} -> {cap}: thinking off needs it")


def _without_thinking_edits(body: dict[str, Any], changes: dict[str, Any]) -> None:
    """`context_management` without the edits that clear thinking blocks: they need thinking
    on. Claude Code sends {"type": "clear_thinking_20251015", "keep": "all"}."""
    management = body.get("context_management")
    if not isinstance(management, dict) or not isinstance(management.get("edits"), list):
        return
    edits = management["edits"]
    kept = [e for e in edits if not (isinstance(e, dict) and isinstance(e.get("type"), str)
                                     and e["type"].startswith(_THINKING_EDIT_PREFIX))]
    if len(kept) == len(edits):
        return
    rest = {k: v for k, v in management.items() if k != "edits"}
    changes["context_management"] = {**rest, "edits": kept} if kept or rest else None
