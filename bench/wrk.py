"""Throughput with wrk (Debian's package): install it if missing, run it, read its report."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.procs import cpu_sets

LUA = Path(__file__).with_name("wrk_post.lua")


class WrkMissing(Exception):
    pass


def ensure_wrk() -> str:
    """The wrk binary, installed with apt-get when missing and we are root."""
    found = shutil.which("wrk")
    if found:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise WrkMissing("wrk is not installed (apt-get install wrk) and this user cannot "
                         "install it")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print("bench: installing wrk with apt-get ...", flush=True)
    subprocess.run(["apt-get", "update"], check=False, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    done = subprocess.run(["apt-get", "install", "-y", "wrk"], check=False, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    found = shutil.which("wrk")
    if done.returncode != 0 or not found:
        raise WrkMissing("could not install wrk with apt-get")
    return found


@dataclass
class WrkResult:
    rps: float
    requests: int
    errors: int
    """Socket errors plus non-2xx answers."""
    p50_ms: float
    p99_ms: float

    def to_json(self) -> dict[str, float | int]:
        return {"rps": round(self.rps, 1), "requests": self.requests, "errors": self.errors,
                "p50_ms": self.p50_ms, "p99_ms": self.p99_ms}


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _latency(text: str, label: str) -> float:
    match = re.search(rf"^\s*{label}%\s+([\d.]+)(us|ms|s)\s*$", text, re.MULTILINE)
    return round(float(match.group(1)) * _UNITS[match.group(2)], 4) if match else float("nan")


def parse(text: str) -> WrkResult:
    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    total = re.search(r"(\d+) requests in", text)
    if rps is None or total is None:
        raise RuntimeError(f"cannot read wrk's report:\n{text}")
    errors = 0
    socket_errors = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if socket_errors:
        errors += sum(int(n) for n in socket_errors.groups())
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if non2xx:
        errors += int(non2xx.group(1))
    return WrkResult(float(rps.group(1)), int(total.group(1)), errors,
                     _latency(text, "50"), _latency(text, "99"))


def run(wrk: str, port: int, path: str, body: bytes, *, connections: int,
        seconds: int) -> WrkResult:
    """One wrk run from the helper cores: one thread, `connections` keep-alive connections."""
    _, helpers = cpu_sets()
    with tempfile.NamedTemporaryFile(prefix="claudex-bench-body-", suffix=".json") as file:
        # A file, not the environment: one variable holds at most 128 KB.
        file.write(body)
        file.flush()
        env = {**os.environ, "BENCH_BODY_FILE": file.name}
        argv = [wrk, "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(LUA),
                f"http://127.0.0.1:{port}{path}"]
        done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False,
                              preexec_fn=lambda: os.sched_setaffinity(0, helpers),
                              timeout=seconds + 60)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr or done.stdout}")
    return parse(done.stdout)
