"""docs/reference/cli.md: every command and option, walked from the argument parser
(`claudex.cli.build_parser`) rather than its `--help` text, whose layout follows the terminal."""

from __future__ import annotations

import argparse
import functools

from claudex.cli import build_parser
from claudex.docs_gen.markdown import code, table

SOURCES = ("claudex/cli/parser.py",)


def _wide(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    # One usage line whatever the terminal: argparse wraps at $COLUMNS otherwise.
    parser.formatter_class = functools.partial(argparse.HelpFormatter, width=10_000)
    return parser


def _usage(parser: argparse.ArgumentParser) -> str:
    return " ".join(_wide(parser).format_usage().removeprefix("usage:").split())


def _option_rows(parser: argparse.ArgumentParser) -> list[list[str]]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.option_strings:
            takes = action.nargs != 0
            metavar = action.metavar or action.dest.upper()
            name = ", ".join(f"{o} {metavar}" if takes else o for o in action.option_strings)
        else:
            name = str(action.metavar or action.dest)
        words = action.help or ""
        if action.choices and not isinstance(action, argparse._SubParsersAction):
            words = f"{words} one of {', '.join(code(str(c)) for c in action.choices)}".strip()
        if action.nargs == "?" and not action.option_strings:
            words = f"(optional) {words}".strip()
        if isinstance(action, argparse._AppendAction):
            words = f"{words} (may be given more than once)".strip()
        rows.append([code(name), words])
    return rows


def render() -> str:
    parser = build_parser()
    lines = ["# Command line", "",
             f"{parser.description} `claudex` with no command opens the console.", "",
             "```", _usage(parser), "```", "",
             table(("option", "meaning"), _option_rows(parser)), ""]
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subparsers.choices.items():
        lines += [f"## `claudex {name}`", "", sub.description or "", "",
                  "```", _usage(sub), "```", ""]
        if sub.epilog:
            lines += [sub.epilog, ""]
        rows = _option_rows(sub)
        if rows:
            lines += [table(("argument", "meaning"), rows), ""]
    return "\n".join(lines)
