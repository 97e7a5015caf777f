"""Reading the history journal: `GET /_claudex/history` and `claudex history`.

Reads open their own connection (WAL: readers never block the writer) and run off the event loop
(`asyncio.to_thread`). A filter that is not understood is a `HistoryQueryError` with a sentence.

`q` searches the text an operator would look for: a request's provider, profile, model, outcome,
status, request id, route, attempt trail and attempts (their messages included); an event's kind,
profile and sentence. It is one SQL `LIKE` per column (case-insensitive for ASCII), with `%`, `_`
and the escape character itself escaped, so a search for `50%` means those three characters.
Columns a journal written by an older claudex lacks are left out of the search. A row's client
headers are shown through the header policy (engine/masking/header_policy.py) whoever wrote them.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from claudex.engine.masking.header_policy import shown_headers

OUTCOMES: Final = ("ok", "failover", "failed")
KINDS: Final = ("requests", "events")
DEFAULT_LIMIT: Final = 500
MAX_LIMIT: Final = 10_000
_UNITS: Final = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


class HistoryQueryError(ValueError):
    """A filter that does not parse; the message says which and how it should look."""


@dataclass(frozen=True)
class HistoryQuery:
    since: float | None = None
    until: float | None = None
    provider: str | None = None
    outcome: str | None = None
    limit: int = DEFAULT_LIMIT
    text: str | None = None        # `q`: a search over the columns an operator reads
    kind: str | None = None        # "requests" or "events" only; None: both
    request_id: str | None = None  # one request, by the id the engine gave it


def parse_when(text: str, now: float, name: str) -> float:
    """`2h` / `10m` / `30s` / `1d` ago, or epoch seconds."""
    text = text.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhd])", text)
    if match:
        return now - float(match.group(1)) * _UNITS[match.group(2)]
    try:
        return float(text)
    except ValueError:
        raise HistoryQueryError(f"{name} takes a duration ago (30s, 10m, 2h, 1d) or epoch "
                                f"seconds, not {text[:40]!r}") from None


def parse_query(params: Mapping[str, str], now: float) -> HistoryQuery:
    since = params.get("since")
    until = params.get("until")
    outcome = params.get("outcome") or None
    if outcome is not None and outcome not in OUTCOMES:
        raise HistoryQueryError(f"outcome is one of {', '.join(OUTCOMES)}, not {outcome[:40]!r}")
    raw_limit = params.get("limit")
    limit = DEFAULT_LIMIT
    if raw_limit:
        try:
            limit = int(raw_limit)
        except ValueError:
            raise HistoryQueryError(f"limit takes a whole number, not {raw_limit[:40]!r}") from None
        if not 1 <= limit <= MAX_LIMIT:
            raise HistoryQueryError(f"limit is between 1 and {MAX_LIMIT}")
    kind = params.get("kind") or None
    if kind is not None and kind not in KINDS:
        raise HistoryQueryError(f"kind is one of {', '.join(KINDS)}, not {kind[:40]!r}")
    text = (params.get("q") or "").strip() or None
    if text is not None and len(text) > 200:
        raise HistoryQueryError("q is at most 200 characters")
    return HistoryQuery(
        since=parse_when(since, now, "since") if since else None,
        until=parse_when(until, now, "until") if until else None,
        provider=params.get("provider") or None, outcome=outcome, limit=limit,
        text=text, kind=kind, request_id=(params.get("request_id") or "").strip() or None)


# What `q` looks through, per table (those a journal's schema has).
_REQUEST_SEARCH: Final = ("provider", "profile", "model", "outcome", "status", "request_id",
                          "route", "protocol", "trail", "attempts", "dropped", "routed")
_EVENT_SEARCH: Final = ("kind", "profile", "message")


def like_pattern(text: str) -> str:
    """`text` as a LIKE pattern matching it anywhere, its wildcards taken literally
    (with `ESCAPE '\\'`)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}


