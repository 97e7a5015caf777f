"""A request's conversation (DESIGN.md "Conversations"): the session a client names, first
match, with a digest of the prompt's start — the same across turns, different for a subagent."""

from __future__ import annotations

import json
from typing import Any

from claudex.engine.core.conversation import conversation_of, session_of

SESSION = "0f3c2a4e-5b6d-4c7e-8f90-1a2b3c4d5e6f"


def claude_code(first: Any, *later: Any, system: str = "You are Claude Code.") -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": first}]
    for turn in later:
        messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": turn}]
    return {"model": "claude-sonnet-4-5", "system": [{"type": "text", "text": system}],
            "messages": messages}


def test_the_session_is_found_where_each_client_puts_it() -> None:
    assert session_of({"x-claude-code-session-id": SESSION}, {}) == SESSION
    current = json.dumps({"device_id": "d1", "account_uuid": "", "session_id": SESSION})
    assert session_of({}, {"metadata": {"user_id": current}}) == SESSION
    older = f"user_abc123_account_4f1e_session_{SESSION}"
    assert session_of({}, {"metadata": {"user_id": older}}) == SESSION
    assert session_of({"session_id": "codex-1"}, {"prompt_cache_key": "codex-2"}) == "codex-1"
    assert session_of({}, {"prompt_cache_key": "codex-2"}) == "codex-2"
    # First match: Claude Code's header over its metadata.
    assert session_of({"x-claude-code-session-id": "h"},
                      {"metadata": {"user_id": current}}) == "h"
    assert session_of({}, {"metadata": {"user_id": "{not json"}}) is None
    assert session_of({}, {"metadata": {"user_id": "plain-user"}}) is None


def test_turns_of_one_conversation_share_it_and_a_subagent_has_its_own() -> None:
    headers = {"x-claude-code-session-id": SESSION}
    first = conversation_of("anthropic", headers, claude_code(
        [{"type": "text", "text": "Fix the bug", "cache_control": {"type": "ephemeral"}}]))
    later = conversation_of("anthropic", headers, claude_code(
        [{"type": "text", "text": "Fix the bug"}], "run the tests", "thanks"))
    assert first == later and first.key.startswith(f"{SESSION}/")
    subagent = conversation_of("anthropic", headers, claude_code(
        "Search the repo for parse_config", system="You are a search agent."))
    assert subagent.session == first.session and subagent.key != first.key
    alone = conversation_of("anthropic", {}, claude_code("Fix the bug"))
    assert alone.session is None and alone.key == first.digest


def test_each_protocol_reads_its_own_system_prompt_and_first_message() -> None:
    chat = {"messages": [{"role": "system", "content": "Be brief."},
                         {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                         {"role": "assistant", "content": "Hello"}]}
    responses = {"instructions": "Be brief.", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}]}
    anthropic = {"system": "Be brief.", "messages": [{"role": "user", "content": "Hi"}]}
    digests = {conversation_of(protocol, {}, body).digest for protocol, body in (
        ("openai", chat), ("responses", responses), ("anthropic", anthropic))}
    assert len(digests) == 1  # the same start, whichever protocol carried it
    assert conversation_of("responses", {}, {"input": "Hi", "instructions": "Be brief."}) \
        .digest in digests
