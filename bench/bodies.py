"""Request bodies shaped like Claude Code's, at the sizes its sessions reach.

Claude Code sends a long system prompt (in blocks, with `cache_control`), about two dozen tool
schemas, `metadata.user_id`, `thinking` and the whole conversation so far: user turns, assistant
turns with text and `tool_use` blocks, and `tool_result` blocks carrying file contents and command
output. A session starts near 20 KB and grows to hundreds of KB and past a megabyte. Every word
here is written by this module (a fixed vocabulary, a seeded generator): no real prompt is copied.

    claude_code_body(20_000)   -> bytes of about 20 KB (never less), deterministic
"""

from __future__ import annotations

import json
import random
from typing import Any

from bench.world import MODEL

_WORDS = (
    "the proxy forwards each request to the profile it addresses and fails over along its "
    "backups when a provider refuses answers slowly or breaks the stream before content file "
    "function module returns value config test breaker retry stream event token usage cache "
    "session prompt schema tool result error status header body JSON parse encode buffer "
    "socket latency budget queue limit worker thread async await import class method field "
    "read write edit search replace list directory path line column diff patch commit branch"
).split()

_TOOL_NAMES = (
    "Task", "Bash", "Glob", "Grep", "LS", "ExitPlanMode", "Read", "Edit", "MultiEdit", "Write",
    "NotebookEdit", "WebFetch", "TodoWrite", "WebSearch", "BashOutput", "KillShell",
    "SlashCommand", "AskUser", "ListMcpResources", "ReadMcpResource", "mcp__ide__getDiagnostics",
    "mcp__ide__executeCode", "Skill", "Plan",
)


def _prose(rng: random.Random, words: int) -> str:
    out = []
    for index in range(words):
        word = rng.choice(_WORDS)
        out.append(word.capitalize() if index % 14 == 0 else word)
        if index % 14 == 13:
            out[-1] += "."
    return " ".join(out)


def _code(rng: random.Random, lines: int) -> str:
    """Something like a file as the Read tool returns it: numbered lines of code."""
    rows = []
    for number in range(1, lines + 1):
        indent = "    " * rng.randint(0, 3)
        name, other = rng.choice(_WORDS), rng.choice(_WORDS)
        rows.append(f"{number:6d}\u2192{indent}{name}_{other} = {other}({rng.randint(0, 999)})")
    return "\n".join(rows)


def _tool(rng: random.Random, name: str) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for index in range(rng.randint(2, 5)):
        key = f"{rng.choice(_WORDS)}_{index}"
        kind = rng.choice(("string", "integer", "boolean", "array"))
        prop: dict[str, Any] = {"type": kind, "description": _prose(rng, rng.randint(4, 14))}
        if kind == "array":
            prop["items"] = {"type": "string"}
        props[key] = prop
    return {
        "name": name,
        "description": _prose(rng, rng.randint(12, 60)),
        "input_schema": {
            "type": "object",
            "properties": props,
            "required": list(props)[:2],
            "additionalProperties": False,
            "$schema": "http://json-schema.org/draft-07/schema#",
        },
    }


def _turn(rng: random.Random, index: int) -> list[dict[str, Any]]:
    """One round of the tool loop: the assistant calls a tool, the user turn brings its result."""
    call_id = f"toolu_bench{index:06d}"
    assistant = {"role": "assistant", "content": [
        {"type": "text", "text": _prose(rng, rng.randint(10, 60))},
        {"type": "tool_use", "id": call_id, "name": rng.choice(_TOOL_NAMES),
         "input": {"file_path": f"/work/project/{rng.choice(_WORDS)}.py",
                   "limit": rng.randint(50, 400)}},
    ]}
    result = _code(rng, rng.randint(20, 120)) if index % 3 else _prose(rng, rng.randint(40, 200))
    user = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call_id, "content": result},
    ]}
    return [assistant, user]


def claude_code_object(size: int, *, stream: bool = False, seed: int = 7,
                       text: str | None = None) -> dict[str, Any]:
    """A Messages request of at least `size` bytes once encoded compactly. `text` (when given)
    is the first user turn's text: the bench upstream reads its knobs from it."""
    rng = random.Random(seed)
    body: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 32000,
        "system": [
            {"type": "text", "text": "You are a coding assistant run by the bench."},
            {"type": "text", "text": _prose(rng, 500),
             "cache_control": {"type": "ephemeral"}},
        ],
        "tools": [_tool(rng, name) for name in _TOOL_NAMES],
        "metadata": {"user_id": "user_bench_account__session_0000"},
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": text or _prose(rng, 40)},
        ]}],
    }
    if stream:
        body["stream"] = True
    encoded = len(json.dumps(body, separators=(",", ":")).encode())
    index = 0
    while encoded < size:
        turn = _turn(rng, index)
        body["messages"].extend(turn)
        encoded += len(json.dumps(turn, separators=(",", ":")).encode())
        index += 1
    # The conversation ends on a user turn: a closing question after the last tool result.
    body["messages"][-1]["content"].append({"type": "text", "text": _prose(rng, 20)})
    return body


def claude_code_body(size: int, *, stream: bool = False, text: str | None = None) -> bytes:
    return json.dumps(claude_code_object(size, stream=stream, text=text),
                      separators=(",", ":")).encode()


SIZES = {"20KB": 20_000, "100KB": 100_000, "1MB": 1_000_000}
"""The Claude-Code-sized bodies `make bench` sends beside the small one."""
