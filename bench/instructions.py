"""claudex's own cost per request in CPU instructions (valgrind's callgrind): a figure that,
unlike a time, does not move with what else the machine is doing.

    python -m bench.instructions [--profile anth|chat] [--requests 1200] [--addons] [--json]

The same in-process request as bench/request_cost.py (the server's ASGI app driving the engine,
whose transport answers from memory; the default config, history on, its journal's writer thread
counted too) is run under `valgrind --tool=callgrind` twice, a short run and a long one, and the
difference in instructions is divided by the difference in requests, so the interpreter's start-up
and the imports cancel out. Rows: the default config; without the journal; without any addon (the
forwarding core and the server's front alone); and with `--addons`, the core with each addon
alone, whose difference to the core is that addon's cost. Each row takes about a minute and a half
(Python runs ~50x slower under valgrind); two runs of the same row agree to ~0.3 %.

Needs valgrind (Debian's `valgrind`); not part of `make bench`, which measures time.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import procs

SHORT = 300
ADDONS = ("stats", "series", "tokens", "cost", "events", "windows")


async def _child(profile: str, count: int, variant: str) -> None:
    """Run `count` requests after a warm-up, configured as `variant` says."""
    import uvloop  # noqa: F401  (the loop claudex serve runs on)

    from bench.request_cost import engine_for, runner

    with tempfile.TemporaryDirectory(prefix="claudex-instr-") as state:
        engine = engine_for(profile, Path(state))
        await engine.start(health=False)
        if engine.seeding is not None:
            await engine.seeding
        if variant.startswith("only:"):
            keep = set(variant[5:].split(","))
            engine.hooks.set([a for a in engine.hooks.addons if getattr(a, "name", "") in keep])
        if variant != "default" and engine.journal is not None:
            engine.events.sinks.remove(engine.journal.record)
        run = runner(engine)
        await run(200)  # caches filled, first-use paths run
        # The collector as `claudex serve` sets it (claudex/server/serve.py): start-up objects
        # frozen, the young generation collected every 20,000 allocations.
        gc.collect()
        gc.freeze()
        gc.set_threshold(20_000, 20, 20)
        await run(count)
        await engine.close()


def _instructions(profile: str, count: int, variant: str, out_dir: Path) -> int:
    out = out_dir / f"callgrind-{profile}-{variant.replace(':', '-')}-{count}.out"
    argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
            "-m", "bench.instructions", "--child", profile, str(count), variant]
    env = {**os.environ, "PYTHONPATH": str(procs.ROOT)}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=procs.ROOT,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"callgrind run failed ({done.returncode}): {done.stderr[-800:]}")
    match = re.search(r"^summary:\s+(\d+)", out.read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"no summary line in {out}")
    return int(match.group(1))


def per_request(profile: str, variant: str, requests: int, out_dir: Path) -> float:
    short = _instructions(profile, SHORT, variant, out_dir)
    long = _instructions(profile, SHORT + requests, variant, out_dir)
    return (long - short) / requests


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions")
    parser.add_argument("--child", nargs=3, metavar=("PROFILE", "COUNT", "VARIANT"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--profile", choices=("anth", "chat"), default="anth",
                        help="anth: pass-through (the default); chat: translated")
    parser.add_argument("--requests", type=int, default=1200)
    parser.add_argument("--addons", action="store_true", help="a row per addon")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.child:
        profile, count, variant = args.child
        import uvloop

        uvloop.run(_child(profile, int(count), variant))
        return 0
    if shutil.which("valgrind") is None:
        print("bench.instructions needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    variants = ["default", "no-journal", "only:"]
    if args.addons:
        variants += [f"only:{name}" for name in ADDONS]
    rows: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="claudex-callgrind-") as out:
        for variant in variants:
            rows[variant] = per_request(args.profile, variant, args.requests, Path(out))
            if not args.json:
                core = rows.get("only:")
                extra = f"  (+{rows[variant] - core:,.0f} over the core)" \
                    if core is not None and variant.startswith("only:") and variant != "only:" \
                    else ""
                label = {"default": "default config", "no-journal": "without the journal",
                         "only:": "core (no addon, no journal)"}.get(variant, variant[5:])
                print(f"{label:<30} {rows[variant]:>10,.0f} instructions per request{extra}",
                      flush=True)
    if args.json:
        print(json.dumps({"profile": args.profile, "requests": args.requests, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
