"""`claudex env` and `claudex run`: Claude Code (or another command) pointed at the proxy.

Behind a corporate proxy (a proxy variable set), Claude Code's `NO_PROXY` gains the loopback
names, so its requests to claudex stay on this machine (issue 36)."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
from collections.abc import Mapping

import httpx

from claudex.cli.common import (
    CliError,
    _admin_headers,
    _base_url,
    _config_if_loadable,
    _config_path,
    trust_env_for,
)
from claudex.config.loader import load_config
from claudex.config.model import Config, ConfigError
from claudex.config.network import PROXY_VARIABLES  # as Claude Code (Node) and curl read them

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def loopback_no_proxy(environ: Mapping[str, str]) -> dict[str, str]:
    """`NO_PROXY` and `no_proxy` for Claude Code when a proxy variable is set: the entries it
    already has (from both spellings, in order, each once) plus 127.0.0.1, localhost and ::1,
    so its requests to claudex on this machine never go to the corporate proxy. {} when no
    proxy is set, or when `*` already exempts every host."""
    if not any(environ.get(name, "").strip() for name in PROXY_VARIABLES):
        return {}
    entries: list[str] = []
    for name in ("NO_PROXY", "no_proxy"):
        for entry in environ.get(name, "").replace(",", " ").split():
            if entry.lower() not in (e.lower() for e in entries):
                entries.append(entry)
    if "*" in entries:
        return {}
    entries += [name for name in LOOPBACK_NAMES if name not in (e.lower() for e in entries)]
    value = ",".join(entries)
    return {"NO_PROXY": value, "no_proxy": value}


def _client_env(args: argparse.Namespace, profile: str | None) -> dict[str, str]:
    base = _base_url(args)
    config: Config | None = None
    path = _config_path(args)
    if path.exists():
        try:
            config = load_config(path)
        except ConfigError:
            config = None
    if profile == "auto" and config is not None and config.profile("auto") is None:
        # Claudex's `claudex run auto` reached its router; here that is the default route,
        # where [routes] and [router] apply.
        profile = None
    if profile and config is not None and config.resolve(profile) is None:
        names = ", ".join([*(p.name for p in config.profiles), *(p.name for p in config.pools)])
        raise CliError(f"No profile named {profile!r} in {path} (have: {names}).")
    env = {"ANTHROPIC_BASE_URL": f"{base}/proxy/{profile}" if profile else base}
    # A pool stands for its members here: their first one says what the client needs.
    target = (config.resolve(profile) if profile else config.default_profile) if config else None
    if config is not None and config.proxy.auth_token_env:
        env["ANTHROPIC_AUTH_TOKEN"] = f"${config.proxy.auth_token_env}"
    elif target is None or target.auth_type != "passthrough":
        # Claude Code wants some credential; the proxy supplies the real one upstream.
        env["ANTHROPIC_AUTH_TOKEN"] = "claudex"
    env.update(loopback_no_proxy(os.environ))
    return env


def cmd_env(args: argparse.Namespace) -> int:
    for key, value in _client_env(args, args.profile).items():
        # A $NAME reference stays unquoted-expandable so no secret is ever printed.
        shown = f'"{value}"' if value.startswith("$") else f"'{value}'"
        print(f"export {key}={shown}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    base = _base_url(args)
    try:
        httpx.get(base + "/healthz", headers=_admin_headers(args), timeout=3.0,
                  trust_env=trust_env_for(base))
    except httpx.TransportError:
        raise CliError(
            f"No claudex proxy answers at {base}. Start it first in another terminal with "
            "`claudex serve` (or `claudex` for the console), then run this again."
        ) from None
    config = _config_if_loadable(args)
    command = list(args.command or [])
    if not command:
        # Claudex's `claude_binary` names the Claude Code to run; else `claude` from PATH.
        binary = config.claude_binary if config is not None else None
        command = [os.path.expanduser(binary) if binary else "claude"]
    if shutil.which(command[0]) is None:
        raise CliError(f"Command not found: {command[0]}")
    env = dict(os.environ)
    for key, value in _client_env(args, args.profile).items():
        env[key] = os.path.expandvars(value) if value.startswith("$") else value
    target = None
    if config is not None:
        named = args.profile if args.profile != "auto" or config.profile("auto") else None
        target = config.resolve(named) if named else config.default_profile
    if target is not None:
        # The profile's `extra_env` goes last, as in Claudex: what the file says wins.
        env.update(target.extra_env)
    return subprocess.call(command, env=env)
