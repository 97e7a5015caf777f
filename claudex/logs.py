"""Logging for claudex: one redaction filter that masks every secret, stderr for `serve`
(text or JSON lines), a rotating file for the console (it owns the terminal)."""

from __future__ import annotations

import json
import logging
import logging.handlers
import re
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from claudex.engine.secrets import mask_secret

# Shapes of secrets worth masking even when nobody registered them.
_PATTERNS = [
    re.compile(r"(?i)(bearer\s+)([A-Za-z0-9._~+/=-]{8,})"),
    re.compile(r"\b((?:sk|xai|pk|rk)-[A-Za-z0-9_-]{8,})\b"),
]


class RedactionFilter(logging.Filter):
    """Masks registered secrets and secret-shaped strings in every record that passes."""

    def __init__(self) -> None:
        super().__init__()
        self._secrets: set[str] = set()

    def add(self, secrets: Iterable[str | None]) -> None:
        # Build a new set and swap it in: another thread may be iterating the current one.
        fresh = set(self._secrets)
        fresh.update(s for s in secrets if s and len(s) >= 6)
        self._secrets = fresh

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, mask_secret(secret))
        text = _PATTERNS[0].sub(lambda m: m.group(1) + mask_secret(m.group(2)), text)
        return _PATTERNS[1].sub(lambda m: mask_secret(m.group(1)), text)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = self.redact(message)
        if redacted != message or record.args:
            record.msg, record.args = redacted, None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = self.redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


REDACTOR = RedactionFilter()


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False)


def _install(handler: logging.Handler, level: int) -> None:
    handler.addFilter(REDACTOR)
    root = logging.getLogger("claudex")
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    root.propagate = False
    # uvicorn's own errors go to the same place, redacted, instead of Python's last-resort stderr.
    server_log = logging.getLogger("uvicorn.error")
    for old in list(server_log.handlers):
        server_log.removeHandler(old)
    server_log.addHandler(handler)
    server_log.setLevel(logging.WARNING)
    server_log.propagate = False


def setup_stderr(*, json_lines: bool = False, level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter(
        "%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S"))
    _install(handler, level)


def setup_file(path: Path, level: int = logging.INFO) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(path, maxBytes=5_000_000, backupCount=3)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    _install(handler, level)
