"""Time health rounds of an in-process Engine (the scale row): every profile probed once,
concurrently, as the background health task does.

    python -m bench.health_round CONFIG ROUNDS

Prints one JSON line: the first (cold: connections opened) and the following rounds' times in ms,
and how many profiles ended green/yellow/red.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

from claudex.config.loader import load_config
from claudex.engine.engine import Engine


async def measure(path: Path, rounds: int) -> dict[str, object]:
    config = load_config(path)
    engine = Engine(config)
    try:
        start = time.perf_counter()
        await engine.check_health_now()
        cold = (time.perf_counter() - start) * 1000
        warm: list[float] = []
        for _ in range(rounds):
            start = time.perf_counter()
            await engine.check_health_now()
            warm.append((time.perf_counter() - start) * 1000)
        colors = Counter(p["health"]["color"] for p in engine.snapshot()["profiles"])
    finally:
        await engine.close()
    warm.sort()
    return {
        "profiles": len(config.profiles),
        "cold_ms": round(cold, 2),
        "rounds_ms": [round(w, 2) for w in warm],
        "median_ms": round(warm[len(warm) // 2], 2) if warm else None,
        "colors": dict(colors),
    }


def main(argv: list[str]) -> int:
    import uvloop

    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: python -m bench.health_round CONFIG ROUNDS", file=sys.stderr)
        return 2
    result = uvloop.run(measure(Path(argv[0]), int(argv[1])))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
