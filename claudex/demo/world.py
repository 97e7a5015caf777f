"""The demo world: four fake providers (two Anthropic, one Chat Completions, one Responses API)
and a generated config in a temporary folder. "claude" and "codex" are subscriptions: their
answers describe quota windows that fill with the tokens served.

"claude" is reached as a company's provider is (issue 36): through the demo's own upstream proxy
`corp` (claudex/demo/fake_proxy.py) and over TLS (a TLS front with a private CA the profile's
`ca_bundle` trusts), so requests go through CONNECT tunnels and the proxy's own failures — its
connections refused, its 429s — are told apart from the provider's. The console's demo keys take
the proxy down and make it answer 429 (claudex/demo/controls.py).

Shared by `claudex demo --headless` and the console demo so both show the same thing.
"""

from __future__ import annotations

import os
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

from claudex.config.loader import load_config
from claudex.config.model import DEFAULT_PORT, Config
from claudex.demo.fake_plans import Plan
from claudex.demo.fake_provider import FakeProvider, start_fakes, stop_fakes
from claudex.demo.fake_proxy import FakeProxy
from claudex.demo.pki import new_authority
from claudex.demo.tls_front import TlsFront

DEMO_KEY_ENV = "CLAUDEX_DEMO_KEY"
DEMO_KEY = "demo-key-not-a-secret-0000"
OPENAI_DEMO_MODELS = ("grok-3-beta", "grok-3-mini")
"""What the demo's OpenAI fake serves (it refuses other models, as x.ai would)."""

# name, protocol, backups
DEMO_PROVIDERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("claude", "anthropic", ("claude-backup", "grok")),
    ("claude-backup", "anthropic", ()),
    ("grok", "openai", ("claude-backup",)),
    ("codex", "responses", ("claude-backup",)),
)
_PROVIDER_TYPES = {"anthropic": "DirectAnthropic", "openai": "OpenAICompatible",
                   "responses": "OpenAIResponses"}
RESPONSES_DEMO_MODEL = "codex-chat"  # what the Responses fake named "codex" serves

# The subscriptions of the demo (claudex/demo/fake_plans.py): "claude" is a Claude plan, "codex"
# a ChatGPT one. Their "5h" window lasts minutes here, so a new user sees it fill with the
# traffic, the failover when it is spent and the plan serving again after its reset.
DEMO_WINDOW_S = 180.0
DEMO_WINDOW_TOKENS = {"claude": 15_000, "codex": 6_000}

# The demo's upstream proxy and the profile behind it. Its [retry] is short so the escalation
# after repeated 429s ("Repeated rate-limit errors from the upstream proxy corp ...") shows after
# one wait of PROXY_RETRY_AFTER_S, not after the default five attempts.
DEMO_PROXY = "corp"
DEMO_PROXIED = "claude"
PROXY_RETRY_AFTER_S = 2.0
PROXY_MAX_ATTEMPTS = 2


# Ports this process has handed out. The kernel may give the same port to two binds to port 0
# in a row once the first socket is closed (seen in CI: two fleet instances spawned together
# were both handed 40503, one failed to listen), so a port is handed out once per process.
_HANDED_OUT: set[tuple[str, int]] = set()


def free_port(preferred: int = 0, host: str = "127.0.0.1") -> int:
    """`preferred` when it is free, else any free port (the demo, tests, bench and soak).

    Never the same port twice in one process, so callers that start several servers before any
    of them listens cannot be handed one port between them."""
    for port in (preferred, *([0] * 64)):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            found = int(sock.getsockname()[1])
        if (host, found) in _HANDED_OUT:
            continue
        _HANDED_OUT.add((host, found))
        return found
    raise OSError("no free port")


