"""The pieces of one end-to-end run: fake upstreams in this process, a real `claudex serve`
subprocess on a generated config, and the real Claude Code CLI run with `-p` in isolation.

    world = World(tmp_path, claude_binary, proxy)
    anth = await world.fake("anth", "anthropic")
    oai = await world.fake("oai", "openai", max_output_tokens=8192)
    world.profile("anth", anth, backups=["oai"])
    world.profile("oai", oai, default_model="oai-chat", max_tokens=8192)
    await world.serve()
    run = await world.claude(steps, profile="anth")

Isolation of Claude Code: a scratch HOME (so no login, settings or history of the machine's
user), a scratch working directory, an environment built from nothing (no inherited keys),
telemetry, error reports, auto-update and non-essential traffic off, and `HTTPS_PROXY` /
`HTTP_PROXY` at a proxy that refuses every connection and records it (`refusing_proxy`);
only 127.0.0.1 is exempt (`NO_PROXY`). Tools are allowed by name (`--allowedTools Bash Write`),
never by `--dangerously-skip-permissions`.

Nothing here waits on a clock for correctness: processes are awaited, the proxy's readiness is
its own log line; the timeouts only bound a run that hangs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import shlex
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from claudex.demo.aws_signatures import AwsTestKey
from claudex.demo.fake_bedrock import FakeBedrock
from claudex.demo.fake_plans import Plan
from claudex.demo.fake_provider import FakeProvider
from claudex.demo.fake_replies import Protocol
from claudex.demo.scripted import script_prompt
from e2e.refusing_proxy import Attempt, RefusingProxy

CLAUDE_TIMEOUT_S: Final = 180.0
"""Bounds a hung Claude Code run; a normal one takes a few seconds."""
SERVE_START_TIMEOUT_S: Final = 30.0
UPSTREAM_KEY: Final = "sk-e2e-upstream-" + secrets.token_hex(8)
"""What claudex's profiles send upstream (api_key_env E2E_UPSTREAM_KEY)."""
CLIENT_KEY: Final = "sk-ant-e2e-client-" + secrets.token_hex(8)
"""Claude Code's own dummy ANTHROPIC_API_KEY: it must never reach an api-key upstream."""
_LISTENING: Final = re.compile(r"claudex listening on (http://127\.0\.0\.1:\d+)")
_REQUEST_LINE: Final = re.compile(
    r"request (?P<protocol>\S+) (?P<model>\S+) -> (?P<provider>\S+) (?P<status>\S+) "
    r"\[(?P<trail>[^\]]*)\]")
_BIN: Final = Path(sys.executable).parent
BEDROCK_KEY: Final = AwsTestKey("AKIDE2E" + secrets.token_hex(6).upper(),
                                "e2e-secret-" + secrets.token_hex(16))
"""The AWS keys the fake Bedrock knows and `claudex serve` signs with (from its environment)."""


@dataclass(frozen=True)
class LoggedRequest:
    """One request as `claudex serve --debug` logs it: the client's model, who served it, the
    status the client got, and every attempt as (provider, status or outcome)."""

    model: str
    provider: str
    status: str
    attempts: tuple[tuple[str, str], ...]
    line: str


@dataclass
class ServeProcess:
    proc: asyncio.subprocess.Process
    url: str
    log: list[str]
    log_path: Path
    reader: asyncio.Task[None]

    def requests(self) -> list[LoggedRequest]:
        found = []
        for line in self.log:
            match = _REQUEST_LINE.search(line)
            if match is None:
                continue
            attempts = []
            for part in match["trail"].split(" -> "):
                provider, _, outcome = part.strip().rpartition(" ")
                attempts.append((provider, outcome))
            found.append(LoggedRequest(match["model"], match["provider"], match["status"],
                                       tuple(attempts), line))
        return found

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 20)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        with contextlib.suppress(asyncio.CancelledError):
            await self.reader


@dataclass
class ClaudeRun:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    token: str
    proof: Path

    def describe(self) -> str:
        return (f"claude exited {self.returncode}\n--- stdout ---\n{self.stdout[-4000:]}\n"
                f"--- stderr ---\n{self.stderr[-4000:]}")


