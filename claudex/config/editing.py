"""Edit `profiles.toml` in place: change, add, rename and delete profiles, keeping everything else.

The file is edited with tomlkit, which keeps every comment, the order of keys and tables and the
formatting of untouched values, so a hand-written, heavily commented file survives an edit from
the console byte for byte outside the edited lines. The rules:

- A key whose new value equals its current one is not touched (its formatting stays).
- A changed key is rewritten where it stands, keeping a trailing `# comment` on its line.
- A new key goes right after a commented-out example of itself (`# max_tokens = 8192`) when the
  profile has one, else after the profile's last key, before any trailing comment block (which
  often introduces the next table).
- A key set to None is removed with its line; comment lines above it stay (never lose a comment).
- Renaming a profile also renames it in other profiles' `backup_providers`, in
  `[proxy] default_profile`, `[routes]` and `[router]`; deleting one also drops those references
  (see `delete_profile`).

Every write builds the whole new text first, validates it with the same validator as
`claudex check` (`parse_config`) and only then replaces the file atomically. A `ConfigError`
leaves the file untouched. The file gets mode 0600 when it holds a secret (`api_key = "..."`),
else it keeps its mode.

Crashes: the new text goes to a hidden temp file beside the config (`.profiles.toml.*.tmp`,
a name neither the loader nor the watcher reads) and is renamed over it, so a writer killed at
any point leaves the old file whole. claudex's writers of one directory take turns (an advisory
lock on the directory), so a temp file found while holding the turn belongs to a writer that
died: each successful write removes those. A write the system refuses (read-only directory,
disk full) raises `WriteError`, saying why, with the file unchanged.

Conflicts: callers take a `Fingerprint` (mtime and sha256) when they read the file and pass it
back when they write. If the file changed on disk in between, `ConflictError` is raised and
nothing is written; the caller then reloads or overwrites (writes again with
`ConflictError.current`, re-applying its values on top of the new content), so neither edit is lost.

Exceptions: `EditError` is the base of `ConflictError`, `ProfileNotFoundError` and `WriteError`;
a file that does not load, or an edit that would not load, raises `ConfigError`
(`claudex.config.model`).

Layout: the pure text transforms (`with_profile_updated`, `profile_names`, ...) live in
`claudex.config._edit_text` and are re-exported here; this module adds the file around them
(fingerprints, conflict checks, validation, the atomic write). Import from here.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claudex.config._edit_text import (
    EditError,
    ProfileNotFoundError,
    profile_from_text,
    profile_names,
    references_to,
    with_profile_added,
    with_profile_deleted,
    with_profile_updated,
)
from claudex.config.atomic_files import remove_leftover_temp_files, write_text_atomic
from claudex.config.digest import digest_of
from claudex.config.loader import parse_config
from claudex.config.model import Config, ConfigError, ConfigIssue

# The pure text transforms live in `_edit_text` (the editor runs them on every keystroke); they
# are part of this module's API, so they are re-exported here.
__all__ = [
    "ConflictError",
    "EditError",
    "Fingerprint",
    "ProfileNotFoundError",
    "WriteError",
    "add_profile",
    "delete_profile",
    "digest_of",
    "file_fingerprint",
    "profile_from_text",
    "profile_names",
    "read_config_text",
    "read_profile",
    "references_to",
    "rename_profile",
    "set_profile_enabled",
    "update_profile",
    "validate_text",
    "with_profile_added",
    "with_profile_deleted",
    "with_profile_updated",
]

_BOM = "\ufeff"
_SECRET_MODE = 0o600


class ConflictError(EditError):
    """The file changed on disk since the caller read it. Nothing was written.

    `current` is the file's fingerprint now: writing again with it as the expected fingerprint
    ("overwrite") re-applies the caller's values on top of the new content.
    """

    def __init__(self, path: Path, current: Fingerprint) -> None:
        super().__init__(f"{path} changed on disk since it was loaded")
        self.path = path
        self.current = current


class WriteError(EditError):
    """The system refused the write (read-only directory, disk full, ...); the file is unchanged."""

    def __init__(self, path: Path, error: OSError) -> None:
        reason = error.strerror or type(error).__name__
        super().__init__(f"cannot write {path}: {reason}; the file was not changed")
        self.path = path
        self.errno = error.errno


@dataclass(frozen=True)
class Fingerprint:
    """What a file looked like when it was read: its mtime and the sha256 of its bytes."""

    mtime_ns: int
    digest: str


def file_fingerprint(path: Path | str) -> Fingerprint:
    """The current fingerprint of the file at `path` (OSError if it cannot be read)."""
    return _read(Path(path))[1]


def read_config_text(path: Path | str) -> tuple[str, Fingerprint]:
    """The file's text and the fingerprint of exactly that text, for a later conflict check."""
    file = Path(path)
    raw, fingerprint = _read_or_report(file)
    return _decode(raw, str(file))[1], fingerprint


