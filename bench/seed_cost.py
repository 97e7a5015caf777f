"""What seeding the panels' counters from the history journal costs at start, before and after
the per-minute aggregates (engine/history/seed.py, database.py version 2).

    python -m bench.seed_cost [ROWS]      (default 312000: a busy day)

Writes ROWS request rows shaped like the engine's (three providers, one in fifty failed over,
tokens and a cost) spread over one local day into a fresh journal in a temporary directory (gone
afterwards), then times `read_seed`'s reading, each the best of three runs (wall and CPU
seconds): from the rows (what every start did before the aggregates, and what a journal not
migrated yet still does), the one-time migration of a journal written before them (building
the aggregates from its rows), and from the aggregates; it checks the two readings give the same
numbers. The writer's cost: the journal's own writer (`Journal._write_pending`) given 20,000
finished requests as the engine hands them over, in batches of 100 (a flush), once keeping the
aggregates and once not (a journal still at version 1): CPU microseconds per request.
`make bench` runs it too (50,000 rows with --quick) and puts its table in RESULTS.md.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from claudex.engine.core.request import Attempt
from claudex.engine.core.usage import Usage
from claudex.engine.history.database import (
    _REQUEST_COLUMNS,
    HEADERS_REMASKED,
    MINUTES_KEPT,
    open_database,
)
from claudex.engine.history.journal import Journal
from claudex.engine.history.seed import Seed, _read, local_midnight

PROVIDERS = ("claude", "claude-backup", "gpt")
_INSERT = (f"INSERT INTO requests ({', '.join(_REQUEST_COLUMNS)}) "
           f"VALUES ({', '.join('?' * len(_REQUEST_COLUMNS))})")


def rows(count: int, start: float, end: float, seed: int = 7) -> list[tuple[Any, ...]]:
    rng = random.Random(seed)
    out = []
    step = (end - start) / count
    for i in range(count):
        at = start + i * step
        failed_over = i % 50 == 0
        first = PROVIDERS[i % 3]
        served = PROVIDERS[(i + 1) % 3] if failed_over else first
        attempts: list[dict[str, Any]] = []
        if failed_over:
            attempts.append({"provider": first, "outcome": "server_error", "status": 503,
                             "message": "overloaded", "latency_ms": 80.0})
        stream = i % 2 == 0
        ok: dict[str, Any] = {"provider": served, "outcome": "ok", "status": 200,
                              "message": "", "latency_ms": rng.uniform(300, 2000),
                              "headers_ms": 120.0}
        if stream:
            ok["first_content_ms"] = rng.uniform(200, 900)
        attempts.append(ok)
        trail = " -> ".join(f"{a['provider']} {a['status']}" for a in attempts)
        tin, tout = rng.randint(100, 5000), rng.randint(10, 800)
        out.append((i, at, "anthropic", "messages", "claude-sonnet-4-5", first, served, 200,
                    "failover" if failed_over else "ok", ok["latency_ms"], int(stream), trail,
                    json.dumps(attempts), "[]", tin, tout, 0, f"id{i:07d}", "/v1/messages",
                    json.dumps({"user-agent": "claude-cli/2.0"}), 0,
                    (tin * 3 + tout * 15) / 1e6, None, None, None))  # (routed, windows)
    return out


def insert(conn: sqlite3.Connection, batch: list[tuple[Any, ...]], size: int = 100) -> float:
    """Seconds to write `batch` as the journal's writer does: one transaction per `size`."""
    started = time.perf_counter()
    for i in range(0, len(batch), size):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(_INSERT, batch[i:i + size])
        conn.execute("COMMIT")
    return time.perf_counter() - started


def same_numbers(a: Seed, b: Seed) -> bool:
    """The two seeds equal, costs to a billionth: a sum of floats in another order may differ
    in its last bits (the panels show cents)."""
    if a.since != b.since or a.providers.keys() != b.providers.keys():
        return False
    for name, x in a.providers.items():
        y = b.providers[name]
        if not math.isclose(x.cost.usd, y.cost.usd, rel_tol=1e-9, abs_tol=1e-12):
            return False
        if (x.cost.priced, x.cost.unpriced) != (y.cost.priced, y.cost.unpriced):
            return False
        if [x.requests, x.successes, x.failures, x.rate_limited, x.tokens, x.minutes,
                x.first_content, x.durations] != [
                y.requests, y.successes, y.failures, y.rate_limited, y.tokens, y.minutes,
                y.first_content, y.durations]:
            return False
    return True


def best(fn: Callable[[], Any], runs: int = 3) -> tuple[float, float, Any]:
    """The best wall and CPU seconds of `runs` calls, and the last result."""
    wall = cpu = float("inf")
    result = None
    for _ in range(runs):
        w, c = time.perf_counter(), time.process_time()
        result = fn()
        wall, cpu = min(wall, time.perf_counter() - w), min(cpu, time.process_time() - c)
    return wall, cpu, result


