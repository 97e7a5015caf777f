"""Files replaced atomically, private by default: config files, OAuth credentials, tokens.

Here in `claudex.config`, the lowest layer: config rewrites profiles in place with it, and the
engine, which may import config (never the other way), writes refreshed credentials back with it.
It imports nothing of claudex's own.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time
from pathlib import Path

__all__ = ["STALE_TEMP_FILE_S", "remove_leftover_temp_files", "write_json_atomic",
           "write_text_atomic"]


def write_text_atomic(path: Path, text: str, mode: int = 0o600) -> None:
    """Replace `path` with `text` atomically, leaving the file with permissions `mode`.

    A symlink at `path` is followed, so a file managed from elsewhere (dotfiles) stays linked.
    Missing parent directories are created private to the user. On any failure the old file is
    untouched and no temp file is left behind — unless the process is killed mid-write: such a
    leftover (mode 0600, perhaps holding a token) is removed by a later write once it is clearly
    stale, since no live writer keeps one for more than a moment.
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
    remove_leftover_temp_files(target, min_age_s=STALE_TEMP_FILE_S)


STALE_TEMP_FILE_S = 60.0


def remove_leftover_temp_files(target: Path, *, min_age_s: float) -> None:
    """Remove the temp files `write_text_atomic` makes for `target` that are at least
    `min_age_s` old: left by writers that were killed mid-write. A caller holding a lock that
    every writer takes may pass 0."""
    pattern = re.compile(rf"\.{re.escape(target.name)}\.[A-Za-z0-9_]+\.tmp")
    try:
        names = os.listdir(target.parent)
    except OSError:
        return
    now = time.time()
    for name in names:
        if not pattern.fullmatch(name):
            continue
        leftover = target.parent / name
        with contextlib.suppress(OSError):
            if now - leftover.stat().st_mtime >= min_age_s:
                leftover.unlink()


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
