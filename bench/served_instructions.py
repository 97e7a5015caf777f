"""Instructions per request of a served proxy (valgrind's callgrind): `claudex serve` and the
bare forwarder (bench/reference_proxy.py) side by side, with the C functions and shared objects
(libpython, uvloop, httptools, aiohttp's and multidict's extensions, libc) that spend them.

    python -m bench.served_instructions [--requests 1000] [--connections 8] [--body small|20k]
                                        [--only claudex|reference] [--top 30] [--json]
                                        [--variants] [--calls] [--keep DIR]

bench/instructions.py counts claudex in-process (its transport answering from memory, no
sockets); this counts the whole server process as `make bench` runs it: the bench upstream
(bench/upstream.py, natively, on the helper cores), and the proxy — `claudex --config bench.toml
serve` with the bench's default config (bench/world.py, history on; its health probes off, as
nothing runs behind the other profiles and a probe round would land in one run and not the other)
or the forwarder — under `valgrind --tool=callgrind`, every thread counted (the journal's writer
too). A client of blocking keep-alive connections (bench/httpclient.py, the same request bytes
wrk sends) makes a fixed number of non-streamed POST /v1/messages, `--connections` at a time;
each proxy runs twice, with 300 requests and with 300 + `--requests`, and the difference in
instructions (in total, per shared object, per function) divided by `--requests` is the cost of
one request: start-up, imports, the first-use paths and shutdown cancel out. The proxy is
saturated under valgrind (~50x slower), so with a few connections its loop finds several
requests ready at each turn, as under wrk's 64; two runs of one proxy agree to ~0.5 %.

Rows: the total and each thread's (the event loop's, the journal writer's); self instructions
by shared object, by libpython's source file (ceval.c: bytecode run; gcmodule.c: the collector;
obmalloc.c: allocation) and by C function; and libc's system-call wrappers, as calls per
request. `--keep DIR` leaves the callgrind files there for `callgrind_annotate --tree=caller`.
`--variants` adds two claudex rows: without the journal, and the core alone (no addon, no
journal; both taken off after the engine starts, as bench/instructions.py does in-process).
`--calls` runs the same two runs natively under cProfile instead (seconds, not minutes) and
counts Python function calls per request on the event loop's thread by package, a built-in's
counted as its caller's package's: what claudex asks of uvicorn and aiohttp, beside what the
forwarder asks (both deterministic; two runs agree exactly but for the collector's timing).

What it cannot see: the kernel (a syscall is its libc wrapper's few instructions; the calls
column counts them), cache misses, and time: the journal's writer flushes every 0.5 s of wall
time, and under valgrind a batch holds ~50x fewer requests than natively, so its per-batch
cost (the transaction, the minute sums' upserts) weighs more a request here than at full speed,
and the writer's total moves by ±3,000 a request between runs (a run's wall time follows the
machine's load): judge a change to it by its functions (`--keep`), not by the thread's total.

Needs valgrind (Debian's `valgrind`); each proxy takes two to three minutes. Not part of
`make bench` or `make test`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import procs
from bench.httpclient import Connection, build_request
from bench.world import ANTHROPIC_HEADERS, KEY, KEY_ENV, Ports, main_config, messages_body

SHORT = 300
_RECURSION = re.compile(r"'\d+$")  # callgrind's name for a function's recursive depth
# libc functions that are system calls (or wrap one): their calls per request are shown.
_SYSCALLS = re.compile(
    r"^(__libc_|__GI___libc_|__GI_|__)?(send|sendto|sendmsg|recv|recvfrom|recvmsg|read|write|"
    r"writev|readv|epoll_wait|epoll_pwait|epoll_ctl|accept4?|close|futex|syscall|"
    r"getsockopt|setsockopt|getpeername|getsockname|fcntl64|fcntl|ioctl|pwrite64|pread64|"
    r"fsync|fdatasync|lseek64|lseek|openat64|openat|fstatat64|newfstatat|clock_nanosleep|"
    r"nanosleep|sched_yield|select|poll)$")


# ------------------------------------------------------------------ the callgrind file


@dataclass
class Profile:
    """A callgrind output file summed up: self instructions by (object, file, function), and
    how often each function was called."""

    total: int = 0
    threads: list[int] = field(default_factory=list)  # each thread's total, the main one first
    self_ir: dict[tuple[str, str, str], int] = field(default_factory=lambda: defaultdict(int))
    calls: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))


def read_profile(path: Path, out: Profile | None = None) -> Profile:
    """Add one callgrind file's counts to `out` (a new Profile if None)."""
    out = Profile() if out is None else out
    names: dict[str, dict[str, str]] = {"ob": {}, "fl": {}, "fn": {}}
    space = {"ob": "ob", "cob": "ob", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl",
             "cfl": "fl", "fn": "fn", "cfn": "fn"}

    def name(kind: str, text: str) -> str:
        table = names[space[kind]]
        if text.startswith("("):
            ident, _, rest = text.partition(")")
            rest = rest.strip()
            if rest:
                table[ident] = rest
                return rest
            return table.get(ident, ident)
        return text

    ob = fl = fn = ""
    cob = cfn = None
    positions = 1
    skip_next = False  # the cost line after `calls=` is the call's inclusive cost
    for line in path.read_text(errors="replace").splitlines():
        if not line:
            continue
        head = line[0]
        if head.isdigit() or head in "+-*":
            parts = line.split()
            if skip_next:
                skip_next = False
                continue
            if len(parts) > positions:
                out.self_ir[(ob, fl, fn)] += int(parts[positions])
            continue
        key, eq, value = line.partition("=")
        if eq:
            if key == "ob":
                ob = name(key, value)
            elif key in ("fl", "fi", "fe"):
                fl = name(key, value)
            elif key == "fn":
                fn = name(key, value)
                cob = None
            elif key == "cob":
                cob = name(key, value)
            elif key in ("cfi", "cfl"):
                name(key, value)
            elif key == "cfn":
                cfn = name(key, value)
            elif key == "calls":
                if cfn is not None:
                    out.calls[(cob or ob, cfn)] += int(value.split()[0])
                cob = None
                skip_next = True
            continue
        if line.startswith("positions:"):
            positions = len(line.split()[1:])
        elif line.startswith("summary:"):
            out.total += int(line.split()[1])
            out.threads.append(int(line.split()[1]))
    return out


