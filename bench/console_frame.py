"""Time the console's frames with 100 profiles, headless (the scale row).

    python -m bench.console_frame CONFIG FRAMES

Builds the engine from CONFIG (not started: no health task, no traffic), opens the console app
headless through Textual's test harness, and times FRAMES refreshes: the main screen's
`refresh_now` (pull a snapshot, update every panel) plus Textual's layout and render of the
result. A breaker is tripped and reset between frames so each frame has something to change.
Prints one JSON line.
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


async def measure(path: Path, frames: int) -> dict[str, Any]:
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
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
