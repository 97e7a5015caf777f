"""Run `claudex console` (a Textual app) on a pseudo-terminal so it renders as it would for a
user, while the benchmark measures the proxy it hosts. Output is read and thrown away (only the
tail is kept for error messages) so the app never blocks on a full terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from bench.procs import port_open


class ConsoleProcess:
    def __init__(self, argv: Sequence[str], *, env: dict[str, str], cores: set[int],
                 log_path: Path, rows: int = 40, columns: int = 140) -> None:
        self.argv = list(argv)
        self.env = {**env, "TERM": "xterm-256color", "COLUMNS": str(columns),
                    "LINES": str(rows)}
        self.cores = cores
        self.log_path = log_path
        self.size = struct.pack("HHHH", rows, columns, 0, 0)
        self.popen: subprocess.Popen[bytes] | None = None
        self.master = -1
        self.tail = b""
        self.reader: threading.Thread | None = None

    def __enter__(self) -> ConsoleProcess:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, self.size)
        cores = self.cores
        self.popen = subprocess.Popen(
            self.argv, stdin=slave, stdout=slave, stderr=slave, env=self.env,
            preexec_fn=lambda: os.sched_setaffinity(0, cores), start_new_session=True,
        )
        os.close(slave)
        self.master = master
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()
        return self

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.tail = (self.tail + data)[-4000:]

    def wait_for_port(self, port: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen is not None and self.popen.poll() is not None:
                return False
            try:
                if port_open(port):
                    return True
            except OSError:
                pass
            time.sleep(0.1)
        return False

    def output_tail(self) -> str:
        text = self.tail.decode(errors="replace")
        return " ".join(text.split())[-300:]

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self.log_path.write_bytes(self.tail)
        if self.master >= 0:
            os.close(self.master)
            self.master = -1
