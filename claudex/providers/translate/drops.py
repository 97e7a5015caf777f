"""What translation leaves out, in one place: a table per direction, one short stable name a row.
(Anthropic -> Responses is Anthropic -> OpenAI Chat, then Chat -> Responses: both tables apply.)

The names are what the request log, the console's request row and `/metrics` show
("dropped: thinking, cache_control, context_management"), so they stay short and do not change.
Translators record names through `Drops`, whose `add` takes only a `DropName`: mypy refuses a
name that is in neither table, so an ad-hoc string cannot creep into a log line.

Three kinds of thing no table can know, because a newer API version may add them at any time,
are named by the client's own key instead (`Drops.unknown`, cut to UNKNOWN_NAME_LIMIT
characters): an unrecognised top-level field (its key, e.g. "future_field"), content block or
part type ("content.<type>") and tool definition key ("tools.<key>"). `listed` tells them
apart, e.g. for a metrics label that must not take client-chosen values.

Values that change nothing (`n: 1`, `thinking: {"type": "disabled"}`, a null field) are left out
without being named; a system message moved to where the target accepts it is not dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Literal

DropName = Literal[
    # Responses client -> Chat Completions or Anthropic (`responses_client`; an Anthropic target
    # gets the Chat form through OpenAI -> Anthropic, whose table applies too)
    "web_search", "hosted_tools", "hosted_tool_calls", "custom_tool_format", "reasoning_items",
    "item_reference", "tool_output.non_text", "text.format", "include", "reasoning",
    "client_metadata", "truncation", "background", "max_tool_calls", "prompt",
    "prompt_cache_retention",
    # Anthropic -> OpenAI
    "thinking", "redacted_thinking", "cache_control", "citations", "top_k", "service_tier",
    "container", "mcp_servers", "context_management", "output_config.effort",
    "output_config.format", "output_config", "metadata.user_id", "metadata", "defer_loading",
    "server_tools", "server_tool_blocks", "system.non_text", "image_source", "document_source",
    "tool_result.non_text", "tool_choice", "malformed", "unknown_role",
    # OpenAI -> Anthropic (tool_choice, metadata, service_tier, malformed and unknown_role too)
    "n", "logprobs", "top_logprobs", "logit_bias", "presence_penalty", "frequency_penalty",
    "seed", "response_format", "audio", "modalities", "prediction", "reasoning_effort",
    "web_search_options", "functions", "function_call", "store", "verbosity",
    "prompt_cache_key", "safety_identifier", "temperature", "non_function_tools", "name",
    "function_messages", "empty_turn", "reasoning_content", "non_function_tool_calls",
    "tool_call_arguments", "image_url", "image_detail", "file", "input_audio",
    # OpenAI Chat -> Responses (an Anthropic request goes through the Chat form first, so its
    # own table applies before this one); several names above apply here too
    "stop", "max_tokens", "top_p", "user",
]

ANTHROPIC_TO_OPENAI: Final[Mapping[DropName, str]] = MappingProxyType({
    "thinking": "`thinking` settings (enabled, adaptive) and thinking blocks in the history: an "
                "OpenAI model takes neither, and a signature means something only to Anthropic",
    "redacted_thinking": "redacted thinking blocks: encrypted for Anthropic alone",
    "cache_control": "prompt-caching marks on blocks, system blocks and tools: OpenAI-compatible "
                     "servers cache by themselves or not at all",
    "citations": "citation settings of documents and citations on text blocks",
    "top_k": "OpenAI samples with top_p only",
    "service_tier": "Anthropic's capacity tiers mean nothing to another provider",
    "container": "a code-execution container: it lives inside Anthropic's API",
    "mcp_servers": "the MCP connector: Anthropic's API calls those servers itself",
    "context_management": "context editing (clear_thinking, clear_tool_uses) is done by "
                          "Anthropic's API; the conversation is sent as the client wrote it",
    "output_config.effort": "effort has a near relative in OpenAI's `reasoning_effort`, but "
                            "non-reasoning models and most compatible servers refuse that field",
    "output_config.format": "Anthropic's structured-output format",
    "output_config": "other output settings",
    "metadata.user_id": "not sent as OpenAI's `user`: Claude Code puts its device and session "
                        "ids there, meant for Anthropic, not for a third-party provider",
    "metadata": "other metadata keys",
    "defer_loading": "deferred tool loading (tool search) is Anthropic's; the tool is sent as "
                     "an ordinary function",
    "server_tools": "server tool definitions (web search, code execution, bash, text editor, "
                    "...): they run inside Anthropic's API",
    "server_tool_blocks": "server tool calls and their results in the history",
    "system.non_text": "non-text blocks in the system prompt or a system turn: an OpenAI system "
                       "message is text",
    "image_source": "an image whose source has no OpenAI form (a file id)",
    "document_source": "a document whose source has no OpenAI form (a URL, a file id, base64 "
                       "other than a PDF)",
    "tool_result.non_text": "blocks other than text and images inside a tool result",
    "tool_choice": "a tool_choice with no tools left to choose from, or of a kind OpenAI lacks",
    "malformed": "an entry that is not an object (validation normally refuses it first)",
    "unknown_role": "a message whose role is not user, assistant or system",
})

RESPONSES_TO_OTHERS: Final[Mapping[DropName, str]] = MappingProxyType({
    "web_search": "the hosted web_search tool (Codex CLI sends it): it runs inside OpenAI's "
                  "API, nowhere else",
    "hosted_tools": "other hosted tools (file_search, code_interpreter, image_generation, mcp, "
                    "computer use): they run inside OpenAI's API",
    "hosted_tool_calls": "hosted tool calls and their results in the history (web_search_call, "
                         "file_search_call, ...)",
    "custom_tool_format": "a custom tool's grammar: the tool is offered as a function taking "
                          "one free-form string",
    "reasoning_items": "reasoning items in the history: encrypted for, and meaningful to, the "
                       "Responses provider that produced them",
    "item_reference": "references to items stored at OpenAI: claudex keeps no history",
    "tool_output.non_text": "images and files in a function_call_output: a tool message "
                            "carries text",
    "text.format": "an output format other than text, json_schema or json_object",
    "include": "extra output OpenAI can attach (reasoning.encrypted_content, logprobs, ...)",
    "reasoning": "reasoning effort and summaries: no field every Chat Completions server or "
                 "Anthropic model takes",
    "client_metadata": "Codex CLI's session and turn ids, meant for OpenAI",
    "truncation": "OpenAI's automatic truncation of a conversation too long for the model",
    "background": "background responses: they are polled from OpenAI's store",
    "max_tool_calls": "a cap on hosted tool calls",
    "prompt": "a prompt template stored at OpenAI",
    "prompt_cache_retention": "OpenAI's prompt-cache retention setting",
    "prompt_cache_key": "OpenAI's cache routing key",
    "store": "`store: true`: claudex keeps no conversation state",
    "metadata": "metadata for stored responses",
    "service_tier": "OpenAI's processing tiers",
    "top_logprobs": "token log probabilities",
    "verbosity": "text.verbosity: no counterpart",
    "tool_choice": "a tool_choice with no tools left to choose from, or of a kind the target "
                   "lacks (allowed_tools, a hosted tool)",
    "system.non_text": "non-text parts of a system or developer message",
    "image_source": "an image given by file id: it lives in OpenAI's file store",
    "file": "a file given by id or URL rather than its data",
    "malformed": "an entry that is not an object (validation normally refuses it first)",
    "unknown_role": "a message whose role is not user, assistant, system or developer",
})

OPENAI_TO_ANTHROPIC: Final[Mapping[DropName, str]] = MappingProxyType({
    "n": "more than one choice: Anthropic answers with one",
    "logprobs": "token log probabilities: Anthropic gives none",
    "top_logprobs": "token log probabilities: Anthropic gives none",
    "logit_bias": "no counterpart",
    "presence_penalty": "no counterpart",
    "frequency_penalty": "no counterpart",
    "seed": "no counterpart",
    "response_format": "JSON mode and schemas: not translated",
    "audio": "audio output, or an earlier assistant turn's audio reference",
    "modalities": "output modalities other than text",
    "prediction": "predicted outputs",
    "reasoning_effort": "no field every Anthropic model takes (thinking budgets, adaptive "
                        "thinking and effort differ by model)",
    "web_search_options": "OpenAI's built-in web search",
    "functions": "the legacy `functions` list (use `tools`)",
    "function_call": "the legacy `function_call`, top level or in an assistant turn",
    "store": "storing completions at OpenAI",
    "metadata": "OpenAI's metadata for stored completions",
    "service_tier": "OpenAI's processing tiers",
    "verbosity": "no counterpart",
    "prompt_cache_key": "OpenAI's cache routing key",
    "safety_identifier": "dropped when `user` is also given: Anthropic takes one user id",
    "temperature": "a temperature above 1: Anthropic's range ends at 1, and it is not clamped",
    "tool_choice": "a tool_choice with no tools to choose from, or a kind Anthropic lacks "
                   "(allowed_tools)",
    "non_function_tools": "tools other than functions (custom tools)",
    "name": "the `name` of a message's author",
    "function_messages": "messages of the legacy `function` role",
    "empty_turn": "an empty user or assistant turn: Anthropic refuses one, and it said nothing",
    "reasoning_content": "reasoning text of earlier assistant turns (DeepSeek style)",
    "non_function_tool_calls": "tool calls other than function calls",
    "tool_call_arguments": "tool call arguments that are not a JSON object: sent as {}",
    "image_url": "an image part without a usable URL (a data URL that is not base64)",
    "image_detail": "the `detail` of an image",
    "file": "a file part other than a base64 PDF (file ids live in OpenAI's file store)",
    "input_audio": "audio input",
    "malformed": "an entry that is not an object (validation normally refuses it first)",
    "unknown_role": "a message whose role Anthropic has no counterpart for",
})

CHAT_TO_RESPONSES: Final[Mapping[DropName, str]] = MappingProxyType({
    "stop": "stop sequences: the Responses API has none",
    "max_tokens": "the output cap, at the ChatGPT (Codex) backend, which refuses "
                  "`max_output_tokens`",
    "temperature": "at the ChatGPT (Codex) backend, which refuses sampling settings",
    "top_p": "at the ChatGPT (Codex) backend, which refuses sampling settings",
    "user": "end-user ids and request metadata, at the ChatGPT (Codex) backend",
    "metadata": "request metadata, at the ChatGPT (Codex) backend",
    "service_tier": "processing tiers, at the ChatGPT (Codex) backend",
    "store": "`store: true`: claudex keeps no conversation state, so every request is whole "
             "and sent with `store: false`",
    "n": "more than one choice: a response has one output",
    "logprobs": "token log probabilities (the Responses API has them under `include`, not "
                "translated)",
    "logit_bias": "no counterpart",
    "presence_penalty": "no counterpart",
    "frequency_penalty": "no counterpart",
    "seed": "no counterpart",
    "audio": "audio output, or an earlier assistant turn's audio reference",
    "modalities": "output modalities other than text",
    "prediction": "predicted outputs",
    "web_search_options": "Chat's built-in web search options",
    "functions": "the legacy `functions` list (use `tools`)",
    "function_call": "the legacy `function_call`, top level or in an assistant turn",
    "function_messages": "messages of the legacy `function` role",
    "non_function_tools": "tools other than functions (custom tools)",
    "non_function_tool_calls": "tool calls other than function calls in the history",
    "tool_choice": "a tool_choice with no tools to choose from, or an allowed_tools subset",
    "reasoning_content": "reasoning text of earlier assistant turns (DeepSeek style)",
    "input_audio": "audio input",
    "file": "a file part with neither data nor a file id",
    "image_url": "an image part without a URL",
    "malformed": "an entry that is not an object (validation normally refuses it first)",
    "unknown_role": "a message whose role the Responses API has no counterpart for",
})

UNKNOWN_NAME_LIMIT = 64
_LISTED: Final[frozenset[str]] = (frozenset(ANTHROPIC_TO_OPENAI) | frozenset(OPENAI_TO_ANTHROPIC)
                                  | frozenset(CHAT_TO_RESPONSES))


def listed(name: str) -> bool:
    """Whether `name` is a row of a table (not a client's key named by `Drops.unknown`)."""
    return name in _LISTED or name in RESPONSES_TO_OTHERS


class Drops:
    """The ordered set of what one translation left out."""

    def __init__(self) -> None:
        self._names: dict[str, None] = {}

    def add(self, name: DropName) -> None:
        self._names.setdefault(name, None)

    def unknown(self, name: str) -> None:
        """Something no table can know (a newer API's field or block type): its own name."""
        self._names.setdefault(name[:UNKNOWN_NAME_LIMIT], None)

    def field(self, key: str, table: Mapping[DropName, str]) -> None:
        """A top-level field the target cannot take: its table row, or its own key."""
        if key in table:
            self._names.setdefault(key, None)
        else:
            self.unknown(key)

    def __bool__(self) -> bool:
        return bool(self._names)

    def as_tuple(self) -> tuple[str, ...]:
        return tuple(self._names)
