"""Translation between the Anthropic Messages API and OpenAI Chat Completions.

Pure functions and incremental stream state machines; no I/O. A request translated one way
returns a `Translated` whose `tool_names` turns shortened tool names back in the answer; its
`dropped` names what the target could not take, with the short names of the two tables in
`claudex.providers.translate.drops` ("thinking", "cache_control", ...; `drops.listed` tells a
table name from a client's own key, e.g. for a metrics label).

The names below are loaded when first asked for (PEP 562): a `claudex serve` whose clients and
providers speak one protocol never translates, and importing every module here at start held
~0.7 MB for the life of the process. A module that translates imports what it uses; the first
`tr.NAME` (or `from claudex.providers.translate import NAME`) imports NAME's module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # Submodules the engine reaches as `tr.from_responses`, `tr.to_responses` (loaded at use).
    from claudex.providers.translate import from_responses as from_responses
    from claudex.providers.translate import to_responses as to_responses
    from claudex.providers.translate.errors import translate_error
    from claudex.providers.translate.models import (
        anthropic_models_to_openai,
        models_list,
        openai_models_to_anthropic,
    )
    from claudex.providers.translate.requests import (
        DEFAULT_MAX_TOKENS,
        Translated,
        anthropic_to_openai_request,
        include_usage_requested,
        openai_to_anthropic_request,
    )
    from claudex.providers.translate.responses import (
        anthropic_to_openai_response,
        openai_to_anthropic_response,
    )
    from claudex.providers.translate.responses_client import (
        ResponsesRequest,
        ResponsesStream,
        refuse_stateful,
        responses_request,
    )
    from claudex.providers.translate.responses_client_reasoning import (
        ReasoningTap,
        encrypted_in_answer,
        without_foreign_reasoning,
    )
    from claudex.providers.translate.responses_client_stream import (
        failed_event as responses_failed_event,
    )
    from claudex.providers.translate.streams import AnthropicToOpenAIStream, OpenAIToAnthropicStream
    from claudex.providers.translate.tokens import estimate_input_tokens
    from claudex.providers.translate.tools import ToolNameMap

# Each public name -> the module (under this package) that defines it.
_WHERE: dict[str, tuple[str, str]] = {
    "translate_error": ("errors", "translate_error"),
    "anthropic_models_to_openai": ("models", "anthropic_models_to_openai"),
    "models_list": ("models", "models_list"),
    "openai_models_to_anthropic": ("models", "openai_models_to_anthropic"),
    "DEFAULT_MAX_TOKENS": ("requests", "DEFAULT_MAX_TOKENS"),
    "Translated": ("requests", "Translated"),
    "anthropic_to_openai_request": ("requests", "anthropic_to_openai_request"),
    "include_usage_requested": ("requests", "include_usage_requested"),
    "openai_to_anthropic_request": ("requests", "openai_to_anthropic_request"),
    "anthropic_to_openai_response": ("responses", "anthropic_to_openai_response"),
    "openai_to_anthropic_response": ("responses", "openai_to_anthropic_response"),
    "ResponsesRequest": ("responses_client", "ResponsesRequest"),
    "ResponsesStream": ("responses_client", "ResponsesStream"),
    "refuse_stateful": ("responses_client", "refuse_stateful"),
    "responses_request": ("responses_client", "responses_request"),
    "ReasoningTap": ("responses_client_reasoning", "ReasoningTap"),
    "encrypted_in_answer": ("responses_client_reasoning", "encrypted_in_answer"),
    "without_foreign_reasoning": ("responses_client_reasoning", "without_foreign_reasoning"),
    "responses_failed_event": ("responses_client_stream", "failed_event"),
    "AnthropicToOpenAIStream": ("streams", "AnthropicToOpenAIStream"),
    "OpenAIToAnthropicStream": ("streams", "OpenAIToAnthropicStream"),
    "estimate_input_tokens": ("tokens", "estimate_input_tokens"),
    "ToolNameMap": ("tools", "ToolNameMap"),
}


def __getattr__(name: str) -> Any:
    """A public name (or a submodule) imported at its first use, then kept here: later
    lookups are plain attribute reads."""
    where = _WHERE.get(name)
    if where is not None:
        value = getattr(importlib.import_module(f"{__name__}.{where[0]}"), where[1])
    elif not name.startswith("__"):
        try:
            value = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})


__all__ = [
    "DEFAULT_MAX_TOKENS",
    "AnthropicToOpenAIStream",
    "OpenAIToAnthropicStream",
    "ReasoningTap",
    "ResponsesRequest",
    "ResponsesStream",
    "ToolNameMap",
    "Translated",
    "anthropic_models_to_openai",
    "anthropic_to_openai_request",
    "anthropic_to_openai_response",
    "encrypted_in_answer",
    "estimate_input_tokens",
    "include_usage_requested",
    "models_list",
    "openai_models_to_anthropic",
    "openai_to_anthropic_request",
    "openai_to_anthropic_response",
    "refuse_stateful",
    "responses_failed_event",
    "responses_request",
    "translate_error",
    "without_foreign_reasoning",
]
