"""The `claudex` command line. Every failure ends in one clear message and an exit status, never
a traceback."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from claudex import __version__
from claudex.config.loader import check_config, load_config
from claudex.config.model import Config, ConfigError, HistorySettings
from claudex.config.paths import default_config_path, example_config_path
from claudex.config.permissions import config_permission_warning, file_permission_warning
from claudex.engine.breaker.trips import DurationError, parse_duration, reset_words, trip_words
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


def _admin(args: argparse.Namespace, method: str, path: str,
           body: dict[str, Any] | None = None) -> httpx.Response:
    url = _base_url(args)
    try:
        return httpx.request(method, url + path, headers=_admin_headers(args), timeout=10.0,
                             json=body)
    except httpx.TransportError:
        raise CliError(
            f"No claudex engine answers at {url}. Start one with `claudex serve` "
            "(or `claudex demo --headless`), or pass --url."
        ) from None


# -- commands ------------------------------------------------------------------------------------


# `[proxy] log_level` (or Claudex's top-level `log_level`) as a `logging` level number.
_LOG_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}


def cmd_serve(args: argparse.Namespace) -> int:
    from claudex.engine.masking import logs
    from claudex.server.serve import ServeError, serve_forever

    config = _load(args)
    level = 10 if args.debug else _LOG_LEVELS[config.proxy.log_level]
    logs.setup_stderr(json_lines=args.log_json, level=level)
    host = args.host or config.proxy.host
    port = args.port if args.port is not None else config.proxy.port
    try:
        return serve_forever(config, host=host, port=port, config_path=_config_path(args))
    except ServeError as exc:  # the server layer does not know the command line's error
        raise CliError(str(exc)) from None


def cmd_check(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    path = _config_path(args)
    if not path.exists() and not path.is_symlink():
        raise _no_config(path)
    out = Console(highlight=False)
    issues = check_config(path)
    if issues:
        out.print(f"[bold red]{len(issues)} problem(s)[/] in {path}:")
        for issue in issues:
            out.print(f"  {issue}", markup=False)
        _print_warning(out, file_permission_warning(path))
        return 1
    from rich.table import Table

    config = load_config(path)
    warned = f", {len(config.warnings)} warning(s)" if config.warnings else ""
    pools = f", {len(config.pools)} pool(s)" if config.pools else ""
    out.print(f"[green]ok[/] {path}: {len(config.profiles)} profile(s){pools}{warned}")
    for warning in config.warnings:
        _print_warning(out, str(warning))
    _print_warning(out, config_permission_warning(config))
    table = Table(box=None, show_header=True, header_style="bold", pad_edge=False)
    for column in ("profile", "type", "chain", "state"):
        table.add_column(column, no_wrap=column != "state")
    for p in config.profiles:
        chain = " → ".join([p.name, *p.backup_providers])
        problem = f"[red]misconfigured:[/] {escape(p.problem)}" if p.problem else None
        if not p.enabled:
            state = "[dim]disabled[/]" + (f" ({problem})" if problem else "")
        else:
            state = problem or "[green]ready[/]"
        table.add_row(p.name, _SHORT_TYPES.get(p.provider_type, p.provider_type), chain, state)
    for pool in config.pools:
        members = " | ".join(pool.members)
        chain = " → ".join([f"({members})", *pool.backup_providers])
        table.add_row(pool.name, "pool", chain, f"[green]{pool.balance}[/]")
    out.print(table)
    for line in _routing_lines(config):
        out.print(line, markup=False)
    return 0


def _routing_lines(config: Config) -> list[str]:
    """What `[routes]` and `[router]` do, for `claudex check` (nothing when neither is set)."""
    lines = []
    targets = config.routes.targets()
    if targets:
        shown = ", ".join(f"{route} → {profile}" for route, profile in targets.items())
        tokens = f" (over {config.routes.long_context_tokens:,} tokens)" \
            if "long_context" in targets else ""
        lines.append(f"routes: {shown}{tokens}")
    router = config.router
    if router.active:
        model = f" ({router.model})" if router.model else ""
        rules = ", ".join(f"{name} → {profile}" for name, profile in router.rules.items())
        lines.append(f"router: {router.profile}{model} classifies each conversation: {rules}")
    elif router.rules or router.profile:
        lines.append("router: off (enabled = false)")
    return lines


_SHORT_TYPES = {
    "DirectAnthropic": "anthropic",
    "OpenAICompatible": "openai",
    "OpenAIResponses": "responses",
}


def cmd_init(args: argparse.Namespace) -> int:
    from claudex.config.atomic_files import write_text_atomic
    from claudex.config.loader import parse_config
    from claudex.config.starter import discover, report, starter_path_free, starter_text

    path = _config_path(args)
    if not starter_path_free(path):
        raise CliError(
            f"{path} already exists; `claudex init` never replaces a config. Check it with "
            "`claudex check`, or pass --config NEW_FILE to write a starter somewhere else."
        )
    if args.from_ccr:
        return _init_from_ccr(Path(args.from_ccr).expanduser(), path)
    found = discover(os.environ)
    text = starter_text(found, str(example_config_path()))
    # What init writes must load; a failure here is claudex's bug, reported before any write.
    config = parse_config(text, str(path))
    try:
        write_text_atomic(path, text, 0o600)
    except OSError as exc:
        raise CliError(f"Cannot write {path}: {exc.strerror or type(exc).__name__}") from None
    print("claudex init looked for logins and API-key variables:")
    for line in report(found):
        print(f"  {line}")
    names = ", ".join(p.name for p in config.profiles)
    print(f"Wrote {path} (mode 0600) with {len(config.profiles)} profile(s): {names}.")
    print("Next: `claudex check`, then `claudex serve` and, in another terminal, `claudex run`.")
    return 0


def _init_from_ccr(source: Path, path: Path) -> int:
    """`claudex init --from-ccr FILE`: the claude-code-router config as a claudex one."""
    from claudex.config.atomic_files import write_text_atomic
    from claudex.config.ccr_json import CcrFileError
    from claudex.config.from_ccr import convert_ccr
    from claudex.config.loader import parse_config

    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise CliError(f"Cannot read {source}: {why}") from None
    try:
        converted = convert_ccr(text, str(source))
    except CcrFileError as exc:
        raise CliError(f"{exc} — nothing was written") from None
    # What init writes must load; a failure here is claudex's bug, reported before any write.
    parse_config(converted.text, str(path), env={})
    try:
        write_text_atomic(path, converted.text, 0o600)
    except OSError as exc:
        raise CliError(f"Cannot write {path}: {exc.strerror or type(exc).__name__}") from None
    print(f"Wrote {path} (mode 0600) from {source}: {len(converted.profiles)} profile(s) "
          f"({', '.join(converted.profiles)}), default {converted.default_profile}.")
    for route, profile in converted.routes.items():
        print(f"  route {route} -> {profile}")
    if converted.variables:
        print("Set these variables before `claudex serve` (no key was copied):")
        for variable, why in converted.variables.items():
            print(f"  {variable}: {why}")
    print("Next: `claudex check`, then `claudex serve` and, in another terminal, `claudex run`.")
    return 0


def _print_warning(out: Any, warning: str | None) -> None:
    if warning:
        out.print("[bold yellow]warning:[/] ", end="")
        out.print(warning, markup=False)


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


def cmd_status(args: argparse.Namespace) -> int:
    resp = _admin(args, "GET", "/_claudex/status")
    if resp.status_code != 200:
        raise _engine_error(resp)
    data = resp.json()
    if args.json:
        # The engine masks secrets itself; masking again covers an engine of another version.
        print(SCRUBBER.text(json.dumps(data, indent=2)))
        return 0
    from claudex.text.status import render_status

    render_status(data)
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    """From the running engine; with none answering, from the journal file itself (the history
    outlives the process)."""
    params = {k: v for k, v in (("since", args.since), ("until", args.until),
                                ("provider", args.provider), ("outcome", args.outcome),
                                ("limit", args.limit), ("q", args.search),
                                ("request_id", args.id)) if v}
    if args.id:
        params["kind"] = "requests"
    url = _base_url(args)
    try:
        resp = httpx.get(url + "/_claudex/history", params=params,
                         headers=_admin_headers(args), timeout=15.0)
    except httpx.TransportError:
        data = _history_from_file(args, params)
    else:
        if resp.status_code == 400:
            raise CliError(str(resp.json().get("error")))
        if resp.status_code != 200:
            raise _engine_error(resp)
        data = resp.json()
    if args.id:
        return _print_request_detail(data, args.id, as_json=args.json)
    if args.json:
        print(SCRUBBER.text(json.dumps(data, indent=2)))
        return 0
    from claudex.text.history import history_lines

    lines = history_lines(data)
    for line in lines:
        print(line)
    if not lines:
        print("No history in that window.")
    return 0


def _print_request_detail(data: dict[str, Any], request_id: str, *, as_json: bool) -> int:
    """`claudex history --id`: the request's detail, as the console's detail screen shows it."""
    from claudex.text.history import detail_lines

    found = [r for r in data.get("requests") or [] if r.get("request_id") == request_id]
    if not found:
        raise CliError(f"No request {request_id!r} in the history (ids are in the second "
                       "column of `claudex history`).")
    if as_json:
        print(SCRUBBER.text(json.dumps(found[-1], indent=2)))
        return 0
    for line in detail_lines(found[-1]):
        print(SCRUBBER.text(line))
    return 0


def _history_from_file(args: argparse.Namespace, params: dict[str, str]) -> dict[str, Any]:
    import sqlite3
    import time

    from claudex.engine.history.journal import history_path
    from claudex.engine.history.query import HistoryQueryError, parse_query, read_history

    config = _config_if_loadable(args)
    settings = config.history if config is not None else HistorySettings()
    path = history_path(settings)
    try:
        query = parse_query(params, time.time())
        return {**read_history(path, query), "history": {"path": str(path), "from_file": True}}
    except HistoryQueryError as exc:
        raise CliError(str(exc)) from None
    except sqlite3.Error as exc:
        raise CliError(f"No engine answers at {_base_url(args)}, and {path} cannot be read: "
                       f"{exc}.") from None


def cmd_usage(args: argparse.Namespace) -> int:
    """From the journal file (the engine's or not): the usage report needs every row of the
    window, grouped, which is one query there."""
    import sqlite3
    import time

    from claudex.engine.history.journal import history_path
    from claudex.engine.history.query import HistoryQueryError
    from claudex.engine.history.usage_report import parse_since, read_usage

    config = _config_if_loadable(args)
    settings = config.history if config is not None else HistorySettings()
    path = history_path(settings)
    if config is not None and not settings.enabled:
        raise CliError(f"History is off in {config.path} ([history] enabled = false): there "
                       "is no journal to report on.")
    try:
        report = read_usage(path, since=parse_since(args.since, time.time()), by=args.by)
    except HistoryQueryError as exc:
        raise CliError(str(exc)) from None
    except sqlite3.Error as exc:
        raise CliError(f"{path} cannot be read: {exc}.") from None
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
        return 0
    from claudex.text.usage import render_usage

    render_usage(report)
    return 0


def _breaker_command(args: argparse.Namespace, action: str) -> int:
    body: dict[str, Any] | None = None
    timed = getattr(args, "duration", None)
    reason = getattr(args, "reason", None)
    if timed is not None or reason:
        try:
            seconds = None if timed is None else parse_duration(timed)
        except DurationError as exc:
            raise CliError(f"--for: {exc}.") from None
        body = {"for": seconds, "reason": reason}
    resp = _admin(args, "POST", f"/_claudex/breakers/{args.name}/{action}", body)
    if resp.status_code == 404:
        raise CliError(f"No profile named {args.name!r} on the running engine.")
    if resp.status_code == 400 and action == "trip":
        raise CliError(str(resp.json().get("error") or "not tripped").capitalize() + ".")
    if resp.status_code != 200:
        raise _engine_error(resp)
    data = resp.json()
    line = f"{args.name}: breaker {data.get('breaker')}"
    ended = data.get("ended")
    if action == "reset" and isinstance(ended, list) and ended:
        line = reset_words(args.name, [str(words) for words in ended])
    if body is not None and data.get("breaker") == "forced_open":
        left = data.get("retry_in_s")
        line += ", " + trip_words(data.get("reason"),
                                  left if isinstance(left, int | float) else None)
    print(SCRUBBER.text(line))
    return 0


def cmd_reload(args: argparse.Namespace) -> int:
    resp = _admin(args, "POST", "/_claudex/reload")
    if resp.status_code == 400:
        issues = resp.json().get("issues") or []
        lines = "\n".join(f"  {issue}" for issue in issues)
        raise CliError(f"Not reloaded: the config has {len(issues)} problem(s); the previous "
                       f"config stays live.\n{lines}")
    if resp.status_code == 409:
        raise CliError("The running engine was not started from a config file (a demo?): "
                       "nothing to reload.")
    if resp.status_code != 200:
        raise _engine_error(resp)
    names = resp.json().get("profiles") or []
    print(f"reloaded: {len(names)} profile(s): {', '.join(names)}")
    return 0


def cmd_trip(args: argparse.Namespace) -> int:
    return _breaker_command(args, "trip")


def cmd_reset(args: argparse.Namespace) -> int:
    return _breaker_command(args, "reset")


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
        httpx.get(base + "/healthz", headers=_admin_headers(args), timeout=3.0)
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


def _config_if_loadable(args: argparse.Namespace) -> Config | None:
    path = _config_path(args)
    if not path.exists():
        return None
    try:
        return load_config(path)
    except ConfigError:
        return None


def cmd_demo(args: argparse.Namespace) -> int:
    if args.headless:
        from claudex.demo.headless import run_headless_demo

        return run_headless_demo(port=args.port)
    from claudex.console.launch import HostError, run_demo

    try:
        return run_demo(read_only=args.read_only, port=args.port)
    except HostError as exc:
        raise CliError(str(exc)) from None


def cmd_console(args: argparse.Namespace) -> int:
    from claudex.console.launch import HostError, run_console

    config = _load(args)
    urls = [str(u).rstrip("/") for u in (getattr(args, "url", None) or [])]
    try:
        return run_console(config, read_only=getattr(args, "read_only", False), urls=urls,
                           headers=_admin_headers(args))
    except HostError as exc:
        raise CliError(str(exc)) from None


# -- parser --------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="claudex",
        description="A local failover proxy for LLM API providers.",
    )
    parser.add_argument("--version", action="version", version=f"claudex {__version__}")
    parser.add_argument("--config", metavar="FILE", help="profiles file (default: "
                        "$CLAUDEX_CONFIG or the user config dir)")
    sub = parser.add_subparsers(dest="command_name", metavar="COMMAND")

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS,
                       help="profiles file")
        return p

    p = add("console", "open the operations console (default)")
    p.add_argument("--read-only", action="store_true",
                   help="watch only: no trip, reset, edit, add or delete")
    p.add_argument("--url", action="append", metavar="URL",
                   help="attach to the engine at URL (default: the config's address, if one "
                   "answers there; else the console hosts one)")
    p.set_defaults(func=cmd_console)
    p = add("serve", "run the proxy headless")
    p.add_argument("--host", help="listen here instead of the config's [proxy] host")
    p.add_argument("--port", type=int, help="listen here instead of the config's [proxy] port")
    p.add_argument("--log-json", action="store_true", help="log JSON lines to stderr")
    p.add_argument("--debug", action="store_true", help="log every request")
    p.set_defaults(func=cmd_serve)
    p = add("check", "validate the config and list every problem")
    p.set_defaults(func=cmd_check)
    p = add("init", "write a starter config from the logins and API-key variables found")
    p.add_argument("--from-ccr", metavar="FILE",
                   help="convert a claude-code-router config.json instead (no key is copied)")
    p.set_defaults(func=cmd_init)
    p = add("status", "show the running engine's providers")
    p.add_argument("--json", action="store_true", help="the status JSON, for scripts")
    p.add_argument("--url", help="engine URL (default from the config's host and port)")
    p.set_defaults(func=cmd_status)
    p = add("reload", "make the running engine re-read its config file")
    p.add_argument("--url", help="engine URL (default from the config's host and port)")
    p.set_defaults(func=cmd_reload)
    for name, func, text in (("trip", cmd_trip, "force a provider's breaker open"),
                             ("reset", cmd_reset,
                              "close a provider's breaker, end its cooldown and spent window")):
        p = add(name, text)
        p.add_argument("name", help="the profile whose breaker it is")
        p.add_argument("--url", help="engine URL (default from the config's host and port)")
        if name == "trip":
            p.add_argument("--for", dest="duration", metavar="DURATION",
                           help="for how long: 90s, 20m, 1h30m, 2h (then half-open; default: "
                                "until reset)")
            p.add_argument("--reason", help="why, in a few words (shown with the trip)")
        p.set_defaults(func=func)
    p = add("history", "list journaled requests and events (from the engine, or its file)")
    p.add_argument("--since", help="how far back: 30s, 10m, 2h, 1d, or epoch seconds")
    p.add_argument("--until", help="up to when (same forms)")
    p.add_argument("--provider", help="only requests that tried this provider, and its events")
    p.add_argument("--outcome", choices=("ok", "failover", "failed"))
    p.add_argument("--limit", help="at most this many of each (default 500)")
    p.add_argument("--search", "-q", metavar="TEXT",
                   help="only rows mentioning TEXT (provider, model, status, id, trail, message)")
    p.add_argument("--id", metavar="REQUEST_ID",
                   help="one request's detail: every attempt's timings and reasons, headers")
    p.add_argument("--json", action="store_true", help="JSON, as GET /_claudex/history")
    p.add_argument("--url", help="engine URL (default from the config's host and port)")
    p.set_defaults(func=cmd_history)
    p = add("usage", "what the journaled requests used and cost, per day, profile or model")
    p.add_argument("--since", default="7d",
                   help="how far back: 12h, 7d, 30d, or epoch seconds (default 7d)")
    p.add_argument("--by", choices=("day", "profile", "model"), default="day",
                   help="one row per day (default), per profile that served, or per model")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_usage)
    p = add("env", "print the environment for Claude Code to use the proxy")
    p.add_argument("profile", nargs="?",
                   help="address this profile (/proxy/PROFILE); default: the default profile")
    p.add_argument("--url", help="proxy URL (default from the config's host and port)")
    p.set_defaults(func=cmd_env)
    p = add("run", "run Claude Code (or CMD) against the proxy")
    p.epilog = ("Anything after -- is the command to run with its arguments (default: claude, or "
                "the config's claude_binary), with ANTHROPIC_BASE_URL set to the proxy and the "
                "profile's extra_env added: claudex run grok -- claude --model opus")
    p.add_argument("profile", nargs="?",
                   help="address this profile (/proxy/PROFILE); default: the default profile")
    p.add_argument("--url", help="proxy URL (default from the config's host and port)")
    p.set_defaults(func=cmd_run, command=[])
    p = add("demo", "start fake providers and the proxy on a demo config")
    p.add_argument("--headless", action="store_true", help="no console: print how to use it")
    p.add_argument("--port", type=int, default=None, help="proxy port (default 13456 or free)")
    p.add_argument("--read-only", action="store_true",
                   help="watch only: no trip, reset, edit, add or delete")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    trailing: list[str] = []
    if "--" in argv:  # `claudex run [PROFILE] -- CMD ARGS...`
        cut = argv.index("--")
        argv, trailing = argv[:cut], argv[cut + 1 :]
    args = parser.parse_args(argv)
    if trailing:
        if getattr(args, "func", None) is not cmd_run:
            parser.error("'--' is only used with `claudex run`")
        args.command = trailing
    func: Any = getattr(args, "func", cmd_console)
    if not hasattr(args, "config"):
        args.config = None
    try:
        return int(func(args))
    except CliError as exc:
        print(f"claudex: {exc}", file=sys.stderr)
        return 1
    except ConfigError as exc:
        print(f"claudex: the config has problems:\n{exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the last line of defence: a message, never a traceback
        print(f"claudex: unexpected error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 70


if __name__ == "__main__":
    sys.exit(main())
