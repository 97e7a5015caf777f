"""Translation between the Anthropic Messages API and OpenAI Chat Completions.

Pure functions and incremental stream state machines; no I/O. A request translated one way
returns a `Translated` whose `tool_names` turns shortened tool names back in the answer; its
`dropped` names what the target could not take, with the short names of the two tables in
`claudex.providers.translate.drops` ("thinking", "cache_control", ...; `drops.listed` tells a
table name from a client's own key, e.g. for a metrics label).
"""

from __future__ import annotations

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
