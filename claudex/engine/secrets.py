"""Handling secrets safely: showing them masked, and writing files that hold them.

`mask_secret` is the one way a key or token is ever shown (`sk-…wxyz`). `write_json_atomic` and
`write_text_atomic` write credential and config files so that a reader never sees a half-written
file and nobody else can read the result: a temp file in the same directory, fsync, chmod, then
`os.replace` over the target.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

# Below this length even the last few characters give away too much of the secret.
_SHORT = 12
_TINY = 8
_ELLIPSIS = "…"


def mask_secret(value: str) -> str:
    """Show a secret as a non-secret prefix and its last 4 characters: `sk-ant-…wxyz` -> `sk-…wxyz`.

    The prefix is kept only when the value starts with a short tag ending in '-' (at most three
    characters and the dash, like `sk-`); it names the kind of key, not the key. Values shorter
    than 12 characters keep only their last two characters, and those shorter than 8 keep nothing.
    """
    if len(value) < _TINY:
        return _ELLIPSIS
    if len(value) < _SHORT:
        return _ELLIPSIS + value[-2:]
    dash = value.find("-")
    prefix = value[: dash + 1] if 0 < dash <= 3 else ""
    return f"{prefix}{_ELLIPSIS}{value[-4:]}"


def write_text_atomic(path: Path, text: str, mode: int = 0o600) -> None:
    """Replace `path` with `text` atomically, leaving the file with permissions `mode`.

    A symlink at `path` is followed, so a file managed from elsewhere (dotfiles) stays linked.
    Missing parent directories are created private to the user. On any failure the old file is
    untouched and no temp file is left behind.
    """
    target = Path(path).expanduser()
    if target.is_symlink():
        target = target.resolve()
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # mkstemp creates the file 0600 from the start, so the secret is never readable by others.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    _fsync_directory(target.parent)


def write_json_atomic(path: Path, data: object, mode: int = 0o600) -> None:
    """Write `data` as indented JSON to `path` atomically (see `write_text_atomic`).

    The data is serialised before anything touches the disk, so unserialisable data raises
    `TypeError` with the old file intact.
    """
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    write_text_atomic(path, text, mode)


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable; not every platform lets a directory be opened for this."""
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
