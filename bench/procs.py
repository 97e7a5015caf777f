"""Starting, pinning, watching and stopping the benchmark's processes.

On a machine with two or more cores the process under test (a proxy) gets core 0 to itself and
everything else (upstreams, fakes, wrk, the measuring client) shares the rest, so the proxies are
compared on equal terms and the load generator does not steal their CPU.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


# Taken once, before `pin_self` narrows this process's own affinity.
_ALL_CORES = frozenset(os.sched_getaffinity(0))


def cpu_sets() -> tuple[set[int], set[int]]:
    """(cores for the process under test, cores for everything else)."""
    cores = sorted(_ALL_CORES)
    if len(cores) < 2:
        return set(cores), set(cores)
    return {cores[0]}, set(cores[1:])


# Other work on the machine (a test run, an editor) competes for the same two cores; as root the
# benchmark's processes run at a slightly higher priority so it disturbs the numbers less. The
# proxies compared all get the same value, so the comparison stays fair.
NICENESS = -10 if os.geteuid() == 0 else 0


def pin_self() -> None:
    """Move the measuring process (this one) off the proxy's core and raise its priority."""
    _, helpers = cpu_sets()
    os.sched_setaffinity(0, helpers)
    if NICENESS:
        os.nice(NICENESS)


def refusing_port() -> tuple[socket.socket, int]:
    """A port that refuses connections: bound (so nobody else takes it) but not listening."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock, int(sock.getsockname()[1])


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    port: int | None = None
    cores: set[int] = field(default_factory=set)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def rss_mb(self) -> float:
        """Resident memory now (VmRSS), in MB (2**20 bytes)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError(f"{self.name}: no VmRSS")

    def stop(self, timeout: float = 10.0) -> None:
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def spawn(name: str, argv: Sequence[str], *, cores: set[int], log_dir: Path,
          port: int | None = None, env: dict[str, str] | None = None,
          niceness: int = NICENESS) -> Proc:
    log_path = log_dir / f"{name}.log"
    log = log_path.open("wb")

    def prepare() -> None:  # runs in the child between fork and exec
        os.sched_setaffinity(0, cores)
        # Children inherit the runner's niceness; set the asked-for value absolutely.
        current = os.getpriority(os.PRIO_PROCESS, 0)
        if current != niceness:
            os.setpriority(os.PRIO_PROCESS, 0, niceness)

    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    popen = subprocess.Popen(
        list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        cwd=ROOT, env=full_env, preexec_fn=prepare, start_new_session=True,
    )
    log.close()
    return Proc(name, popen, log_path, port, cores)


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


def wait_until(ready: Callable[[], bool], proc: Proc, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited (status {proc.popen.returncode}):\n"
                               f"{proc.log_tail()}")
        with contextlib.suppress(OSError):
            if ready():
                return
        time.sleep(0.05)
    raise RuntimeError(f"{proc.name} not ready after {timeout:.0f} s:\n{proc.log_tail()}")


def port_open(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1.0):
        return True


_TICK = os.sysconf("SC_CLK_TCK")


def _machine_busy_s() -> float:
    """CPU seconds all cores have spent busy since boot (/proc/stat)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / _TICK


def _process_cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


def _own_cpu_s() -> float:
    """This process and its reaped children (wrk, stopped servers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class CpuWatch:
    """How much CPU processes other than the benchmark's used while it ran: a noisy machine
    (another test run, a build) shows up here, next to the numbers it disturbed."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.busy0 = _machine_busy_s()
        self.own0 = _own_cpu_s()

    def others_cores(self, live_pids: Sequence[int]) -> float:
        """Average number of cores kept busy by other processes since the start."""
        elapsed = time.monotonic() - self.started
        busy = _machine_busy_s() - self.busy0
        own = _own_cpu_s() - self.own0 + sum(_process_cpu_s(pid) for pid in live_pids)
        return round(max(0.0, busy - own) / elapsed, 2) if elapsed > 0 else 0.0


class Fleet:
    """Every process the run started; `stop_all` ends them (also on errors)."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: list[Proc] = []

    def start(self, name: str, argv: Sequence[str], *, under_test: bool, port: int | None = None,
              env: dict[str, str] | None = None,
              ready: Callable[[], bool] | None = None, timeout: float = 20.0) -> Proc:
        test_cores, helper_cores = cpu_sets()
        proc = spawn(name, argv, cores=test_cores if under_test else helper_cores,
                     log_dir=self.log_dir, port=port, env=env)
        self.procs.append(proc)
        check = ready or (lambda: port is not None and port_open(port))
        wait_until(check, proc, timeout)
        return proc

    def stop(self, proc: Proc) -> None:
        proc.stop()
        if proc in self.procs:
            self.procs.remove(proc)

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()
