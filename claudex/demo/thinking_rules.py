"""Anthropic's thinking rules, as an Anthropic-protocol fake provider enforces them.

A fake with a `signing_key` behaves like the real Messages API towards thinking:

- When a request turns thinking on, its answer starts with a thinking block whose `signature`
  only this fake can have made (an HMAC of a nonce and the block's text under the fake's key);
  "redact thinking" in the last user message makes it a `redacted_thinking` block instead.
  With `display: "omitted"` (Claude Code's) the thinking text is empty, as the real API's is.
- A thinking block whose signature it did not make, or whose text was changed, is refused:
  400 "messages.N.content.M: Invalid `signature` in `thinking` block" (`data` for
  redacted_thinking) — what the real API answers to another provider's block.
- With thinking on, a conversation in a tool-use loop whose last assistant turn does not start
  with a thinking block is refused with the API's own words ("Expected `thinking` or
  `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant`
  message must start with a thinking block ..."). Models that cannot turn thinking off (Opus
  5.5, Fable, Mythos) are not held to it: their API drops unreadable blocks itself.
- `thinking.type` values a model does not take are refused, per Anthropic's table
  (https://platform.claude.com/docs/en/build-with-claude/thinking-troubleshooting), and so is a
  `clear_thinking_*` context edit without thinking on (the fakes' reading of that rule).

Pure functions; `claudex.demo.fake_replies.plan_reply` calls them. This module is written
apart from claudex's own rewrite (`claudex.providers.thinking`) so that tests check one
against the other.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Any, Final

from claudex.demo.replies_common import ThinkingBlock

_DOCS: Final = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
_NONCE: Final = 12
_MAC: Final = 16


@dataclass(frozen=True)
class _Model:
    prefix: str
    default_on: bool
    refused: frozenset[str]          # thinking.type values answered with 400
    can_turn_off: bool = True        # False: thinking always runs
    disabled_max_effort: str | None = None


def _m(prefix: str, default_on: bool, *refused: str, can_turn_off: bool = True,
       disabled_max_effort: str | None = None) -> _Model:
    return _Model(prefix, default_on, frozenset(refused), can_turn_off, disabled_max_effort)


# First match wins (claude-opus-5-5 before claude-opus-5). "between_tools" is Sonnet 5.5's.
_MODELS: Final = (
    _m("claude-fable-5", True, "enabled", "disabled", "between_tools", can_turn_off=False),
    _m("claude-mythos-5", True, "enabled", "disabled", "between_tools", can_turn_off=False),
    _m("claude-mythos-preview", True, "disabled", "between_tools", can_turn_off=False),
    _m("claude-opus-5-5", True, "enabled", "disabled", "between_tools", can_turn_off=False),
    _m("claude-opus-5", True, "enabled", "between_tools", disabled_max_effort="high"),
    _m("claude-sonnet-5-5", True, "enabled", "disabled"),
    _m("claude-sonnet-5", True, "enabled", "between_tools"),
    _m("claude-opus-4-8", False, "enabled", "between_tools"),
    _m("claude-opus-4-7", False, "enabled", "between_tools"),
    _m("claude-opus-4-6", False, "between_tools"),
    _m("claude-sonnet-4-6", False, "between_tools"),
    _m("claude-opus-4-5", False, "adaptive", "between_tools"),
    _m("claude-sonnet-4-5", False, "adaptive", "between_tools"),
    _m("claude-haiku-4-5", False, "adaptive", "between_tools"),
    _m("claude-opus-4-1", False, "adaptive", "between_tools"),
)
_ANY_OTHER: Final = _m("", False)
_EFFORTS: Final = ("low", "medium", "high", "xhigh", "max")


def _echo(text: str) -> str:
    """A request's string quoted in an error: a lone surrogate has no UTF-8 form."""
    return text.encode("utf-8", "replace").decode()


def new_signing_key() -> bytes:
    return os.urandom(16)


def _model(name: Any) -> _Model:
    text = name.lower() if isinstance(name, str) else ""
    return next((m for m in _MODELS if text.startswith(m.prefix)), _ANY_OTHER)


