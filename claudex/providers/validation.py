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

A problem is raised as `InvalidRequest`; its message follows each API's own wording: Anthropic's
validation errors (`messages.0.content: Input should be a valid list`) and OpenAI's
(`Invalid type for 'messages[0].content': expected a string or an array, but got an integer
instead.`, with `param` and `code`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from claudex.providers import anthropic, openai

PathPart = str | int
Kind = Literal["missing", "type", "minimum", "empty", "value", "extra", "nesting", "stateful"]

# What a field should be, as each API names it.
_ANTHROPIC_EXPECTED = {
    "string": "a valid string",
    "integer": "a valid integer",
    "boolean": "a valid boolean",
    "number": "a valid number",
    "list": "a valid list",
    "object": "a valid dictionary",
    "string_or_list": "a valid string or a list",
}
_OPENAI_EXPECTED = {
    "string": "a string",
    "integer": "an integer",
    "boolean": "a boolean",
    "number": "a number",
    "list": "an array",
    "object": "an object",
    "string_or_list": "a string or an array",
}
_OPENAI_CODES: dict[Kind, str] = {
    "missing": "missing_required_parameter",
    "type": "invalid_type",
    "minimum": "integer_below_min_value",
    "empty": "empty_array",
    "value": "invalid_value",
    "extra": "unknown_parameter",
    "nesting": "invalid_request_body",
    "stateful": "unsupported_parameter",
}
# claudex keeps no conversation state: a Responses request pointing at stored history
# (`previous_response_id`, `conversation`) cannot be answered by a provider that lacks it.
_STATEFUL = ("claudex keeps no conversation history, so '{param}' cannot be honoured by this "
             "provider; send the whole conversation in 'input' (with store: false, as Codex CLI "
             "does).")
_NESTING = "Request body is nested too deeply."


def _openai_kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _shown(value: Any) -> str:
    """A client's value quoted in a message: short, never a Python repr."""
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True)
class Problem:
    """The first thing wrong with a request: where, and what."""

    path: tuple[PathPart, ...]
    kind: Kind
    expected: str = ""             # a key of _ANTHROPIC_EXPECTED, for kind "type"
    got: Any = None                # the offending value, for "type", "minimum" and "value"
    allowed: tuple[str, ...] = ()  # for "value"

    def anthropic_message(self) -> str:
        if self.kind == "nesting":
            return _NESTING
        if self.kind == "stateful":
            return _STATEFUL.format(param=self.openai_param)
        where = ".".join(str(p) for p in self.path)
        if self.kind == "missing":
            what = "Field required"
        elif self.kind == "type":
            what = f"Input should be {_ANTHROPIC_EXPECTED[self.expected]}"
        elif self.kind == "minimum":
            what = "Input should be greater than or equal to 1"
        elif self.kind == "empty":
            what = "at least one message is required"
        elif self.kind == "value":
            # Pydantic's wording, as Anthropic's API gives it: 'a', 'b' or 'c'.
            quoted = [f"'{a}'" for a in self.allowed]
            what = "Input should be " + (
                ", ".join(quoted[:-1]) + " or " + quoted[-1] if len(quoted) > 1 else
                "".join(quoted))
        else:
            what = "Extra inputs are not permitted"
        return f"{where}: {what}"

    @property
    def openai_param(self) -> str | None:
        if not self.path:
            return None
        out = ""
        for part in self.path:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
        return out

    @property
    def openai_code(self) -> str:
        return _OPENAI_CODES[self.kind]

    def openai_message(self) -> str:
        param = self.openai_param
        if self.kind == "nesting":
            return _NESTING
        if self.kind == "stateful":
            return _STATEFUL.format(param=param)
        if self.kind == "missing":
            return f"Missing required parameter: '{param}'."
        if self.kind == "type":
            return (f"Invalid type for '{param}': expected {_OPENAI_EXPECTED[self.expected]}, "
                    f"but got {_openai_kind_of(self.got)} instead.")
        if self.kind == "minimum":
            return (f"Invalid '{param}': integer below minimum value. Expected a value >= 1, "
                    f"but got {self.got} instead.")
        if self.kind == "empty":
            return (f"Invalid '{param}': empty array. Expected an array with minimum length 1, "
                    "but got an empty array instead.")
        if self.kind == "value":
            allowed = ", ".join(f"'{a}'" for a in self.allowed)
            return f"Invalid value: '{_shown(self.got)}'. Supported values are: {allowed}."
        return f"Unrecognized request argument supplied: {param}"


class InvalidRequest(ValueError):
    """The client's request is malformed: answered 400, no provider is asked."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.anthropic_message())
        self.problem = problem


def fail(path: tuple[PathPart, ...], kind: Kind, expected: str = "", got: Any = None,
          allowed: tuple[str, ...] = ()) -> InvalidRequest:
    return InvalidRequest(Problem(path, kind, expected, got, allowed))


# -- value kinds -------------------------------------------------------------------------------

def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "boolean": lambda v: isinstance(v, bool),
    "number": _is_number,
    "list": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "string_or_list": lambda v: isinstance(v, str | list),
}


def optional_fields(body: dict[str, Any], fields: Sequence[tuple[str, str]],
              base: tuple[PathPart, ...] = ()) -> None:
    """Each field that is present and not null must be of its kind."""
    for key, kind in fields:
        value = body.get(key)
        if value is not None and not _CHECKS[kind](value):
            raise fail((*base, key), "type", kind, value)


def required_field(body: dict[str, Any], key: str, kind: str,
              base: tuple[PathPart, ...] = ()) -> Any:
    value = body.get(key)
    if value is None:
        raise fail((*base, key), "missing")
    if not _CHECKS[kind](value):
        raise fail((*base, key), "type", kind, value)
    return value


def require_object(value: Any, path: tuple[PathPart, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise fail(path, "type", "object", value)
    return value


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
        # Imported here: that module builds on this one's helpers.
        from claudex.providers.validation_responses import check_responses_top_level
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


# -- Anthropic contents: when translating ------------------------------------------------------

def error_body(protocol: Literal["anthropic", "openai", "responses"],
               problem: Problem) -> bytes:
    """The 400 body for `problem` in the client's protocol (a Responses client's errors have
    Chat Completions' shape)."""
    if protocol == "anthropic":
        return anthropic.error_body(400, problem.anthropic_message())
    return openai.error_body(400, problem.openai_message(), code=problem.openai_code,
                             param=problem.openai_param)
