"""What every depth of the request checks shares (`claudex.providers.validation`, its
`validation_messages` and `validation_responses`): where a request is wrong and how (`Problem`),
worded as each API words it, raised as `InvalidRequest` (`fail`); and the field checks that find
one (`optional_fields`, `required_field`, `require_object`). Below the three, so none of them
imports another for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

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
