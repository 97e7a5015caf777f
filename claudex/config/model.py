"""Typed configuration objects. Loading and validation live in `loader.py`.

Every object is frozen: a reload builds a new `Config` and the engine swaps it in whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

ProviderType = Literal["DirectAnthropic", "OpenAICompatible", "OpenAIResponses", "Bedrock",
                       "Vertex"]
AuthType = Literal["api-key", "oauth", "passthrough", "aws-sigv4"]
Protocol = Literal["anthropic", "openai", "responses"]
LogLevel = Literal["debug", "info", "warning", "error"]
Balance = Literal["sticky", "round_robin", "least_busy"]
BALANCES: tuple[str, ...] = ("sticky", "round_robin", "least_busy")

# The provider types claudex serves (the console offers these).
PROVIDER_TYPES: tuple[str, ...] = ("DirectAnthropic", "OpenAICompatible", "OpenAIResponses",
                                   "Bedrock", "Vertex")
# Claude on AWS Bedrock and Google Vertex AI (DESIGN.md "Claude on clouds"): the Anthropic
# Messages API behind a cloud's own URL, body, signer and stream (config/clouds.py).
CLOUD_PROVIDER_TYPES: tuple[str, ...] = ("Bedrock", "Vertex")
ANTHROPIC_SIGNER = "@anthropic"  # `Profile.signs_as` of Anthropic's Claude, wherever served
# Types a file may name (Claudex has them) that claudex does not serve yet: such a profile loads,
# with this reason as its `problem`, so the rest of the file works. Serving one means moving it
# from here to PROVIDER_TYPES and giving it a `Profile.protocol`. (None today.)
UNSERVED_PROVIDER_TYPES: Mapping[str, str] = {}
AUTH_TYPES: tuple[str, ...] = ("api-key", "oauth", "passthrough", "aws-sigv4")
OAUTH_PROVIDERS: tuple[str, ...] = ("claude", "codex")
# OAuth logins Claudex has and claudex does not: the profile loads, shown misconfigured.
UNSUPPORTED_OAUTH_PROVIDERS: tuple[str, ...] = ("google", "github", "gitlab", "qwen", "kimi")

DEFAULT_PORT = 13456
MAX_BODY_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class BreakerSettings:
    failure_threshold: int = 3
    recovery_seconds: float = 30.0
    half_open_probes: int = 1
    max_recovery_seconds: float = 300.0


@dataclass(frozen=True)
class RetrySettings:
    initial_delay: float = 1.0
    multiplier: float = 2.0
    max_delay: float = 60.0
    max_attempts: int = 5
    jitter: Literal["full", "none"] = "full"
    max_retry_after: float = 60.0


@dataclass(frozen=True)
class HealthSettings:
    enabled: bool = True
    interval_seconds: float = 30.0
    timeout_seconds: float = 10.0
    degraded_latency_ms: float = 3000.0
    # Slow from real traffic (engine/health/slowness.py): a recent p95 this many times the
    # provider's usual one, over at least `slow_min_samples` answers, turns it yellow; 0: never.
    slow_factor: float = 3.0
    slow_min_samples: int = 20
    # New conversations (and a pool's new bindings) prefer providers that are not slow.
    avoid_slow: bool = False


@dataclass(frozen=True)
class ProxySettings:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    default_profile: str | None = None
    auth_token_env: str | None = None
    # Upstream timeouts for forwarded requests (seconds). `read_timeout` bounds the wait for the
    # first byte of the response and every gap between chunks afterwards.
    connect_timeout: float = 10.0
    read_timeout: float = 600.0
    # Streams (DESIGN.md failure table): no response headers or first event within
    # `stream_first_byte_timeout`, or no content within `stream_commit_timeout` (both counted
    # from sending): fail over; silent for `stream_idle_timeout` once committed: SSE error.
    # `read_timeout` above is then the non-streamed answer's alone.
    stream_first_byte_timeout: float = 30.0
    stream_commit_timeout: float = 60.0
    stream_idle_timeout: float = 300.0
    # claudex's own limits at each provider: pooled connections, requests in flight
    # (None: adaptive, starting unlimited), the longest wait for either before failing over
    # as `queue_full`, and the share of recent requests that may be same-provider 429 retries.
    max_connections: int = 4096
    max_concurrency: int | None = None
    queue_timeout: float = 30.0
    retry_budget: float = 0.2
    # `claudex serve`'s log level (`[proxy] log_level`, or Claudex's top-level `log_level`).
    log_level: LogLevel = "info"


@dataclass(frozen=True)
class HistorySettings:
    """`[history]`: the SQLite journal of request summaries and events (engine/history/journal.py).
    `path` None: `history.sqlite3` in the user state dir (platformdirs)."""

    enabled: bool = True
    path: str | None = None
    max_age_days: float = 30.0
    max_mb: float = 200.0


@dataclass(frozen=True)
class TelemetrySettings:
    """`[telemetry]`: OTLP/HTTP traces (engine/addons/traces.py). `otlp_endpoint` is the
    collector's base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` is added), or the full
    traces URL when it ends so; None: the OTEL_EXPORTER_OTLP_* variables decide, and with none
    set, no traces (and nothing of OpenTelemetry imported)."""

    otlp_endpoint: str | None = None


@dataclass(frozen=True)
class FleetSettings:
    """`[fleet]`: instances sharing breaker facts through Redis (off unless `redis_url` is set).
    `name` defaults to the instance's host:port; `password_env` names the Redis password's
    variable, so the URL itself never holds a secret; `secret_env` names the variable holding
    the fleet's Fernet key, without which OAuth tokens never enter Redis."""

    redis_url: str | None = None
    name: str | None = None
    key_prefix: str = "claudex"
    password_env: str | None = None
    secret_env: str | None = None

    @property
    def enabled(self) -> bool:
        return self.redis_url is not None


