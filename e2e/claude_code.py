"""The pinned Claude Code CLI, installed with npm into a cache folder outside the repository.

    python -m e2e.claude_code        # install if missing, print the binary's path

`npm install --prefix CACHE @anthropic-ai/claude-code@VERSION` brings the platform's native
binary as an optional dependency (`@anthropic-ai/claude-code-linux-x64`, ...). The wrapper
package's postinstall (which would link it) is not needed: the native binary is run directly,
so neither install scripts nor the wrapper's `node >= 22` requirement matter. The cache is
`${XDG_CACHE_HOME:-~/.cache}/claudex-e2e/claude-code-VERSION`, reused while its binary reports
the pinned version; `CLAUDEX_E2E_CLAUDE=/path/to/claude` uses another binary instead.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Final

from e2e.npm_cache import InstallError, install_pinned

VERSION: Final = "2.1.332"
PACKAGE: Final = "@anthropic-ai/claude-code"



def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "claudex-e2e" / f"claude-code-{VERSION}"


def platform_package() -> str:
    """The npm package holding this machine's native binary."""
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine)
    system = {"linux": "linux", "darwin": "darwin"}.get(sys.platform)
    if arch is None or system is None:
        raise InstallError(f"no Claude Code binary for {sys.platform}/{machine}")
    musl = system == "linux" and any(Path("/lib").glob("ld-musl-*"))
    return f"{PACKAGE}-{system}-{arch}{'-musl' if musl else ''}"


def binary_in(prefix: Path) -> Path:
    return prefix / "node_modules" / platform_package() / "claude"


def version_of(binary: Path) -> str | None:
    """What `claude --version` says ("2.1.332 (Claude Code)"), or None if it does not run."""
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                              timeout=60, env={"PATH": os.environ.get("PATH", ""),
                                               "HOME": str(Path.home()),
                                               "DISABLE_AUTOUPDATER": "1"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def ensure_installed() -> Path:
    """The path of a Claude Code binary at the pinned version, installing it if needed."""
    override = os.environ.get("CLAUDEX_E2E_CLAUDE")
    if override:
        binary = Path(override)
        if version_of(binary) is None:
            raise InstallError(f"CLAUDEX_E2E_CLAUDE={override} does not run")
        return binary
    return install_pinned(cache_dir(), f"{PACKAGE}@{VERSION}", what="Claude Code",
                          is_pinned=_is_pinned, binary_in=binary_in)


def _is_pinned(binary: Path) -> bool:
    said = version_of(binary) if binary.is_file() else None
    return said is not None and said.split()[0] == VERSION


def main() -> int:
    try:
        print(ensure_installed())
    except InstallError as error:
        print(f"e2e: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
