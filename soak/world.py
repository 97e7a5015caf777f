"""The soak's world: three fake providers, a fake OAuth token endpoint, a config file for them and
a real `claudex serve` process reading it — all on 127.0.0.1.

Profiles (one of each auth style and both protocols):
    alpha   DirectAnthropic, OAuth (claude credentials file, refreshed at the fake token endpoint),
            backups beta then gamma
    beta    OpenAICompatible, api key from the environment, backup gamma
    gamma   DirectAnthropic, api key from the environment, no backup

beta is reached through an upstream proxy of its own, "corp" (claudex/demo/fake_proxy.py, named in
`[[upstream_proxies]]`; issue 36), which the chaos schedule takes down and makes answer 429; the
others are direct. beta answers over TLS (claudex/demo/tls_front.py, a certificate of a private
CA the profile's `ca_bundle` names), so claudex reaches it as it reaches a real provider through a
corporate proxy: a CONNECT tunnel, whose refusal and 429 are the proxy's own (a plain-http request
through a proxy gets the proxy's 429 as if the provider had said it).
beta is also alpha's first backup, so an out proxy is met both by requests addressed to beta
(they fail over to gamma) and in the middle of alpha's chain (skipped as `no_route`, like an
open breaker).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import httpx

from claudex.demo.fake_oauth import FakeTokenServer
from claudex.demo.fake_provider import FakeProvider, start_fakes, stop_fakes
from claudex.demo.fake_proxy import FakeProxy
from claudex.demo.pki import new_authority
from claudex.demo.tls_front import TlsFront
from claudex.demo.world import free_port

PROVIDERS: Final = (("alpha", "anthropic"), ("beta", "openai"), ("gamma", "anthropic"))
BACKUPS: Final = {"alpha": ("beta", "gamma"), "beta": ("gamma",), "gamma": ()}
OAUTH_PROVIDER: Final = "alpha"
PROXY_NAME: Final = "corp"
PROXIED: Final = "beta"
"""The provider behind the upstream proxy `PROXY_NAME`."""
REPO: Final = Path(__file__).resolve().parent.parent  # where `python -m soak.child` is found
KEYS: Final = {"SOAK_BETA_KEY": "sk-soak-beta-0123456789", "SOAK_GAMMA_KEY": "sk-soak-gamma-987654"}


@dataclass(frozen=True)
class ProxiedRoute:
    """How `PROXIED` is reached: its TLS front's URL, the CA that signed the front's
    certificate, and the upstream proxy between."""

    proxy_url: str
    base_url: str
    ca_bundle: Path


@dataclass(frozen=True)
class Limits:
    """The timing settings written to the config; the deadline of a request follows from them."""

    connect_timeout: float = 1.0
    read_timeout: float = 1.5
    # A hung or stalled stream is left at these (each within connect + read above, so the
    # deadline below covers them); a wait for a slot at claudex is bounded by queue_timeout.
    stream_first_byte_timeout: float = 1.0
    stream_commit_timeout: float = 1.5
    stream_idle_timeout: float = 1.5
    queue_timeout: float = 1.0
    failure_threshold: int = 3
    recovery_seconds: float = 1.5
    max_recovery_seconds: float = 6.0
    half_open_probes: int = 1
    retry_initial_delay: float = 0.05
    retry_max_delay: float = 0.4
    retry_max_attempts: int = 3
    max_retry_after: float = 1.0
    health_interval: float = 1.0

    def deadline_s(self, chain_length: int) -> float:
        """The longest a request may take by the config's own promises: at every provider of its
        chain, each attempt may wait out the connect and read timeouts and each rate-limit retry
        the longest allowed wait, plus one extra attempt for an OAuth refresh; and two seconds
        of slack for scheduling on a loaded machine."""
        attempts = self.retry_max_attempts + 1
        per_attempt = self.queue_timeout + max(
            self.connect_timeout + self.read_timeout, self.stream_commit_timeout,
            self.stream_first_byte_timeout + self.stream_idle_timeout)
        per_provider = attempts * per_attempt + (
            self.retry_max_attempts - 1) * max(self.max_retry_after, self.retry_max_delay)
        return chain_length * per_provider + 2.0


def config_text(fakes: dict[str, FakeProvider], port: int, limits: Limits, creds: Path,
                token_url: str, history: Path, route: ProxiedRoute | None = None) -> str:
    """The soak's config; `history` is its journal, in the soak's own folder (the default path
    is the user's own journal: a soak's fake traffic must never land there). With `route`,
    `PROXIED` goes through the upstream proxy `PROXY_NAME` (whose breaker and retry settings
    are the globals above) to its TLS front, and the others are direct."""
    lines = [
        "# Written by the claudex soak; every number here bounds a request's deadline.",
        "[proxy]",
        'host = "127.0.0.1"',
        f"port = {port}",
        f"connect_timeout = {limits.connect_timeout}",
        f"read_timeout = {limits.read_timeout}",
        f"stream_first_byte_timeout = {limits.stream_first_byte_timeout}",
        f"stream_commit_timeout = {limits.stream_commit_timeout}",
        f"stream_idle_timeout = {limits.stream_idle_timeout}",
        f"queue_timeout = {limits.queue_timeout}",
        "",
        "[breaker]",
        f"failure_threshold = {limits.failure_threshold}",
        f"recovery_seconds = {limits.recovery_seconds}",
        f"half_open_probes = {limits.half_open_probes}",
        f"max_recovery_seconds = {limits.max_recovery_seconds}",
        "",
        "[retry]",
        f"initial_delay = {limits.retry_initial_delay}",
        "multiplier = 2.0",
        f"max_delay = {limits.retry_max_delay}",
        f"max_attempts = {limits.retry_max_attempts}",
        'jitter = "full"',
        f"max_retry_after = {limits.max_retry_after}",
        "",
        "[health]",
        "enabled = true",
        f"interval_seconds = {limits.health_interval}",
        f"timeout_seconds = {limits.read_timeout}",
        "degraded_latency_ms = 500",
        "avoid_slow = true  # a turns_slow fault: new conversations start elsewhere meanwhile",
        "",
        "[history]",
        f"path = {json.dumps(str(history))}  # the soak's own, never the user's",
    ]
    if route is not None:
        lines += ["", "[[upstream_proxies]]", f'name = "{PROXY_NAME}"',
                  f'url = "{route.proxy_url}"']
    for name, protocol in PROVIDERS:
        fake = fakes[name]
        provider_type = "DirectAnthropic" if protocol == "anthropic" else "OpenAICompatible"
        backups = ", ".join(f'"{b}"' for b in BACKUPS[name])
        lines += [
            "",
            "[[profiles]]",
            f'name = "{name}"',
            f'provider_type = "{provider_type}"',
            f'base_url = "{route.base_url if route and name == PROXIED else fake.base_url}"',
            f'default_model = "{name}-model"',
            f"backup_providers = [{backups}]",
        ]
        if route is not None and name == PROXIED:
            lines += [f'upstream_proxy = "{PROXY_NAME}"',
                      f"ca_bundle = {json.dumps(str(route.ca_bundle))}"]
        elif route is not None:
            lines.append('upstream_proxy = "direct"')
        if name == OAUTH_PROVIDER:
            lines += ['auth_type = "oauth"', 'oauth_provider = "claude"',
                      f'credentials_file = "{creds}"', f'token_url = "{token_url}"']
        else:
            lines.append(f'api_key_env = "SOAK_{name.upper()}_KEY"')
    return "\n".join(lines) + "\n"


def serve_env(state_dir: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a soak's `claudex serve`: the providers' keys, and a state dir of the
    soak's own (`XDG_STATE_HOME`: whatever claudex would keep in the user's state dir — the
    journal when a config names none, the trips saved in it — stays in the soak's folder)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    return {**os.environ, **KEYS, "XDG_STATE_HOME": str(state_dir), **(extra or {})}


def write_credentials(path: Path, access: str, refresh: str) -> None:
    expires_ms = int((time.time() + 3600) * 1000)
    data = {"claudeAiOauth": {"accessToken": access, "refreshToken": refresh,
                              "expiresAt": expires_ms, "scopes": ["user:inference"]}}
    path.write_text(json.dumps(data))
    path.chmod(0o600)


@dataclass
class ServeProcess:
    """`claudex serve` as a child process; its stderr goes to `log_path`."""

    proc: asyncio.subprocess.Process
    url: str
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("VmRSS not found")

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    async def stop(self) -> int:
        """SIGTERM, then wait; the exit status (SIGKILL after 20 s, reported as such)."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 20)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        assert self.proc.returncode is not None
        return self.proc.returncode


