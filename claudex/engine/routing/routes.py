"""`[routes]`: which route, if any, a request on a default route takes (DESIGN.md "Routes").

First match, in this order:
    long_context  the estimated prompt is over `long_context_tokens` (default 60,000)
    web_search    the request offers a `web_search*` server tool (Anthropic
                  `web_search_20250305`, Responses `web_search` / `web_search_preview`), or a
                  Chat Completions request asks for `web_search_options`
    thinking      thinking is on: Anthropic `thinking.type` "enabled" / "adaptive"; OpenAI
                  `reasoning_effort`, Responses `reasoning.effort`, other than "none"/"minimal"
    background    a haiku-family model: what Claude Code sends its background work to (titles,
                  topic checks, summaries)

claude-code-router (the Router most users know, src/utils/router.ts up to v1.0.64) checks the
same facts, in the order long context, background, web search, think; ours is DESIGN.md's.

Cheap on purpose: only the routes configured are looked at, and the prompt is estimated only
when its body is big enough to pass the threshold at all (`could_be_long`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from claudex.config.model import Protocol, RoutesSettings
from claudex.engine.routing.estimate import could_be_long, estimated_prompt_tokens

_NOT_THINKING: Final = frozenset({"none", "minimal"})


def route_of(protocol: Protocol, body: Mapping[str, Any], raw: bytes,
             routes: RoutesSettings) -> str | None:
    """The name of the first route that `body` (sent as `raw`) takes, or None."""
    if routes.long_context is not None and could_be_long(raw, routes.long_context_tokens) \
            and estimated_prompt_tokens(protocol, body) > routes.long_context_tokens:
        return "long_context"
    if routes.web_search is not None and offers_web_search(protocol, body):
        return "web_search"
    if routes.thinking is not None and thinking_on(protocol, body):
        return "thinking"
    if routes.background is not None and background_model(body.get("model")):
        return "background"
    return None


def offers_web_search(protocol: Protocol, body: Mapping[str, Any]) -> bool:
    if protocol == "openai" and body.get("web_search_options") is not None:
        return True  # Chat Completions' search models take it instead of a tool
    tools = body.get("tools")
    if not isinstance(tools, list):
        return False
    return any(isinstance(tool, dict) and isinstance(kind := tool.get("type"), str)
               and kind.startswith("web_search") for tool in tools)


def thinking_on(protocol: Protocol, body: Mapping[str, Any]) -> bool:
    if protocol == "anthropic":
        thinking = body.get("thinking")
        return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
    if protocol == "openai":
        effort = body.get("reasoning_effort")
    else:
        reasoning = body.get("reasoning")
        effort = reasoning.get("effort") if isinstance(reasoning, dict) else None
    return isinstance(effort, str) and effort not in _NOT_THINKING


def background_model(model: Any) -> bool:
    return isinstance(model, str) and "haiku" in model.lower()
