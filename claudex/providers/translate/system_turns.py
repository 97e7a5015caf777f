"""System messages inside the conversation, kept where they were as far as each API allows.

Anthropic takes `{"role": "system"}` turns inside `messages` ("mid-conversation system
messages"; Claude Code sends its environment and reminders that way), OpenAI takes `system` and
`developer` messages anywhere. Each keeps its place in translation, except where the target
would refuse it there:

- OpenAI refuses anything between an assistant message's `tool_calls` and its `tool` messages,
  so a system message there moves to just after the last of those tool messages.
- Anthropic takes a system turn only right after a user turn, and only as the last message or
  right before an assistant turn (never first, never beside another system turn). So a system
  message waits for the next assistant turn and goes in just before it when a user turn
  precedes it (or at the end, after a user turn); several waiting together become one turn.
  One that cannot be placed so (it would follow an assistant turn) joins the top-level
  `system` after the leading system prompt, where every model takes it.
- Only some Anthropic models take system turns at all: the others answer 400 "role 'system' is
  not supported on this model" (anthropics/claude-code#61412), which claudex never fails over.
  Anthropic's documentation names Claude Opus 4.8 and later Opus models, Fable 5 and Mythos 5
  ("not Claude Sonnet 5"; Claude Code 2.1.201 stopped sending them to Sonnet 5 sessions), and
  testers of the live API found Opus 4.1-4.7, Sonnet 4.x and Haiku 4.x refusing them. For every
  other model, and for non-Claude models behind Anthropic-compatible servers, the turns join the
  top-level `system` instead: a model that can take them loses only their position, one that
  cannot would lose the whole request.

Adjacent system messages are joined into one, as the leading system prompt already is: several
in a row say nothing more than one, and not every OpenAI-compatible server takes a run of them.
"""

from __future__ import annotations

import re
from typing import Any

from claudex.providers.translate.content import note_block_extras
from claudex.providers.translate.drops import Drops

TEXT_JOINER = "\n\n"

# "claude-<family>-<major>[-<minor>]" anywhere in the name (Bedrock and Vertex ids wrap it);
# a minor of three or more digits is a date, not a version.
_CLAUDE_MODEL = re.compile(r"claude-(?P<family>opus|sonnet|haiku|fable|mythos)-(?P<major>\d+)"
                           r"(?:[-.](?P<minor>\d{1,2})(?!\d))?")
_FIRST_SYSTEM_TURN_OPUS = (4, 8)


def supports_system_turns(model: Any) -> bool:
    """Whether an Anthropic model takes `role: "system"` turns inside `messages` (see above:
    the ones known to; an unknown model gets the top-level `system`, which every model takes)."""
    if not isinstance(model, str):
        return False
    match = _CLAUDE_MODEL.search(model.lower())
    if match is None:
        return False
    family = match["family"]
    if family in ("fable", "mythos"):
        return True
    if family != "opus":
        return False
    version = (int(match["major"]), int(match["minor"] or 0))
    return version >= _FIRST_SYSTEM_TURN_OPUS


# -- Anthropic -> OpenAI ---------------------------------------------------------------------

def anthropic_system_text(content: Any, drops: Drops) -> str:
    """The text of a system prompt or system turn: a string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "text":
            note_block_extras(block, drops)
            texts.append(str(block.get("text", "")))
        else:
            drops.add("system.non_text")
    return TEXT_JOINER.join(texts)


def settle_openai_system_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Move system messages out of the gap between `tool_calls` and their tool messages, then
    join adjacent ones."""
    moved: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    awaiting_results = False
    for message in messages:
        role = message["role"]
        if awaiting_results and role == "system":
            held.append(message)
            continue
        if awaiting_results and role == "tool":
            moved.append(message)
            continue
        moved += held
        held = []
        moved.append(message)
        awaiting_results = role == "assistant" and bool(message.get("tool_calls"))
    moved += held
    out: list[dict[str, Any]] = []
    for message in moved:
        if message["role"] == "system" and out and out[-1]["role"] == "system":
            out[-1] = {"role": "system",
                       "content": out[-1]["content"] + TEXT_JOINER + message["content"]}
        else:
            out.append(message)
    return out


# -- OpenAI -> Anthropic ---------------------------------------------------------------------

def place_anthropic_system_turns(
    system: list[dict[str, Any]], messages: list[dict[str, Any]], model: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`messages` holds system turns (`content` a string) where the OpenAI conversation had
    them; returns (top-level system blocks, messages) with each where Anthropic takes it."""
    in_place = supports_system_turns(model)
    system = list(system)
    out: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []

    def settle() -> None:
        if not held:
            return
        if in_place and out and out[-1]["role"] == "user":
            out.append({"role": "system", "content": held[0]["text"]} if len(held) == 1
                       else {"role": "system", "content": list(held)})
        else:
            system.extend(held)
        held.clear()

    for message in messages:
        if message["role"] == "system":
            held.append({"type": "text", "text": message["content"]})
            continue
        if message["role"] == "assistant":
            settle()
        out.append(message)
    settle()
    return system, out

