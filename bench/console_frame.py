"""Time the console's frames with 100 profiles, headless (the scale row).

    python -m bench.console_frame CONFIG FRAMES

Builds the engine from CONFIG (not started: no health task, no traffic), opens the console app
headless through Textual's test harness, and times FRAMES refreshes: the main screen's
`refresh_now` (pull a snapshot, update every panel or table row) plus Textual's layout and
render of the result. A breaker is tripped and reset between frames so each frame has something
to change. Measured twice, in the panel grid and in the provider table (`v`; the table is the
first view above 12 profiles). Prints one JSON line: the grid's numbers at the top level (as
before the table existed) and the table's under "table".
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from claudex.config.loader import load_config
from claudex.console.app import ConsoleApp
from claudex.console.link import LocalLink
from claudex.engine.engine import Engine


async def measure(path: Path, frames: int, view: str = "grid") -> dict[str, Any]:
    config = load_config(path)
    engine = Engine(config)
    app = ConsoleApp(LocalLink(engine))
    times: list[float] = []
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.pause()
            refresh = getattr(app.screen, "refresh_now", None)
            if refresh is None:
                return {"available": False,
                        "reason": f"{type(app.screen).__name__} has no refresh_now()"}
            set_view = getattr(app.screen, "set_view", None)
            if set_view is not None:
                set_view(view, chosen=True)  # (else the profile count picks it)
            elif view != "grid":
                return {"available": False, "reason": "this console has no table view"}
            names = list(engine.runtimes)
            for index in range(frames + 3):  # the first three warm caches up
                name = names[index % len(names)]
                engine.trip(name) if index % 2 == 0 else engine.reset(name)
                start = time.perf_counter()
                await refresh()
                await pilot.pause()
                if index >= 3:
                    times.append((time.perf_counter() - start) * 1000)
    finally:
        await engine.close()
    times.sort()
    return {
        "available": True,
        "profiles": len(config.profiles),
        "frames": len(times),
        "p50_ms": round(times[len(times) // 2], 2),
        "p95_ms": round(times[min(len(times) - 1, int(len(times) * 0.95))], 2),
        "max_ms": round(times[-1], 2),
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: python -m bench.console_frame CONFIG FRAMES", file=sys.stderr)
        return 2
    logging.disable(logging.CRITICAL)  # breaker transitions would log a line per frame
    result = asyncio.run(measure(Path(argv[0]), int(argv[1])))
    if result.get("available"):
        table = asyncio.run(measure(Path(argv[0]), int(argv[1]), "table"))
        result["table"] = ({k: table[k] for k in ("p50_ms", "p95_ms", "max_ms")}
                           if table.get("available") else table)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