def demo_config_text(fakes: dict[str, FakeProvider], port: int, *,
                     proxy_url: str | None = None, proxied_url: str | None = None,
                     ca_bundle: Path | None = None) -> str:
    """The demo's config. With `proxy_url`, profile "claude" goes through `[[upstream_proxies]]`
    corp at that URL, to `proxied_url` (its fake behind TLS) trusting `ca_bundle`."""
    lines = [
        "# claudex demo config: four fake providers on 127.0.0.1 (generated).",
        "[proxy]",
        'host = "127.0.0.1"',
        f"port = {port}",
        'default_profile = "claude"',
        "connect_timeout = 2",
        "read_timeout = 10",
        "",
        "[breaker]",
        "failure_threshold = 3",
        "recovery_seconds = 15",
        "",
        "[health]",
        "interval_seconds = 5",
        "timeout_seconds = 2",
        "degraded_latency_ms = 1500",
        "",
    ]
    if proxy_url is not None:
        lines += [
            "[[upstream_proxies]]",
            f'name = "{DEMO_PROXY}"',
            f'url = "{proxy_url}"',
            f"max_attempts = {PROXY_MAX_ATTEMPTS}",
            "initial_delay = 0.5",
            "",
        ]
    for name, protocol, backups in DEMO_PROVIDERS:
        fake = fakes[name]
        proxied = proxy_url is not None and name == DEMO_PROXIED
        base_url = proxied_url if proxied and proxied_url else fake.base_url
        provider_type = _PROVIDER_TYPES[protocol]
        backup_list = ", ".join(f'"{b}"' for b in backups)
        model = {"anthropic": "claude-sonnet-4-5", "openai": OPENAI_DEMO_MODELS[0]}.get(
            protocol, RESPONSES_DEMO_MODEL)
        lines += [
            "[[profiles]]",
            f'name = "{name}"',
            f'provider_type = "{provider_type}"',
            f'base_url = "{base_url}"',
            f'api_key_env = "{DEMO_KEY_ENV}"',
            f'default_model = "{model}"',
            f"backup_providers = [{backup_list}]",
        ]
        if proxied:
            lines.append(f'upstream_proxy = "{DEMO_PROXY}"')
            if ca_bundle is not None:
                lines.append(f"ca_bundle = {_toml_str(str(ca_bundle))}")
        lines.append("")
    return "\n".join(lines)


def _toml_str(text: str) -> str:
    """A TOML basic string (a temp folder's path may hold a backslash or a quote)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass
class DemoWorld:
    fakes: dict[str, FakeProvider]
    config: Config
    folder: tempfile.TemporaryDirectory[str]
    proxy: FakeProxy | None = None
    """The upstream proxy `corp` in front of claude's fake (the demo's proxy keys drive it)."""
    front: TlsFront | None = None
    """claude's fake over TLS, as the proxy reaches it (a CONNECT tunnel)."""

    @property
    def config_path(self) -> Path:
        assert self.config.path is not None
        return self.config.path

    async def close(self) -> None:
        if self.proxy is not None:
            await self.proxy.close()
        if self.front is not None:
            await self.front.close()
        await stop_fakes(self.fakes.values())
        self.folder.cleanup()


async def start_demo_world(port: int | None = None) -> DemoWorld:
    os.environ.setdefault(DEMO_KEY_ENV, DEMO_KEY)
    started = await start_fakes([(name, proto) for name, proto, _ in DEMO_PROVIDERS])  # type: ignore[misc]
    fakes = {f.name: f for f in started}
    for fake in started:
        if fake.protocol == "openai":
            fake.models = OPENAI_DEMO_MODELS
    fakes["claude"].plan = Plan.claude(tokens_5h=DEMO_WINDOW_TOKENS["claude"],
                                       seconds_5h=DEMO_WINDOW_S)
    fakes["codex"].plan = Plan.chatgpt(tokens_5h=DEMO_WINDOW_TOKENS["codex"],
                                       seconds_5h=DEMO_WINDOW_S)
    folder = tempfile.TemporaryDirectory(prefix="claudex-demo-")
    world = DemoWorld(fakes, Config(), folder)
    try:
        # claude's fake as a company's provider: TLS with a private CA, through the proxy.
        pki = Path(folder.name) / "pki"
        authority = new_authority(pki, "claudex demo CA")
        world.front = TlsFront(fakes[DEMO_PROXIED].base_url,
                               authority.issue_server(pki, DEMO_PROXIED))
        await world.front.start()
        world.proxy = FakeProxy(retry_after=PROXY_RETRY_AFTER_S)
        await world.proxy.start()
        path = Path(folder.name) / "profiles.toml"
        chosen = port if port is not None else free_port(DEFAULT_PORT)
        path.write_text(demo_config_text(fakes, chosen, proxy_url=world.proxy.url,
                                         proxied_url=world.front.base_url,
                                         ca_bundle=authority.cert_path))
        path.chmod(0o600)
        world.config = load_config(path)
    except BaseException:
        await world.close()
        raise
    return world
