"""Scripted replies: a fake provider drives a real client (Claude Code) through a tool loop.

A conversation whose first user message carries the marker `claudex-e2e:TOKEN` follows the
script written in that same message, one line per step:

    claudex-e2e:TOKEN
    step: Write /absolute/path/proof.txt
    step: Bash curl -s -X POST http://127.0.0.1:PORT/_fake/fault -d '{"mode": "500"}'

Each answer is one step: `Write PATH` calls the client's `Write` tool with `file_path` PATH and
`content` TOKEN; `Bash COMMAND` calls its `Bash` tool with that command (which is how a script
changes the world in the middle of a session: a fault switched on, a breaker reset). After the
last step the answer is the text `done TOKEN`.

The script is stateless: the step to answer with is the number of tool results the conversation
already holds, so whichever provider receives the conversation (after a failover too, in either
protocol) continues where the last one stopped. The tools are looked up by name among those the
request offers; one that is missing, or a tool result reporting an error, ends the script with a
text that says so, so the client prints it. A request that offers no tools at all (a client's
side request, such as a title) is not part of the loop and gets the ordinary answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal

from claudex.demo.replies_common import ToolCall, dumps

__all__ = ["MARKER", "Step", "next_step", "script_prompt"]

MARKER: Final = "claudex-e2e:"
CODEX_SHELL: Final = "exec_command"
"""Codex CLI's shell tool: a `Bash` step calls it when the request offers no `Bash`."""
_MARKER_RE: Final = re.compile(re.escape(MARKER) + r"([A-Za-z0-9_-]{1,64})")
_STEP_RE: Final = re.compile(r"^step: (Write|Bash) (.+)$", re.MULTILINE)
_TOOL_ERROR: Final = "<tool_use_error>"  # how Claude Code marks a failed tool's result

Protocol = Literal["anthropic", "openai"]


@dataclass(frozen=True, slots=True)
class Step:
    """One answer of the script: a tool call, or else the words of a text answer."""

    tool_call: ToolCall | None
    words: tuple[str, ...] = ()


def script_prompt(token: str, steps: list[tuple[str, str]]) -> str:
    """The prompt that starts a script: `steps` are (tool, argument) pairs, `Write`/`Bash`."""
    lines = [f"{MARKER}{token}",
             "This is a scripted end-to-end run of claudex: the provider follows these steps."]
    for tool, argument in steps:
        if tool not in ("Write", "Bash") or "\n" in argument:
            raise ValueError(f"a step is Write PATH or Bash COMMAND on one line, not {tool!r}")
        lines.append(f"step: {tool} {argument}")
    return "\n".join(lines)


def next_step(protocol: Protocol, body: dict[str, Any], reply_id: str) -> Step | None:
    """The scripted answer to this request, or None when the conversation follows no script
    (or offers no tools)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    # The first user message holding the marker: Codex CLI sends its environment context as
    # a user message before the prompt.
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            text = "\n".join(_texts(message.get("content")))
            marker = _MARKER_RE.search(text)
            if marker is not None:
                break
    else:
        return None
    offered = _offered_tool_names(protocol, body.get("tools"))
    if not offered:
        return None
    token = marker.group(1)
    steps = _STEP_RE.findall(text)
    results = list(_tool_results(protocol, messages))
    if results and results[-1][1]:
        return _say("script stopped: step", str(len(results)), "failed:", results[-1][0][:200])
    done = len(results)
    if done >= len(steps):
        return _say("done", token)
    tool, argument = steps[done]
    if tool == "Bash" and tool not in offered and CODEX_SHELL in offered:
        # Codex CLI's shell: `exec_command` with a `cmd` string (0.171.0).
        return Step(ToolCall(id="call_" + reply_id, name=CODEX_SHELL,
                             arguments=dumps({"cmd": argument.strip()})))
    if tool not in offered:
        return _say("script error: the request offers no", tool, "tool; it offers",
                    ", ".join(sorted(offered)) + ".")
    arguments: dict[str, str]
    if tool == "Write":
        arguments = {"file_path": argument.strip(), "content": token}
    else:
        arguments = {"command": argument.strip(), "description": f"claudex e2e step {done + 1}"}
    prefix = "toolu_01" if protocol == "anthropic" else "call_"
    return Step(ToolCall(id=prefix + reply_id, name=tool, arguments=dumps(arguments)))


def _say(*words: str) -> Step:
    return Step(None, tuple(" ".join(words).split(" ")))


def _texts(content: Any) -> Iterator[str]:
    """The text of a message's content: a string, or its text blocks / parts."""
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                text = part.get("text")
                if isinstance(text, str):
                    yield text


def _offered_tool_names(protocol: Protocol, tools: Any) -> set[str]:
    names: set[str] = set()
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict):
            continue
        entry = tool.get("function") if protocol == "openai" else tool
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            names.add(entry["name"])
    return names


def _tool_results(protocol: Protocol, messages: list[Any]) -> Iterator[tuple[str, bool]]:
    """Each tool result in the conversation, in order: (its text, whether it reports an error)."""
    for message in messages:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if protocol == "openai":
            if message.get("role") == "tool":
                text = "\n".join(_texts(content))
                yield text, _TOOL_ERROR in text
            continue
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                text = "\n".join(_texts(block.get("content")))
                yield text, block.get("is_error") is True or _TOOL_ERROR in text