def short_object(ob: str) -> str:
    base = os.path.basename(ob)
    base = re.sub(r"\.cpython-\d+[^.]*\.so$", ".so", base)
    parent = os.path.basename(os.path.dirname(ob))
    if base.endswith(".so") and parent and not base.startswith("lib"):
        return f"{parent}/{base}"
    return base


@dataclass
class PerRequest:
    total: float
    threads: list[float]  # the main thread's, then the others' (the journal's writer)
    by_object: dict[str, float]
    by_function: dict[tuple[str, str], float]  # (object, function)
    by_source: dict[str, float]  # libpython's instructions by its source file
    calls: dict[tuple[str, str], float]


def difference(short: Profile, long: Profile, requests: int) -> PerRequest:
    by_object: dict[str, float] = defaultdict(float)
    by_function: dict[tuple[str, str], float] = defaultdict(float)
    by_source: dict[str, float] = defaultdict(float)
    for sign, prof in ((-1, short), (1, long)):
        for (ob, fl, fn), ir in prof.self_ir.items():
            obj, fn = short_object(ob), _RECURSION.sub("", fn)
            by_object[obj] += sign * ir / requests
            by_function[(obj, fn)] += sign * ir / requests
            if obj.startswith("libpython"):
                by_source[fl.split("Python-")[-1] if fl else "?"] += sign * ir / requests
    calls: dict[tuple[str, str], float] = defaultdict(float)
    for sign, prof in ((-1, short), (1, long)):
        for (ob, fn), count in prof.calls.items():
            calls[(short_object(ob), _RECURSION.sub("", fn))] += sign * count / requests
    threads = [(b - a) / requests for a, b in zip(short.threads, long.threads, strict=False)]
    return PerRequest((long.total - short.total) / requests, threads, dict(by_object),
                      dict(by_function), dict(by_source), dict(calls))


# ------------------------------------------------------------------ Python calls (--calls)

CallCounts = dict[str, int]  # "package: function (file:line)" -> calls


