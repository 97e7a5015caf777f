"""Why thinking went off, as it was found (issue 23, item 7): qwen-code keeps thinking on and
sends its history without thinking blocks although one provider served every turn, so the note
says the history has none, not that another provider served the turn; a block another provider
signed, dropped, still says that. Through the proxy and an Anthropic fake that keeps the
thinking rules."""

from __future__ import annotations

from typing import Any

from tests.conftest import build_config, profile_toml

THINKING_ON = {"type": "enabled", "budget_tokens": 2048}


def tool_loop(assistant_content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "List the files."},
        {"role": "assistant", "content": assistant_content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": "a.py b.py"}]},
    ]


TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
TOOLS = [{"name": "Bash", "input_schema": {"type": "object"}}]


async def request_notes(proxy: Any, messages: list[dict[str, Any]]) -> list[str]:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 4096, "thinking": THINKING_ON,
            "tools": TOOLS, "messages": messages}
    resp = await proxy.messages(body)
    assert resp.status_code == 200, resp.text
    [event] = [e for e in proxy.engine.events.since(0, {"request"})
               if e.data["request_id"] == resp.headers["x-claudex-request-id"]]
    assert "thinking" in event.message
    return list(event.data["notes"])


async def test_a_history_without_thinking_blocks_is_said_so(fakes: Any,
                                                           proxy_factory: Any) -> None:
    f = await fakes(("qwen", "anthropic"))
    proxy = await proxy_factory(build_config(profile_toml("qwen", f["qwen"])), fakes=f)
    notes = await request_notes(proxy, tool_loop([{"type": "text", "text": "Listing."},
                                                  TOOL_USE]))
    assert notes == ["thinking off: the history has no thinking block before the last tool use"]
    sent = f["qwen"].requests[-1].json
    assert "thinking" not in sent  # claude-sonnet-4-5 takes thinking left out as off


async def test_a_block_signed_elsewhere_is_said_to_be_served_elsewhere(
        fakes: Any, proxy_factory: Any) -> None:
    f = await fakes(("a", "anthropic"), ("b", "anthropic"))
    proxy = await proxy_factory(build_config(profile_toml("a", f["a"])
                                             + profile_toml("b", f["b"])), fakes=f)
    # b answers first and signs its thinking; then the loop goes on at a.
    first = {"model": "claude-sonnet-4-5", "max_tokens": 4096, "thinking": THINKING_ON,
             "tools": TOOLS, "messages": [{"role": "user", "content": "List the files. "
                                                                      "use tool Bash"}]}
    answer = (await proxy.messages(first, profile="b")).json()
    assert answer["content"][0]["type"] == "thinking"
    messages = [first["messages"][0], {"role": "assistant", "content": answer["content"]},
                {"role": "user", "content": [{"type": "tool_result",
                                              "tool_use_id": answer["content"][-1]["id"],
                                              "content": "a.py"}]}]
    notes = await request_notes(proxy, messages)
    assert notes == ["dropped: thinking (signed by b)",
                     "thinking off: last tool-use turn served elsewhere"]
