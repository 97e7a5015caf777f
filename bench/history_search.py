"""Time the history journal's reads the console makes: a page of older requests (scrolling
past the oldest row), a `q` search that matches and one that matches nothing (a full scan), and
one request by id.

    python -m bench.history_search [ROWS]      (default 100000)

Writes ROWS request rows shaped like the engine's (one in fifty failed over) into a fresh file,
then times each read five times with `read_history` (what `GET /_claudex/history` and the
hosted links run, on a thread). Prints one line per read: rows returned and mean milliseconds.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from claudex.engine.history.database import open_database
from claudex.engine.history.query import HistoryQuery, read_history

COLUMNS = ("event_id", "time", "protocol", "endpoint", "model", "profile", "provider", "status",
           "outcome", "latency_ms", "stream", "trail", "attempts", "dropped", "input_tokens",
           "output_tokens", "cache_read_tokens", "request_id", "route", "headers")


def fill(path: Path, count: int, now: float) -> None:
    conn = open_database(path)
    rows = []
    for i in range(count):
        failed_over = i % 50 == 0
        attempts: list[dict[str, object]] = ([{"provider": "claude", "outcome": "connect_error",
                      "message": "connection refused"}] if failed_over else [])
        served = "claude-backup" if failed_over else "claude"
        attempts.append({"provider": served, "outcome": "ok", "status": 200,
                         "latency_ms": 400.0, "headers_ms": 120.0})
        trail = " -> ".join(f"{a['provider']} {a.get('status') or a['outcome']}"
                            for a in attempts)
        rows.append((i, now - count + i, "anthropic", "messages", f"claude-sonnet-4-{i % 3}",
                     "claude", served, 200, "failover" if failed_over else "ok", 400.0, 0,
                     trail, json.dumps(attempts), "[]", 10, 3, 0, f"id{i:07d}",
                     "/v1/messages", json.dumps({"user-agent": "claude-cli/2.0"})))
    conn.execute("BEGIN")
    conn.executemany(f"INSERT INTO requests ({', '.join(COLUMNS)}) "
                     f"VALUES ({', '.join('?' * len(COLUMNS))})", rows)
    conn.execute("COMMIT")
    conn.close()


def main(argv: list[str]) -> int:
    count = int(argv[0]) if argv else 100_000
    path = Path(tempfile.mkdtemp(prefix="claudex-bench-")) / "history.sqlite3"
    now = time.time()
    fill(path, count, now)
    reads = (
        ("page of 200 before a time", HistoryQuery(kind="requests", until=now - count / 2,
                                                   limit=200)),
        ("q matching (connect_error)", HistoryQuery(kind="requests", text="connect_error",
                                                    limit=200)),
        ("q matching nothing", HistoryQuery(kind="requests", text="zzz-nothing", limit=200)),
        ("one request by id", HistoryQuery(request_id=f"id{count // 2:07d}")),
    )
    print(f"{count} requests in {path}")
    for label, query in reads:
        started = time.perf_counter()
        for _ in range(5):
            found = read_history(path, query)
        ms = (time.perf_counter() - started) / 5 * 1000
        print(f"{label:28s} {len(found['requests']):4d} rows  {ms:7.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
