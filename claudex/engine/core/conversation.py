"""Which conversation a request belongs to (DESIGN.md "State that spans requests": Conversations).

A conversation is its client's session, when the client names one, together with a digest of
how the conversation starts — its system prompt and first user message:

- the session, first match: header `x-claude-code-session-id` (Claude Code); `metadata.user_id`'s
  `session_id` (current Claude Code sends a JSON string `{"device_id": ..., "session_id": ...}`,
  older versions `user_<hash>_account_<uuid>_session_<uuid>`); Codex's `session_id` header,
  else the body's `prompt_cache_key`;
- the digest: of the text of the system prompt (Anthropic `system`, OpenAI `system` /
  `developer` messages before the first user turn, Responses `instructions`) and of the first
  user message. Only text is read: Claude Code moves `cache_control` markers from turn to turn,
  and a marker must not make a new conversation of an old one.

Claude Code's subagents share their parent's session id but not its prompt (and so not its
prompt cache): with the digest they are conversations of their own. No session id: the digest
alone.

Pure functions of one request, shared by what remembers things per conversation (pools' sticky
bindings, the `[router]` classifier's answers). Cost: one pass over the system prompt and first
message, each read up to `_READ_LIMIT` characters, and one BLAKE2b digest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from claudex.config.model import Protocol

_READ_LIMIT: Final = 64 * 1024
"""Characters of the system prompt and of the first user message that go into the digest: a
prompt that starts the same for 64 KiB is the same prompt, for a cache as for us."""
_SESSION_LIMIT: Final = 200
"""A session id longer than this is cut: ids are uuids, a client sending a novel is wrong."""


@dataclass(frozen=True)
class Conversation:
    session: str | None   # the client's session id, when it names one
    digest: str           # 16 hex digits of the prompt's start

    @property
    def key(self) -> str:
        """One string naming the conversation (`SESSION/DIGEST`, or the digest alone)."""
        return f"{self.session}/{self.digest}" if self.session else self.digest


def conversation_of(protocol: Protocol, headers: Mapping[str, str],
                    body: Mapping[str, Any]) -> Conversation:
    """The conversation of a request in the client's `protocol` (`headers` as received, names
    lowercased as the server hands them over)."""
    return Conversation(session_of(headers, body), prompt_digest(protocol, body))


def session_of(headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
    """The session the client names, or None (see the module docstring for the order)."""
    header = headers.get("x-claude-code-session-id")
    if header and header.strip():
        return header.strip()[:_SESSION_LIMIT]
    metadata = body.get("metadata")
    if isinstance(metadata, dict):
        found = _session_in_user_id(metadata.get("user_id"))
        if found:
            return found[:_SESSION_LIMIT]
    codex = headers.get("session_id")
    if codex and codex.strip():
        return codex.strip()[:_SESSION_LIMIT]
    key = body.get("prompt_cache_key")
    if isinstance(key, str) and key.strip():
        return key.strip()[:_SESSION_LIMIT]
    return None


def _session_in_user_id(user_id: Any) -> str | None:
    if not isinstance(user_id, str) or not user_id:
        return None
    if user_id.startswith("{"):  # current Claude Code: a JSON object as a string
        try:
            parsed = json.loads(user_id)
        except ValueError:
            return None
        session = parsed.get("session_id") if isinstance(parsed, dict) else None
        return session if isinstance(session, str) and session else None
    _, marker, session = user_id.rpartition("_session_")  # older: ..._session_<uuid>
    return session if marker and session else None


def prompt_digest(protocol: Protocol, body: Mapping[str, Any]) -> str:
    """16 hex digits of the text of the system prompt and the first user message."""
    system, first = prompt_start(protocol, body)
    digest = hashlib.blake2b(digest_size=8)
    digest.update(system.encode("utf-8", "surrogatepass"))
    digest.update(b"\x00")
    digest.update(first.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def prompt_start(protocol: Protocol, body: Mapping[str, Any],
                 limit: int = _READ_LIMIT) -> tuple[str, str]:
    """The text of the system prompt and of the first user message, each up to `limit`
    characters ("" where there is none)."""
    if protocol == "responses":
        return _bounded(_texts(body.get("instructions")), limit), \
            _bounded(_first_user_texts(body.get("input"), responses=True), limit)
    if protocol == "anthropic":
        return _bounded(_texts(body.get("system")), limit), \
            _bounded(_first_user_texts(body.get("messages")), limit)
    return _bounded(_openai_system_texts(body.get("messages")), limit), \
        _bounded(_first_user_texts(body.get("messages")), limit)


def _bounded(parts: Iterator[str], limit: int) -> str:
    out: list[str] = []
    size = 0
    for part in parts:
        out.append(part[: limit - size])
        size += len(out[-1])
        if size >= limit:
            break
    return "\n".join(out)


def _texts(content: Any) -> Iterator[str]:
    """The text of a content value in any of the three protocols: a string, or a list of
    blocks / parts with a `text` (Anthropic `text`, OpenAI `text`, Responses `input_text`)."""
    if isinstance(content, str):
        yield content
        return
    if not isinstance(content, list):
        return
    for block in content:
        if isinstance(block, str):
            yield block
        elif isinstance(block, dict):
            text = block.get("text")
            if isinstance(text, str):
                yield text


def _first_user_texts(messages: Any, *, responses: bool = False) -> Iterator[str]:
    if responses and isinstance(messages, str):  # Responses `input` may be a plain string
        yield messages
        return
    if not isinstance(messages, list):
        return
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            yield from _texts(message.get("content"))
            return


def _openai_system_texts(messages: Any) -> Iterator[str]:
    if not isinstance(messages, list):
        return
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "user":
            return
        if role in ("system", "developer"):
            yield from _texts(message.get("content"))


def first_turn(protocol: Protocol, body: Mapping[str, Any]) -> bool:
    """Whether a request starts its conversation: nothing the model said (an assistant turn,
    a tool call or its output) is in it yet, and it continues no stored response."""
    if protocol == "responses":
        if body.get("previous_response_id"):
            return False
        items = body.get("input")
        if not isinstance(items, list):
            return True
        return not any(isinstance(item, dict) and (item.get("role") == "assistant" or item.get(
            "type") in ("function_call", "function_call_output", "reasoning")) for item in items)
    messages = body.get("messages")
    if not isinstance(messages, list):
        return True
    return not any(isinstance(m, dict) and m.get("role") in ("assistant", "tool")
                   for m in messages)
