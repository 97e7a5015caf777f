"""Whether the config file gives its secrets away: a file holding an inline `api_key` that group
or others can read.

claudex writes such files with mode 0600 itself (`config/editing.py`), but a file written by
hand, copied or unpacked often is 0644. `claudex check`, `claudex serve` and the console say so
once, naming the file, its mode and the fix — never the secret.
"""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path

from claudex.config.model import Config

# Read permission for the group or for others.
_SHARED_READ = stat.S_IRGRP | stat.S_IROTH


def readable_by_others(path: Path) -> int | None:
    """The file's permission bits when group or others may read it, else None (also when it
    cannot be looked at: then there is nothing to warn about here)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None
    return mode if mode & _SHARED_READ else None


def _warning(path: Path, mode: int) -> str:
    who = " and ".join(w for w, bit in (("group", stat.S_IRGRP), ("others", stat.S_IROTH))
                       if mode & bit)
    return (f"{path} holds an inline api_key and is readable by {who} (mode {mode:04o}); "
            f"run `chmod 600 {path}` (or use api_key_env).")


def config_permission_warning(config: Config) -> str | None:
    """One line when `config` came from a file that holds an inline secret and others may
    read; None otherwise."""
    if config.path is None or not any(p.api_key for p in config.profiles):
        return None
    mode = readable_by_others(config.path)
    return None if mode is None else _warning(config.path, mode)


def file_permission_warning(path: Path | str | None) -> str | None:
    """The same check for a config file known only by its path (the console, which sees the
    engine's snapshot): the file is read to see whether it holds an inline secret."""
    if not path:
        return None
    file = Path(path)
    mode = readable_by_others(file)
    if mode is None:
        return None
    try:
        document = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    profiles = document.get("profiles")
    if not isinstance(profiles, list):
        return None
    if not any(isinstance(p, dict) and p.get("api_key") for p in profiles):
        return None
    return _warning(file, mode)