class Facts:
    """A finished request as engine/addons/request_report.py's `RequestRecord` gives it to the
    journal (its `RequestFacts`)."""

    def __init__(self, i: int, row: tuple[Any, ...]) -> None:
        self.id, self.time, self.protocol, self.endpoint, self.model = row[:5]
        self.profile, self.provider, self.status = row[5:8]
        self.ms, self.stream = row[9], bool(row[10])
        self.attempts = [Attempt(a["provider"], a["outcome"], a["status"], a["message"],
                                 a["latency_ms"], first_content_ms=a.get("first_content_ms"))
                         for a in json.loads(row[12])]
        self.dropped: tuple[str, ...] = ()
        self.usage = Usage(row[14], row[15], row[16], row[20])
        self.request_id, self.route = row[17], row[18]
        self.headers = {"user-agent": "claude-cli/2.0"}
        self.cost_usd, self.cost_basis, self.routed = row[21], "api", None
        self.windows, self.plan = None, False  # an API key's answer: no plan window kept
        self.kind = "request"
        self._trail = row[11]

    def trail(self) -> str:
        return str(self._trail)


def writer_cost(folder: Path, facts: list[Facts], keep: bool) -> float:
    """CPU microseconds per request the journal's writer spends on `facts`, in flushes of 100."""
    path = folder / f"writer-{keep}.sqlite3"
    journal = Journal(path)
    conn = open_database(path)
    if not keep:
        as_before(conn)
    cpu = 0.0
    for i in range(0, len(facts), 100):
        journal._pending.extend(facts[i:i + 100])  # type: ignore[arg-type]
        started = time.process_time()
        journal._write_pending(conn)
        cpu += time.process_time() - started
    assert journal.problem is None, journal.problem
    conn.close()
    return cpu / len(facts) * 1e6


def as_before(conn: sqlite3.Connection) -> None:
    """The journal as a claudex before the aggregates left it (version 1)."""
    conn.execute("DROP TABLE minutes")
    conn.execute("DROP TABLE minute_attempts")
    conn.execute(f"PRAGMA user_version = {HEADERS_REMASKED}")


def measure(count: int = 312_000) -> dict[str, Any]:
    """The numbers `main` prints (and `make bench` puts in RESULTS.md), for `count` rows."""
    folder = Path(tempfile.mkdtemp(prefix="claudex-bench-seed-"))
    try:
        return _measure(folder, count)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _measure(folder: Path, count: int) -> dict[str, Any]:
    day_start = local_midnight(time.time())
    now = day_start + 86_000.0  # late in the day: the whole day's rows are today's
    until = now - 5.0
    path = folder / "history.sqlite3"
    conn = open_database(path)
    as_before(conn)
    insert(conn, rows(count, day_start + 1.0, until - 1.0), size=10_000)
    conn.close()

    def seed(minutes: bool) -> Seed:
        ro = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return _read(ro, now=now, until=until, day_start=day_start, minutes=minutes)
        finally:
            ro.close()

    before = best(lambda: seed(False))
    started_wall, started_cpu = time.perf_counter(), time.process_time()
    conn = open_database(path)  # the migration: the aggregates built from the rows, once
    migrated = conn.execute("PRAGMA user_version").fetchone()[0] == MINUTES_KEPT
    minute_rows = sum(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                      for t in ("minutes", "minute_attempts"))
    conn.close()
    migration = time.perf_counter() - started_wall, time.process_time() - started_cpu
    after = best(lambda: seed(True))
    sample = [Facts(i, r) for i, r in enumerate(rows(20_000, day_start + 1.0, until - 1.0, 11))]
    without = min(writer_cost(folder, sample, keep=False) for _ in range(2))
    kept = min(writer_cost(folder, sample, keep=True) for _ in range(2))
    return {"rows": count, "before_s": round(before[0], 4), "before_cpu_s": round(before[1], 4),
            "migration_s": round(migration[0], 4), "migration_cpu_s": round(migration[1], 4),
            "after_s": round(after[0], 4), "after_cpu_s": round(after[1], 4),
            "aggregate_rows": minute_rows,
            "same": migrated and same_numbers(before[2], after[2]),
            "writer_us": round(without, 2), "writer_minutes_us": round(kept, 2)}


def main(argv: list[str]) -> int:
    count = int(argv[0]) if argv else 312_000
    m = measure(count)
    print(f"{count} request rows over one day")
    print(f"seed from the rows (before)        {m['before_s']:7.3f} s wall  "
          f"{m['before_cpu_s']:7.3f} s CPU")
    print(f"migration, once (sums from rows)   {m['migration_s']:7.3f} s wall  "
          f"{m['migration_cpu_s']:7.3f} s CPU  ({m['aggregate_rows']} aggregate rows)")
    print(f"seed from the minutes (after)      {m['after_s']:7.3f} s wall  "
          f"{m['after_cpu_s']:7.3f} s CPU")
    print(f"same numbers: {'yes' if m['same'] else 'NO'}")
    print(f"writer per request: {m['writer_us']:.1f} µs CPU without the minutes, "
          f"{m['writer_minutes_us']:.1f} µs with "
          f"(+{m['writer_minutes_us'] - m['writer_us']:.1f} µs)")
    return 0 if m["same"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
