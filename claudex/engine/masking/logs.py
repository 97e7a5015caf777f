"""Logging for claudex: one redaction filter that masks every secret, stderr for `serve`
(text or JSON lines), a rotating file for the console (it owns the terminal)."""

from __future__ import annotations

import json
import logging
import logging.handlers
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from claudex.engine.masking.secrets import SCRUBBER, SecretScrubber


class RedactionFilter(logging.Filter):
    """Masks registered secrets and secret-shaped strings in every record that passes.

    The secrets live in the process-wide `SCRUBBER` (claudex.engine.masking.secrets), which the
    engine also uses for error answers, status and events: registering a secret here covers them
    all.
    """

    def __init__(self, scrubber: SecretScrubber = SCRUBBER) -> None:
        super().__init__()
        self._scrubber = scrubber

    def add(self, secrets: Iterable[str | None]) -> None:
        self._scrubber.add(secrets)

    def redact(self, text: str) -> str:
        return self._scrubber.text(text)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = self.redact(message)
        if redacted != message or record.args:
            record.msg, record.args = redacted, None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = self.redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
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


_installed: list[logging.Handler] = []


def _install(handler: logging.Handler, level: int) -> None:
    handler.addFilter(REDACTOR)
    root = logging.getLogger()
    claudex_log = logging.getLogger("claudex")
    # uvicorn's own errors go to the same place, redacted, instead of Python's last-resort stderr.
    server_log = logging.getLogger("uvicorn.error")
    for logger in (root, claudex_log, server_log):
        for old in list(logger.handlers):
            if logger is not root or old in _installed:
                logger.removeHandler(old)
        logger.addHandler(handler)
    _installed[:] = [handler]
    claudex_log.setLevel(level)
    claudex_log.propagate = False
    server_log.setLevel(logging.WARNING)
    server_log.propagate = False
    # Other libraries' warnings (asyncio's "exception never retrieved", aiohttp) pass the same
    # filter instead of reaching stderr unredacted.
    root.setLevel(logging.WARNING)


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
