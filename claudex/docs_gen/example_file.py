"""What `profiles.example.toml` says about each key: the comment written above it.

The example file is the one place a key's meaning is written for users (`claudex init` points at
it, and a copy of it is a working config), so the configuration reference reads the meanings from
it instead of repeating them. The conventions the file follows, and this parser relies on:

- a comment block directly above a key (written or commented out, `# key = value`) describes it;
  a key right under another key with no comment between shares that key's words;
- a comment block directly above a table header (`[proxy]`, `[[profiles]]`, or a commented-out
  `# [fleet]`) describes the table; a blank line ends a block;
- a commented line is a commented-out key only if it parses as TOML (`# api_key = "" means no
  key` is prose).

Of the `[[profiles]]` tables, the first words found for a key are kept.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field

_HEADER = re.compile(r"^\[\[?\s*([A-Za-z0-9_.-]+)\s*\]\]?$")
_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*=")


@dataclass
class ExampleFile:
    """Words per table (`""` is the top level) and per (table, key); the example value too."""

    tables: dict[str, str] = field(default_factory=dict)
    keys: dict[tuple[str, str], str] = field(default_factory=dict)
    values: dict[tuple[str, str], str] = field(default_factory=dict)

    def words(self, table: str, key: str) -> str:
        return self.keys.get((table, key), "")


def _as_key(text: str) -> str | None:
    """The key a line sets, when the line is a TOML key/value pair."""
    match = _KEY.match(text)
    if match is None:
        return None
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    return match.group(1)


def parse(text: str) -> ExampleFile:
    found = ExampleFile()
    table = ""
    block: list[str] = []
    shared = ""  # the words of the key just above, for a key that follows it directly
    for raw in text.splitlines():
        line = raw.strip()
        commented = line.startswith("#")
        body = line.lstrip("#").strip() if commented else line
        if not line:
            block, shared = [], ""
            continue
        if commented and not body.strip("-="):
            continue  # a rule line between parts of the file
        header = _HEADER.match(body)
        if header is not None:
            table = header.group(1)
            if block:
                found.tables.setdefault(table, " ".join(block))
            block, shared = [], ""
            continue
        key = _as_key(body)
        if key is None:
            if commented:
                block.append(body)
                shared = ""
            continue
        words = " ".join(block) if block else shared
        if words:
            found.keys.setdefault((table, key), words)
        found.values.setdefault((table, key), body.split("=", 1)[1].strip())
        block, shared = [], words
    return found