def _package(filename: str) -> str:
    if filename == "~":
        return "built-in"
    parts = Path(filename).parts
    for marker in ("site-packages", "claudex", "bench"):
        if marker in parts:
            i = parts.index(marker)
            if marker == "site-packages":
                return parts[i + 1].removesuffix(".py") if i + 1 < len(parts) else "?"
            return marker
    if "python3.11" in parts or any(p.startswith("python3") for p in parts):
        rest = parts[[i for i, p in enumerate(parts) if p.startswith("python3")][-1] + 1:]
        return rest[0].removesuffix(".py") if rest else "stdlib"
    return "?"


def read_calls(path: Path) -> CallCounts:
    import pstats

    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    out: CallCounts = {}
    for (filename, line, func), (_cc, nc, _tt, _ct, callers) in stats.items():
        if filename == "~":  # a built-in: counted as its callers' package's
            for (caller_file, _, _), counts in callers.items():
                key = f"built-in from {_package(caller_file)}: {func}"
                out[key] = out.get(key, 0) + counts[1]
            continue
        out[f"{_package(filename)}: {func} ({Path(filename).name}:{line})"] = nc
    return out


def _profiled_child(out: str, module: str, args: list[str]) -> None:
    """Run `module` as `python -m module args` would, under cProfile, and write its stats when
    it ends. uvicorn restores the SIGTERM handler it found and raises the signal again after
    its graceful shutdown: the one found here lets the process end normally, stats written."""
    import cProfile
    import runpy

    signal.signal(signal.SIGTERM, lambda *_: None)
    sys.argv = [module, *args]
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    finally:
        profiler.disable()
        profiler.dump_stats(out)


def calls_difference(short: CallCounts, long: CallCounts, requests: int) -> dict[str, float]:
    return {k: (long.get(k, 0) - short.get(k, 0)) / requests for k in set(short) | set(long)}


def calls_report(results: dict[str, dict[str, float]], top: int) -> str:
    targets = list(results)
    packages: dict[str, dict[str, float]] = defaultdict(dict)
    functions: dict[str, dict[str, float]] = defaultdict(dict)
    for t, r in results.items():
        for k, v in r.items():
            pkg = k.split(":", 1)[0]
            packages[pkg][t] = packages[pkg].get(t, 0.0) + v
            functions[k][t] = v
    lines = ["Python function calls per request (the event loop's thread, cProfile): " + ", ".join(
        f"{t} {sum(r.values()):,.1f}" for t, r in results.items())]
    lines += ["", *_table("by package", packages, targets, top, 1)]
    if len(targets) == 2:
        a, b = targets
        diff = {k: v for k, v in functions.items()
                if not k.startswith(("claudex", "built-in from claudex"))
                and abs(v.get(a, 0.0) - v.get(b, 0.0)) >= 0.5}
        ranked = dict(sorted(diff.items(), key=lambda kv: -abs(kv[1].get(a, 0.0)
                                                              - kv[1].get(b, 0.0)))[:top])
        lines += ["", *_table(f"library calls, {a} vs {b}", ranked, targets, top, 2)]
    else:
        lines += ["", *_table("by function", functions, targets, top, 2)]
    return "\n".join(lines)


# ------------------------------------------------------------------ running the proxies


