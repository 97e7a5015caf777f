"""Request shape checks: what the proxy and the translators rely on, refused with a 400 in the
client's own protocol and wording when it does not hold.

Two depths, so a well-formed request pays almost nothing:
- `check_top_level` — the fields the proxy itself reads or the translators take as given
  (model, messages, max_tokens, stream, system, tools, ...): a dozen dictionary lookups and
  isinstance checks, run on every request at the edge (`claudex.server.proxy_asgi`) before any
  provider or breaker is involved.
- `check_anthropic_contents` / `check_openai_contents` (`validation_messages`) — every
  message, content block, tool and tool call: the shape the translators walk. Run only when
  claudex reads the conversation itself — translating it, or estimating its tokens — where the
  walk costs a fraction of the work it guards. A request forwarded unchanged is left for its
  provider to judge, as it would be without claudex.

Types the checks do not know (a new content block, a server tool) pass: they are valid to newer
API versions, and the translators drop and list what has no counterpart. On a translated path
the checks refuse only what no provider could take: an Anthropic system turn anywhere in
`messages` passes (an OpenAI target takes a system message anywhere; the translator settles
where an Anthropic one may stand).

A problem is raised as `InvalidRequest` (`validation_problems`, which the three modules of checks
share); its message follows each API's own wording: Anthropic's validation errors
(`messages.0.content: Input should be a valid list`) and OpenAI's (`Invalid type for
'messages[0].content': expected a string or an array, but got an integer instead.`, with `param`
and `code`).
"""

from __future__ import annotations

from typing import Any, Literal

from claudex.providers import anthropic, openai
from claudex.providers.validation_problems import (
    Problem,
    _is_integer,
    fail,
    optional_fields,
    required_field,
)
from claudex.providers.validation_responses import check_responses_top_level


def _positive_integer(body: dict[str, Any], key: str, *, required: bool) -> None:
    value = body.get(key)
    if value is None:
        if required:
            raise fail((key,), "missing")
        return
    if not _is_integer(value):
        raise fail((key,), "type", "integer", value)
    if value < 1:
        raise fail((key,), "minimum", got=value)


# -- top level: every request, at the edge -----------------------------------------------------

_ANTHROPIC_OPTIONAL = (
    ("system", "string_or_list"), ("temperature", "number"), ("top_p", "number"),
    ("metadata", "object"), ("tools", "list"), ("stop_sequences", "list"),
)
_OPENAI_OPTIONAL = (
    ("stream", "boolean"), ("temperature", "number"), ("top_p", "number"), ("tools", "list"),
    ("stream_options", "object"), ("user", "string"), ("safety_identifier", "string"),
    ("parallel_tool_calls", "boolean"),
)


def check_top_level(protocol: Literal["anthropic", "openai", "responses"], endpoint: str,
                    body: dict[str, Any]) -> None:
    """The fields the proxy reads and the translators take as given. `endpoint` is
    "messages", "count_tokens", "chat" or "responses". Raises InvalidRequest."""
    if protocol == "responses":
        check_responses_top_level(body)
        return
    # Every request passes here: the usual values (a plain str, a non-empty list, a positive
    # int, a bool) are taken at a glance, anything else by the full check that words why.
    if body.get("model").__class__ is not str:
        required_field(body, "model", "string")
    messages = body.get("messages")
    if messages.__class__ is not list or not messages:
        if not required_field(body, "messages", "list"):
            raise fail(("messages",), "empty")
    if protocol == "anthropic":
        if endpoint == "count_tokens":
            # The counting endpoint takes no `stream`; a stream flag there would make the
            # proxy wait for an event stream that never comes.
            if body.get("stream") not in (None, False):
                raise fail(("stream",), "extra")
        else:
            max_tokens = body.get("max_tokens")
            if max_tokens.__class__ is not int or max_tokens < 1:
                _positive_integer(body, "max_tokens", required=True)
            stream = body.get("stream")
            if stream is not None and stream is not True and stream is not False:
                optional_fields(body, (("stream", "boolean"),))
        optional_fields(body, _ANTHROPIC_OPTIONAL)
        choice = body.get("tool_choice")
        if choice is not None and not isinstance(choice, dict | str):  # "auto" is tolerated
            raise fail(("tool_choice",), "type", "object", choice)
        return
    _positive_integer(body, "max_tokens", required=False)
    _positive_integer(body, "max_completion_tokens", required=False)
    optional_fields(body, _OPENAI_OPTIONAL)
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str | list):
        raise fail(("stop",), "type", "string_or_list", stop)
    choice = body.get("tool_choice")
    if choice is not None and not isinstance(choice, dict | str):
        raise fail(("tool_choice",), "type", "object", choice)


def error_body(protocol: Literal["anthropic", "openai", "responses"],
               problem: Problem) -> bytes:
    """The 400 body for `problem` in the client's protocol (a Responses client's errors have
    Chat Completions' shape)."""
    if protocol == "anthropic":
        return anthropic.error_body(400, problem.anthropic_message())
    return openai.error_body(400, problem.openai_message(), code=problem.openai_code,
                             param=problem.openai_param)