# ---------------------------------------------------------------------------------------------
# File operations: read, transform, validate, write atomically.


def read_profile(path: Path | str, name: str) -> dict[str, Any]:
    """The profile's keys as written in the file at `path`."""
    text, _ = read_config_text(path)
    return profile_from_text(text, name, file=str(path))


def update_profile(
    path: Path | str,
    name: str,
    values: Mapping[str, Any],
    *,
    expected_mtime_ns: int | None = None,
    expected_digest: str | None = None,
) -> Fingerprint:
    """Set the profile's keys (None removes one); a different `name` renames the profile.

    Keys not in `values` are left as they are. Raises `ProfileNotFoundError`, `ConflictError`
    (see `_check_unchanged`) or `ConfigError` (the result would not load); the file is then
    untouched. Returns the fingerprint of the written file.
    """
    return _commit(
        Path(path),
        lambda text, file: with_profile_updated(text, name, values, file=file),
        expected_mtime_ns,
        expected_digest,
    )


def add_profile(
    path: Path | str,
    values: Mapping[str, Any],
    *,
    expected_mtime_ns: int | None = None,
    expected_digest: str | None = None,
) -> Fingerprint:
    """Append a new `[[profiles]]` table (creating the file if it does not exist)."""
    return _commit(
        Path(path),
        lambda text, file: with_profile_added(text, values, file=file),
        expected_mtime_ns,
        expected_digest,
        create=True,
    )


def delete_profile(
    path: Path | str,
    name: str,
    *,
    drop_references: bool = True,
    expected_mtime_ns: int | None = None,
    expected_digest: str | None = None,
) -> Fingerprint:
    """Remove the profile's table; see `with_profile_deleted` for references to it."""
    return _commit(
        Path(path),
        lambda text, file: with_profile_deleted(
            text, name, drop_references=drop_references, file=file
        ),
        expected_mtime_ns,
        expected_digest,
    )


def rename_profile(
    path: Path | str,
    name: str,
    new_name: str,
    *,
    expected_mtime_ns: int | None = None,
    expected_digest: str | None = None,
) -> Fingerprint:
    """Rename a profile and every reference to it (an update of `name`)."""
    return update_profile(
        path,
        name,
        {"name": new_name},
        expected_mtime_ns=expected_mtime_ns,
        expected_digest=expected_digest,
    )


def set_profile_enabled(path: Path | str, name: str, enabled: bool) -> Fingerprint:
    """Write `enabled = true` / `false` for the profile (the console's one-key toggle): the
    line is rewritten where it stands, or added after the profile's keys; nothing else moves."""
    return update_profile(path, name, {"enabled": enabled})


def validate_text(text: str, file: str = "<config>") -> Config:
    """The validator of `claudex check`, on text that is not (yet) on disk."""
    return parse_config(text, file)


# ---------------------------------------------------------------------------------------------
# Internals


