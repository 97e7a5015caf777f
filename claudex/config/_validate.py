"""Check a parsed document section by section and build `Config` from what passed.

`_Builder` turns every problem into a `ConfigIssue` located through `_KeyLines` and goes on, so
one run lists everything. Cross-checks (duplicate names, unknown or self-listed backups, the
proxy's default profile and bind address) run after the per-key checks. Chains are not transitive
(DESIGN.md), so profiles backing each other up are fine.

Claudex's keys (DESIGN.md "Claudex keys") are read here too: its top-level `proxy_port`,
`proxy_host` and `log_level` fill in `[proxy]`, its `[router]` is checked with `[routes]`
(`_routes_checks.py`), and the features claudex lacks (`hyperlinks`, `[context]`) become
warnings, as does the advice of `_advice.py`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from claudex.config._advice import chain_advice
from claudex.config._checks import (
    _BREAKER_KEYS,
    _CLAUDEX_ONLY_PROFILE_KEYS,
    _HEALTH_KEYS,
    _NOT_IMPLEMENTED,
    _POOL_KEYS,
    _PROFILE_KEYS,
    _PROXY_KEYS,
    _REQUIRED_POOL_KEYS,
    _RETRY_KEYS,
    _TOP_LEVEL_KEYS,
    _TOP_LEVEL_PROXY_KEYS,
    STRIP_AUTO,
    Checker,
    _Bad,
    _did_you_mean,
    _quoted,
    _text,
    _type_name,
)
from claudex.config._cloud_checks import (
    cloud_key_problems,
    missing_key_words,
    required_profile_keys,
)
from claudex.config._fleet_checks import FLEET_KEYS, GENERATE_KEY, fleet_key_problem
from claudex.config._history_checks import HISTORY_KEYS, TELEMETRY_KEYS
from claudex.config._lines import _BARE_KEY, KeyPath, _KeyLines
from claudex.config._network_checks import (
    NETWORK_KEYS,
    PROFILE_NETWORK_KEYS,
    REQUIRED_UPSTREAM_PROXY_KEYS,
    UPSTREAM_PROXY_KEYS,
    NetProblem,
    environment_problems,
    proxy_problems,
    table_problems,
)
from claudex.config._routes_checks import ROUTER_KEYS, ROUTES_KEYS, route_problems
from claudex.config._secrets import _profile_problem
from claudex.config.clouds import default_base_url
from claudex.config.model import (
    BreakerSettings,
    Config,
    ConfigError,
    ConfigIssue,
    FleetSettings,
    HealthSettings,
    HistorySettings,
    NetworkSettings,
    Pool,
    Profile,
    ProxySettings,
    RetrySettings,
    RouterSettings,
    RoutesSettings,
    TelemetrySettings,
    UpstreamProxy,
)

# A provider's table: its own keys, the global sections' it may override, and the network's.
PROFILE_SCHEMA: Mapping[str, Checker] = {**_PROFILE_KEYS, **PROFILE_NETWORK_KEYS}


@dataclass(frozen=True)
class _Where:
    """A place in the document: `loc` finds its line, `label` names it in the issue."""

    loc: KeyPath
    label: str

    def child(self, key: str) -> _Where:
        part = key if _BARE_KEY.fullmatch(key) else _quoted(key, limit=1000)
        return _Where((*self.loc, key), f"{self.label}.{part}" if self.label else part)


_TOP = _Where((), "")


@dataclass
class _CheckedProfile:
    """One `[[profiles]]` table after its keys were checked: the values that passed."""

    where: _Where
    values: dict[str, Any]
    name: str | None
    # Claudex can keep the key in the system keyring, which claudex does not read.
    uses_keyring: bool = False
    # `members` and no `base_url`: a pool (DESIGN.md "Pools").
    pool: bool = False
    # An `[[upstream_proxies]]` entry (named like profiles, in the same name space).
    proxy: bool = False


class _Builder:
    """Checks a parsed document section by section, collecting issues, then builds `Config`."""

    def __init__(self, file: str, lines: _KeyLines, env: Mapping[str, str]) -> None:
        self._file = file
        self._lines = lines
        self._env = env
        self._issues: list[ConfigIssue] = []
        self._warnings: list[ConfigIssue] = []
        # Where each `[proxy]` value was written, when Claudex's top-level key supplied it.
        self._proxy_origins: dict[str, _Where] = {}

    def _issue(self, where: _Where, message: str, at: KeyPath = ()) -> ConfigIssue:
        line = self._lines.line_of((*where.loc, *at))
        return ConfigIssue(self._file, line, where.label, message)

    def _report(self, where: _Where, message: str, at: KeyPath = ()) -> None:
        self._issues.append(self._issue(where, message, at))

    def _warn(self, where: _Where, message: str, at: KeyPath = ()) -> None:
        self._warnings.append(self._issue(where, message, at))

    def build(self, data: dict[str, Any]) -> Config:
        for key in data:
            if key not in _TOP_LEVEL_KEYS:
                self._report(_TOP.child(key), f"unknown key{_did_you_mean(key, _TOP_LEVEL_KEYS)}")
            elif key in _NOT_IMPLEMENTED:
                self._warn(_TOP.child(key), "not implemented by claudex; ignored")
        proxy_values = self._proxy_section(data)
        model_aliases = self._model_aliases(data)
        claude_binary = self._top_level_text(data, "claude_binary")
        breaker_values = self._section(data, "breaker", _BREAKER_KEYS)
        retry_values = self._section(data, "retry", _RETRY_KEYS)
        health_values = self._section(data, "health", _HEALTH_KEYS)
        fleet_values = self._section(data, "fleet", FLEET_KEYS)
        self._check_fleet_key(fleet_values)
        history_values = self._section(data, "history", HISTORY_KEYS)
        telemetry_values = self._section(data, "telemetry", TELEMETRY_KEYS)
        routes_values = self._section(data, "routes", ROUTES_KEYS)
        router_values = self._section(data, "router", ROUTER_KEYS)
        checked = self._profiles(data.get("profiles", []))
        network_values = self._section(data, "network", NETWORK_KEYS)
        proxies = self._upstream_proxies(data.get("upstream_proxies", []))

        proxy = replace(ProxySettings(), **proxy_values)
        breaker = self._merge_breaker(BreakerSettings(), breaker_values, _TOP.child("breaker"))
        retry = self._merge_retry(RetrySettings(), retry_values, _TOP.child("retry"))
        health = replace(HealthSettings(), **health_values)

        by_name = self._check_names(checked, proxies)
        self._check_network(network_values, checked, proxies)
        self._check_backups(checked, by_name)
        self._check_pools(checked, by_name)
        self._check_proxy(proxy, proxy_values, by_name)
        self._check_routes(routes_values, router_values, by_name)
        merged = [
            (
                profile,
                self._merge_breaker(breaker, _pick(profile.values, _BREAKER_KEYS), profile.where),
                self._merge_retry(retry, _pick(profile.values, _RETRY_KEYS), profile.where),
            )
            for profile in checked if not profile.pool
        ]
        merged_proxies = [
            (
                entry,
                self._merge_breaker(breaker, _pick(entry.values, _BREAKER_KEYS), entry.where),
                self._merge_retry(retry, _pick(entry.values, _RETRY_KEYS), entry.where),
            )
            for entry in proxies
        ]
        if self._issues:
            raise ConfigError(_reading_order(self._issues))

        profiles = tuple(
            self._make_profile(profile, profile_breaker, profile_retry, proxy)
            for profile, profile_breaker, profile_retry in merged
        )
        pools = tuple(_make_pool(profile.values) for profile in checked if profile.pool)
        self._advise([profile for profile in checked if not profile.pool], profiles)
        return Config(
            proxy=proxy,
            breaker=breaker,
            retry=retry,
            health=health,
            fleet=replace(FleetSettings(), **fleet_values),
            history=replace(HistorySettings(), **history_values),
            telemetry=replace(TelemetrySettings(), **telemetry_values),
            routes=replace(RoutesSettings(), **routes_values),
            router=replace(RouterSettings(), **router_values),
            profiles=profiles,
            pools=pools,
            network=replace(NetworkSettings(), **network_values),
            upstream_proxies=tuple(
                UpstreamProxy(name=entry.values["name"], url=entry.values["url"],
                              password_env=entry.values.get("password_env"),
                              enabled=entry.values.get("enabled", True),
                              breaker=proxy_breaker, retry=proxy_retry)
                for entry, proxy_breaker, proxy_retry in merged_proxies),
            model_aliases=model_aliases,
            warnings=tuple(_reading_order(self._warnings)),
            claude_binary=claude_binary,
        )

    def _check_fleet_key(self, values: Mapping[str, Any]) -> None:
        """`[fleet] secret_env`: the variable it names must hold a Fernet key when set (never
        shown); unset, tokens simply stay out of Redis, which is worth a warning."""
        variable = values.get("secret_env")
        if variable is None:
            return
        where = _TOP.child("fleet").child("secret_env")
        value = self._env.get(variable)
        if not value:
            self._warn(where, f"environment variable {variable} is not set: OAuth tokens are "
                       "not shared across machines")
        elif (problem := fleet_key_problem(value)) is not None:
            self._report(where, f"environment variable {variable} {problem}; generate a key "
                         f"with {GENERATE_KEY}")

    def _proxy_section(self, data: Mapping[str, object]) -> dict[str, Any]:
        """`[proxy]`, with Claudex's top-level `proxy_port`, `proxy_host` and `log_level` filling
        in what it does not set."""
        values = self._section(data, "proxy", _PROXY_KEYS)
        table = data.get("proxy")
        written = table if isinstance(table, dict) else {}
        for top_key, (key, check) in _TOP_LEVEL_PROXY_KEYS.items():
            if top_key not in data:
                continue
            where = _TOP.child(top_key)
            try:
                value = check(data[top_key])
            except _Bad as bad:
                self._report(where, bad.message, bad.at)
                continue
            if key in written:
                self._warn(where, f"ignored: [proxy] sets {key}, which wins")
            else:
                values[key] = value
                self._proxy_origins[key] = where
        return values

    def _model_aliases(self, data: Mapping[str, object]) -> dict[str, str]:
        if "model_aliases" not in data:
            return {}
        where = _TOP.child("model_aliases")
        table = data["model_aliases"]
        if not isinstance(table, dict):
            self._report(
                where,
                f'must be a table ([model_aliases]) of alias = "model" pairs, '
                f"not {_type_name(table)}",
            )
            return {}
        aliases: dict[str, str] = {}
        for alias, target in table.items():
            if isinstance(target, str) and target.strip():
                aliases[alias] = target
                continue
            what = "an empty string" if isinstance(target, str) else _type_name(target)
            self._report(where.child(alias), f"must be the name of a model, not {what}")
        return aliases

    def _top_level_text(self, data: Mapping[str, object], key: str) -> str | None:
        if key not in data:
            return None
        try:
            return _text(data[key])
        except _Bad as bad:
            self._report(_TOP.child(key), bad.message)
            return None

    def _advise(self, checked: list[_CheckedProfile], profiles: tuple[Profile, ...]) -> None:
        """Warnings for chain members that would get requests they cannot serve well. A key the
        advice names but the profile lacks is located at the profile's own header."""
        where_of = {p.name: entry.where for entry, p in zip(checked, profiles, strict=True)}
        for advice in chain_advice(profiles):
            self._warn(where_of[advice.profile].child(advice.key), advice.message)

    def _check_table(
        self,
        table: Mapping[str, object],
        spec: Mapping[str, Checker],
        where: _Where,
        ignored: frozenset[str] = frozenset(),
    ) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for key, value in table.items():
            checker = spec.get(key)
            if checker is None:
                if key not in ignored:
                    self._report(where.child(key), f"unknown key{_did_you_mean(key, spec)}")
                continue
            try:
                values[key] = checker(value)
            except _Bad as bad:
                self._report(where.child(key), bad.message, bad.at)
        return values

    def _section(
        self, data: Mapping[str, object], name: str, spec: Mapping[str, Checker]
    ) -> dict[str, Any]:
        table = data.get(name, {})
        if not isinstance(table, dict):
            self._report(_TOP.child(name), f"must be a table ([{name}]), not {_type_name(table)}")
            return {}
        return self._check_table(table, spec, _TOP.child(name))

    def _profiles(self, raw: object) -> list[_CheckedProfile]:
        if not isinstance(raw, list):
            self._report(_TOP.child("profiles"), "must be an array of tables: write [[profiles]]")
            return []
        return [
            checked
            for index, table in enumerate(raw)
            if (checked := self._profile(index, table)) is not None
        ]

    def _profile(self, index: int, table: object) -> _CheckedProfile | None:
        where = _Where(("profiles", index), f"profiles[{index}]")
        if not isinstance(table, dict):
            self._report(where, f"must be a table, not {_type_name(table)}")
            return None
        raw_name = table.get("name")
        name = raw_name if isinstance(raw_name, str) and raw_name.strip() else None
        if name is not None:
            part = name if _BARE_KEY.fullmatch(name) else _quoted(name)
            where = _Where(where.loc, f"profiles.{part}")
        if "members" in table and "base_url" not in table:
            return self._pool(where, table, name)
        if "members" in table:
            self._report(where.child("members"), "a pool has members and no base_url, a "
                         "provider a base_url and no members: remove one of the two")
        values = self._check_table(table, PROFILE_SCHEMA, where,
                                   _CLAUDEX_ONLY_PROFILE_KEYS | {"members"})
        for key in required_profile_keys(values.get("provider_type")):
            if key not in table:
                self._report(where.child(key),
                             missing_key_words(values.get("provider_type"), key))
        for key, message in cloud_key_problems(values):
            self._report(where.child(key), message)
        if values.get("api_key") and "api_key_env" in values:
            self._report(where.child("api_key"), "set either api_key or api_key_env, not both")
        if (
            values.get("auth_type") == "oauth"
            and "oauth_provider" not in table
            and "token_command" not in table
        ):
            self._report(
                where.child("auth_type"),
                'auth_type "oauth" needs oauth_provider ("claude" or "codex") or token_command',
            )
        # A name with bad characters was reported above; still use it to resolve backup lists,
        # so that one mistake is not reported again as an "unknown profile" elsewhere.
        return _CheckedProfile(where, values, name, "api_key_keyring" in table)

    def _pool(self, where: _Where, table: Mapping[str, object],
              name: str | None) -> _CheckedProfile:
        """A pool's table: its own keys only (a provider's keys belong to its members)."""
        values = self._check_table(table, _POOL_KEYS, where)
        for key in _REQUIRED_POOL_KEYS:
            if key not in table:
                self._report(where.child(key), "missing required key")
        if "members" in values and not values["members"]:
            self._report(where.child("members"), "a pool needs at least one member")
        return _CheckedProfile(where, values, name, pool=True)

    def _check_pools(self, profiles: list[_CheckedProfile],
                     by_name: Mapping[str, _CheckedProfile]) -> None:
        """Each member is a profile of the file, not a pool, named once; weights name members."""
        for pool in profiles:
            if not pool.pool:
                continue
            members: tuple[str, ...] = pool.values.get("members", ())
            where = pool.where.child("members")
            seen: set[str] = set()
            for index, member in enumerate(members):
                found = by_name.get(member)
                if member == pool.name:
                    self._report(where, "a pool cannot be its own member", (index,))
                elif found is None:
                    hint = _did_you_mean(member, [n for n, p in by_name.items() if not p.pool])
                    self._report(where, f"unknown profile {_quoted(member)}{hint}", (index,))
                elif found.pool:
                    self._report(where, f"{_quoted(member)} is a pool; a pool's members are "
                                 "profiles (list its members here instead)", (index,))
                elif member in seen:
                    self._report(where, f"{_quoted(member)} is listed twice", (index,))
                seen.add(member)
            for member in pool.values.get("weights", {}):
                if member not in members:
                    self._report(pool.where.child("weights"),
                                 f"{_quoted(member)} is not a member of this pool", (member,))

    def _check_names(self, profiles: list[_CheckedProfile],
                     proxies: list[_CheckedProfile]) -> dict[str, _CheckedProfile]:
        """The first profile of each name; later ones with the same name are reported. Profiles,
        pools and upstream proxies share one name space (`claudex trip NAME` takes any); the
        mapping returned holds profiles and pools only."""
        by_name: dict[str, _CheckedProfile] = {}
        taken: dict[str, _CheckedProfile] = {}
        # In the file's order, so "first defined" is the one written first.
        entries = sorted([*profiles, *proxies],
                         key=lambda entry: self._lines.line_of(entry.where.loc) or 0)
        for entry in entries:
            if entry.name is None:
                continue
            first = taken.get(entry.name)
            if not entry.proxy and entry.name not in by_name:
                # Kept even when a proxy took the name first: one mistake, reported once.
                by_name[entry.name] = entry
            if first is None:
                taken[entry.name] = entry
                continue
            first_line = self._lines.line_of((*first.where.loc, "name"))
            where = f" (first defined on line {first_line})" if first_line is not None else ""
            if entry.proxy or first.proxy:
                what = "an upstream proxy" if first.proxy else "a profile"
                message = f"duplicate name {_quoted(entry.name)}: {what} has it{where}"
            else:
                message = f"duplicate profile name {_quoted(entry.name)}{where}"
            self._report(entry.where.child("name"), message)
        return by_name

    def _upstream_proxies(self, raw: object) -> list[_CheckedProfile]:
        """`[[upstream_proxies]]`: each entry's keys, and its password's whereabouts."""
        if not isinstance(raw, list):
            self._report(_TOP.child("upstream_proxies"),
                         "must be an array of tables: write [[upstream_proxies]]")
            return []
        found: list[_CheckedProfile] = []
        for index, table in enumerate(raw):
            where = _Where(("upstream_proxies", index), f"upstream_proxies[{index}]")
            if not isinstance(table, dict):
                self._report(where, f"must be a table, not {_type_name(table)}")
                continue
            raw_name = table.get("name")
            name = raw_name if isinstance(raw_name, str) and raw_name.strip() else None
            if name is not None:
                part = name if _BARE_KEY.fullmatch(name) else _quoted(name)
                where = _Where(where.loc, f"upstream_proxies.{part}")
            values = self._check_table(table, UPSTREAM_PROXY_KEYS, where)
            for key in REQUIRED_UPSTREAM_PROXY_KEYS:
                if key not in table:
                    self._report(where.child(key), "missing required key")
            self._net_problems(where, proxy_problems(values, self._env))
            found.append(_CheckedProfile(where, values, name, proxy=True))
        return found

    def _check_network(self, network: Mapping[str, Any], profiles: list[_CheckedProfile],
                       proxies: list[_CheckedProfile]) -> None:
        """`[network]`'s and each provider's network keys: names that exist, files that read."""
        enabled = {entry.values["name"]: entry.values.get("enabled", True)
                   for entry in proxies if "name" in entry.values}
        self._net_problems(_TOP.child("network"),
                           table_problems(network, self._env, enabled))
        for profile in profiles:
            if not profile.pool:
                self._net_problems(profile.where, table_problems(
                    profile.values, self._env, enabled, fill=network))
        # The environment's variables matter only where a route reads them.
        default = network.get("upstream_proxy", ("env",))
        readers = [profile for profile in profiles if not profile.pool
                   and "env" in profile.values.get("upstream_proxy", default)]
        if readers:
            first = readers[0]
            where = (first.where if "env" in first.values.get("upstream_proxy", ())
                     else _TOP.child("network"))
            for message in environment_problems(self._env):
                self._warn(where.child("upstream_proxy"), message)

    def _net_problems(self, where: _Where, problems: list[NetProblem]) -> None:
        for problem in problems:
            (self._warn if problem.warning else self._report)(
                where.child(problem.key), problem.message, problem.at)

    def _check_backups(
        self, profiles: list[_CheckedProfile], by_name: Mapping[str, _CheckedProfile]
    ) -> None:
        # Only a profile naming itself is wrong: a request tries its profile's list and never a
        # backup's backups, so `a -> b` with `b -> a` cannot loop.
        for profile in profiles:
            backups: tuple[str, ...] = profile.values.get("backup_providers", ())
            where = profile.where.child("backup_providers")
            seen: set[str] = set()
            for index, backup in enumerate(backups):
                if backup == profile.name:
                    self._report(where, "a profile cannot list itself as a backup", (index,))
                elif backup not in by_name:
                    hint = _did_you_mean(backup, by_name)
                    self._report(where, f"unknown profile {_quoted(backup)}{hint}", (index,))
                elif backup in seen:
                    self._report(where, f"{_quoted(backup)} is listed twice", (index,))
                seen.add(backup)

    def _check_proxy(
        self,
        proxy: ProxySettings,
        values: Mapping[str, Any],
        by_name: Mapping[str, _CheckedProfile],
    ) -> None:
        where = _TOP.child("proxy")
        default = values.get("default_profile")
        if default is not None and default not in by_name:
            hint = _did_you_mean(default, by_name)
            self._report(
                where.child("default_profile"), f"unknown profile {_quoted(default)}{hint}"
            )
        if "host" in values and not _is_loopback(proxy.host) and proxy.auth_token_env is None:
            self._report(
                self._proxy_origins.get("host", where.child("host")),
                f"{_quoted(proxy.host)} is not a loopback address; listening on it requires "
                "auth_token_env so that every request must carry a token",
            )

    def _check_routes(self, routes: Mapping[str, Any], router: Mapping[str, Any],
                      by_name: Mapping[str, _CheckedProfile]) -> None:
        enabled = {name: p.values.get("enabled", True) is not False
                   for name, p in by_name.items()}
        for problem in route_problems(routes, router, by_name, enabled):
            where = _TOP
            for key in problem.path:
                where = where.child(key)
            (self._warn if problem.warning else self._report)(where, problem.message)

    def _merge_breaker(
        self, base: BreakerSettings, values: dict[str, Any], where: _Where
    ) -> BreakerSettings:
        merged = replace(base, **values)
        self._check_order(merged, values, where, "recovery_seconds", "max_recovery_seconds")
        return merged

    def _merge_retry(
        self, base: RetrySettings, values: dict[str, Any], where: _Where
    ) -> RetrySettings:
        merged = replace(base, **values)
        self._check_order(merged, values, where, "initial_delay", "max_delay")
        return merged

    def _check_order(self, merged: object, values: dict[str, Any], where: _Where,
                     low: str, high: str) -> None:
        """`high` must not be below `low` once merged; blame the key this table set."""
        low_value, high_value = getattr(merged, low), getattr(merged, high)
        if high_value < low_value:
            key = high if high in values else low
            if key in values:
                self._report(
                    where.child(key),
                    f"{high} ({high_value:g}) must not be less than {low} ({low_value:g})",
                )

    def _make_profile(
        self,
        checked: _CheckedProfile,
        breaker: BreakerSettings,
        retry: RetrySettings,
        proxy: ProxySettings,
    ) -> Profile:
        values = checked.values
        base_url = (values["base_url"] if "base_url" in values else
                    default_base_url(values["provider_type"], values["region"])).rstrip("/")
        api_key = values.get("api_key")
        if api_key == "" and "api_key_env" in values:
            api_key = None  # `api_key = ""` beside api_key_env only says "no inline key"
        return Profile(
            name=values["name"],
            provider_type=values["provider_type"],
            # Callers join paths onto it (`{base_url}/v1/messages`).
            base_url=base_url,
            default_model=values.get("default_model"),
            api_key_env=values.get("api_key_env"),
            api_key=api_key,
            auth_type=values.get("auth_type", "api-key"),
            backup_providers=values.get("backup_providers", ()),
            enabled=values.get("enabled", True),
            models=values.get("models", {}),
            custom_headers=values.get("custom_headers", {}),
            max_tokens=values.get("max_tokens"),
            context_window=values.get("context_window"),
            reserve=values.get("reserve", 0.0),
            oauth_provider=values.get("oauth_provider"),
            credentials_file=values.get("credentials_file"),
            token_url=values.get("token_url"),
            client_id=values.get("client_id"),
            token_command=values.get("token_command"),
            health_probe=values.get("health_probe", True),
            region=values.get("region"),
            project=values.get("project"),
            aws_profile=values.get("aws_profile"),
            aws_service=values.get("aws_service"),
            query_params=values.get("query_params", {}),
            extra_env=values.get("extra_env", {}),
            strip_params=_resolve_strip(values.get("strip_params", STRIP_AUTO), base_url),
            priority=values.get("priority"),
            breaker=breaker,
            retry=retry,
            connect_timeout=values.get("connect_timeout", proxy.connect_timeout),
            read_timeout=values.get("read_timeout", proxy.read_timeout),
            **{key: values.get(key, getattr(proxy, key)) for key in _PER_PROVIDER_LIMITS},
            **_pick(values, PROFILE_NETWORK_KEYS),
            problem=_profile_problem(values, self._env, uses_keyring=checked.uses_keyring),
        )


