"""Reading a claude-code-router `config.json` as ccr itself reads it.

ccr (v1, src/utils/index.ts) parses the file with JSON5, so the files people have carry `//`
comments (its README's own example did) and trailing commas; and it replaces `$VAR` and
`${VAR}` in every string with the environment variable. Here comments and trailing commas are
taken out before the standard library parses the rest; the other JSON5 forms (single quotes,
unquoted keys) are refused with the place named. Interpolation is not done: a `$VAR` is what
the conversion keeps (`interpolated_name`), so no secret is read.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

_VARIABLE: Final = re.compile(r"\$\{([^}]+)\}|\$([A-Z_][A-Z0-9_]*)")
_WHOLE_VARIABLE: Final = re.compile(
    r"\s*(?:\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Z_][A-Z0-9_]*))\s*")


class CcrFileError(Exception):
    """The file cannot be read as a ccr config; the message names where and why."""


def read_ccr_json(text: str, source: str) -> dict[str, Any]:
    """The object in `text` (a ccr config.json named `source` in messages)."""
    try:
        value = json.loads(_plain_json(text, source))
    except json.JSONDecodeError as exc:
        raise CcrFileError(f"{source}:{exc.lineno}:{exc.colno}: not valid JSON "
                           f"({exc.msg})") from None
    except RecursionError:
        raise CcrFileError(f"{source}: nested too deeply to be a config") from None
    if not isinstance(value, dict):
        raise CcrFileError(f"{source}: a ccr config is a JSON object ({{...}}), "
                           f"not {type(value).__name__}")
    return value


def interpolated_name(value: str) -> str | None:
    """`VAR` when `value` is just `$VAR` or `${VAR}` (ccr's interpolation), else None."""
    match = _WHOLE_VARIABLE.fullmatch(value)
    return (match.group(1) or match.group(2)) if match else None


def mentions_variable(value: str) -> bool:
    return _VARIABLE.search(value) is not None


def _plain_json(text: str, source: str) -> str:
    """`text` without comments and trailing commas; the line structure is kept, so the
    decoder's line and column still point into the user's file."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            end = _string_end(text, i)
            out.append(text[i:end])
            i = end
        elif ch == "'":
            line = text.count("\n", 0, i) + 1
            raise CcrFileError(f"{source}:{line}: a single-quoted string (JSON5); write it "
                               'in double quotes')
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                line = text.count("\n", 0, i) + 1
                raise CcrFileError(f"{source}:{line}: a /* comment that is never closed")
            out.append("\n" * text.count("\n", i, end))
            i = end + 2
        elif ch == ",":
            j = i + 1
            while j < n and (text[j].isspace() or text.startswith(("//", "/*"), j)):
                if text.startswith("//", j):
                    k = text.find("\n", j)
                    j = n if k < 0 else k
                elif text.startswith("/*", j):
                    k = text.find("*/", j + 2)
                    j = n if k < 0 else k + 2
                else:
                    j += 1
            if j < n and text[j] in "]}":
                i += 1  # a trailing comma: dropped
            else:
                out.append(ch)
                i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    """The index just past the double-quoted string starting at `start` (or the end of the
    text, where the decoder then reports the unterminated string)."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        elif text[i] == "\n":
            return i  # unterminated: let the decoder say so at this line
        else:
            i += 1
    return len(text)
