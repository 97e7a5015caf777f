"""claudex installed like a tool, with nothing from the repository at hand (`make installed`).

    python -m e2e.installed [--keep]      # --keep: leave the scratch folder, print its path

What a user gets from `pip install claudex-*.whl` (or `uv tool install .`, `pipx install .`,
which install the same wheel into a venv of their own):

1. `python -m build` makes the sdist and, from the sdist, the wheel, in a folder holding only
   what the build is given (pyproject.toml, MANIFEST.in, README.md, claudex/): a build that
   needs anything else fails here. Every file under claudex/ (but bytecode) must be in the
   wheel and in the sdist with the same bytes, and nothing else under claudex/ in the wheel;
   the packaged example config must be the repository's profiles.example.toml.
2. A fresh venv (`python -m venv`), the wheel installed into it with pip (its dependencies
   from the package index).
3. From a scratch working directory outside the repository, with a scratch HOME and XDG dirs
   and an environment built from nothing (no inherited keys, no PYTHONPATH), the installed
   commands: `claudex --version` (the wheel's version), `--help` (the demo is reachable),
   `claudex check` on the example shipped inside the installed package (found through
   importlib.resources by the installed python), `claudex init` into the scratch config dir and
   `claudex check` of what it wrote, `claudex demo --headless` with requests for a few seconds
   (every one answered 200, then again with the primary down: answered by its backup), the
   console (`claudex demo` on a pseudo-terminal: `g` for traffic, `q` to quit), and `claudex
   serve` on a free port of 127.0.0.1 over the installed package's own fake providers
   (`python -m claudex.demo.serve_fakes`), answering POST /v1/messages with 200, failing over
   when the primary is down, reached by `claudex status` and by the console attached to it.

Every request goes to 127.0.0.1 (pip's to the package index aside). Any failure ends the run
with the command, its exit status and its output. Only the standard library is used here: the
repository's own claudex is never imported.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tarfile
import tempfile
import termios
import time
import urllib.error
import urllib.request
import venv
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parent.parent
# What the build is given: a build needing any other file of the repository fails.
BUILD_INPUTS: Final = ("pyproject.toml", "MANIFEST.in", "README.md", "claudex")
MESSAGE: Final = {"model": "claude-sonnet-4-5", "max_tokens": 64,
                  "messages": [{"role": "user", "content": "Hello"}]}
# Traffic at most ~20 requests a second: a user's, not a load test (the demo's fake plans fill
# their quota windows with what they serve).
PACE_S: Final = 0.05
# Requests go straight to 127.0.0.1: no proxy from the environment.
_HTTP: Final = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class CheckFailed(Exception):
    """One step failed; the message says which, with the output that shows why."""


def say(text: str) -> None:
    print(f"installed: {text}", flush=True)


# -- processes -----------------------------------------------------------------------------------


def _output(label: str, text: str) -> str:
    text = text.strip()
    return f"--- {label} ---\n{text}\n" if text else f"--- {label}: (empty) ---\n"


def run(cmd: Sequence[str | Path], *, env: dict[str, str] | None = None, cwd: Path | None = None,
        timeout: float = 120, expect_rc: int = 0) -> subprocess.CompletedProcess[str]:
    """Run `cmd` to its end; a different exit status (or a hang) fails with its output."""
    argv = [str(a) for a in cmd]
    try:
        done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        raise CheckFailed(f"`{' '.join(argv)}` did not end within {timeout:.0f} s\n"
                          + _output("stdout", out) + _output("stderr", err)) from None
    if done.returncode != expect_rc:
        raise CheckFailed(f"`{' '.join(argv)}` exited with {done.returncode} "
                          f"(expected {expect_rc})\n"
                          + _output("stdout", done.stdout) + _output("stderr", done.stderr))
    return done


class Background:
    """A long-running command, its stdout and stderr going to files (read back on failure)."""

    def __init__(self, name: str, cmd: Sequence[str | Path], *, env: dict[str, str], cwd: Path,
                 logs: Path) -> None:
        self.name = name
        self.argv = [str(a) for a in cmd]
        self.out_path = logs / f"{name}.stdout"
        self.err_path = logs / f"{name}.stderr"
        with self.out_path.open("wb") as out, self.err_path.open("wb") as err:
            self.proc = subprocess.Popen(self.argv, env=env, cwd=cwd, stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def stdout(self) -> str:
        return self.out_path.read_text(encoding="utf-8", errors="replace")

    def stderr(self) -> str:
        return self.err_path.read_text(encoding="utf-8", errors="replace")

    def failed(self, what: str) -> CheckFailed:
        state = ("still running" if self.proc.poll() is None
                 else f"exited with {self.proc.returncode}")
        return CheckFailed(f"{self.name} (`{' '.join(self.argv)}`, {state}): {what}\n"
                           + _output("stdout", self.stdout()) + _output("stderr", self.stderr()))

    def wait_for_line(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        """The first match of `pattern` in its stdout, waited for (its exit fails at once)."""
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.stdout())
            if found:
                return found
            if self.proc.poll() is not None:
                raise self.failed(f"ended before printing /{pattern}/")
            if time.monotonic() > deadline:
                raise self.failed(f"printed no /{pattern}/ within {timeout:.0f} s")
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGINT, *, expect_rc: int | None = 0,
             timeout: float = 20) -> None:
        """Signal it and wait for its end; `expect_rc` (unless None) is the status it must end
        with. A process that does not end is killed, and fails."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise self.failed(f"did not end within {timeout:.0f} s of signal {sig}") from None
        if expect_rc is not None and self.proc.returncode != expect_rc:
            raise self.failed(f"ended with {self.proc.returncode}, expected {expect_rc}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@contextlib.contextmanager
def background(name: str, cmd: Sequence[str | Path], *, env: dict[str, str], cwd: Path,
               logs: Path) -> Iterator[Background]:
    """A `Background` for the block, killed (with its process group) if the block did not stop
    it."""
    proc = Background(name, cmd, env=env, cwd=cwd, logs=logs)
    try:
        yield proc
    finally:
        proc.kill()


# -- HTTP to 127.0.0.1 ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http(method: str, url: str, body: dict[str, Any] | None = None,
         timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one request; an HTTP error status is returned, not raised."""
    if not url.startswith("http://127.0.0.1:"):
        raise CheckFailed(f"refusing a request off this machine: {url}")
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"content-type": "application/json",
                                              "anthropic-version": "2023-06-01"})
    try:
        with _HTTP.open(request, timeout=timeout) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


def wait_until_answering(url: str, proc: Background, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError):
            if http("GET", url + "/healthz", timeout=2)[0] == 200:
                return
        if proc.proc.poll() is not None:
            raise proc.failed(f"ended before {url}/healthz answered")
        if time.monotonic() > deadline:
            raise proc.failed(f"{url}/healthz did not answer within {timeout:.0f} s")
        time.sleep(0.05)


def send_messages(url: str, *, seconds: float, expect: set[str] | None = None,
                  refuse: str | None = None, at_least: int = 3) -> dict[str, int]:
    """POST /v1/messages again and again, paced, for `seconds` (and at least `at_least`
    times): every one must be a 200 with a reply, served by a provider in `expect` (if given)
    and never by `refuse`. Returns how many each provider served."""
    served: dict[str, int] = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline or sum(served.values()) < at_least:
        status, headers, body = http("POST", url + "/v1/messages", MESSAGE)
        provider = headers.get("x-claudex-provider", "?")
        if status != 200:
            raise CheckFailed(f"POST {url}/v1/messages answered {status} (provider {provider}, "
                              f"attempts {headers.get('x-claudex-attempts')}): {body[:500]!r}")
        reply = json.loads(body)
        if reply.get("type") != "message" or not reply.get("content"):
            raise CheckFailed(f"POST {url}/v1/messages: 200 without a message: {body[:500]!r}")
        if (expect is not None and provider not in expect) or provider == refuse:
            raise CheckFailed(f"POST {url}/v1/messages was served by {provider!r}; expected one "
                              f"of {sorted(expect or [])}, never {refuse!r} (attempts "
                              f"{headers.get('x-claudex-attempts')})")
        served[provider] = served.get(provider, 0) + 1
        time.sleep(PACE_S)
    return served


def fault(base_url: str, mode: str, **extra: Any) -> None:
    """Switch a fake provider's fault (`POST /_fake/fault` at its root, not under /v1)."""
    root = re.sub(r"/v1/?$", "", base_url.rstrip("/"))
    status, _, body = http("POST", root + "/_fake/fault", {"mode": mode, **extra})
    if status != 200:
        raise CheckFailed(f"POST {root}/_fake/fault answered {status}: {body[:300]!r}")


def engine_status(url: str) -> dict[str, Any]:
    status, _, body = http("GET", url + "/_claudex/status")
    if status != 200:
        raise CheckFailed(f"GET {url}/_claudex/status answered {status}: {body[:300]!r}")
    data: dict[str, Any] = json.loads(body)
    return data


# -- the console on a pseudo-terminal ------------------------------------------------------------


class Terminal:
    """A command on a pseudo-terminal of 140x40: what it draws, and keys typed into it."""

    def __init__(self, name: str, cmd: Sequence[str | Path], *, env: dict[str, str],
                 cwd: Path) -> None:
        self.name = name
        self.argv = [str(a) for a in cmd]
        self.screen = b""
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
        try:
            self.proc = subprocess.Popen(self.argv, env={**env, "TERM": "xterm-256color",
                                                         "COLUMNS": "140", "LINES": "40"},
                                         cwd=cwd, stdin=slave, stdout=slave, stderr=slave,
                                         start_new_session=True)
        finally:
            os.close(slave)

    def text(self) -> str:
        """What it drew, escape sequences blanked out."""
        raw = self.screen.decode("utf-8", errors="replace")
        return re.sub(r"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|.)", " ", raw)

    def failed(self, what: str) -> CheckFailed:
        state = ("still running" if self.proc.poll() is None
                 else f"exited with {self.proc.returncode}")
        tail = re.sub(r"\s+", " ", self.text())[-3000:]
        return CheckFailed(f"{self.name} (`{' '.join(self.argv)}`, {state}): {what}\n"
                           + _output("what it drew (last 3000 characters)", tail))

    def pump(self, seconds: float) -> None:
        """Read what it draws for `seconds` (less if it ends)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # the other side closed: it ended
                    return
                if not chunk:
                    return
                self.screen += chunk
            elif self.proc.poll() is not None:
                return

    def wait_for(self, words: Sequence[str], timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not all(w in self.text() for w in words):
            if self.proc.poll() is not None:
                raise self.failed(f"ended before drawing {list(words)}")
            if time.monotonic() > deadline:
                raise self.failed(f"drew no {list(words)} within {timeout:.0f} s")
            self.pump(0.2)

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def quit(self, timeout: float = 20) -> None:
        """`q`, then its end with status 0."""
        self.type("q")
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self.pump(0.2)
        if self.proc.poll() is None:
            raise self.failed(f"still running {timeout:.0f} s after `q`")
        if self.proc.returncode != 0:
            raise self.failed(f"ended with {self.proc.returncode} after `q`")

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        with contextlib.suppress(OSError):
            os.close(self.master)


@contextlib.contextmanager
def terminal(name: str, cmd: Sequence[str | Path], *, env: dict[str, str],
             cwd: Path) -> Iterator[Terminal]:
    term = Terminal(name, cmd, env=env, cwd=cwd)
    try:
        yield term
    finally:
        term.close()


# -- the steps -----------------------------------------------------------------------------------


def build(scratch: Path) -> tuple[Path, Path, Path]:
    """The sdist and wheel (built from the sdist) of a copy of the build inputs: (source copy,
    sdist, wheel)."""
    source = scratch / "source"
    source.mkdir()
    for name in BUILD_INPUTS:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, source / name)
    dist = scratch / "dist"
    # Isolated (the default): setuptools comes from the index as a user's build would get it.
    run([sys.executable, "-m", "build", "--outdir", dist, source], cwd=scratch, timeout=300)
    sdists, wheels = sorted(dist.glob("*.tar.gz")), sorted(dist.glob("*.whl"))
    if len(sdists) != 1 or len(wheels) != 1:
        raise CheckFailed(f"expected one sdist and one wheel in {dist}, found "
                          f"{[p.name for p in dist.iterdir()]}")
    return source, sdists[0], wheels[0]


def package_files(source: Path) -> dict[str, bytes]:
    """Every file under claudex/ of the source copy (no bytecode), by its path in a wheel."""
    return {p.relative_to(source).as_posix(): p.read_bytes()
            for p in sorted((source / "claudex").rglob("*")) if p.is_file()}


def check_contents(source: Path, sdist: Path, wheel: Path) -> str:
    """The wheel and the sdist hold exactly the package's files, byte for byte; returns the
    wheel's version."""
    want = package_files(source)
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
        got = {n: whl.read(n) for n in names if n.startswith("claudex/")}
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        version_line = re.search(r"^Version: (\S+)$", whl.read(metadata).decode(), re.M)
    if version_line is None:
        raise CheckFailed(f"{wheel.name}: no Version in {metadata}")
    stray = sorted(n for n in names if not n.startswith(("claudex/", "claudex-")))
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    differ = sorted(n for n in set(want) & set(got) if want[n] != got[n])
    if missing or extra or differ or stray:
        raise CheckFailed(
            f"{wheel.name} is not the package: missing {missing} (add a pattern to "
            f"[tool.setuptools.package-data] in pyproject.toml), not in the source {extra}, "
            f"different bytes {differ}, outside the package {stray}")
    with tarfile.open(sdist) as tar:
        top = tar.getnames()[0].split("/")[0]
        in_sdist = {m.name.removeprefix(top + "/") for m in tar.getmembers() if m.isfile()}
    missing = sorted(set(want) - in_sdist)
    if missing:
        raise CheckFailed(f"{sdist.name} lacks {missing}")
    packaged = want.get("claudex/data/profiles.example.toml")
    if packaged != (REPO / "profiles.example.toml").read_bytes():
        raise CheckFailed("claudex/data/profiles.example.toml is not the repository's "
                          "profiles.example.toml: copy it there (it is what the wheel ships)")
    return version_line.group(1)


def install(scratch: Path, wheel: Path) -> Path:
    """A fresh venv with the wheel installed: its bin/ folder."""
    home = scratch / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(home)
    bin_dir = home / "bin"
    run([bin_dir / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         wheel], cwd=scratch, timeout=600)
    return bin_dir


def scratch_env(scratch: Path, bin_dir: Path) -> dict[str, str]:
    """An environment built from nothing: the venv first on PATH, a scratch HOME and XDG
    dirs, no keys, no PYTHONPATH."""
    dirs = {name: scratch / name.lower() for name in
            ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME")}
    for path in dirs.values():
        path.mkdir()
    # COLUMNS: rich wraps what `claudex check` prints at 80 columns off a terminal.
    return {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
            "COLUMNS": "250",
            "PYTHONNOUSERSITE": "1", "NO_PROXY": "127.0.0.1,localhost",
            **{k: str(v) for k, v in dirs.items()}}


def check_installed_python(bin_dir: Path, env: dict[str, str], cwd: Path) -> Path:
    """The installed python imports claudex from the venv, not the repository; returns the
    packaged example config's path, as importlib.resources gives it."""
    code = ("import json, sys, claudex; from importlib.resources import files; "
            "print(json.dumps({'module': claudex.__file__, 'path': sys.path, "
            "'example': str(files('claudex') / 'data' / 'profiles.example.toml')}))")
    found = json.loads(run([bin_dir / "python", "-c", code], env=env, cwd=cwd).stdout)
    module, example = Path(found["module"]), Path(found["example"])
    venv_home = bin_dir.parent.resolve()
    if not module.resolve().is_relative_to(venv_home):
        raise CheckFailed(f"the installed python imports claudex from {module}, not the venv")
    near_repo = [p for p in found["path"] if p and Path(p).resolve().is_relative_to(REPO)]
    if near_repo:
        raise CheckFailed(f"the installed python's sys.path reaches the repository: {near_repo}")
    if not example.is_file() or not example.resolve().is_relative_to(venv_home):
        raise CheckFailed(f"the packaged example config {example} is not an installed file")
    return example


def check_cli(bin_dir: Path, env: dict[str, str], cwd: Path, version: str,
              example: Path) -> None:
    claudex = bin_dir / "claudex"
    said = run([claudex, "--version"], env=env, cwd=cwd).stdout.strip()
    if said != f"claudex {version}":
        raise CheckFailed(f"`claudex --version` says {said!r}; the wheel is {version}")
    say(f"`claudex --version`: {said}")
    helped = run([claudex, "--help"], env=env, cwd=cwd).stdout
    if "demo" not in helped:
        raise CheckFailed(f"`claudex --help` does not mention the demo:\n{helped}")
    demo_help = run([claudex, "demo", "--help"], env=env, cwd=cwd).stdout
    if "--headless" not in demo_help:
        raise CheckFailed(f"`claudex demo --help` has no --headless:\n{demo_help}")
    checked = run([claudex, "check", "--config", example], env=env, cwd=cwd).stdout
    if not checked.startswith("ok "):
        raise CheckFailed(f"`claudex check --config {example}` did not say ok:\n{checked}")
    say(f"`claudex check` on the packaged example: {checked.splitlines()[0]}")
    # No config yet: the message names the packaged example, which exists.
    missing = run([claudex, "check"], env=env, cwd=cwd, expect_rc=1).stderr
    named = re.search(r"the full example is (\S+?)\)", missing)
    if named is None or Path(named.group(1)) != example:
        raise CheckFailed(f"`claudex check` with no config should name {example}:\n{missing}")
    written = run([claudex, "init"], env=env, cwd=cwd).stdout
    config = Path(env["XDG_CONFIG_HOME"]) / "claudex" / "profiles.toml"
    if not config.is_file() or str(config) not in written:
        raise CheckFailed(f"`claudex init` did not write {config}:\n{written}")
    if f"explained in the example config: {example}" not in config.read_text(encoding="utf-8"):
        raise CheckFailed(f"{config} does not point at the packaged example {example}")
    checked = run([claudex, "check"], env=env, cwd=cwd).stdout
    if not checked.startswith(f"ok {config}"):
        raise CheckFailed(f"`claudex check` of what init wrote did not say ok:\n{checked}")
    say(f"`claudex init` wrote {config}; `claudex check`: ok")


def check_headless_demo(bin_dir: Path, env: dict[str, str], cwd: Path, logs: Path) -> None:
    port = free_port()
    with background("claudex demo --headless", [bin_dir / "claudex", "demo", "--headless",
                                                "--port", str(port)],
                    env=env, cwd=cwd, logs=logs) as demo:
        url = demo.wait_for_line(r"claudex demo is running — proxy at (http://\S+)").group(1)
        fakes = dict(re.findall(r"(\S+) \(\w+\) (http://127\.0\.0\.1:\d+[^\s,]*)",
                                demo.wait_for_line(r"fake providers: .*\n").group(0)))
        if url != f"http://127.0.0.1:{port}" or "claude" not in fakes:
            raise demo.failed(f"proxy at {url}, fakes {fakes}: expected port {port} and "
                              "a fake named claude")
        served = send_messages(url, seconds=3)
        fault(fakes["claude"], "down", duration_s=60)
        failed_over = send_messages(url, seconds=2, refuse="claude")
        status = engine_status(url)
        if status.get("all_failed") != 0 or status.get("failovers", 0) < 1:
            raise demo.failed(f"status says all_failed {status.get('all_failed')}, failovers "
                              f"{status.get('failovers')}")
        demo.stop(signal.SIGINT, expect_rc=0)
    say(f"`claudex demo --headless`: {served} answered, then with claude down {failed_over}")


def check_demo_console(bin_dir: Path, env: dict[str, str], cwd: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with terminal("claudex demo (console)", [bin_dir / "claudex", "demo", "--port", str(port)],
                  env=env, cwd=cwd) as term:
        term.wait_for(["claude-backup", "quit"])
        term.type("g")  # the demo's traffic
        deadline = time.monotonic() + 20
        while True:
            term.pump(0.5)
            status = engine_status(url)
            if status.get("requests", 0) >= 5:
                break
            if time.monotonic() > deadline:
                raise term.failed(f"`g` brought no traffic in 20 s: status {status}")
        if status.get("all_failed") != 0:
            raise term.failed(f"{status.get('all_failed')} of the demo's requests failed")
        term.quit()
    say(f"`claudex demo` (the console): drew its panels, {status['requests']} requests from "
        "`g`, none failed, `q` quit")


SERVE_CONFIG: Final = """\
[proxy]
port = {port}
default_profile = "upstream-a"
connect_timeout = 2
read_timeout = 5

[health]
enabled = false

[[profiles]]
name = "upstream-a"
provider_type = "DirectAnthropic"
base_url = "{a}"
api_key_env = "FAKE_KEY"
backup_providers = ["upstream-b"]

[[profiles]]
name = "upstream-b"
provider_type = "DirectAnthropic"
base_url = "{b}"
api_key_env = "FAKE_KEY"
"""


def check_serve(bin_dir: Path, env: dict[str, str], cwd: Path, logs: Path) -> None:
    fakes_cmd: list[str | Path] = [bin_dir / "python", "-m", "claudex.demo.serve_fakes",
                                   "upstream-a:anthropic", "upstream-b:anthropic"]
    with background("fake providers", fakes_cmd, env=env, cwd=cwd, logs=logs) as fakes:
        a = fakes.wait_for_line(r"upstream-a\s+anthropic\s+(http://127\.0\.0\.1:\d+)").group(1)
        b = fakes.wait_for_line(r"upstream-b\s+anthropic\s+(http://127\.0\.0\.1:\d+)").group(1)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        config = cwd / "serve.toml"
        config.write_text(SERVE_CONFIG.format(port=port, a=a, b=b), encoding="utf-8")
        config.chmod(0o600)
        serve_env = {**env, "FAKE_KEY": "sk-fake-key-0123456789"}
        cfg: list[str | Path] = ["--config", config]
        with background("claudex serve", [bin_dir / "claudex", *cfg, "serve"],
                        env=serve_env, cwd=cwd, logs=logs) as serve:
            wait_until_answering(url, serve)
            served = send_messages(url, seconds=1, expect={"upstream-a"})
            status = run([bin_dir / "claudex", *cfg, "status"], env=env, cwd=cwd).stdout
            if "upstream-a" not in status or "upstream-b" not in status:
                raise serve.failed(f"`claudex status` does not list both profiles:\n{status}")
            with terminal("claudex console (attached)",
                          [bin_dir / "claudex", *cfg, "console", "--read-only"],
                          env=env, cwd=cwd) as term:
                term.wait_for(["upstream-a", "upstream-b", "quit"])
                term.quit()
            fault(a, "down", duration_s=60)
            failed_over = send_messages(url, seconds=1, expect={"upstream-b"})
            serve.stop(signal.SIGTERM, expect_rc=0)
        fakes.stop(signal.SIGINT, expect_rc=0)
    say(f"`claudex serve`: POST /v1/messages 200 {served}, with upstream-a down {failed_over}; "
        "`claudex status` and the console attached to it")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.installed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args(argv)
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="claudex-installed-")).resolve()
    if scratch.is_relative_to(REPO):
        raise SystemExit(f"the scratch folder {scratch} must be outside the repository")
    try:
        source, sdist, wheel = build(scratch)
        version = check_contents(source, sdist, wheel)
        say(f"built {sdist.name} and, from it, {wheel.name}: the package's "
            f"{len(package_files(source))} files, byte for byte")
        bin_dir = install(scratch, wheel)
        say(f"installed {wheel.name} into a fresh venv ({time.monotonic() - started:.0f} s)")
        cwd, logs = scratch / "cwd", scratch / "logs"
        cwd.mkdir()
        logs.mkdir()
        env = scratch_env(scratch, bin_dir)
        example = check_installed_python(bin_dir, env, cwd)
        check_cli(bin_dir, env, cwd, version, example)
        check_headless_demo(bin_dir, env, cwd, logs)
        check_demo_console(bin_dir, env, cwd)
        check_serve(bin_dir, env, cwd, logs)
    except CheckFailed as exc:
        print(f"installed: FAILED: {exc}", file=sys.stderr, flush=True)
        if not args.keep:
            print(f"installed: (run with --keep to look at {scratch})", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            say(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    say(f"ok in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
