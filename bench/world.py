"""The processes one benchmark run measures, and the claudex configs that wire them together.

    bench upstream      raw uvloop responder (bench/upstream.py): the fast upstream
    fakes               claudex.demo.serve_fakes: primary + backup (Anthropic), oai (OpenAI)
    reference           bench/reference_proxy.py -> bench upstream
    claudex             `claudex --config bench.toml serve` (uvloop)

claudex's profiles:
    fast       DirectAnthropic -> bench upstream (the default profile: latency, throughput, streams)
    backup     DirectAnthropic -> fake "backup"
    refusing   DirectAnthropic -> a port that refuses connections, backups = [backup]; its breaker
               never opens (huge failure_threshold), so every request pays the refused connect
    tripped    DirectAnthropic -> fake "primary", backups = [backup]; tripped via the admin API
    oai        OpenAICompatible -> fake "oai" (pass-through, and translation once it lands)
"""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bench import procs
from bench.httpclient import Connection, build_request
from claudex.demo.world import free_port

MODEL = "claude-sonnet-4-5"
KEY_ENV = "BENCH_PROVIDER_KEY"
KEY = "sk-bench-not-a-secret-0000"
NEVER_OPEN = 1_000_000_000


def messages_body(text: str = "Say hello.", *, stream: bool = False, model: str = MODEL) -> bytes:
    body: dict[str, object] = {
        "model": model,
        "max_tokens": 256,
        "messages": [{"role": "user", "content": text}],
    }
    if stream:
        body["stream"] = True
    return json.dumps(body, separators=(",", ":")).encode()


def chat_body(text: str = "Say hello.", model: str = "oai-chat") -> bytes:
    body = {"model": model, "max_tokens": 256, "messages": [{"role": "user", "content": text}]}
    return json.dumps(body, separators=(",", ":")).encode()


ANTHROPIC_HEADERS = {"anthropic-version": "2023-06-01"}


def _profile(name: str, provider_type: str, base_url: str, *, backups: tuple[str, ...] = (),
             default_model: str = MODEL, extra: str = "") -> str:
    lines = [
        "[[profiles]]",
        f'name = "{name}"',
        f'provider_type = "{provider_type}"',
        f'base_url = "{base_url}"',
        f'api_key_env = "{KEY_ENV}"',
        f'default_model = "{default_model}"',
    ]
    if backups:
        lines.append("backup_providers = [" + ", ".join(f'"{b}"' for b in backups) + "]")
    if extra:
        lines.append(extra)
    return "\n".join(lines) + "\n"


def _head(port: int, default_profile: str) -> str:
    return (f'[proxy]\nhost = "127.0.0.1"\nport = {port}\ndefault_profile = "{default_profile}"\n\n'
            "[health]\nenabled = true\ninterval_seconds = 30\n\n")


@dataclass
class Ports:
    upstream: int = field(default_factory=free_port)
    reference: int = field(default_factory=free_port)
    claudex: int = field(default_factory=free_port)
    claudex_scale: int = field(default_factory=free_port)
    claudex_console: int = field(default_factory=free_port)
    primary: int = field(default_factory=free_port)
    backup: int = field(default_factory=free_port)
    oai: int = field(default_factory=free_port)


def main_config(ports: Ports, refusing: int, claudex_port: int) -> str:
    up = f"http://127.0.0.1:{ports.upstream}"
    return _head(claudex_port, "fast") + "\n".join([
        _profile("fast", "DirectAnthropic", up),
        _profile("backup", "DirectAnthropic", f"http://127.0.0.1:{ports.backup}"),
        _profile("refusing", "DirectAnthropic", f"http://127.0.0.1:{refusing}",
                 backups=("backup",), extra=f"failure_threshold = {NEVER_OPEN}"),
        _profile("tripped", "DirectAnthropic", f"http://127.0.0.1:{ports.primary}",
                 backups=("backup",)),
        _profile("oai", "OpenAICompatible", f"http://127.0.0.1:{ports.oai}/v1",
                 default_model="oai-chat"),
    ])


