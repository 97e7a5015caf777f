"""The pinned Codex CLI, installed with npm into a cache folder, and one `codex exec` run.

    python -m e2e.codex_cli          # install if missing, print the binary's path

`npm install --prefix CACHE @openai/codex@VERSION` brings this platform's native binary as an
optional dependency (`@openai/codex-linux-x64`, an alias of `@openai/codex@VERSION-linux-x64`,
holding `vendor/<target triple>/bin/codex`); the JavaScript wrapper is not needed, the binary is
run directly. The cache is `${XDG_CACHE_HOME:-~/.cache}/claudex-e2e/codex-VERSION`;
`CLAUDEX_E2E_CODEX=/path/to/codex` uses another binary instead.

Isolation, as for Claude Code: a scratch HOME and CODEX_HOME, an environment built from
nothing, HTTPS_PROXY at the refusing proxy, and a config.toml that turns off everything Codex
CLI would otherwise fetch from github.com and chatgpt.com (update check, analytics, feedback,
OpenTelemetry, plugins, apps). Its model provider is claudex (`wire_api = "responses"`), with
Codex's own retries off, so a run shows claudex's behaviour.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import secrets
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from claudex.demo.scripted import script_prompt
from e2e.harness import World, _base_env
from e2e.npm_cache import InstallError, install_pinned

VERSION: Final = "0.171.0"
PACKAGE: Final = "@openai/codex"
CODEX_TIMEOUT_S: Final = 180.0
CLIENT_KEY: Final = "sk-codex-e2e-client-" + secrets.token_hex(8)
"""Codex CLI's key for the claudex provider (env_key): it must never reach an upstream."""



def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "claudex-e2e" / f"codex-{VERSION}"


def _platform() -> tuple[str, str]:
    """(npm package suffix, Rust target triple) of this machine's binary."""
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine)
    rust = {"x64": "x86_64", "arm64": "aarch64"}.get(arch or "")
    if sys.platform == "linux" and arch and rust:
        return f"linux-{arch}", f"{rust}-unknown-linux-musl"
    if sys.platform == "darwin" and arch and rust:
        return f"darwin-{arch}", f"{rust}-apple-darwin"
    raise InstallError(f"no Codex CLI binary for {sys.platform}/{machine}")


def binary_in(prefix: Path) -> Path:
    suffix, triple = _platform()
    return (prefix / "node_modules" / f"{PACKAGE}-{suffix}" / "vendor" / triple / "bin"
            / "codex")


def version_of(binary: Path) -> str | None:
    """What `codex --version` says ("codex-cli 0.171.0"), or None if it does not run."""
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                              timeout=60, env={"PATH": os.environ.get("PATH", ""),
                                               "HOME": str(Path.home())})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _is_pinned(binary: Path) -> bool:
    said = version_of(binary) if binary.is_file() else None
    return said is not None and said.split()[-1] == VERSION


def ensure_installed() -> Path:
    override = os.environ.get("CLAUDEX_E2E_CODEX")
    if override:
        if version_of(Path(override)) is None:
            raise InstallError(f"CLAUDEX_E2E_CODEX={override} does not run")
        return Path(override)
    return install_pinned(cache_dir(), f"{PACKAGE}@{VERSION}", what="Codex CLI",
                          is_pinned=_is_pinned, binary_in=binary_in, extra=("--ignore-scripts",))


def codex_config(base_url: str, model: str) -> str:
    """CODEX_HOME/config.toml: claudex as the model provider, nothing fetched from outside."""
    return f"""model = "{model}"
model_provider = "claudex"
check_for_update_on_startup = false

[model_providers.claudex]
name = "claudex"
base_url = "{base_url}"
wire_api = "responses"
env_key = "CLAUDEX_E2E_CODEX_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[features]
plugins = false
remote_plugin = false
apps = false
in_app_updates = false
"""


@dataclass
class CodexRun:
    returncode: int
    stdout: str
    stderr: str
    token: str
    proof: Path

    def describe(self) -> str:
        return (f"codex exited {self.returncode}\n--- stdout ---\n{self.stdout[-4000:]}\n"
                f"--- stderr ---\n{self.stderr[-4000:]}")


async def run_codex(world: World, binary: Path, *, profile: str,
                    model: str = "gpt-5.1-codex",
                    before: Sequence[str] = (), after: Sequence[str] = ()) -> CodexRun:
    """`codex exec` on a script of shell steps: `before`, then the one that writes the proof
    file, then `after`; then the provider says `done TOKEN`."""
    assert world.served is not None
    token = "c" + secrets.token_hex(6)
    proof = world.proof_path()
    prompt = script_prompt(token, [*(("Bash", c) for c in before),
                                   ("Bash", f"printf %s {token} > {proof}"),
                                   *(("Bash", c) for c in after)])
    codex_home = world.home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        codex_config(f"{world.served.url}/proxy/{profile}/v1", model))
    env = {**_base_env(), "HOME": str(world.home), "CODEX_HOME": str(codex_home),
           "TMPDIR": str(world.tmp), "SHELL": "/bin/bash", "CLAUDEX_E2E_CODEX_KEY": CLIENT_KEY,
           "HTTPS_PROXY": world.proxy.url, "HTTP_PROXY": world.proxy.url,
           "https_proxy": world.proxy.url, "http_proxy": world.proxy.url,
           "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    argv = [str(binary), "exec", "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox", prompt]
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=world.work, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), CODEX_TIMEOUT_S)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = await proc.communicate()
    return CodexRun(proc.returncode if proc.returncode is not None else -1,
                    out.decode(errors="replace"), err.decode(errors="replace"), token, proof)


def main() -> int:
    try:
        print(ensure_installed())
    except InstallError as error:
        print(f"e2e: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