def _commit(
    path: Path,
    transform: Callable[[str, str], str],
    expected_mtime_ns: int | None,
    expected_digest: str | None,
    *,
    create: bool = False,
) -> Fingerprint:
    file = str(path)
    # The file actually written: a symlinked config is written at its target (as
    # `write_text_atomic` does), and that is where its temp files are.
    target = path.expanduser()
    if target.is_symlink():
        target = target.resolve()
    # Read, check and write in one turn, so that no other claudex writer slips in between the
    # conflict check and the rename.
    with _writers_turn(target.parent):
        if create and not path.exists():
            raw, current, mode = b"", None, _SECRET_MODE
        else:
            raw, current = _read_or_report(path)
            mode = stat.S_IMODE(os.stat(path).st_mode)
        if current is not None:
            _check_unchanged(path, current, expected_mtime_ns, expected_digest)
        bom, text = _decode(raw, file)
        new_text = transform(text, file)
        config = parse_config(new_text, file)  # raises ConfigError: nothing written
        new_mode = _SECRET_MODE if any(profile.api_key for profile in config.profiles) else mode
        if current is not None and new_text == text and new_mode == mode:
            return current  # nothing to change: no write, so no reload event for watchers
        try:
            write_text_atomic(path, bom + new_text, new_mode)
        except OSError as error:
            raise WriteError(path, error) from None
        # We hold the writers' turn, so no live claudex writer has a temp file here now.
        remove_leftover_temp_files(target, min_age_s=0)
        return file_fingerprint(path)


@contextlib.contextmanager
def _writers_turn(directory: Path) -> Iterator[None]:
    """Hold the advisory lock of claudex's writers in `directory` (the lock is on the directory
    itself, so no lock file is left behind). Where there is no such lock (Windows, a directory
    that does not exist yet or cannot be opened) writers go without: the conflict check and the
    atomic rename still protect the file."""
    if sys.platform == "win32":
        yield
        return
    import fcntl

    try:
        handle = os.open(directory, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
        except OSError:
            pass  # a file system without flock: go on unlocked
        yield
    finally:
        os.close(handle)  # releases the lock


def _check_unchanged(
    path: Path, current: Fingerprint, expected_mtime_ns: int | None, expected_digest: str | None
) -> None:
    """Raise `ConflictError` if the file differs from what the caller read.

    The digest decides when given: a file touched but not changed loses nobody's edit. The
    mtime alone is the weaker check for callers that kept only that. Neither given: no check.
    """
    if expected_digest is not None:
        changed = expected_digest != current.digest
    elif expected_mtime_ns is not None:
        changed = expected_mtime_ns != current.mtime_ns
    else:
        changed = False
    if changed:
        raise ConflictError(path, current)


def _read(path: Path) -> tuple[bytes, Fingerprint]:
    # Stat the open file, so the mtime and the bytes belong to the same file even if it is
    # replaced by rename while we read.
    with open(path, "rb") as handle:
        mtime_ns = os.fstat(handle.fileno()).st_mtime_ns
        raw = handle.read()
    return raw, Fingerprint(mtime_ns, digest_of(raw))


def _read_or_report(path: Path) -> tuple[bytes, Fingerprint]:
    try:
        return _read(path)
    except FileNotFoundError:
        raise ConfigError([ConfigIssue(str(path), None, "file", "file not found")]) from None
    except OSError as error:
        reason = error.strerror or type(error).__name__
        issue = ConfigIssue(str(path), None, "file", f"cannot read: {reason}")
        raise ConfigError([issue]) from None


def _decode(raw: bytes, file: str) -> tuple[str, str]:
    """(byte-order mark or "", text): the mark is written back so the file stays as it was."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise ConfigError([ConfigIssue(file, line, "file", "not valid UTF-8 text")]) from None
    if text.startswith(_BOM):
        return _BOM, text[1:]
    return "", text
