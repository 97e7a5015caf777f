"""Token commands: run a profile's `token_command` through the shell and take the token it prints.

Kept apart from `oauth.py` (credential files and the refresh grant): a command is a different
source with its own hazards, a child process to bound in time and to kill with whatever it
started, and output that is the secret itself. `credentials.py` (through token_sources.py) decides
when to run one; nothing here caches, logs or publishes events.

    CommandFailed    a token command could not be run, timed out, or exited non-zero; its
                     reason says how, never what the command printed on stdout
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

COMMAND_TIMEOUT_SECONDS = 30.0


class CommandFailed(Exception):
    """A token command failed; `reason` says how (exit status, timeout), never what it printed."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def token_from_output(output: str) -> str | None:
    """The first non-empty line of a command's output (`pass show` prints extras after it)."""
    for line in output.splitlines():
        if line.strip():
            return line.strip()
    return None


async def run_shell_command(command: str, time_limit: float = COMMAND_TIMEOUT_SECONDS) -> str:
    """Run `command` through the shell and return its stdout.

    The command runs in its own process group so that a timeout (or cancellation) kills whatever
    it started, not just the shell.
    """
    try:
        process = await asyncio.create_subprocess_shell(
            command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        raise CommandFailed(f"could not be started ({exc.strerror or type(exc).__name__})") from exc
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), time_limit)
    except TimeoutError:
        await _kill_group(process)
        raise CommandFailed(f"did not finish within {time_limit:g} s") from None
    except BaseException:
        await _kill_group(process)
        raise
    if process.returncode != 0:
        # Only stderr's first line is shown: stdout is where the secret would be.
        lines = stderr.decode("utf-8", "replace").strip().splitlines()
        first = lines[0].strip()[:200] if lines else ""
        detail = f": {first}" if first else ""
        raise CommandFailed(f"exited with status {process.returncode}{detail}")
    return stdout.decode("utf-8", "replace")


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    await process.wait()