ROUTE_NAMES: tuple[str, ...] = ("long_context", "web_search", "thinking", "background")
"""`[routes]`, in the order a request is matched against them (DESIGN.md "Routes")."""
DEFAULT_LONG_CONTEXT_TOKENS = 60_000


@dataclass(frozen=True)
class RoutesSettings:
    """`[routes]`: requests on the default routes (`/v1/messages`, `/v1/chat/completions`,
    `/v1/responses`) sent to another profile (or pool) by what they are; each value names the
    profile whose own chain serves. None: that route is not used."""

    long_context: str | None = None
    long_context_tokens: int = DEFAULT_LONG_CONTEXT_TOKENS
    web_search: str | None = None
    thinking: str | None = None
    background: str | None = None

    def targets(self) -> dict[str, str]:
        """The routes in use, in matching order: route name -> profile."""
        return {name: target for name in ROUTE_NAMES
                if (target := getattr(self, name)) is not None}

    @property
    def configured(self) -> bool:
        return any(getattr(self, name) is not None for name in ROUTE_NAMES)


@dataclass(frozen=True)
class RouterSettings:
    """Claudex's `[router]`: the `profile` (with `model`, else its default_model) is asked once
    per conversation which of `rules`' categories the conversation is; the category's profile
    serves it, `rules["default"]` when the answer is not a category or the asking fails."""

    enabled: bool = False
    profile: str | None = None
    model: str | None = None
    rules: Mapping[str, str] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.enabled and self.profile is not None and bool(self.categories)

    @property
    def categories(self) -> tuple[str, ...]:
        """The rule names the classifier may answer (all but `default`)."""
        return tuple(name for name in self.rules if name != "default")

    @property
    def default(self) -> str | None:
        return self.rules.get("default")


