"""What the event bus's backlog of finished requests holds, in bytes (tracemalloc): a figure that,
unlike RSS, does not move from run to run.

    python -m bench.backlog_memory [--profile anth|chat]

The same in-process requests as bench/request_cost.py (the server's ASGI app driving the default
config's engine, history on, the transport answering from memory): 2,100 to fill the backlog, then
2,000 more traced; the backlog is then emptied, and what that frees is what its 2,000 records
held (each record's own objects: the request's fields, its attempts, its usage).
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import tracemalloc
from pathlib import Path

from bench.request_cost import engine_for, runner


async def measure(profile: str) -> tuple[int, int]:
    """(records in the backlog, bytes they hold)."""
    with tempfile.TemporaryDirectory(prefix="claudex-backlog-") as state:
        engine = engine_for(profile, Path(state))
        await engine.start(health=False)
        if engine.seeding is not None:
            await engine.seeding
        run = runner(engine)
        await run(2_100)
        gc.collect()
        tracemalloc.start()
        try:
            await run(2_000)  # the backlog is these 2,000 now
            gc.collect()
            held = tracemalloc.get_traced_memory()[0]
            backlog = engine.events._backlog
            count = len(backlog)
            backlog.clear()
            gc.collect()
            held -= tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
            await engine.close()
    return count, held


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.backlog_memory",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--profile", choices=("anth", "chat"), default="anth")
    args = parser.parse_args(argv)
    import uvloop

    count, held = uvloop.run(measure(args.profile))
    print(f"{args.profile}: {count:,} records hold {held / 1024:,.1f} KiB, "
          f"{held / max(count, 1):,.0f} bytes each")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
