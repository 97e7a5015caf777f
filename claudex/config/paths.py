"""Where claudex looks for its config file when no `--config FILE` is given."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import platformdirs

CONFIG_ENV_VAR = "CLAUDEX_CONFIG"
CONFIG_FILE_NAME = "profiles.toml"


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    """`$CLAUDEX_CONFIG` when set and not blank, else `profiles.toml` in the user config dir.

    `env` defaults to the process environment; tests pass their own mapping.
    """
    environ = os.environ if env is None else env
    override = environ.get(CONFIG_ENV_VAR, "").strip()
    if override:
        # Expand `~` ourselves: the variable is often set in files no shell expands.
        return Path(override).expanduser()
    return platformdirs.user_config_path("claudex") / CONFIG_FILE_NAME
