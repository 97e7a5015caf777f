"""The command line's arguments, and `main`: parse, run one command, and turn every failure into
one clear message and an exit status, never a traceback."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from claudex import __version__
from claudex.cli.clients import cmd_env, cmd_run
from claudex.cli.common import CliError
from claudex.cli.config_file import cmd_check, cmd_init
from claudex.cli.engine_admin import cmd_reload, cmd_reset, cmd_status, cmd_trip
from claudex.cli.history import cmd_history, cmd_usage
from claudex.cli.start import cmd_console, cmd_demo, cmd_serve
from claudex.config.model import ConfigError


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