@dataclass
class World:
    root: Path
    claude_binary: Path
    proxy: RefusingProxy
    fakes: dict[str, FakeProvider] = field(default_factory=dict)
    clouds: dict[str, FakeBedrock] = field(default_factory=dict)
    """The cloud fakes (Bedrock), beside the protocol fakes."""
    serve_env: dict[str, str] = field(default_factory=dict)
    """More variables for `claudex serve` (AWS keys for a SigV4 profile)."""
    profiles: list[str] = field(default_factory=list)
    settings: str = ""
    """TOML put before the profiles (`[breaker]` and the like)."""
    served: ServeProcess | None = None
    config_path: Path | None = None
    proxy_mark: int = 0

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        self.work = self.root / "work"
        self.tmp = self.root / "tmp"
        for folder in (self.home, self.work, self.tmp):
            folder.mkdir(parents=True, exist_ok=True)
        self.proxy_mark = len(self.proxy.attempts)

    # ------------------------------------------------------------ the upstreams and claudex

    async def fake(self, name: str, protocol: Protocol, **options: Any) -> FakeProvider:
        fake = FakeProvider(name, protocol, **options)
        await fake.start()
        self.fakes[name] = fake
        return fake

    async def bedrock(self, name: str, **options: Any) -> FakeBedrock:
        """A fake Bedrock region that knows `BEDROCK_KEY`, and its profile's keys for
        `claudex serve` (the AWS chain reads them from the environment; nothing of the
        machine's AWS files: they point into the scratch folder)."""
        fake = FakeBedrock(name, keys=[BEDROCK_KEY], **options)
        await fake.start()
        self.clouds[name] = fake
        self.serve_env.update({
            "AWS_ACCESS_KEY_ID": BEDROCK_KEY.access_key_id,
            "AWS_SECRET_ACCESS_KEY": BEDROCK_KEY.secret_access_key,
            "AWS_CONFIG_FILE": str(self.root / "aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(self.root / "aws-credentials"),
            "AWS_EC2_METADATA_DISABLED": "true"})
        return fake

    def bedrock_profile(self, name: str, fake: FakeBedrock, *, model: str,
                        backups: Sequence[str] = ()) -> None:
        """A Bedrock profile at `fake`, signed SigV4 with the keys `bedrock` put in the
        environment."""
        self.profiles.append("\n".join([
            "[[profiles]]", f'name = "{name}"', 'provider_type = "Bedrock"',
            f'region = "{fake.region}"', f'base_url = "{fake.base_url}"',
            f'default_model = "{model}"', f"backup_providers = {json.dumps(list(backups))}",
        ]) + "\n")

    def profile(self, name: str, fake: FakeProvider, *, backups: Sequence[str] = (),
                default_model: str | None = None, max_tokens: int | None = None,
                extra: str = "") -> None:
        provider_type = {"anthropic": "DirectAnthropic", "openai": "OpenAICompatible",
                         "responses": "OpenAIResponses"}[fake.protocol]
        lines = ["[[profiles]]", f'name = "{name}"', f'provider_type = "{provider_type}"',
                 f'base_url = "{fake.base_url}"', 'api_key_env = "E2E_UPSTREAM_KEY"',
                 f"backup_providers = {json.dumps(list(backups))}"]
        if default_model is not None:
            lines.append(f'default_model = "{default_model}"')
        if max_tokens is not None:
            lines.append(f"max_tokens = {max_tokens}")
        if extra:
            lines.append(extra)
        self.profiles.append("\n".join(lines) + "\n")

    async def serve(self) -> ServeProcess:
        """`claudex serve` on the profiles so far (the first is the default), on a free port
        it reports itself; health probes off, so every upstream request is the client's."""
        path = self.root / "profiles.toml"
        path.write_text("[proxy]\nhost = \"127.0.0.1\"\n\n[health]\nenabled = false\n\n"
                        + self.settings + "\n" + "\n".join(self.profiles))
        path.chmod(0o600)
        self.config_path = path
        log_path = self.root / "claudex-serve.log"
        env = {**_base_env(), "E2E_UPSTREAM_KEY": UPSTREAM_KEY, "HOME": str(self.home),
               **self.serve_env}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "claudex.cli", "--config", str(path), "serve", "--port", "0",
            "--debug", stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, env=env)
        log: list[str] = []
        listening: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        reader = asyncio.create_task(_read_log(proc, log, log_path, listening))
        try:
            url = await asyncio.wait_for(asyncio.shield(listening), SERVE_START_TIMEOUT_S)
        except (TimeoutError, EOFError) as error:
            proc.kill()
            await proc.wait()
            await reader
            raise AssertionError("claudex serve did not start:\n" + "\n".join(log)) from error
        self.served = ServeProcess(proc, url, log, log_path, reader)
        return self.served

    def claudex_command(self, *args: str) -> str:
        """A shell command running this claudex's CLI against the served engine."""
        assert self.served is not None
        return shlex.join([str(_BIN / "claudex"), *args, "--url", self.served.url])

    @staticmethod
    def fault_command(fake: FakeProvider, mode: str) -> str:
        """A shell command switching `fake`'s fault through its control route."""
        root = fake.base_url.removesuffix("/v1")
        return shlex.join(["curl", "-sf", "-o", "/dev/null", "-w", "fault set: %{http_code}",
                           "-X", "POST", f"{root}/_fake/fault",
                           "-H", "content-type: application/json",
                           "-d", json.dumps({"mode": mode})])

    @staticmethod
    def spend_command(fake: FakeProvider, seconds: float) -> str:
        """A shell command spending `fake`'s plan window, resetting in `seconds`."""
        root = fake.base_url.removesuffix("/v1")
        return shlex.join(["curl", "-sf", "-o", "/dev/null", "-w", "plan spent: %{http_code}",
                           "-X", "POST", f"{root}/_fake/plan",
                           "-H", "content-type: application/json",
                           "-d", json.dumps({"spend_s": seconds})])

    async def subscription(self) -> tuple[FakeProvider, FakeProvider]:
        """A Claude subscription `sub` (a fake plan sending the unified headers) with `anth2`
        behind it, served."""
        sub = await self.fake("sub", "anthropic")
        backup = await self.fake("anth2", "anthropic")
        sub.plan = Plan.claude()
        self.profile("sub", sub, backups=["anth2"])
        self.profile("anth2", backup)
        await self.serve()
        return sub, backup

    # ------------------------------------------------------------ Claude Code

    def proof_path(self) -> Path:
        return self.work / "proof.txt"

    def proxy_attempts(self) -> list[Attempt]:
        """What Claude Code tried to reach outside 127.0.0.1 during this world's runs."""
        return self.proxy.since(self.proxy_mark)

    async def claude(self, steps: Sequence[tuple[str, str]], *, profile: str | None = None,
                     base_url: str | None = None,
                     mode: dict[str, str] | None = None,
                     env_over: dict[str, str] | None = None) -> ClaudeRun:
        """Run `claude -p` on a script of (tool, argument) steps (`claudex.demo.scripted`)
        through the served claudex at `/proxy/PROFILE` (None: the default route), or at
        `base_url`. Claude Code's own retries are off: a request claudex fails is not hidden
        by a second try. `env_over`: variables set over the harness's own (a scenario's
        NO_PROXY)."""
        token = "t" + secrets.token_hex(6)
        prompt = script_prompt(token, list(steps))
        if base_url is None:
            assert self.served is not None
            base_url = self.served.url + (f"/proxy/{profile}" if profile else "")
        argv = [str(self.claude_binary), "-p", prompt, "--max-turns", "12",
                "--allowedTools", "Bash", "Write"]
        env = {**_base_env(),
               "HOME": str(self.home), "TMPDIR": str(self.tmp), "SHELL": "/bin/bash",
               "CLAUDE_CONFIG_DIR": str(self.home / ".claude"),
               "ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": CLIENT_KEY,
               "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
               "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
               "CLAUDE_CODE_MAX_RETRIES": "0",
               "HTTPS_PROXY": self.proxy.url, "HTTP_PROXY": self.proxy.url,
               "https_proxy": self.proxy.url, "http_proxy": self.proxy.url,
               "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        if mode is not None:  # Claude Code in Bedrock or Vertex mode: those variables instead
            for name in ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"):
                env.pop(name)
            env.update(mode)
        env.update(env_over or {})
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=self.work, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), CLAUDE_TIMEOUT_S)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = await proc.communicate()
        return ClaudeRun(argv, proc.returncode if proc.returncode is not None else -1,
                         out.decode(errors="replace"), err.decode(errors="replace"), token,
                         self.proof_path())

    async def close(self) -> None:
        if self.served is not None:
            await self.served.stop()
        for fake in self.fakes.values():
            await fake.stop()
        for cloud in self.clouds.values():
            await cloud.stop()


def _base_env() -> dict[str, str]:
    """A minimal environment: nothing of the caller's (no API keys, no proxies) leaks in."""
    path = os.pathsep.join([str(_BIN), "/usr/local/bin", "/usr/bin", "/bin"])
    return {"PATH": path, "LANG": "C.UTF-8", "TERM": "dumb"}


async def _read_log(proc: asyncio.subprocess.Process, log: list[str], path: Path,
                    listening: asyncio.Future[str]) -> None:
    assert proc.stderr is not None
    with path.open("w") as sink:
        async for raw in proc.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            log.append(line)
            sink.write(line + "\n")
            sink.flush()
            match = _LISTENING.search(line)
            if match and not listening.done():
                listening.set_result(match.group(1))
    if not listening.done():
        listening.set_exception(EOFError("claudex serve exited"))
