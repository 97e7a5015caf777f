"""Reading a provider's context window out of the 400 it answers when a conversation is too long
for it (DESIGN.md failure table: "400 stating the context window").

A long Claude Code conversation (100k tokens and more) failed over to a backup with a smaller
window is refused there; the next backup may hold it. Each provider words the refusal its own
way. The wordings below were confirmed in public reports of real answers (the source named
beside each); the number captured is the window (prompt and completion together, as most
providers count it):

    OpenAI       This model's maximum context length is 8192 tokens. However, your messages
                 resulted in 8227 tokens. ... code "context_length_exceeded"
                 (crewAIInc/crewAI-examples#121, chathub-dev/chathub#126; the "However, you
                 requested N tokens (P in the messages, C in the completion)" form:
                 The-Vibe-Company/quivr#505)
    DeepSeek     the same sentence, code "invalid_request_error" (FoundationAgents/OpenManus#79,
                 anomalyco/models.dev#1295: 131072 for deepseek-chat)
    vLLM         the same sentence (ruipeterpan/specreason#4); newer: "The decoder prompt
                 (length 163840) is longer than the maximum model length of 131072"
                 (thu-coai/Glyph#9)
    OpenRouter   This endpoint's maximum context length is 131072 tokens. However, you
                 requested about 141607 tokens (...) (Aider-AI/aider#3721, OpenHands#9937)
    Anthropic    prompt is too long: 200082 tokens > 200000 maximum
                 (RipperTs/claude-code-relay#23, anthropics/claude-code#7866); with the output:
                 input length and `max_tokens` exceed context limit: 189136 + 20000 > 204648
                 (anthropics/claude-code#408, continuedev/continue#6080)
    xAI (grok)   This model's maximum prompt length is 131072 but the request contains 136973
                 tokens. (cline/cline#3120)
    Gemini       The input token count (132478) exceeds the maximum number of tokens allowed
                 (131072). (google-gemini/gemini-cli#4118, #4231: the native API; that its
                 OpenAI-compatible endpoint words it the same is NOT confirmed)
    Mistral      Prompt contains 321774 tokens and 0 draft tokens, too large for model with
                 262144 maximum context length (quoted with docs.mistral.ai's "known
                 limitations" as its source in other clients' tests; no first-hand report found)
    Kimi         Your request exceeded model token limit: 262144 (requested: 275363)
                 (multica-ai/multica#4130)
    OpenAI Responses  Your input exceeds the context window of this model. Please adjust your
                 input and try again. code "context_length_exceeded", no size
                 (anomalyco/opencode#6071, dyad-sh/dyad#1672). Streamed, it comes inside a
                 200 stream before any content, as `response.failed` with that code in
                 `response.error` (openai/codex codex-rs/codex-api/src/sse/responses.rs,
                 context_window_error_is_fatal) or an `error` event (OpenAI's
                 ResponseErrorEvent: code, message, param; the-open-agent/openagent#2344):
                 engine/core/streaming.py reads the event's message and chunk here too
    llama.cpp    the request exceeds the available context size, try increasing it; type
                 "exceed_context_size_error" with "n_ctx" beside the message
                 (ggml-org/llama.cpp PR 15780, oobabooga/textgen#7257)

Wordings that say the window was exceeded without its size (Groq: "Please reduce the length of
the messages or completion." with code "context_length_exceeded", thepersonalaicompany/amurex-
backend#51; Ollama's "prompt too long; exceeded max context length by N tokens", whose N is the
excess, seen only in other clients' tests) count as a context refusal with no window stated:
the caller remembers the request's own estimate instead. Ollama by default truncates a long
prompt silently (ollama/ollama#7661) and then answers nothing to recognise.

A max_tokens range ("valid range of max_tokens is [1, 8192]") is not a context window: that is
`limits.stated_max_tokens`, read before this.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_N = r"(\d[\d,]*)"
# Each captures the window.
_STATED = (
    re.compile(rf"maximum context length is {_N} tokens", re.IGNORECASE),       # OpenAI & co
    re.compile(rf"prompt is too long: {_N} tokens > {_N} maximum", re.IGNORECASE),  # Anthropic
    re.compile(rf"maximum prompt length is {_N}", re.IGNORECASE),                # xAI
    re.compile(rf"exceeds the maximum number of tokens allowed \({_N}\)", re.IGNORECASE),
    re.compile(rf"too large for model with {_N} maximum context length", re.IGNORECASE),
    re.compile(rf"longer than the maximum model length of {_N}", re.IGNORECASE),  # vLLM
    re.compile(rf"exceeded model token limit: {_N}", re.IGNORECASE),             # Kimi
    re.compile(rf"exceeds the available context size \({_N} tokens\)", re.IGNORECASE),
    re.compile(rf"exceed context limit: {_N} \+ {_N} > {_N}", re.IGNORECASE),  # Anthropic
)
_WINDOW_GROUP = {1: 2, 8: 3}  # Anthropic's patterns: the window is their last number
# Said without the window's size.
_UNSTATED = re.compile(
    r"context_length_exceeded|exceed_context_size_error|exceeds the available context size"
    r"|prompt too long; exceeded (?:max )?context length|prompt is too long"
    r"|input token count .{0,40}exceeds the maximum|exceeds the context window",
    re.IGNORECASE)
_N_CTX = re.compile(rb'"n_ctx"\s*:\s*(\d+)')  # llama.cpp's field beside its message
# Below this a "window" is more likely a misread number than a real model's context.
_SMALLEST_WINDOW = 100


@dataclass(frozen=True)
class ContextRefusal:
    """A refusal because the conversation does not fit: `window` the provider stated, or None
    when it said so without the size."""

    window: int | None


def context_refusal(message: str, payload: bytes = b"") -> ContextRefusal | None:
    """Whether a 400's message (and its raw body, for fields beside the message and the error
    code) says the prompt is over the provider's context window; None: it does not."""
    lowered = message.lower()
    if "token" in lowered or "context" in lowered or "length" in lowered:
        for index, pattern in enumerate(_STATED):
            found = pattern.search(message)
            if found:
                value = int(found.group(_WINDOW_GROUP.get(index, 1)).replace(",", ""))
                return ContextRefusal(value if value >= _SMALLEST_WINDOW else None)
    if _UNSTATED.search(message) or (payload and _UNSTATED.search(
            payload[:4096].decode("utf-8", "replace"))):
        found_ctx = _N_CTX.search(payload[:4096]) if payload else None
        if found_ctx is not None and int(found_ctx.group(1)) >= _SMALLEST_WINDOW:
            return ContextRefusal(int(found_ctx.group(1)))
        return ContextRefusal(None)
    return None
