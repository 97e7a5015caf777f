"""`claudex status`, `reload`, `trip` and `reset`: the running engine, through its admin API."""

from __future__ import annotations

import argparse
import json
from typing import Any

from claudex.cli.common import CliError, _admin, _engine_error
from claudex.engine.breaker.trips import DurationError, parse_duration, reset_words, trip_words
from claudex.engine.masking.secrets import SCRUBBER


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
        raise CliError(f"No profile or upstream proxy named {args.name!r} on the running engine.")
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
