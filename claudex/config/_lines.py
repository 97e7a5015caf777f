"""Where each key of a TOML document was written, found by re-reading its text.

`tomllib` keeps no positions, so `_Scanner` follows the already accepted text closely enough to
record the line of every table header, key (plain, dotted and inside inline tables) and array
item. `_KeyLines` answers lookups by key path, falling back to the nearest recorded parent.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping

# A path into the parsed document: table and key names, and array indexes.
KeyPath = tuple[str | int, ...]

# A key TOML accepts without quotes; also how issue labels decide whether to quote a key.
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


class _KeyLines:
    """The line each key, table and array item was written on, looked up by key path.

    Paths index the parsed document: `("profiles", 0, "backup_providers", 1)`. A path with no
    line of its own takes the line of its nearest recorded parent, usually the table header.
    """

    def __init__(self, lines: Mapping[KeyPath, int]) -> None:
        self._lines = lines

    @classmethod
    def scan(cls, text: str) -> _KeyLines:
        scanner = _Scanner(text)
        try:
            scanner.run()
        except Exception:
            # Only line numbers depend on the scan: a failure costs precision, never the load.
            pass
        return cls(scanner.lines)

    def line_of(self, path: KeyPath) -> int | None:
        for end in range(len(path), 0, -1):
            line = self._lines.get(path[:end])
            if line is not None:
                return line
        return None


class _ScanError(Exception):
    pass


class _Scanner:
    """A position-keeping reader of TOML that tomllib has already accepted.

    It does not validate anything; it only follows the structure (headers, keys, strings,
    arrays, inline tables) closely enough to never mistake text inside a string for a key.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.lines: dict[KeyPath, int] = {}
        self._array_tables: dict[KeyPath, int] = {}

    def run(self) -> None:
        table: KeyPath = ()
        while self._skip_blank():
            if self.text.startswith("[", self.pos):
                table = self._header(array=self.text.startswith("[[", self.pos))
            else:
                self._key_value(table)

    def _peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _note(self, path: KeyPath, line: int) -> None:
        self.lines.setdefault(path, line)

    def _skip_spaces(self) -> None:
        while self._peek() in (" ", "\t"):
            self.pos += 1

    def _skip_blank(self) -> bool:
        """Skip whitespace, line breaks and comments; False at the end of the text."""
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char == "\n":
                self.line += 1
                self.pos += 1
            elif char in " \t\r":
                self.pos += 1
            elif char == "#":
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            else:
                return True
        return False

    def _expect(self, token: str) -> None:
        if not self.text.startswith(token, self.pos):
            raise _ScanError(f"expected {token!r} at offset {self.pos}")
        self.pos += len(token)

    def _header(self, *, array: bool) -> KeyPath:
        line = self.line
        self._expect("[[" if array else "[")
        keys = self._dotted_key()
        self._skip_spaces()
        self._expect("]]" if array else "]")
        path: KeyPath = ()
        for position, key in enumerate(keys):
            path = (*path, key)
            if array and position == len(keys) - 1:
                count = self._array_tables.get(path, 0)
                self._array_tables[path] = count + 1
                self._note(path, line)
                path = (*path, count)
            elif path in self._array_tables:
                # `[profiles.x]` after `[[profiles]]` extends the latest profile.
                path = (*path, self._array_tables[path] - 1)
            # `[a.b.c]` creates `a` and `a.b` implicitly when they do not exist yet.
            self._note(path, line)
        return path

    def _dotted_key(self) -> list[str]:
        parts: list[str] = []
        while True:
            self._skip_spaces()
            char = self._peek()
            if char in ('"', "'"):
                start = self.pos
                self._single_line_string(char)
                # Let tomllib decode the escapes rather than re-implement them.
                parts.append(tomllib.loads("k = " + self.text[start : self.pos])["k"])
            else:
                match = _BARE_KEY.match(self.text, self.pos)
                if match is None:
                    raise _ScanError(f"expected a key at offset {self.pos}")
                parts.append(match.group())
                self.pos = match.end()
            self._skip_spaces()
            if self._peek() != ".":
                return parts
            self.pos += 1

    def _key_value(self, table: KeyPath) -> None:
        line = self.line
        path = table
        for key in self._dotted_key():
            path = (*path, key)
            self._note(path, line)
        self._skip_spaces()
        self._expect("=")
        self._skip_spaces()
        self._value(path)

    def _value(self, path: KeyPath) -> None:
        char = self._peek()
        if self.text.startswith(('"""', "'''"), self.pos):
            self._multi_line_string(char)
        elif char in ('"', "'"):
            self._single_line_string(char)
        elif char == "[":
            self._array(path)
        elif char == "{":
            self._inline_table(path)
        else:
            # Numbers, booleans, dates: run to the next delimiter (dates may contain a space).
            while self.pos < len(self.text) and self.text[self.pos] not in ",]}#\r\n":
                self.pos += 1

    def _single_line_string(self, quote: str) -> None:
        self.pos += 1
        while True:
            char = self._peek()
            if char in ("", "\n"):
                raise _ScanError("unterminated string")
            self.pos += 2 if char == "\\" and quote == '"' else 1
            if char == quote:
                return

    def _multi_line_string(self, quote: str) -> None:
        start = self.pos
        delimiter = quote * 3
        self.pos += 3
        while True:
            char = self._peek()
            if char == "":
                raise _ScanError("unterminated multi-line string")
            if char == "\\" and quote == '"':
                self.pos += 2
            elif self.text.startswith(delimiter, self.pos):
                self.pos += 3
                # Up to two more quotes right before the delimiter belong to the content.
                for _ in range(2):
                    if self._peek() == quote:
                        self.pos += 1
                break
            else:
                self.pos += 1
        self.line += self.text.count("\n", start, self.pos)

    def _array(self, path: KeyPath) -> None:
        self.pos += 1
        index = 0
        while True:
            if not self._skip_blank():
                raise _ScanError("unterminated array")
            if self._peek() == "]":
                self.pos += 1
                return
            before = self.pos
            item = (*path, index)
            self._note(item, self.line)
            self._value(item)
            self._skip_blank()
            if self._peek() == ",":
                self.pos += 1
                index += 1
            elif self.pos == before:
                raise _ScanError(f"stuck in an array at offset {self.pos}")

    def _inline_table(self, path: KeyPath) -> None:
        self.pos += 1
        while True:
            if not self._skip_blank():
                raise _ScanError("unterminated inline table")
            if self._peek() == "}":
                self.pos += 1
                return
            before = self.pos
            self._key_value(path)
            self._skip_blank()
            if self._peek() == ",":
                self.pos += 1
            elif self.pos == before:
                raise _ScanError(f"stuck in an inline table at offset {self.pos}")
