"""docs/reference/translation-drops.md: what translation leaves out, one table per direction,
from providers/translate/drops.py."""

from __future__ import annotations

from collections.abc import Mapping

from claudex.docs_gen.markdown import code, table
from claudex.providers.translate import drops

SOURCES = ("claudex/providers/translate/drops.py",)

# (heading, the table, when it applies)
DIRECTIONS: tuple[tuple[str, Mapping[drops.DropName, str], str], ...] = (
    ("Anthropic client → OpenAI Chat Completions provider", drops.ANTHROPIC_TO_OPENAI,
     "Claude Code (or any Anthropic client) failing over to grok, deepseek, OpenRouter, Ollama "
     "and other OpenAI-compatible providers; also the first half of Anthropic → Responses."),
    ("OpenAI Chat Completions client → Anthropic provider", drops.OPENAI_TO_ANTHROPIC,
     "An OpenAI SDK client served by a `DirectAnthropic` profile."),
    ("Chat Completions → Responses API provider", drops.CHAT_TO_RESPONSES,
     "Any request served by an `OpenAIResponses` profile that did not come in the Responses "
     "form: an Anthropic request goes through the Chat form first, so the first table applies "
     "before this one."),
    ("Responses API client → Chat Completions or Anthropic provider", drops.RESPONSES_TO_OTHERS,
     "Codex CLI (or the openai SDK's `client.responses`) served by a Chat Completions or "
     "Anthropic profile; an Anthropic target gets the Chat form, so the OpenAI → Anthropic "
     "table applies too."),
)


def render() -> str:
    lines = [
        "# Translation drop tables", "",
        "When a request is served by a provider of another protocol, what the target cannot take "
        "is left out and **named**, never silently altered. The names below are what the "
        "request log, the console's request detail, the journal and `/metrics` "
        "(`claudex_translation_dropped{provider,field}`) show, e.g. "
        "`dropped: thinking, cache_control`.", "",
        "Values that change nothing (`n: 1`, `thinking: {\"type\": \"disabled\"}`, a null "
        "field) are left out without being named. Something no table can know (a newer API's "
        "top-level field, content block type or tool key) is named by the client's own key "
        f"(`future_field`, `content.<type>`, `tools.<key>`), cut to {drops.UNKNOWN_NAME_LIMIT} "
        "characters.", "",
    ]
    for heading, rows, when in DIRECTIONS:
        lines += [f"## {heading}", "", when, "",
                  table(("name", "what is left out"),
                        ([code(name), words] for name, words in rows.items())), ""]
    return "\n".join(lines)
