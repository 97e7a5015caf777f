"""What the commands share: the config file they read, the running engine's address and admin API,
and `CliError`, the one way a command fails (a message, exit status 1)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from claudex.config.loader import load_config
from claudex.config.model import Config, ConfigError
from claudex.config.paths import default_config_path, example_config_path
from claudex.engine.masking.secrets import SCRUBBER, config_secrets


class CliError(Exception):
    """A message for the user; printed without a traceback, exit status 1."""


def _config_path(args: argparse.Namespace) -> Path:
    return Path(args.config).expanduser() if args.config else default_config_path()


def _no_config(path: Path) -> CliError:
    return CliError(
        f"No config at {path}. Run `claudex init` to write a starter config there from the "
        f"logins and API-key variables it finds (the full example is {example_config_path()}), "
        "pass --config FILE, or try `claudex demo` (fake providers, no setup)."
    )


def _load(args: argparse.Namespace) -> Config:
    path = _config_path(args)
    if not path.exists():
        raise _no_config(path)
    try:
        return load_config(path)
    except ConfigError as exc:
        if len(exc.issues) == 1:  # one problem, one line (it names the file and line)
            raise CliError(str(exc.issues[0])) from None
        lines = "\n".join(f"  {issue}" for issue in exc.issues)
        raise CliError(f"{path} has {len(exc.issues)} problem(s):\n{lines}") from None


def _config_if_loadable(args: argparse.Namespace) -> Config | None:
    path = _config_path(args)
    if not path.exists():
        return None
    try:
        return load_config(path)
    except ConfigError:
        return None


def _base_url(args: argparse.Namespace) -> str:
    if getattr(args, "url", None):
        return str(args.url).rstrip("/")
    host, port = "127.0.0.1", 13456
    path = _config_path(args)
    if path.exists():
        try:
            proxy = load_config(path).proxy
            host, port = proxy.host, proxy.port
        except ConfigError:
            pass
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}"


def _local_token(config: Config | None) -> str | None:
    if config is None or not config.proxy.auth_token_env:
        return None
    return os.environ.get(config.proxy.auth_token_env) or None


def _admin_headers(args: argparse.Namespace) -> dict[str, str]:
    token = os.environ.get("CLAUDEX_TOKEN")
    path = _config_path(args)
    if path.exists():
        try:
            config = load_config(path)
        except ConfigError:
            pass
        else:
            token = _local_token(config) or token
            SCRUBBER.add(config_secrets(config))  # whatever the engine says is shown masked
    SCRUBBER.add([token])
    return {"authorization": f"Bearer {token}"} if token else {}


def trust_env_for(url: str) -> bool:
    """Whether httpx may take a proxy from the environment for `url`: never for claudex on
    this machine (a loopback address is never sent through an environment proxy, issue 36 —
    behind a corporate HTTPS_PROXY the admin calls would otherwise go to the proxy)."""
    host = (urlsplit(url if "://" in url else f"//{url}").hostname or "").lower()
    loopback = host in ("localhost", "::1") or host.endswith(".localhost") or \
        host.startswith("127.")
    return not loopback


def _admin(args: argparse.Namespace, method: str, path: str,
           body: dict[str, Any] | None = None) -> httpx.Response:
    url = _base_url(args)
    try:
        return httpx.request(method, url + path, headers=_admin_headers(args), timeout=10.0,
                             json=body, trust_env=trust_env_for(url))
    except httpx.TransportError:
        raise CliError(
            f"No claudex engine answers at {url}. Start one with `claudex serve` "
            "(or `claudex demo --headless`), or pass --url."
        ) from None


def _engine_error(resp: httpx.Response) -> CliError:
    """The engine's own sentence when its answer has one (admin errors are
    `{"error": "..."}`), else the status and the start of the body."""
    try:
        said = resp.json().get("error")
    except (ValueError, AttributeError):
        said = None
    if isinstance(said, str) and said:
        return CliError(SCRUBBER.text(said[:300]))
    return CliError(f"The engine answered {resp.status_code}: {SCRUBBER.text(resp.text[:200])}")


def _print_warning(out: Any, warning: str | None) -> None:
    if warning:
        out.print("[bold yellow]warning:[/] ", end="")
        out.print(warning, markup=False)
