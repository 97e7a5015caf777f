"""The digest a config file is known by: the editor's fingerprint (editing.py) and the watcher's
"is this the text we wrote?" (watch.py) must agree. Its own module so that `claudex serve`'s
watcher does not import the editor and its tomlkit (edits come from the console, not serve)."""

from __future__ import annotations

import hashlib


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
