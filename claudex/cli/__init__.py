"""The `claudex` command line. Every failure ends in one clear message and an exit status, never
a traceback.

    parser.py        every command's arguments, and `main`: run one, a failure in words
    common.py        what the commands share: the config file, the engine's address and admin
                     API, `CliError`
    start.py         serve, demo, console: the proxy headless, the demo, the console
    config_file.py   check, init: the config file validated, or written
    engine_admin.py  status, reload, trip, reset: the running engine, through its admin API
    history.py       history, usage: the journal, from the engine or its file
    clients.py       env, run: Claude Code (or another command) against the proxy

`claudex` (the entry point `claudex.cli:main`) and `python -m claudex.cli` both run `main`.
"""

from claudex.cli.parser import build_parser, main

__all__ = ["build_parser", "main"]