@dataclass(frozen=True)
class Profile:
    name: str
    provider_type: ProviderType
    base_url: str
    default_model: str | None = None
    api_key_env: str | None = None
    api_key: str | None = None
    auth_type: AuthType = "api-key"
    backup_providers: tuple[str, ...] = ()
    enabled: bool = True
    models: Mapping[str, str] = field(default_factory=dict)
    custom_headers: Mapping[str, str] = field(default_factory=dict)
    max_tokens: int | None = None
    # The provider's context window in tokens, when known: as a backup, a request estimated
    # over it is passed over without sending (DESIGN.md failure table).
    context_window: int | None = None
    # A share of the plan's quota windows kept for the user's direct use (DESIGN.md "Windows"):
    # at or above 1 - reserve of a window, new conversations start on the backups. 0: off.
    reserve: float = 0.0
    oauth_provider: str | None = None
    credentials_file: str | None = None
    token_url: str | None = None
    client_id: str | None = None
    token_command: str | None = None
    health_probe: bool = True
    # Claude on clouds (config/clouds.py): Bedrock's and Vertex's region (an aws-sigv4
    # profile's too), Vertex's project, the named profile of the AWS credential chain, and the
    # service SigV4 signs for (`bedrock`; `bedrock-mantle` for AWS's Anthropic-wire endpoint).
    region: str | None = None
    project: str | None = None
    aws_profile: str | None = None
    aws_service: str | None = None
    # Claudex keys (DESIGN.md "Claudex keys"): appended to every upstream URL, set by
    # `claudex run`, body keys removed before sending, shown only.
    query_params: Mapping[str, str] = field(default_factory=dict)
    extra_env: Mapping[str, str] = field(default_factory=dict)
    strip_params: tuple[str, ...] = ()
    priority: int | None = None
    # Per-profile values, already merged over the global sections.
    breaker: BreakerSettings = field(default_factory=BreakerSettings)
    retry: RetrySettings = field(default_factory=RetrySettings)
    connect_timeout: float = 10.0
    read_timeout: float = 600.0
    stream_first_byte_timeout: float = 30.0
    stream_commit_timeout: float = 60.0
    stream_idle_timeout: float = 300.0
    max_connections: int = 4096
    max_concurrency: int | None = None
    queue_timeout: float = 30.0
    retry_budget: float = 0.2
    # The network (DESIGN.md "Networks", issue 36): None takes `[network]`'s value.
    upstream_proxy: tuple[str, ...] | None = None
    ca_bundle: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    client_key_password_env: str | None = None
    # Why this profile cannot be used (secret missing, credentials file absent); None when usable.
    problem: str | None = None

    @cached_property  # read several times a request; the profile is frozen
    def protocol(self) -> Protocol:
        if self.provider_type in ("DirectAnthropic", "Bedrock", "Vertex"):
            return "anthropic"  # Bedrock and Vertex serve the Messages API on their own wire
        if self.provider_type == "OpenAICompatible":
            return "openai"
        return "responses"

    @cached_property
    def price_url(self) -> str:
        """The address its answers are priced by (engine/addons/prices.py): a Bedrock or Vertex
        profile's cloud's own, wherever its base_url points (a VPC endpoint, a test's fake)."""
        if self.provider_type in CLOUD_PROVIDER_TYPES and self.region:
            from claudex.config.clouds import default_base_url

            return default_base_url(self.provider_type, self.region)
        return self.base_url

    @cached_property
    def signs_as(self) -> str:
        """Who the thinking blocks this profile relays count as signed by (DESIGN.md "Portable
        conversations"): its own name, except for Anthropic's Claude wherever it is served — the
        Anthropic API (api.anthropic.com), Bedrock, Vertex and AWS's Anthropic endpoint — whose
        signatures hold across the three ("Signature values are compatible across platforms
        (Claude APIs, Amazon Bedrock, and Google Cloud)": Anthropic's extended-thinking docs).
        `@anthropic` is no profile's name (a name cannot start with `@`)."""
        if self.provider_type in CLOUD_PROVIDER_TYPES or self.auth_type == "aws-sigv4" or (
                self.provider_type == "DirectAnthropic"
                and urlsplit(self.base_url).hostname == "api.anthropic.com"):
            return ANTHROPIC_SIGNER
        return self.name

    @property
    def usable(self) -> bool:
        return self.enabled and self.problem is None


@dataclass(frozen=True)
class NetworkSettings:
    """`[network]`: how every profile reaches its provider unless the profile says otherwise.
    Each `upstream_proxy` entry is "env" (the environment's proxy variables), "direct", a proxy
    URL (http, https, socks5, socks5h) or an `[[upstream_proxies]]` name; a list is tried in
    order."""

    upstream_proxy: tuple[str, ...] = ("env",)
    ca_bundle: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    client_key_password_env: str | None = None