def _listening(port: int) -> bool:
    """Whether something listens on `port`, asked of the kernel (a probe connection would be a
    cost in the process measured, and their number would differ between runs)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for row in Path(table).read_text().splitlines()[1:]:
                cols = row.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the proxy exited ({proc.returncode}) before listening")
        if _listening(port):
            return
        time.sleep(0.5)
    raise RuntimeError(f"nothing listening on {port} after {timeout:.0f} s")


def _load(port: int, body: bytes, count: int, connections: int) -> None:
    """`count` requests over `connections` keep-alive connections, each its share in turn."""
    raw = build_request("POST", "/v1/messages", port, body, ANTHROPIC_HEADERS)
    shares = [count // connections + (1 if i < count % connections else 0)
              for i in range(connections)]
    failures: list[str] = []

    def client(share: int) -> None:
        try:
            with Connection(port, timeout=900.0) as conn:
                for _ in range(share):
                    status, answer = conn.request(raw)
                    if status != 200:
                        failures.append(f"{status} {answer[:200]!r}")
                        return
        except Exception as exc:  # reported below
            failures.append(repr(exc))

    threads = [threading.Thread(target=client, args=(s,)) for s in shares if s]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise RuntimeError(f"requests failed: {failures[:3]}")


def _variant_child(variant: str, args: list[str]) -> int:
    """`claudex serve` with its addons or its journal taken off after the engine starts, as
    bench/instructions.py does in-process: `core` (no addon, no journal), `no-journal`."""
    from claudex.cli import main as cli
    from claudex.engine.engine import Engine

    start = Engine.start

    async def started(self: Engine, *, health: bool | None = None) -> None:
        await start(self, health=health)
        if variant == "core":
            self.hooks.set([])
        if self.journal is not None:
            self.events.sinks.remove(self.journal.record)

    Engine.start = started  # type: ignore[method-assign]
    return int(cli(args) or 0)


def _argv(target: str, ports: Ports, config: Path) -> list[str]:
    if target in ("claudex:core", "claudex:no-journal"):
        return ["-m", "bench.served_instructions", "--variant-child", target.split(":")[1],
                "--config", str(config), "serve"]
    if target == "claudex":
        return ["-m", "claudex.cli", "--config", str(config), "serve"]
    return ["-m", "bench.reference_proxy", "--port", str(ports.reference),
            "--upstream", f"http://127.0.0.1:{ports.upstream}"]


def _run(target: str, count: int, *, ports: Ports, config: Path, body: bytes,
         connections: int, work: Path, calls: bool) -> Profile | CallCounts:
    label = target.replace(":", "-")
    out = work / f"{'cprofile' if calls else 'callgrind'}-{label}-{count}.out"
    state = work / f"state-{label}-{count}"  # a fresh journal each run: seeding is equal
    if calls:
        argv = [sys.executable, "-m", "bench.served_instructions", "--child", str(out),
                *_argv(target, ports, config)[1:]]
    else:
        argv = ["valgrind", "--tool=callgrind", "--separate-threads=yes",
                f"--callgrind-out-file={out}", sys.executable, *_argv(target, ports, config)]
    test_cores, _ = procs.cpu_sets()
    proc = procs.spawn(f"{label}-{count}", argv, cores=test_cores, log_dir=work,
                       env={KEY_ENV: KEY, "XDG_STATE_HOME": str(state)})
    port = ports.claudex if target.startswith("claudex") else ports.reference
    try:
        _wait_listening(port, proc.popen, 300.0)
        _load(port, body, count, connections)
    finally:
        proc.stop(timeout=300)  # a process under valgrind takes its time to finish
    if calls:
        return read_calls(out)
    files = sorted(work.glob(f"{out.name}-*"))  # one a thread: -01 is the main thread
    if not files:
        raise RuntimeError(f"{target}: no callgrind output; log:\n{proc.log_tail()}")
    profile = Profile()
    for path in files:
        read_profile(path, profile)
    return profile


def measure(targets: list[str], requests: int, connections: int, body: bytes,
            calls: bool = False, keep: Path | None = None) -> dict[str, Any]:
    procs.pin_self()
    ports = Ports()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="claudex-served-callgrind-") as tmp:
        work = Path(tmp)
        config = work / "bench.toml"
        text = main_config(ports, procs.refusing_port()[1], ports.claudex)
        config.write_text(text.replace("[health]\nenabled = true", "[health]\nenabled = false"))
        config.chmod(0o600)
        _, helpers = procs.cpu_sets()
        upstream = procs.spawn("upstream", procs.python("-m", "bench.upstream",
                                                       str(ports.upstream)),
                               cores=helpers, log_dir=work)
        try:
            procs.wait_until(lambda: _listening(ports.upstream), upstream)
            for target in targets:
                runs = [_run(target, n, ports=ports, config=config, body=body,
                             connections=connections, work=work, calls=calls)
                        for n in (SHORT, SHORT + requests)]
                short, long = runs
                if isinstance(short, Profile) and isinstance(long, Profile):
                    results[target] = difference(short, long, requests)
                elif isinstance(short, dict) and isinstance(long, dict):
                    results[target] = calls_difference(short, long, requests)
        finally:
            upstream.stop()
            if keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                for path in work.glob("*.out*"):
                    shutil.copy(path, keep / path.name)
    return results


# ------------------------------------------------------------------ the report


def _table(title: str, rows: dict[str, dict[str, float]], targets: list[str], top: int,
           digits: int = 0) -> list[str]:
    def size(k: str) -> float:
        return max(abs(rows[k].get(t, 0.0)) for t in targets)

    keys = [k for k in sorted(rows, key=lambda k: -size(k))[:top] if size(k) >= 0.5 / 10**digits]
    width = max([len(title)] + [len(k) for k in keys])
    head = f"{title:<{width}}" + "".join(f" {t:>12}" for t in targets)
    if len(targets) == 2:
        head += f" {'difference':>12}"
    lines = [head]
    for k in keys:
        vals = [rows[k].get(t, 0.0) for t in targets]
        line = f"{k:<{width}}" + "".join(f" {v:>12,.{digits}f}" for v in vals)
        if len(targets) == 2:
            line += f" {vals[0] - vals[1]:>+12,.{digits}f}"
        lines.append(line)
    return lines


def report(results: dict[str, PerRequest], top: int) -> str:
    targets = list(results)
    lines = ["instructions per request (all threads): " + ", ".join(
        f"{t} {results[t].total:,.0f}" for t in targets)]
    if len(targets) == 2:
        a, b = targets
        lines[0] += f"  ({a} - {b} = {results[a].total - results[b].total:+,.0f})"
    for t, r in results.items():
        lines.append(f"  {t}: the event loop's thread {r.threads[0]:,.0f}, the others "
                     + ", ".join(f"{v:,.0f}" for v in r.threads[1:]))
    objects: dict[str, dict[str, float]] = defaultdict(dict)
    functions: dict[str, dict[str, float]] = defaultdict(dict)
    sources: dict[str, dict[str, float]] = defaultdict(dict)
    syscalls: dict[str, dict[str, float]] = defaultdict(dict)
    for t, r in results.items():
        for obj, v in r.by_object.items():
            objects[obj][t] = v
        for (obj, fn), v in r.by_function.items():
            functions[f"{fn} [{obj}]"][t] = v
        for src, v in r.by_source.items():
            sources[src][t] = v
        for (obj, fn), n in r.calls.items():
            if obj.startswith("libc") and _SYSCALLS.match(fn):
                syscalls[fn][t] = syscalls[fn].get(t, 0.0) + n
    lines += ["", *_table("by shared object", objects, targets, top)]
    lines += ["", *_table("libpython by source file", sources, targets, top)]
    lines += ["", *_table("by function (self)", functions, targets, top)]
    if syscalls:
        lines += ["", *_table("libc system calls (calls per request)", syscalls, targets, top, 2)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _profiled_child(argv[1], argv[2], argv[3:])
        return 0
    if argv[:1] == ["--variant-child"]:
        return _variant_child(argv[1], argv[2:])
    parser = argparse.ArgumentParser(prog="python -m bench.served_instructions")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--body", choices=("small", "20k"), default="small",
                        help="small: the throughput rows' body (the default); 20k: Claude "
                             "Code's shape at 20 KB (bench/bodies.py)")
    parser.add_argument("--only", choices=("claudex", "reference"))
    parser.add_argument("--variants", action="store_true",
                        help="claudex also without its journal, and without any addon")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--calls", action="store_true",
                        help="count Python function calls (cProfile, no valgrind) instead")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="copy the callgrind (or cProfile) files to DIR")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not args.calls and shutil.which("valgrind") is None:
        print("bench.served_instructions needs valgrind (apt-get install valgrind)",
              file=sys.stderr)
        return 2
    if args.body == "small":
        body = messages_body()
    else:
        from bench.bodies import claude_code_body

        body = claude_code_body(20_000)
    targets = [args.only] if args.only else ["claudex", "reference"]
    if args.variants:
        targets[1:1] = ["claudex:no-journal", "claudex:core"]
    results = measure(targets, args.requests, args.connections, body, args.calls, args.keep)
    if args.calls:
        print(json.dumps(results) if args.json else calls_report(results, args.top))
    elif args.json:
        print(json.dumps({t: {"total": r.total, "by_object": r.by_object,
                              "by_source": r.by_source,
                              "by_function": {f"{fn} [{ob}]": v
                                              for (ob, fn), v in r.by_function.items()}}
                          for t, r in results.items()}))
    else:
        print(report(results, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
