"""`claudex history` and `claudex usage`: the journal, from the running engine or, with none
answering, from its file (the history outlives the process)."""

from __future__ import annotations

import argparse
import json
from typing import Any

import httpx

from claudex.cli.common import (
    CliError,
    _admin_headers,
    _base_url,
    _config_if_loadable,
    _engine_error,
    trust_env_for,
)
from claudex.config.model import HistorySettings
from claudex.engine.masking.secrets import SCRUBBER


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
                         headers=_admin_headers(args), timeout=15.0,
                         trust_env=trust_env_for(url))
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
