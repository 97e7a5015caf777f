"""Installing a pinned npm package into a cache folder, shared by the Claude Code and Codex CLI
runs: into a fresh folder first, then moved into place, so an interrupted install leaves no
half-installed cache behind."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

INSTALL_TIMEOUT_S: Final = 600


class InstallError(RuntimeError):
    """The pinned client could not be installed or run; the message says why."""


def install_pinned(target: Path, spec: str, *, what: str, is_pinned: Callable[[Path], bool],
                   binary_in: Callable[[Path], Path], extra: Sequence[str] = ()) -> Path:
    """The binary in `target`, after `npm install --prefix` of `spec` ("pkg@version") when the
    binary there is missing or not the pinned version."""
    binary = binary_in(target)
    if is_pinned(binary):
        return binary
    npm = shutil.which("npm")
    if npm is None:
        raise InstallError(f"npm is needed to install {what} (apt-get install nodejs npm)")
    staging = target.with_name(f"{target.name}.installing-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    command = [npm, "install", "--prefix", str(staging), spec, "--no-audit", "--no-fund",
               "--no-save", *extra, "--loglevel=error"]
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        shutil.rmtree(staging, ignore_errors=True)
        raise InstallError(f"npm install did not finish in {INSTALL_TIMEOUT_S} s") from None
    if done.returncode != 0 or not is_pinned(binary_in(staging)):
        shutil.rmtree(staging, ignore_errors=True)
        raise InstallError(f"npm install {spec} failed (exit {done.returncode}): "
                           f"{(done.stderr or done.stdout).strip()[-2000:]}")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return binary