def thinking_on(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    if thinking is None:
        return _model(body.get("model")).default_on
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


# ---------------------------------------------------------------- signing


def _mac(key: bytes, domain: bytes, nonce: bytes, text: str) -> bytes:
    return hmac.new(key, domain + nonce + text.encode("utf-8", "surrogatepass"),
                    hashlib.sha256).digest()[:_MAC]


def sign(key: bytes, text: str, *, redacted: bool = False) -> str:
    nonce = os.urandom(_NONCE)
    mac = _mac(key, b"redacted:" if redacted else b"thinking:", nonce, text)
    return base64.b64encode(nonce + mac).decode()


def verify(key: bytes, text: str, signed: Any, *, redacted: bool = False) -> bool:
    if not isinstance(signed, str):
        return False
    try:
        raw = base64.b64decode(signed, validate=True)
    except (binascii.Error, ValueError):
        return False
    if len(raw) != _NONCE + _MAC:
        return False
    domain = b"redacted:" if redacted else b"thinking:"
    return hmac.compare_digest(raw[_NONCE:], _mac(key, domain, raw[:_NONCE], text))


def thinking_block(body: dict[str, Any], key: bytes, provider: str,
                   prompt: str) -> ThinkingBlock | None:
    """The thinking block an answer to `body` starts with, signed with `key`; None when the
    request does not turn thinking on."""
    if not thinking_on(body):
        return None
    if "redact thinking" in prompt.lower():
        return ThinkingBlock("redacted_thinking", "", sign(key, "", redacted=True))
    thinking = body.get("thinking")
    omitted = isinstance(thinking, dict) and thinking.get("display") == "omitted"
    text = "" if omitted else f"Considering what {provider} should answer."
    return ThinkingBlock("thinking", text, sign(key, text))


# ---------------------------------------------------------------- refusals


def refusal(body: dict[str, Any], key: bytes) -> str | None:
    """Why the real API would refuse `body`'s thinking, in its words; None when it is fine."""
    return (_type_refusal(body) or _signature_refusal(body, key)
            or _final_turn_refusal(body) or _edit_refusal(body))


def _type_refusal(body: dict[str, Any]) -> str | None:
    thinking = body.get("thinking")
    if not isinstance(thinking, dict):
        return None
    kind = thinking.get("type")
    model = _model(body.get("model"))
    if kind == "adaptive" and kind in model.refused:
        return "adaptive thinking is not supported on this model"
    if isinstance(kind, str) and kind in model.refused:
        return (f'"thinking.type.{kind}" is not supported for this model. Use '
                '"thinking.type.adaptive" and "output_config.effort" to control thinking '
                "behavior.")
    config = body.get("output_config")
    effort = config.get("effort") if isinstance(config, dict) else None
    cap = model.disabled_max_effort
    if kind == "disabled" and cap and effort in _EFFORTS and \
            _EFFORTS.index(effort) > _EFFORTS.index(cap):
        return (f'"thinking.type.disabled" is not supported with effort "{effort}" for this '
                f'model. Use effort "{cap}" or lower.')
    return None


def _signature_refusal(body: dict[str, Any], key: bytes) -> str | None:
    for index, message in enumerate(body.get("messages") or ()):
        content = message.get("content") if isinstance(message, dict) else None
        for number, block in enumerate(content if isinstance(content, list) else ()):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "thinking" and not verify(key, str(block.get("thinking", "")),
                                                 block.get("signature")):
                return f"messages.{index}.content.{number}: Invalid `signature` in `thinking` block"
            if kind == "redacted_thinking" and not verify(key, "", block.get("data"),
                                                          redacted=True):
                return (f"messages.{index}.content.{number}: Invalid `data` in "
                        "`redacted_thinking` block")
    return None


def _final_turn_refusal(body: dict[str, Any]) -> str | None:
    if not thinking_on(body) or not _model(body.get("model")).can_turn_off:
        return None
    messages = [m for m in body.get("messages") or () if isinstance(m, dict)]
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    if last < 0:
        return None
    content = messages[last].get("content")
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    calls = any(b.get("type") == "tool_use" for b in blocks)
    answered = any(isinstance(m.get("content"), list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in m["content"])
        for m in messages[last + 1:] if m.get("role") == "user")
    first = blocks[0].get("type") if blocks else "text"
    first = _echo(first) if isinstance(first, str) else "text"
    if not (calls and answered) or first in ("thinking", "redacted_thinking"):
        return None
    return (f"messages.{last}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
            f"found `{first}`. When `thinking` is enabled, a final `assistant` message must "
            "start with a thinking block (preceeding the lastmost set of `tool_use` and "
            "`tool_result` blocks). We recommend you include thinking blocks from previous "
            "turns. To avoid this requirement, disable `thinking`. Please consult our "
            f"documentation at {_DOCS}")


def _edit_refusal(body: dict[str, Any]) -> str | None:
    management = body.get("context_management")
    edits = management.get("edits") if isinstance(management, dict) else None
    thinking = body.get("thinking")
    between = isinstance(thinking, dict) and thinking.get("type") == "between_tools"
    if thinking_on(body) or between or not isinstance(edits, list):
        return None
    for number, edit in enumerate(edits):
        kind = edit.get("type") if isinstance(edit, dict) else None
        if isinstance(kind, str) and kind.startswith("clear_thinking"):
            return (f"context_management.edits.{number}: `{_echo(kind)}` requires `thinking` to be "
                    "enabled")
    return None