def _make_pool(values: Mapping[str, Any]) -> Pool:
    return Pool(name=values["name"], members=tuple(values["members"]),
                balance=values.get("balance", "sticky"), weights=values.get("weights", {}),
                backup_providers=tuple(values.get("backup_providers", ())))


# `[proxy]` keys a profile may override, beyond the two timeouts named above.
_PER_PROVIDER_LIMITS = (
    "stream_first_byte_timeout", "stream_commit_timeout", "stream_idle_timeout",
    "max_connections", "max_concurrency", "queue_timeout", "retry_budget",
)


def _reading_order(issues: list[ConfigIssue]) -> list[ConfigIssue]:
    # Issues without a line (none so far in practice) go last.
    return sorted(issues, key=lambda issue: (issue.line is None, issue.line or 0))


def _pick(values: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    return {key: values[key] for key in keys if key in values}


# What `strip_params = "auto"` strips, by the base_url's host (and its subdomains). ChatGPT's
# Codex endpoint refuses the sampling parameters; Claudex strips the same.
_AUTO_STRIP: Mapping[str, tuple[str, ...]] = {
    "chatgpt.com": ("temperature", "top_p", "top_k"),
}


def _resolve_strip(setting: tuple[str, ...] | str, base_url: str) -> tuple[str, ...]:
    """The body keys to remove; "auto" (Claudex's default, ours too) is decided by the host."""
    if setting != STRIP_AUTO:
        return tuple(setting)
    host = (urlsplit(base_url).hostname or "").lower()
    for domain, keys in _AUTO_STRIP.items():
        if host == domain or host.endswith("." + domain):
            return keys
    return ()


def _is_loopback(host: str) -> bool:
    bare = host.strip().removeprefix("[").removesuffix("]").lower()
    if bare == "localhost":
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False
