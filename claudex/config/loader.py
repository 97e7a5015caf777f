"""Load `profiles.toml` into the typed objects of `model.py`, reporting every problem at once.

Loading runs in three steps:

1. `tomllib` parses the text. A syntax error stops here, located at the line tomllib names.
2. `_Scanner` (`_lines.py`) reads the same text again to learn on which line each key was written,
   because tomllib keeps no positions. It records table headers, keys (plain, dotted and inside
   inline tables) and array items; a key it has no line for falls back to its table's header line.
3. `_Builder` (`_validate.py`) checks every section key by key against the schema in
   `_checks.py`. Each problem becomes a `ConfigIssue` (file, line, dotted key, message) and
   checking goes on, so one run lists everything; `ConfigError` carries the list.

Issue keys name a profile by its `name` (`profiles.grok.base_url`) and fall back to its position,
counted from 0, when it has no usable name (`profiles[2].name`).

A missing secret is not a problem of the file: such a profile loads with `Profile.problem` set to
a plain reason, and failover skips it. Messages never echo an API key, a header value or a URL.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

# Names other modules and the tests import from here; the `X as X` form re-exports them.
from claudex.config._checks import _PROXY_KEYS as _PROXY_KEYS
from claudex.config._checks import Checker as Checker
from claudex.config._lines import KeyPath as KeyPath
from claudex.config._lines import _KeyLines as _KeyLines
from claudex.config._lines import _Scanner as _Scanner
from claudex.config._secrets import DEFAULT_CREDENTIALS_FILES as DEFAULT_CREDENTIALS_FILES
from claudex.config._validate import PROFILE_SCHEMA, _Builder
from claudex.config.model import Config, ConfigError, ConfigIssue

# Every key a provider's table may hold, the network's included (tests and the editor read it).
_PROFILE_KEYS = PROFILE_SCHEMA

# ---------------------------------------------------------------------------------------------
# Public API


def parse_config(text: str, file: str = "<config>", env: Mapping[str, str] | None = None) -> Config:
    """Parse and validate config text; `file` only names it in issues.

    `env` (default: the process environment) is where `api_key_env` variables and `HOME` are
    looked up. Raises `ConfigError` listing every problem; never anything else.
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError([_syntax_issue(file, text, error)]) from None
    except RecursionError:
        issue = ConfigIssue(file, _deep_nesting_line(text), "syntax",
                            "arrays or tables are nested too deeply")
        raise ConfigError([issue]) from None
    except ValueError:
        # tomllib lets Python's limit on the length of integer literals escape as ValueError.
        issue = ConfigIssue(file, _long_number_line(text), "syntax",
                            "a number is too long to read")
        raise ConfigError([issue]) from None
    return _Builder(file, _KeyLines.scan(text), environ).build(data)


# tomllib gives no position for these two failures, so we find the place ourselves. No real
# config nests brackets anywhere near this deep; where it is passed is the line to look at.
_SUSPICIOUS_DEPTH = 100
_LONG_NUMBER = re.compile(r"\d{4000,}")


def _deep_nesting_line(text: str) -> int:
    depth, line = 0, 1
    for char in text:
        if char in "[{":
            depth += 1
            if depth > _SUSPICIOUS_DEPTH:
                return line
        elif char in "]}":
            depth = max(0, depth - 1)
        elif char == "\n":
            line += 1
    return 1


def _long_number_line(text: str) -> int:
    match = _LONG_NUMBER.search(text)
    return text.count("\n", 0, match.start()) + 1 if match else 1


def load_config(path: Path | str, env: Mapping[str, str] | None = None) -> Config:
    """Read, parse and validate the file at `path`; `Config.path` is set to it."""
    file = Path(path)
    name = str(file)
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        raise ConfigError([ConfigIssue(name, None, "file", "file not found")]) from None
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ConfigError([ConfigIssue(name, None, "file", f"cannot read: {reason}")]) from None
    try:
        # utf-8-sig: tolerate the byte-order mark some Windows editors write.
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        # Count in `error.object`, not `raw`: utf-8-sig reports `start` in the bytes after the
        # byte-order mark, so counting in `raw` put the issue up to three bytes (lines) early.
        line = error.object.count(b"\n", 0, error.start) + 1
        raise ConfigError([ConfigIssue(name, line, "file", "not valid UTF-8 text")]) from None
    return replace(parse_config(text, name, env), path=file)


def check_config(path: Path | str, env: Mapping[str, str] | None = None) -> list[ConfigIssue]:
    """Every problem in the file at `path`; an empty list when it loads."""
    try:
        load_config(path, env)
    except ConfigError as error:
        return list(error.issues)
    return []


_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def _syntax_issue(file: str, text: str, error: tomllib.TOMLDecodeError) -> ConfigIssue:
    message = str(error)
    match = _TOML_POSITION.search(message)
    if match:
        line: int | None = int(match.group(1))
        message = f"{message[: match.start()]} (column {match.group(2)})"
    elif message.endswith("(at end of document)"):
        line = text.count("\n") + 1
        message = message.removesuffix("(at end of document)").rstrip() + " (at end of file)"
    else:
        line = None
    return ConfigIssue(file, line, "syntax", message)
