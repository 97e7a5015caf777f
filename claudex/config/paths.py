"""Where claudex looks for its config file when no `--config FILE` is given, and where the
example config ships."""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

import platformdirs

CONFIG_ENV_VAR = "CLAUDEX_CONFIG"
CONFIG_FILE_NAME = "profiles.toml"
# Claudex (the Rust project) keeps its file in the same directory under this name.
CLAUDEX_FILE_NAME = "config.toml"


def default_config_path(
    env: Mapping[str, str] | None = None, config_dir: Path | None = None
) -> Path:
    """`$CLAUDEX_CONFIG` when set and not blank; else `profiles.toml` in the user config dir;
    else Claudex's `config.toml` there when only that one exists. With neither, `profiles.toml`
    (where `claudex init` writes).

    `env` defaults to the process environment and `config_dir` to platformdirs' user config dir
    for "claudex"; tests pass their own.
    """
    environ = os.environ if env is None else env
    override = environ.get(CONFIG_ENV_VAR, "").strip()
    if override:
        # Expand `~` ourselves: the variable is often set in files no shell expands.
        return Path(override).expanduser()
    directory = platformdirs.user_config_path("claudex") if config_dir is None else config_dir
    ours = directory / CONFIG_FILE_NAME
    claudex = directory / CLAUDEX_FILE_NAME
    if not ours.exists() and claudex.is_file():
        return claudex
    return ours


def example_config_path() -> Path:
    """The commented example config installed with the package."""
    return Path(str(resources.files("claudex") / "data" / "profiles.example.toml"))