def _search(columns: tuple[str, ...], present: set[str], text: str) -> tuple[str, list[object]]:
    used = [c for c in columns if c in present]
    pattern = like_pattern(text)
    clause = " OR ".join(f"CAST({c} AS TEXT) LIKE ? ESCAPE '\\'" for c in used)
    return f"({clause})", [pattern] * len(used)


def read_history(path: Path, query: HistoryQuery) -> dict[str, Any]:
    """`{"requests": [...], "events": [...]}`, oldest first, at most `limit` of each (the
    newest ones). A journal not written yet reads as empty."""
    if not path.exists():
        return {"requests": [], "events": []}
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
    try:
        conn.row_factory = sqlite3.Row
        where: list[str] = ["1=1"]
        args: list[object] = []
        if query.since is not None:
            where.append("time >= ?")
            args.append(query.since)
        if query.until is not None:
            where.append("time <= ?")
            args.append(query.until)
        req_where, req_args = list(where), list(args)
        ev_where, ev_args = list(where), list(args)
        if query.provider:
            # A request that tried the provider counts, not only one it served.
            req_where.append("(provider = ? OR trail LIKE ?)")
            req_args += [query.provider, f"%{query.provider}%"]
            ev_where.append("profile = ?")
            ev_args.append(query.provider)
        if query.outcome:
            req_where.append("outcome = ?")
            req_args.append(query.outcome)
        req_columns = _columns(conn, "requests")
        if query.text:
            clause, clause_args = _search(_REQUEST_SEARCH, req_columns, query.text)
            req_where.append(clause)
            req_args += clause_args
            clause, clause_args = _search(_EVENT_SEARCH, _columns(conn, "events"), query.text)
            ev_where.append(clause)
            ev_args += clause_args
        if query.request_id:
            # A journal from before request ids has none to find.
            req_where.append("request_id = ?" if "request_id" in req_columns else "0")
            req_args += [query.request_id] if "request_id" in req_columns else []
        requests: list[sqlite3.Row] = []
        if query.kind != "events":
            requests = conn.execute(
                f"SELECT * FROM (SELECT * FROM requests WHERE {' AND '.join(req_where)} "
                "ORDER BY time DESC, rowid DESC LIMIT ?) ORDER BY time, rowid",
                [*req_args, query.limit]).fetchall()
        events: list[sqlite3.Row] = []
        # An outcome and a request id are a request's.
        if not query.outcome and not query.request_id and query.kind != "requests":
            events = conn.execute(
                f"SELECT * FROM (SELECT * FROM events WHERE {' AND '.join(ev_where)} "
                "ORDER BY time DESC, rowid DESC LIMIT ?) ORDER BY time, rowid",
                [*ev_args, query.limit]).fetchall()
    finally:
        conn.close()
    return {"requests": [_request_json(r) for r in requests],
            "events": [_event_json(r) for r in events]}


def _request_json(row: sqlite3.Row) -> dict[str, Any]:
    out = {k: row[k] for k in row.keys() if k != "rowid"}
    out["stream"] = bool(out.get("stream"))
    for key in ("attempts", "dropped"):
        out[key] = _json(out.get(key), [])
    # Columns a newer journal has (an older one lacks them).
    if "notes" in out:
        out["notes"] = _json(out.get("notes"), [])
    if "headers" in out:
        out["headers"] = _shown(_json(out.get("headers"), {}))
    return out


def _shown(headers: object) -> dict[str, str]:
    """A row's headers through the header policy again: a row written by an older claudex (or
    by another engine sharing the file) shows no more than this one would record."""
    if not isinstance(headers, dict):
        return {}
    return dict(shown_headers({str(name): str(value) for name, value in headers.items()}))


def _json(text: object, empty: Any) -> Any:
    """A JSON column's value (`empty` for NULL or text that does not parse)."""
    if not isinstance(text, str) or not text:
        return empty
    try:
        return json.loads(text)
    except ValueError:
        return empty


def _event_json(row: sqlite3.Row) -> dict[str, Any]:
    out = {k: row[k] for k in row.keys() if k != "rowid"}
    out["data"] = json.loads(out["data"]) if out.get("data") else {}
    return out
