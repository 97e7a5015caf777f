"""What each Claude model accepts for `thinking`: the one table claudex decides from.

When a conversation comes back to an Anthropic-protocol provider and its last assistant
tool-use turn has no thinking block (another provider served it), thinking has to be off for
that request (Anthropic: "When `thinking` is enabled, a final `assistant` message must start
with a thinking block ... To avoid this requirement, disable `thinking`"). How a model is
asked for no thinking differs, and on the newest models it cannot be:

  off by default (Claude 4.x and older)   leave `thinking` out
  Claude Opus 5, Claude Sonnet 5          on by default: send {"type": "disabled"}
                                          (Opus 5 takes it only at effort high or below)
  Claude Sonnet 5.5                       on by default, "disabled" refused: {"type":
                                          "between_tools"} is its lowest setting
  Claude Opus 5.5, Fable 5/5.1, Mythos    always on: nothing can turn it off, so the request
  5/5.1, Mythos Preview                   is left as the client sent it

Source: Anthropic, "Troubleshooting thinking", the table "Thinking support, defaults, and
rejected configurations by model"
(https://platform.claude.com/docs/en/build-with-claude/thinking-troubleshooting), and "What's
new in Claude Opus 5.5" (https://platform.claude.com/docs/en/models/opus-5-5/whats-new-opus-5-5).

Where the table is silent claudex is conservative: a newer Claude model it does not know
(Haiku 5.5, a future version) is treated as always on — claudex does not invent a setting the
model may refuse; an older unknown Claude model is off by default (every Claude 4.x and 3.x
model is); a model that is not Claude (an Anthropic-compatible third party) gets the explicit
{"type": "disabled"}, which means "no thinking" whatever that provider's default is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Final


class ThinkingOff(Enum):
    """How a model is asked for no thinking."""

    OMIT = "omit"                    # leave `thinking` out: off is the default
    DISABLED = "disabled"            # {"type": "disabled"}
    BETWEEN_TOOLS = "between_tools"  # {"type": "between_tools"}: no up-front thinking
    IMPOSSIBLE = "impossible"        # always on


@dataclass(frozen=True)
class ThinkingModel:
    default_on: bool                  # thinking runs when the request has no `thinking`
    off: ThinkingOff
    off_max_effort: str | None = None  # "disabled" is refused above this output_config.effort


_ALWAYS_ON: Final = ThinkingModel(True, ThinkingOff.IMPOSSIBLE)
_OFF_BY_DEFAULT: Final = ThinkingModel(False, ThinkingOff.OMIT)
_NOT_CLAUDE: Final = ThinkingModel(False, ThinkingOff.DISABLED)

# (family, major, minor or None) -> behaviour, from the documentation's table.
_KNOWN: Final[dict[tuple[str, int, int | None], ThinkingModel]] = {
    ("fable", 5, None): _ALWAYS_ON,
    ("fable", 5, 1): _ALWAYS_ON,
    ("mythos", 5, None): _ALWAYS_ON,
    ("mythos", 5, 1): _ALWAYS_ON,
    ("opus", 5, 5): _ALWAYS_ON,
    ("opus", 5, None): ThinkingModel(True, ThinkingOff.DISABLED, off_max_effort="high"),
    ("sonnet", 5, None): ThinkingModel(True, ThinkingOff.DISABLED),
    ("sonnet", 5, 5): ThinkingModel(True, ThinkingOff.BETWEEN_TOOLS),
    ("opus", 4, 8): _OFF_BY_DEFAULT,
    ("opus", 4, 7): _OFF_BY_DEFAULT,
    ("opus", 4, 6): _OFF_BY_DEFAULT,
    ("sonnet", 4, 6): _OFF_BY_DEFAULT,
    ("opus", 4, 5): _OFF_BY_DEFAULT,
    ("sonnet", 4, 5): _OFF_BY_DEFAULT,
    ("haiku", 4, 5): _OFF_BY_DEFAULT,
    ("opus", 4, 1): _OFF_BY_DEFAULT,
}
# The newest version the table knows per family: anything newer is assumed always on.
_NEWEST: Final[dict[str, tuple[int, int]]] = {}
for _family, _major, _minor in _KNOWN:
    _NEWEST[_family] = max(_NEWEST.get(_family, (0, 0)), (_major, _minor or 0))

# claude-opus-4-6, claude-opus-4-5-20251101, claude-opus-4-20250514 (no minor: the 8-digit
# date is not one), anthropic.claude-opus-4-6-v1 (Bedrock), claude-mythos-preview.
_NAME = re.compile(r"claude-(opus|sonnet|haiku|fable|mythos)-(\d{1,2})(?:[-.](\d{1,2}))?(?!\d)")


def thinking_model(model: str | None) -> ThinkingModel:
    """What `model` accepts for `thinking` (the module docstring has the rules)."""
    name = (model or "").lower()
    if "claude-mythos-preview" in name:
        return _ALWAYS_ON
    match = _NAME.search(name)
    if match is None:
        # claude-3-7-sonnet and older put the version first; all are off by default.
        return _OFF_BY_DEFAULT if "claude-" in name else _NOT_CLAUDE
    family, major = match.group(1), int(match.group(2))
    minor = int(match.group(3)) if match.group(3) else None
    known = _KNOWN.get((family, major, minor))
    if known is not None:
        return known
    return _ALWAYS_ON if (major, minor or 0) > _NEWEST.get(family, (0, 0)) else _OFF_BY_DEFAULT