@dataclass(frozen=True)
class UpstreamProxy:
    """An `[[upstream_proxies]]` entry: a named proxy several profiles share, with a breaker of
    its own (its failures are never the providers')."""

    name: str
    url: str
    password_env: str | None = None
    enabled: bool = True
    breaker: BreakerSettings = field(default_factory=BreakerSettings)
    retry: RetrySettings = field(default_factory=RetrySettings)


@dataclass(frozen=True)
class Pool:
    """A `[[profiles]]` table with `members` and no `base_url` (DESIGN.md "Pools"): several
    profiles (accounts) behind one name. Addressed like a profile; `balance` says which member
    a request goes to first, the other members follow, then the pool's own `backup_providers`
    (the members' own backups are not used inside the pool)."""

    name: str
    members: tuple[str, ...]
    balance: Balance = "sticky"
    weights: Mapping[str, int] = field(default_factory=dict)
    backup_providers: tuple[str, ...] = ()

    def weight(self, member: str) -> int:
        return self.weights.get(member, 1)


@dataclass(frozen=True)
class Config:
    proxy: ProxySettings = field(default_factory=ProxySettings)
    breaker: BreakerSettings = field(default_factory=BreakerSettings)
    retry: RetrySettings = field(default_factory=RetrySettings)
    health: HealthSettings = field(default_factory=HealthSettings)
    fleet: FleetSettings = field(default_factory=FleetSettings)
    history: HistorySettings = field(default_factory=HistorySettings)
    telemetry: TelemetrySettings = field(default_factory=TelemetrySettings)
    routes: RoutesSettings = field(default_factory=RoutesSettings)
    router: RouterSettings = field(default_factory=RouterSettings)
    profiles: tuple[Profile, ...] = ()
    pools: tuple[Pool, ...] = ()
    network: NetworkSettings = field(default_factory=NetworkSettings)
    upstream_proxies: tuple[UpstreamProxy, ...] = ()
    path: Path | None = None
    # `[model_aliases]` (Claudex): a requested model equal to a key becomes its value first.
    model_aliases: Mapping[str, str] = field(default_factory=dict)
    # Problems that do not stop the file from loading ("not implemented by claudex"), with line.
    warnings: tuple[ConfigIssue, ...] = ()
    # Claudex's top-level `claude_binary`: the command `claudex run` starts when none is given.
    claude_binary: str | None = None

    def profile(self, name: str) -> Profile | None:
        for p in self.profiles:
            if p.name == name:
                return p
        return None

    def pool(self, name: str) -> Pool | None:
        for pool in self.pools:
            if pool.name == name:
                return pool
        return None

    def resolve(self, name: str) -> Profile | None:
        """The profile `name` names, or for a pool its first member: the profile whose
        protocol and models stand for the pool (what `claudex run` and `/v1/models` read)."""
        found = self.profile(name)
        if found is None and (pool := self.pool(name)) is not None and pool.members:
            return self.profile(pool.members[0])
        return found

    @property
    def default_name(self) -> str | None:
        """The profile or pool a request on a default route addresses."""
        if self.proxy.default_profile is not None:
            return self.proxy.default_profile
        profile = self.default_profile
        return profile.name if profile is not None else None

    @property
    def default_profile(self) -> Profile | None:
        """The default profile; when `default_profile` names a pool, its first member."""
        name = self.proxy.default_profile
        if name is not None:
            return self.resolve(name) if self.pools else self.profile(name)
        for p in self.profiles:
            if p.enabled:
                return p
        return self.profiles[0] if self.profiles else None


@dataclass(frozen=True)
class ConfigIssue:
    """One problem in a config file, located as precisely as the file allows."""

    file: str
    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.key}: {self.message}"


class ConfigError(Exception):
    """The config could not be loaded; `issues` lists every problem found."""

    def __init__(self, issues: list[ConfigIssue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))
