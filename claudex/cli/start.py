"""`claudex serve`, `claudex demo` and `claudex console`: start the proxy headless, the demo, or
the console (which attaches to an engine or hosts one)."""

from __future__ import annotations

import argparse

from claudex.cli.common import CliError, _admin_headers, _config_path, _load

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
