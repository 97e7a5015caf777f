"""What translating for a Responses API client costs, per request and per stream event.

    python -m bench.responses_translate

The request is shaped like Codex CLI 0.171.0's second turn (a long developer prompt, a dozen
function tools and a namespace, web_search, a shell call and its output: ~40 KB); the streams
are text deltas from a Chat Completions and from an Anthropic upstream. Pure CPU, no sockets:
the proxy's own overhead is `make bench`.
"""

from __future__ import annotations

import json
import time
from typing import Any

from claudex.providers.translate import responses_request

_SCHEMA = {"type": "object", "properties": {
    f"arg{i}": {"type": "string", "description": "An argument of the tool. " * 8}
    for i in range(6)}}


def codex_like_body() -> dict[str, Any]:
    tools: list[dict[str, Any]] = [
        {"type": "function", "name": f"tool_{i}", "description": "Does a thing. " * 40,
         "strict": False, "parameters": _SCHEMA} for i in range(11)]
    tools.append({"type": "namespace", "name": "multi_agent_v1", "description": "Agents.",
                  "tools": [{"type": "function", "name": f"agent_{i}", "parameters": _SCHEMA}
                            for i in range(5)]})
    tools.append({"type": "web_search", "external_web_access": False})
    return {
        "model": "gpt-5.1-codex", "stream": True, "store": False, "tool_choice": "auto",
        "parallel_tool_calls": True, "reasoning": {"summary": "auto"},
        "include": ["reasoning.encrypted_content"], "prompt_cache_key": "s",
        "tools": tools,
        "input": [
            {"type": "message", "role": "developer",
             "content": [{"type": "input_text", "text": "You are a coding agent. " * 600}]},
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": "make the proof file"}]},
            {"type": "function_call", "call_id": "call_1", "name": "tool_0",
             "arguments": "{\"arg0\": \"ls\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "a\nb\n" * 50},
        ],
    }


def _per_call(fn: Any, n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - started) / n


def main() -> None:
    raw = json.dumps(codex_like_body()).encode()
    for target in ("openai", "anthropic"):
        def translate(target: str = target) -> None:
            plan = responses_request(json.loads(raw), target=target,  # type: ignore[arg-type]
                                     model="m", max_tokens_cap=None)
            json.dumps(plan.body)
        print(f"request ({len(raw) / 1024:.0f} KB) -> {target}: "
              f"{_per_call(translate, 300) * 1000:.2f} ms")
    chat = responses_request({"model": "m", "input": "x", "stream": True}, target="openai",
                             model="m", max_tokens_cap=None).stream(model="m")
    delta = (b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hello "},'
             b'"finish_reason":null}]}\n\n')
    print(f"chat stream -> responses: {_per_call(lambda: chat.feed(delta), 20000) * 1e6:.1f} "
          "us per text delta")
    anth = responses_request({"model": "m", "input": "x", "stream": True}, target="anthropic",
                             model="m", max_tokens_cap=None).stream(model="m")
    anth.feed(b'event: message_start\ndata: {"type":"message_start","message":{"id":"m",'
              b'"usage":{}}}\n\nevent: content_block_start\ndata: {"type":"content_block_start",'
              b'"index":0,"content_block":{"type":"text","text":""}}\n\n')
    text = (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
            b'"delta":{"type":"text_delta","text":"hello "}}\n\n')
    print(f"anthropic stream -> responses: {_per_call(lambda: anth.feed(text), 20000) * 1e6:.1f}"
          " us per text delta")


if __name__ == "__main__":
    main()