@dataclass
class World:
    workdir: Path
    limits: Limits
    instruments: Mapping[str, str] = field(default_factory=dict)
    """Environment variables of soak/child.py's opt-in instruments (a memory trace, an injected
    leak): with any set, the child is `python -m soak.child`, claudex's own command line with
    them; with none, plain `python -m claudex.cli`."""
    fakes: dict[str, FakeProvider] = field(default_factory=dict)
    tokens: FakeTokenServer = field(default_factory=FakeTokenServer)
    serve: ServeProcess | None = None
    credentials: Path | None = None
    proxy: FakeProxy = field(default_factory=FakeProxy)
    """`PROXIED`'s upstream proxy; the chaos sets its mode."""
    front: TlsFront | None = None
    """`PROXIED`'s TLS front."""

    @property
    def state_dir(self) -> Path:
        return self.workdir / "state"

    @property
    def history(self) -> Path:
        return self.state_dir / "history.sqlite3"

    async def start(self) -> None:
        started = await start_fakes(PROVIDERS)
        # Every call is kept: the soak matches upstream calls to requests at the end.
        for fake in started:
            fake.max_recorded = 10_000_000
            fake.stream_delay_ms = 1.0  # streams take a few ms, so faults can land mid-stream
            # The soak judges failover and streams, not model names: any model is served.
            fake.strict_models = False
        self.fakes = {fake.name: fake for fake in started}
        await self.tokens.start()
        await self.proxy.start()
        pki = self.workdir / "pki"
        authority = new_authority(pki, "claudex soak CA")
        self.front = TlsFront(self.fakes[PROXIED].base_url, authority.issue_server(pki, PROXIED))
        await self.front.start()
        route = ProxiedRoute(self.proxy.url, self.front.base_url, authority.cert_path)
        self.credentials = self.workdir / "claude-credentials.json"
        write_credentials(self.credentials, "soak-access-0", "soak-refresh-0")
        self.fakes[OAUTH_PROVIDER].faults.valid_tokens = {"soak-access-0"}
        port = free_port()
        config = self.workdir / "soak.toml"
        config.write_text(config_text(self.fakes, port, self.limits, self.credentials,
                                      self.tokens.token_url, self.history, route))
        config.chmod(0o600)
        log_path = self.workdir / "serve.log"
        module = "soak.child" if self.instruments else "claudex.cli"
        with log_path.open("wb") as log_file:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", module, "--config", str(config), "serve",
                stdin=asyncio.subprocess.DEVNULL, stdout=log_file, stderr=log_file,
                env=serve_env(self.state_dir, self.instruments),
                cwd=REPO if self.instruments else None,
            )
        self.serve = ServeProcess(proc, f"http://127.0.0.1:{port}", log_path)
        await self._wait_until_serving()

    async def _wait_until_serving(self) -> None:
        assert self.serve is not None
        async with httpx.AsyncClient() as client:
            for _ in range(1000):  # bounded: ~20 s for the process to start
                if self.serve.proc.returncode is not None:
                    raise RuntimeError(f"claudex serve exited with {self.serve.proc.returncode}:"
                                       f" {self.serve.log_path.read_text()[-2000:]}")
                try:
                    await client.get(self.serve.url + "/healthz")
                    return
                except httpx.TransportError:
                    await asyncio.sleep(0.02)
        raise RuntimeError("claudex serve did not start within 20 s")

    async def stop(self) -> int | None:
        status = await self.serve.stop() if self.serve is not None else None
        await stop_fakes(self.fakes.values())
        await self.tokens.stop()
        await self.proxy.close()
        if self.front is not None:
            await self.front.close()
        return status
