"""The profile editor's file side: the snapshot it read, and what `claudex check` says about
the file the form would write.

- `read_snapshot`: the file's text, fingerprint, the edited profile as written and the profile
  names (read in a worker thread);
- `check_edit`: the issues `claudex check` would report once the form's values are saved;
- `short_key`: an issue's key as the form names it.

`claudex.console.editor_fields` re-exports these names; the screen is `claudex.console.editor`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claudex.config.editing import (
    EditError,
    Fingerprint,
    profile_from_text,
    profile_names,
    read_config_text,
    with_profile_added,
    with_profile_updated,
)
from claudex.config.loader import parse_config
from claudex.config.model import Config, ConfigError, ConfigIssue

_INDEXED_PROFILE = re.compile(r"^profiles\[\d+\]\.")


@dataclass(frozen=True)
class FileSnapshot:
    """The file as the editor read it (in a worker thread: tomlkit is slow-ish)."""

    text: str
    fingerprint: Fingerprint
    profile: dict[str, Any]  # the edited profile's keys as written; {} for a new one
    names: list[str]
    config: Config | None  # for the inherited values shown in empty fields; None if invalid


def read_snapshot(path: Path, name: str | None) -> FileSnapshot:
    text, fingerprint = read_config_text(path)
    file = str(path)
    profile = profile_from_text(text, name, file=file) if name is not None else {}
    try:
        config: Config | None = parse_config(text, file)
    except ConfigError:
        config = None
    return FileSnapshot(text, fingerprint, profile, profile_names(text, file=file), config)


def check_edit(
    text: str, profile_name: str | None, values: Mapping[str, Any], file: str
) -> list[ConfigIssue]:
    """The issues `claudex check` would report once `values` are saved into `text`.

    `profile_name` None adds a profile. Slow-ish (tomlkit and the validator): run it in a thread.
    """
    try:
        if profile_name is None:
            edited = with_profile_added(text, values, file=file)
        else:
            edited = with_profile_updated(text, profile_name, values, file=file)
        parse_config(edited, file)
    except ConfigError as error:
        return list(error.issues)
    except (EditError, TypeError) as error:
        return [ConfigIssue(file, None, "profiles", str(error))]
    return []


def short_key(key: str, typed_name: str) -> str:
    """An issue's key without this profile's prefix: `base_url`, not `profiles.x.base_url`."""
    if typed_name:
        return key.removeprefix(f"profiles.{typed_name}.")
    # A nameless profile is located by its index; the only nameless one is likely ours.
    return _INDEXED_PROFILE.sub("", key, count=1)
