"""Profile `claudex serve` under one benchmark workload with py-spy and list the hot spots.

    python -m bench.profile [throughput|latency|burst|paced|console] [--seconds S] [--native]

For the console's own frame cost, profile the headless frame timer directly:

    py-spy record --gil -o bench/profile-console-frames.svg -- \
        .venv/bin/python -m bench.console_frame CONFIG 15

Starts the same processes as `make bench`, runs the workload against claudex (or, for
"console", against the proxy hosted by `claudex console`), records with
`py-spy record` (install it into the venv: `.venv/bin/pip install py-spy`), and writes
bench/profile-WORKLOAD.svg (a flame graph) and bench/profile-WORKLOAD.txt: the top functions by
own time and by total time, with file:line.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from bench import procs, sections, wrk
from bench.console import ConsoleProcess
from bench.httpclient import Connection
from bench.measure import timed_stream
from bench.world import World, claudex_argv, main_config, messages_body

HERE = Path(__file__).parent


def _py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise SystemExit("py-spy is not installed: .venv/bin/pip install py-spy")
    return found


def _record(pid: int, seconds: int, out: Path, fmt: str, native: bool) -> subprocess.Popen[bytes]:
    argv = [_py_spy(), "record", "--pid", str(pid), "--duration", str(seconds),
            "--rate", "500", "--gil", "--format", fmt, "--output", str(out)]
    if native:
        argv.append("--native")
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _load(workload: str, world: World, port: int, seconds: int) -> None:
    deadline = time.monotonic() + seconds
    if workload == "throughput":
        wrk.run(wrk.ensure_wrk(), port, "/v1/messages", messages_body(), connections=64,
                seconds=seconds)
        return
    text = {"burst": "events:500", "paced": "events:500 pace_us:1000"}.get(workload)
    body = messages_body(text, stream=True) if text else messages_body()
    target = sections._anthropic(port, body=body)
    with Connection(port) as conn:
        raw = target.raw()
        while time.monotonic() < deadline:
            if text:
                timed_stream(conn, raw, 500)
            else:
                conn.request(raw)


def _without_line(frame: str) -> str:
    """`f (path.py:12)` -> `f (path.py)`."""
    head, sep, tail = frame.rpartition(":")
    return f"{head})" if sep and tail.rstrip(")").isdigit() else frame


def summarize(raw: Path, top: int = 25) -> str:
    """Own and total sample shares per function from py-spy's collapsed stacks."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        samples += count
        own[frames[-1]] += count
        # Total time per function (any line of it), counted once per sample.
        for function in {_without_line(frame) for frame in frames}:
            total[function] += count
    if not samples:
        return "no samples\n"
    lines = [f"{samples} samples (py-spy --gil: only threads running Python, 500 Hz)\n",
             "own time by line (the function itself, not its callees):"]
    lines += [f"  {100 * n / samples:5.1f}%  {frame}" for frame, n in own.most_common(top)]
    lines += ["", "total time by function (with callees):"]
    lines += [f"  {100 * n / samples:5.1f}%  {frame}" for frame, n in total.most_common(top)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile")
    parser.add_argument("workload", nargs="?", default="throughput",
                        choices=("throughput", "latency", "burst", "paced", "console"))
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--native", action="store_true", help="include C frames")
    args = parser.parse_args(argv)
    procs.pin_self()
    world = World.create()
    try:
        world.start()
        assert world.claudex is not None
        sections.warm_up(world, sections.Settings.for_mode(True), wrk.ensure_wrk())
        svg = HERE / f"profile-{args.workload}.svg"
        txt = HERE / f"profile-{args.workload}.txt"
        raw = world.workdir / "profile.raw"
        if args.workload == "console":
            p = world.ports
            config = world.workdir / "console.toml"
            config.write_text(main_config(p, world.refusing_port, p.claudex_console))
            env = {**os.environ, "PYTHONPATH": str(procs.ROOT), **world.env}
            with ConsoleProcess(claudex_argv(config, "console"), env=env,
                                cores=procs.cpu_sets()[0],
                                log_path=world.workdir / "console.log") as app:
                if not app.wait_for_port(p.claudex_console, 30.0) or app.popen is None:
                    raise SystemExit("the console did not open its proxy port")
                _profile_pid(app.popen.pid, "latency", world, p.claudex_console, args, svg,
                             raw)
        else:
            _profile_pid(world.claudex.pid, args.workload, world, world.ports.claudex, args,
                         svg, raw)
        report = summarize(raw)
        txt.write_text(f"workload: {args.workload}, {args.seconds:g} s\n\n{report}")
        print(report)
        print(f"wrote {svg} and {txt}")
    finally:
        world.stop()
    return 0


def _profile_pid(pid: int, workload: str, world: World, port: int, args: argparse.Namespace,
                 svg: Path, raw: Path) -> None:
    # Two recorders of the same window: a flame graph to look at and raw stacks to count.
    recorders = [_record(pid, args.seconds, svg, "flamegraph", args.native),
                 _record(pid, args.seconds, raw, "raw", args.native)]
    time.sleep(0.5)
    loader = threading.Thread(target=_load, args=(workload, world, port, args.seconds))
    loader.start()
    loader.join()
    for recorder in recorders:
        _, err = recorder.communicate(timeout=60)
        if recorder.returncode != 0:
            raise SystemExit(f"py-spy failed: {err.decode(errors='replace')}")


if __name__ == "__main__":
    sys.exit(main())
