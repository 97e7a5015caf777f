"""`python -m soak` — the full chaos soak (`make soak`); exits 1 on any violation."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

from rich.console import Console

from soak.report import print_report
from soak.run import SoakPlan, run_soak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m soak", description=__doc__)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--requests", type=int, default=20_000,
                      help="requests in the chaos phase (default 20000)")
    size.add_argument("--seconds", type=float, help="run the chaos phase this long instead")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--think-ms", type=float, default=60.0,
                        help="mean pause of each client between requests (default 60)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--fleet", type=int, metavar="N",
                        help="N instances sharing one redis-server, with Redis and instance "
                        "restarts (soak/fleet.py); runs --seconds (default 60)")
    args = parser.parse_args(argv)
    if args.fleet:
        return _fleet(args)
    plan = SoakPlan(requests=None if args.seconds else args.requests, seconds=args.seconds,
                    clients=args.clients, seed=args.seed, think_ms=args.think_ms)
    console = Console(stderr=True)
    with tempfile.TemporaryDirectory(prefix="claudex-soak-") as workdir:
        report = asyncio.run(run_soak(plan, Path(workdir), say=console.log))
    print_report(report, Console())
    if args.json:
        Path(args.json).write_text(json.dumps(report.to_json(), indent=2) + "\n")
    return 0 if report.ok else 1


def _fleet(args: argparse.Namespace) -> int:
    from soak.fleet import FleetPlan, print_fleet_report, run_fleet_soak

    plan = FleetPlan(instances=args.fleet, seconds=args.seconds or 60.0, seed=args.seed,
                     think_ms=args.think_ms)
    console = Console(stderr=True)
    with tempfile.TemporaryDirectory(prefix="claudex-fleet-soak-") as workdir:
        report = asyncio.run(run_fleet_soak(plan, Path(workdir), say=console.log))
    print_fleet_report(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report.to_json(), indent=2) + "\n")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
