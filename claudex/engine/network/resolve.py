"""Every profile's route, and every proxy the routes go through, from a loaded config and an
environment: done when the config loads (engine start, apply_config), never per request.

A route lists its profile's `upstream_proxy` entries (the profile's, else `[network]`'s), in
order: a named `[[upstream_proxies]]` entry (its own breaker and retry settings, its password
from `password_env`), a URL written inline (named by its host:port, the global breaker and retry
settings), or "env": the environment's proxy for the provider's URL, if any (none for a loopback
provider, or one NO_PROXY excludes). "direct", or "env" finding nothing, adds no hop.

A disabled proxy stays in its routes (`ProxySpec.enabled` False): the failover skips it, and a
route whose proxies are all out is no route, never a direct connection.

TLS: a profile's `ca_bundle` (else `[network]`'s) and client certificate (the profile's
`client_cert` with its `client_key` and password variable, else `[network]`'s three) make the
route's context; a route to an http:// provider through no https proxy needs none.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from claudex.config.model import BreakerSettings, Config, Profile, RetrySettings
from claudex.config.network import (
    DIRECT,
    ENV,
    ProxyAddress,
    ProxyURLError,
    expand_path,
    is_url,
    parse_proxy_url,
)
from claudex.engine.network.environment import environment_proxies, proxy_from_environment
from claudex.engine.network.routes import DIRECT as DIRECT_ROUTE
from claudex.engine.network.routes import Hop, Route
from claudex.engine.network.tls import TlsChoice, ssl_context


@dataclass(frozen=True)
class ProxySpec:
    """One proxy as the engine runs it."""

    hop: Hop
    breaker: BreakerSettings
    retry: RetrySettings
    enabled: bool
    profiles: tuple[str, ...]  # the profiles whose route names it, in the file's order
    # Why the proxy cannot be used (an environment variable holding a URL claudex cannot use:
    # `socks4://`, no host); None when usable. Such a hop is out, never bypassed.
    problem: str | None = None


@dataclass(frozen=True)
class Network:
    routes: Mapping[str, Route] = field(default_factory=dict)  # by profile name (all of them)
    proxies: Mapping[str, ProxySpec] = field(default_factory=dict)  # by hop name

    def route(self, profile: str) -> Route:
        return self.routes.get(profile, DIRECT_ROUTE)


def resolve_network(config: Config, environ: Mapping[str, str]) -> Network:
    """The routes of every profile of `config` and the proxies they use, read in `environ`.
    Raises `tls.TlsSetupError` for a ca_bundle or client certificate that cannot be loaded."""
    resolver = _Resolver(config, environ)
    routes = {profile.name: resolver.route(profile) for profile in config.profiles}
    for proxy in config.upstream_proxies:
        resolver.named(proxy.name)  # listed (status, trip, reset) even when no route uses it
    return Network(routes, resolver.proxies())


class _Resolver:
    def __init__(self, config: Config, environ: Mapping[str, str]) -> None:
        self._config = config
        self._environ = environ
        self._named = {proxy.name: proxy for proxy in config.upstream_proxies}
        self._specs: dict[str, ProxySpec] = {}
        self._users: dict[str, list[str]] = {}
        self._contexts: dict[TlsChoice, ssl.SSLContext | None] = {}
        # One proxy URL in every variable set: its hop is "env"; several: named by variable.
        self._env_single = len(set(environment_proxies(environ).values())) <= 1

    def route(self, profile: Profile) -> Route:
        entries = profile.upstream_proxy or self._config.network.upstream_proxy
        hops: list[Hop] = []
        for entry in entries:
            hop = self._hop(entry, profile.base_url)
            if hop is not None and all(hop.name != seen.name for seen in hops):
                hops.append(hop)
                users = self._users.setdefault(hop.name, [])
                if profile.name not in users:
                    users.append(profile.name)
        needs_tls = profile.base_url.lower().startswith("https:") or any(
            hop.scheme == "https" for hop in hops)
        context = self._context(self._tls_choice(profile)) if needs_tls else None
        if not hops and context is None:
            return DIRECT_ROUTE
        return Route(tuple(hops), context)

    def proxies(self) -> dict[str, ProxySpec]:
        return {name: replace(spec, profiles=tuple(self._users.get(name, ())))
                for name, spec in self._specs.items()}

    def _hop(self, entry: str, target: str) -> Hop | None:
        if entry == DIRECT:
            return None
        if entry == ENV:
            return self._env_hop(target)
        if is_url(entry):
            try:
                address = parse_proxy_url(entry)  # checked when the file loaded
            except ProxyURLError as error:  # a Config built in code: out, never bypassed
                return self._broken("url", entry, f"upstream_proxy URL {error}")
            return self._add(_hop(address.where, address, address.password), None)
        return self.named(entry)

    def named(self, name: str) -> Hop:
        proxy = self._named.get(name)
        if proxy is None:  # checked when the file loaded; a Config built in code may not be
            return self._broken(name, "", f"no [[upstream_proxies]] entry is named {name}")
        try:
            address = parse_proxy_url(proxy.url)
        except ProxyURLError as error:
            return self._broken(name, proxy.url, f"{name}'s url {error}")
        password = address.password
        if proxy.password_env is not None:
            password = self._environ.get(proxy.password_env) or None
        spec = ProxySpec(_hop(proxy.name, address, password), proxy.breaker, proxy.retry,
                         proxy.enabled, ())
        return self._add(spec.hop, spec)

    def _env_hop(self, target: str) -> Hop | None:
        found = proxy_from_environment(target, self._environ)
        if found is None:
            return None
        variable, value = found
        name = ENV if self._env_single else variable.lower()
        try:
            address = parse_proxy_url(value, default_scheme="http")
        except ProxyURLError as error:
            return self._broken(name, value if "://" in value else f"http://{value}",
                                f"{variable}: {error}", shown=variable)
        return self._add(_hop(name, address, address.password), None)

    def _broken(self, name: str, value: str, problem: str, shown: str | None = None) -> Hop:
        """A hop that cannot be used: in its routes all the same (out, never bypassed), with
        `problem` saying why; it shows its scheme and `shown`, never the value (a password)."""
        written = value.split("://", 1)[0].lower() if "://" in value else ""
        scheme = written if written.isascii() and written.isalnum() else "unknown"
        hop = Hop(name, f"{scheme or 'unknown'}://{shown or name}", scheme or "unknown")
        return self._add(hop, ProxySpec(hop, self._config.breaker, self._config.retry, True, (),
                                        problem))

    def _add(self, hop: Hop, spec: ProxySpec | None) -> Hop:
        if hop.name not in self._specs:
            self._specs[hop.name] = spec or ProxySpec(hop, self._config.breaker,
                                                      self._config.retry, True, ())
        return self._specs[hop.name].hop

    def _tls_choice(self, profile: Profile) -> TlsChoice:
        network = self._config.network
        ca_bundle = profile.ca_bundle or network.ca_bundle
        # The certificate, its key and the key's password go together: a profile's own
        # client_cert takes none of [network]'s other two.
        owner = profile if profile.client_cert is not None else network
        variable = owner.client_key_password_env
        return TlsChoice(
            ca_bundle=self._path(ca_bundle),
            client_cert=self._path(owner.client_cert),
            client_key=self._path(owner.client_key),
            key_password=self._environ.get(variable) if variable else None,
        )

    def _path(self, shown: str | None) -> str | None:
        return None if shown is None else str(expand_path(shown, self._environ))

    def _context(self, choice: TlsChoice) -> ssl.SSLContext | None:
        if choice not in self._contexts:
            self._contexts[choice] = ssl_context(choice, self._environ)
        return self._contexts[choice]


def _hop(name: str, address: ProxyAddress, password: str | None) -> Hop:
    return Hop(name=name, url=address.url, scheme=address.scheme, username=address.username,
               password=password)