def scale_config(ports: Ports, count: int = 100) -> str:
    """`count` profiles over the fakes, each with two backups; the last one -> bench upstream."""
    parts = []
    for index in range(count):
        name = f"p{index:03d}"
        # Backups point forward only: the config validator rejects cycles.
        backups = tuple(f"p{index + step:03d}" for step in (1, 2) if index + step < count)
        if index == count - 1:
            parts.append(_profile(name, "DirectAnthropic", f"http://127.0.0.1:{ports.upstream}",
                                  backups=backups))
        elif index % 2 == 0:
            parts.append(_profile(name, "DirectAnthropic", f"http://127.0.0.1:{ports.primary}",
                                  backups=backups))
        else:
            parts.append(_profile(name, "OpenAICompatible", f"http://127.0.0.1:{ports.oai}/v1",
                                  backups=backups, default_model="oai-chat"))
    return _head(ports.claudex_scale, "p000") + "\n".join(parts)


def http_ok(port: int, method: str, path: str, body: bytes = b"") -> bool:
    with Connection(port, timeout=5.0) as conn:
        status, _ = conn.request(build_request(method, path, port, body, ANTHROPIC_HEADERS))
        return status == 200


def claudex_argv(config: Path, command: str = "serve") -> list[str]:
    return procs.python("-m", "claudex.cli", "--config", str(config), command)


@dataclass
class World:
    fleet: procs.Fleet
    ports: Ports
    workdir: Path
    refusing_sock: socket.socket
    refusing_port: int
    main_config: Path
    scale_config: Path
    upstream: procs.Proc | None = None
    fakes: procs.Proc | None = None
    reference: procs.Proc | None = None
    claudex: procs.Proc | None = None

    @classmethod
    def create(cls) -> World:
        workdir = Path(tempfile.mkdtemp(prefix="claudex-bench-"))
        ports = Ports()
        sock, refusing = procs.refusing_port()
        main = workdir / "bench.toml"
        main.write_text(main_config(ports, refusing, ports.claudex))
        scale = workdir / "scale100.toml"
        scale.write_text(scale_config(ports))
        return cls(procs.Fleet(workdir), ports, workdir, sock, refusing, main, scale)

    @property
    def env(self) -> dict[str, str]:
        # A state dir of the bench's own: every claudex it starts keeps its history journal
        # there, as on a fresh install. In the user's state dir the journal grew by every
        # request of every bench run (135 MB after a day of them), and each start's seeding
        # of the panels' counters from it (engine/history/seed.py) took 1.6 s of CPU inside
        # the window being measured.
        return {KEY_ENV: KEY, "XDG_STATE_HOME": str(self.workdir / "state")}

    def start(self) -> None:
        p = self.ports
        self.upstream = self.fleet.start(
            "upstream", procs.python("-m", "bench.upstream", str(p.upstream)),
            under_test=False, port=p.upstream,
            ready=lambda: http_ok(p.upstream, "POST", "/v1/messages", messages_body()))
        self.fakes = self.fleet.start(
            "fakes", procs.python("-m", "claudex.demo.serve_fakes",
                                  f"primary:anthropic:{p.primary}",
                                  f"backup:anthropic:{p.backup}", f"oai:openai:{p.oai}"),
            under_test=False, port=p.oai,
            ready=lambda: all(http_ok(port, "GET", "/_fake/state")
                              for port in (p.primary, p.backup, p.oai)))
        self.reference = self.fleet.start(
            "reference", procs.python("-m", "bench.reference_proxy", "--port", str(p.reference),
                                      "--upstream", f"http://127.0.0.1:{p.upstream}"),
            under_test=True, port=p.reference,
            ready=lambda: http_ok(p.reference, "POST", "/v1/messages", messages_body()))
        self.claudex = self.start_claudex("claudex", self.main_config, p.claudex)

    def start_claudex(self, name: str, config: Path, port: int) -> procs.Proc:
        return self.fleet.start(name, claudex_argv(config), under_test=True, port=port,
                                env=self.env, ready=lambda: http_ok(port, "GET", "/healthz"),
                                timeout=30.0)

    def stop(self, *, keep_logs: bool = False) -> None:
        """Stop every process; remove the configs and logs unless asked to keep them."""
        self.fleet.stop_all()
        self.refusing_sock.close()
        if not keep_logs:
            shutil.rmtree(self.workdir, ignore_errors=True)
