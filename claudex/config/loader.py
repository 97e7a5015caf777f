"""Load `profiles.toml` into the typed objects of `model.py`, reporting every problem at once.

Loading runs in three steps:

1. `tomllib` parses the text. A syntax error stops here, located at the line tomllib names.
2. `_Scanner` reads the same text again to learn on which line each key was written, because
   tomllib keeps no positions. It records table headers, keys (plain, dotted and inside inline
   tables) and array items; a key it has no line for falls back to its table's header line.
3. Every section is checked key by key. Each problem becomes a `ConfigIssue` (file, line, dotted
   key, message) and checking goes on, so one run lists everything; `ConfigError` carries the list.

Issue keys name a profile by its `name` (`profiles.grok.base_url`) and fall back to its position,
counted from 0, when it has no usable name (`profiles[2].name`).

A missing secret is not a problem of the file: such a profile loads with `Profile.problem` set to
a plain reason, and failover skips it. Messages never echo an API key, a header value or a URL.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import math
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from claudex.config.model import (
    AUTH_TYPES,
    OAUTH_PROVIDERS,
    PROVIDER_TYPES,
    BreakerSettings,
    Config,
    ConfigError,
    ConfigIssue,
    HealthSettings,
    Profile,
    ProxySettings,
    RetrySettings,
)

KeyPath = tuple[str | int, ...]
Checker = Callable[[object], Any]

DEFAULT_CREDENTIALS_FILES: Mapping[str, str] = {
    "claude": "~/.claude/.credentials.json",
    "codex": "~/.codex/auth.json",
}

# ---------------------------------------------------------------------------------------------
# Value checks. Each takes the parsed TOML value and returns it converted, or raises `_Bad`.


class _Bad(Exception):
    """A value failed its check; `at` narrows the location below the key (an item, a sub-key)."""

    def __init__(self, message: str, at: KeyPath = ()) -> None:
        super().__init__(message)
        self.message = message
        self.at = at


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# The proxy sets these itself; letting a profile override them would corrupt the request.
_RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})


def _type_name(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return "a date/time"


def _quoted(text: str, limit: int = 60) -> str:
    """`text` for a message, JSON-quoted and shortened."""
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return json.dumps(shown, ensure_ascii=False)


def _did_you_mean(word: str, candidates: Iterable[str]) -> str:
    matches = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {_quoted(matches[0])}?)" if matches else ""


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise _Bad(f"must be a string, not {_type_name(value)}")
    if not value.strip():
        raise _Bad("must not be empty")
    return value


def _optional_text(value: object) -> str | None:
    # Claudex writes `api_key = ""` for profiles without a key: treat empty as unset.
    if isinstance(value, str) and not value.strip():
        return None
    return _text(value)


def _boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise _Bad(f"must be true or false, not {_type_name(value)}")
    return value


def _integer(minimum: int, maximum: int | None = None) -> Checker:
    def check(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Bad(f"must be an integer, not {_type_name(value)}")
        if value < minimum or (maximum is not None and value > maximum):
            shown = str(value) if abs(value) < 10**18 else "a huge number"
            bounds = (
                f"from {minimum} to {maximum}" if maximum is not None else f"at least {minimum}"
            )
            raise _Bad(f"must be {bounds}, not {shown}")
        return value

    return check


def _number(*, minimum: float | None = None, above: float | None = None) -> Checker:
    """A float; TOML integers are accepted (`30` means 30.0), booleans are not."""

    def check(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _Bad(f"must be a number, not {_type_name(value)}")
        try:
            number = float(value)
        except OverflowError:
            raise _Bad("is too large") from None
        if not math.isfinite(number):
            raise _Bad("must be a finite number")
        if minimum is not None and number < minimum:
            raise _Bad(f"must be at least {minimum:g}, not {number:g}")
        if above is not None and number <= above:
            raise _Bad(f"must be greater than {above:g}, not {number:g}")
        return number

    return check


def _choice(
    noun: str, options: tuple[str, ...], aliases: Mapping[str, str] | None = None
) -> Checker:
    def check(value: object) -> str:
        text = _text(value)
        if text in options:
            return text
        if aliases and text in aliases:
            return aliases[text]
        expected = ", ".join(_quoted(option) for option in options)
        hint = _did_you_mean(text, options)
        raise _Bad(f"unknown {noun} {_quoted(text)}{hint}; expected one of {expected}")

    return check


def _env_name(value: object) -> str:
    name = _text(value)
    if not _ENV_NAME.fullmatch(name):
        # Never echo it: a common mistake is pasting the key itself here.
        raise _Bad("must be the name of an environment variable (letters, digits and _)")
    return name


def _profile_name(value: object) -> str:
    name = _text(value)
    if not _PROFILE_NAME.fullmatch(name):
        raise _Bad(
            f"{_quoted(name)} may only contain letters, digits, '.', '_' and '-' "
            "(profile names appear in URLs and headers)"
        )
    return name


def _url(*, allow_query: bool) -> Checker:
    def check(value: object) -> str:
        text = _text(value)
        if any(char.isspace() for char in text):
            raise _Bad("must be a URL without spaces")
        if "://" not in text:
            raise _Bad("must start with http:// or https://")
        try:
            parts = urlsplit(text)
            parts.port  # noqa: B018 -- raises ValueError for a malformed port
        except ValueError:
            raise _Bad("is not a valid URL") from None
        if parts.scheme.lower() not in ("http", "https"):
            raise _Bad(f"must use http or https, not {_quoted(parts.scheme)}")
        if not parts.hostname:
            raise _Bad("must be an http(s) URL with a host")
        if parts.username is not None or parts.password is not None:
            raise _Bad("must not contain a user name or password (use api_key_env)")
        if not allow_query and (parts.query or parts.fragment):
            raise _Bad("must not contain a query string or fragment")
        return text

    return check


def _string_list(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _Bad(f"must be an array of strings, not {_type_name(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            what = "an empty string" if isinstance(item, str) else _type_name(item)
            raise _Bad(f"must be an array of non-empty strings; item {index} is {what}", (index,))
    return tuple(value)


def _string_table(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _Bad(f"must be a table of strings, not {_type_name(value)}")
    for key, item in value.items():
        if not isinstance(item, str) or not item.strip():
            what = "an empty string" if isinstance(item, str) else _type_name(item)
            raise _Bad(f"must be a table of non-empty strings; {_quoted(key)} is {what}", (key,))
    return dict(value)


def _header_table(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _Bad(f"must be a table of strings, not {_type_name(value)}")
    for key, item in value.items():
        if not _HEADER_NAME.fullmatch(key):
            raise _Bad(f"{_quoted(key)} is not a valid HTTP header name", (key,))
        if key.lower() in _RESERVED_HEADERS:
            raise _Bad(f"{_quoted(key)} is set by the proxy and cannot be overridden", (key,))
        if not isinstance(item, str):
            raise _Bad(f"must be a table of strings; {_quoted(key)} is {_type_name(item)}", (key,))
        if any(char in item for char in "\r\n\0"):
            raise _Bad(f"the value of {_quoted(key)} must not contain line breaks", (key,))
    return dict(value)


# ---------------------------------------------------------------------------------------------
# The schema: which keys each table may hold, and how each value is checked.

_BREAKER_KEYS: Mapping[str, Checker] = {
    "failure_threshold": _integer(1),
    "recovery_seconds": _number(above=0),
    "half_open_probes": _integer(1),
    "max_recovery_seconds": _number(above=0),
}
_RETRY_KEYS: Mapping[str, Checker] = {
    "initial_delay": _number(minimum=0),
    "multiplier": _number(minimum=1),
    "max_delay": _number(minimum=0),
    "max_attempts": _integer(1),
    "jitter": _choice("jitter", ("full", "none")),
    "max_retry_after": _number(minimum=0),
}
_TIMEOUT_KEYS: Mapping[str, Checker] = {
    "connect_timeout": _number(above=0),
    "read_timeout": _number(above=0),
}
_PROXY_KEYS: Mapping[str, Checker] = {
    "host": _text,
    "port": _integer(1, 65535),
    "default_profile": _text,
    "auth_token_env": _env_name,
    **_TIMEOUT_KEYS,
}
_HEALTH_KEYS: Mapping[str, Checker] = {
    "enabled": _boolean,
    "interval_seconds": _number(above=0),
    "timeout_seconds": _number(above=0),
    "degraded_latency_ms": _number(above=0),
}
_PROFILE_OWN_KEYS: Mapping[str, Checker] = {
    "name": _profile_name,
    "provider_type": _choice("provider_type", PROVIDER_TYPES),
    "base_url": _url(allow_query=False),
    "default_model": _text,
    "api_key_env": _env_name,
    "api_key": _optional_text,
    "auth_type": _choice("auth_type", AUTH_TYPES),
    "backup_providers": _string_list,
    "enabled": _boolean,
    "models": _string_table,
    "custom_headers": _header_table,
    "max_tokens": _integer(1),
    # Claudex spells the Codex/ChatGPT login "chatgpt" or "openai".
    "oauth_provider": _choice(
        "oauth_provider", OAUTH_PROVIDERS, aliases={"chatgpt": "codex", "openai": "codex"}
    ),
    "credentials_file": _text,
    "token_url": _url(allow_query=True),
    "client_id": _text,
    "token_command": _text,
    "health_probe": _boolean,
}
_PROFILE_KEYS: Mapping[str, Checker] = {
    **_PROFILE_OWN_KEYS,
    **_BREAKER_KEYS,
    **_RETRY_KEYS,
    **_TIMEOUT_KEYS,
}
_REQUIRED_PROFILE_KEYS = ("name", "provider_type", "base_url")
# Keys a Claudex profile may carry that claudex has no use for: accepted and ignored, so a
# Claudex `[[profiles]]` table loads as is.
_CLAUDEX_ONLY_PROFILE_KEYS = frozenset(
    {"priority", "extra_env", "strip_params", "query_params", "api_key_keyring"}
)
_SECTIONS = ("proxy", "breaker", "retry", "health", "profiles")
_TOP_LEVEL_HINTS = {
    "proxy_port": " (claudex sets this as port in [proxy])",
    "proxy_host": " (claudex sets this as host in [proxy])",
}


# ---------------------------------------------------------------------------------------------
# Public API


def parse_config(text: str, file: str = "<config>", env: Mapping[str, str] | None = None) -> Config:
    """Parse and validate config text; `file` only names it in issues.

    `env` (default: the process environment) is where `api_key_env` variables and `HOME` are
    looked up. Raises `ConfigError` listing every problem; never anything else.
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError([_syntax_issue(file, text, error)]) from None
    except RecursionError:
        issue = ConfigIssue(file, None, "syntax", "arrays or tables are nested too deeply")
        raise ConfigError([issue]) from None
    except ValueError:
        # tomllib lets Python's limit on the length of integer literals escape as ValueError.
        issue = ConfigIssue(file, None, "syntax", "a number is too long to read")
        raise ConfigError([issue]) from None
    return _Builder(file, _KeyLines.scan(text), environ).build(data)


def load_config(path: Path | str, env: Mapping[str, str] | None = None) -> Config:
    """Read, parse and validate the file at `path`; `Config.path` is set to it."""
    file = Path(path)
    name = str(file)
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        raise ConfigError([ConfigIssue(name, None, "file", "file not found")]) from None
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ConfigError([ConfigIssue(name, None, "file", f"cannot read: {reason}")]) from None
    try:
        # utf-8-sig: tolerate the byte-order mark some Windows editors write.
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise ConfigError([ConfigIssue(name, line, "file", "not valid UTF-8 text")]) from None
    return replace(parse_config(text, name, env), path=file)


def check_config(path: Path | str, env: Mapping[str, str] | None = None) -> list[ConfigIssue]:
    """Every problem in the file at `path`; an empty list when it loads."""
    try:
        load_config(path, env)
    except ConfigError as error:
        return list(error.issues)
    return []


_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def _syntax_issue(file: str, text: str, error: tomllib.TOMLDecodeError) -> ConfigIssue:
    message = str(error)
    match = _TOML_POSITION.search(message)
    if match:
        line: int | None = int(match.group(1))
        message = f"{message[: match.start()]} (column {match.group(2)})"
    elif message.endswith("(at end of document)"):
        line = text.count("\n") + 1
        message = message.removesuffix("(at end of document)").rstrip() + " (at end of file)"
    else:
        line = None
    return ConfigIssue(file, line, "syntax", message)


# ---------------------------------------------------------------------------------------------
# Validation


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


class _Builder:
    """Checks a parsed document section by section, collecting issues, then builds `Config`."""

    def __init__(self, file: str, lines: _KeyLines, env: Mapping[str, str]) -> None:
        self._file = file
        self._lines = lines
        self._env = env
        self._issues: list[ConfigIssue] = []

    def _report(self, where: _Where, message: str, at: KeyPath = ()) -> None:
        line = self._lines.line_of((*where.loc, *at))
        self._issues.append(ConfigIssue(self._file, line, where.label, message))

    def build(self, data: dict[str, Any]) -> Config:
        for key in data:
            if key not in _SECTIONS:
                hint = _TOP_LEVEL_HINTS.get(key) or _did_you_mean(key, _SECTIONS)
                self._report(_TOP.child(key), f"unknown key{hint}")
        proxy_values = self._section(data, "proxy", _PROXY_KEYS)
        breaker_values = self._section(data, "breaker", _BREAKER_KEYS)
        retry_values = self._section(data, "retry", _RETRY_KEYS)
        health_values = self._section(data, "health", _HEALTH_KEYS)
        checked = self._profiles(data.get("profiles", []))

        proxy = replace(ProxySettings(), **proxy_values)
        breaker = self._merge_breaker(BreakerSettings(), breaker_values, _TOP.child("breaker"))
        retry = self._merge_retry(RetrySettings(), retry_values, _TOP.child("retry"))
        health = replace(HealthSettings(), **health_values)

        by_name = self._check_names(checked)
        self._check_backups(checked, by_name)
        self._check_proxy(proxy, proxy_values, by_name)
        merged = [
            (
                profile,
                self._merge_breaker(breaker, _pick(profile.values, _BREAKER_KEYS), profile.where),
                self._merge_retry(retry, _pick(profile.values, _RETRY_KEYS), profile.where),
            )
            for profile in checked
        ]
        if self._issues:
            # Reading order; issues without a line (none so far in practice) go last.
            self._issues.sort(key=lambda issue: (issue.line is None, issue.line or 0))
            raise ConfigError(self._issues)

        profiles = tuple(
            self._make_profile(profile, profile_breaker, profile_retry, proxy)
            for profile, profile_breaker, profile_retry in merged
        )
        return Config(proxy=proxy, breaker=breaker, retry=retry, health=health, profiles=profiles)

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
        values = self._check_table(table, _PROFILE_KEYS, where, _CLAUDEX_ONLY_PROFILE_KEYS)
        for key in _REQUIRED_PROFILE_KEYS:
            if key not in table:
                self._report(where.child(key), "missing required key")
        if values.get("api_key") is not None and "api_key_env" in values:
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

    def _check_names(self, profiles: list[_CheckedProfile]) -> dict[str, _CheckedProfile]:
        """The first profile of each name; later ones with the same name are reported."""
        by_name: dict[str, _CheckedProfile] = {}
        for profile in profiles:
            if profile.name is None:
                continue
            first = by_name.get(profile.name)
            if first is None:
                by_name[profile.name] = profile
                continue
            first_line = self._lines.line_of((*first.where.loc, "name"))
            where = f" (first defined on line {first_line})" if first_line is not None else ""
            self._report(
                profile.where.child("name"),
                f"duplicate profile name {_quoted(profile.name)}{where}",
            )
        return by_name

    def _check_backups(
        self, profiles: list[_CheckedProfile], by_name: Mapping[str, _CheckedProfile]
    ) -> None:
        graph: dict[str, list[str]] = {name: [] for name in by_name}
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
                elif profile.name is not None and by_name[profile.name] is profile:
                    graph[profile.name].append(backup)
                seen.add(backup)
        for cycle in _find_cycles(graph):
            start = by_name[cycle[0]]
            index = start.values["backup_providers"].index(cycle[1])
            self._report(
                start.where.child("backup_providers"),
                f"backup cycle: {' -> '.join(cycle)}",
                (index,),
            )

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
                where.child("host"),
                f"{_quoted(proxy.host)} is not a loopback address; listening on it requires "
                "auth_token_env so that every request must carry a token",
            )

    def _merge_breaker(
        self, base: BreakerSettings, values: dict[str, Any], where: _Where
    ) -> BreakerSettings:
        merged = replace(base, **values)
        if merged.max_recovery_seconds < merged.recovery_seconds:
            key = "max_recovery_seconds" if "max_recovery_seconds" in values else "recovery_seconds"
            if key in values:
                self._report(
                    where.child(key),
                    f"max_recovery_seconds ({merged.max_recovery_seconds:g}) must not be less "
                    f"than recovery_seconds ({merged.recovery_seconds:g})",
                )
        return merged

    def _merge_retry(
        self, base: RetrySettings, values: dict[str, Any], where: _Where
    ) -> RetrySettings:
        merged = replace(base, **values)
        if merged.max_delay < merged.initial_delay:
            key = "max_delay" if "max_delay" in values else "initial_delay"
            if key in values:
                self._report(
                    where.child(key),
                    f"max_delay ({merged.max_delay:g}) must not be less than "
                    f"initial_delay ({merged.initial_delay:g})",
                )
        return merged

    def _make_profile(
        self,
        checked: _CheckedProfile,
        breaker: BreakerSettings,
        retry: RetrySettings,
        proxy: ProxySettings,
    ) -> Profile:
        values = checked.values
        return Profile(
            name=values["name"],
            provider_type=values["provider_type"],
            # Callers join paths onto it (`{base_url}/v1/messages`).
            base_url=values["base_url"].rstrip("/"),
            default_model=values.get("default_model"),
            api_key_env=values.get("api_key_env"),
            api_key=values.get("api_key"),
            auth_type=values.get("auth_type", "api-key"),
            backup_providers=values.get("backup_providers", ()),
            enabled=values.get("enabled", True),
            models=values.get("models", {}),
            custom_headers=values.get("custom_headers", {}),
            max_tokens=values.get("max_tokens"),
            oauth_provider=values.get("oauth_provider"),
            credentials_file=values.get("credentials_file"),
            token_url=values.get("token_url"),
            client_id=values.get("client_id"),
            token_command=values.get("token_command"),
            health_probe=values.get("health_probe", True),
            breaker=breaker,
            retry=retry,
            connect_timeout=values.get("connect_timeout", proxy.connect_timeout),
            read_timeout=values.get("read_timeout", proxy.read_timeout),
            problem=_secret_problem(values, self._env, uses_keyring=checked.uses_keyring),
        )


def _pick(values: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    return {key: values[key] for key in keys if key in values}


def _is_loopback(host: str) -> bool:
    bare = host.strip().removeprefix("[").removesuffix("]").lower()
    if bare == "localhost":
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False


def _find_cycles(graph: Mapping[str, list[str]]) -> list[list[str]]:
    """Backup cycles as closed paths (`["a", "b", "a"]`), each once, from its earliest profile.

    A depth-first walk reports the cycle closed by each back edge: enough to flag every group of
    profiles that back each other up, though not every distinct cycle inside such a group.
    Iterative, so a long chain cannot exhaust the stack.
    """
    order = {name: position for position, name in enumerate(graph)}
    on_path, finished = 1, 2
    state: dict[str, int] = {}
    found: dict[tuple[str, ...], list[str]] = {}
    for root in graph:
        if root in state:
            continue
        path = [root]
        state[root] = on_path
        pending = [iter(graph[root])]
        while pending:
            target = next(pending[-1], None)
            if target is None:
                state[path.pop()] = finished
                pending.pop()
            elif state.get(target) == on_path:
                cycle = path[path.index(target) :]
                first = min(range(len(cycle)), key=lambda k: order[cycle[k]])
                rotated = tuple(cycle[first:] + cycle[:first])
                found.setdefault(rotated, [*rotated, rotated[0]])
            elif target not in state:
                state[target] = on_path
                path.append(target)
                pending.append(iter(graph[target]))
    return list(found.values())


def _secret_problem(
    values: Mapping[str, Any], env: Mapping[str, str], *, uses_keyring: bool = False
) -> str | None:
    """Why the profile's secret is unavailable, or None. Never raises, never shows a secret."""
    auth_type = values.get("auth_type", "api-key")
    if auth_type == "passthrough" or values.get("token_command"):
        return None
    if auth_type == "oauth":
        shown = (
            values.get("credentials_file") or DEFAULT_CREDENTIALS_FILES[values["oauth_provider"]]
        )
        try:
            exists = _expand_home(shown, env).is_file()
        except (OSError, ValueError) as error:
            return f"credentials file {shown} cannot be read ({type(error).__name__})"
        return None if exists else f"credentials file {shown} not found"
    if values.get("api_key"):
        return None
    variable = values.get("api_key_env")
    if variable is None:
        if uses_keyring:
            return "keyring secrets (api_key_keyring) are not supported; set api_key_env"
        return "no API key configured (set api_key_env)"
    secret = env.get(variable)
    if secret is None:
        return f"environment variable {variable} is not set"
    if not secret.strip():
        return f"environment variable {variable} is empty"
    return None


def _expand_home(path: str, env: Mapping[str, str]) -> Path:
    home = env.get("HOME")
    if home and (path == "~" or path.startswith(("~/", "~" + os.sep))):
        return Path(home + path[1:])
    return Path(os.path.expanduser(path))


# ---------------------------------------------------------------------------------------------
# Line numbers


class _KeyLines:
    """The line each key, table and array item was written on, looked up by key path.

    Paths index the parsed document: `("profiles", 0, "backup_providers", 1)`. A path with no
    line of its own takes the line of its nearest recorded parent, usually the table header.
    """

    def __init__(self, lines: Mapping[KeyPath, int]) -> None:
        self._lines = lines

    @classmethod
    def scan(cls, text: str) -> _KeyLines:
        scanner = _Scanner(text)
        try:
            scanner.run()
        except Exception:
            # Only line numbers depend on the scan: a failure costs precision, never the load.
            pass
        return cls(scanner.lines)

    def line_of(self, path: KeyPath) -> int | None:
        for end in range(len(path), 0, -1):
            line = self._lines.get(path[:end])
            if line is not None:
                return line
        return None


class _ScanError(Exception):
    pass


class _Scanner:
    """A position-keeping reader of TOML that tomllib has already accepted.

    It does not validate anything; it only follows the structure (headers, keys, strings,
    arrays, inline tables) closely enough to never mistake text inside a string for a key.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.lines: dict[KeyPath, int] = {}
        self._array_tables: dict[KeyPath, int] = {}

    def run(self) -> None:
        table: KeyPath = ()
        while self._skip_blank():
            if self.text.startswith("[", self.pos):
                table = self._header(array=self.text.startswith("[[", self.pos))
            else:
                self._key_value(table)

    def _peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _note(self, path: KeyPath, line: int) -> None:
        self.lines.setdefault(path, line)

    def _skip_spaces(self) -> None:
        while self._peek() in (" ", "\t"):
            self.pos += 1

    def _skip_blank(self) -> bool:
        """Skip whitespace, line breaks and comments; False at the end of the text."""
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char == "\n":
                self.line += 1
                self.pos += 1
            elif char in " \t\r":
                self.pos += 1
            elif char == "#":
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            else:
                return True
        return False

    def _expect(self, token: str) -> None:
        if not self.text.startswith(token, self.pos):
            raise _ScanError(f"expected {token!r} at offset {self.pos}")
        self.pos += len(token)

    def _header(self, *, array: bool) -> KeyPath:
        line = self.line
        self._expect("[[" if array else "[")
        keys = self._dotted_key()
        self._skip_spaces()
        self._expect("]]" if array else "]")
        path: KeyPath = ()
        for position, key in enumerate(keys):
            path = (*path, key)
            if array and position == len(keys) - 1:
                count = self._array_tables.get(path, 0)
                self._array_tables[path] = count + 1
                self._note(path, line)
                path = (*path, count)
            elif path in self._array_tables:
                # `[profiles.x]` after `[[profiles]]` extends the latest profile.
                path = (*path, self._array_tables[path] - 1)
            # `[a.b.c]` creates `a` and `a.b` implicitly when they do not exist yet.
            self._note(path, line)
        return path

    def _dotted_key(self) -> list[str]:
        parts: list[str] = []
        while True:
            self._skip_spaces()
            char = self._peek()
            if char in ('"', "'"):
                start = self.pos
                self._single_line_string(char)
                # Let tomllib decode the escapes rather than re-implement them.
                parts.append(tomllib.loads("k = " + self.text[start : self.pos])["k"])
            else:
                match = _BARE_KEY.match(self.text, self.pos)
                if match is None:
                    raise _ScanError(f"expected a key at offset {self.pos}")
                parts.append(match.group())
                self.pos = match.end()
            self._skip_spaces()
            if self._peek() != ".":
                return parts
            self.pos += 1

    def _key_value(self, table: KeyPath) -> None:
        line = self.line
        path = table
        for key in self._dotted_key():
            path = (*path, key)
            self._note(path, line)
        self._skip_spaces()
        self._expect("=")
        self._skip_spaces()
        self._value(path)

    def _value(self, path: KeyPath) -> None:
        char = self._peek()
        if self.text.startswith(('"""', "'''"), self.pos):
            self._multi_line_string(char)
        elif char in ('"', "'"):
            self._single_line_string(char)
        elif char == "[":
            self._array(path)
        elif char == "{":
            self._inline_table(path)
        else:
            # Numbers, booleans, dates: run to the next delimiter (dates may contain a space).
            while self.pos < len(self.text) and self.text[self.pos] not in ",]}#\r\n":
                self.pos += 1

    def _single_line_string(self, quote: str) -> None:
        self.pos += 1
        while True:
            char = self._peek()
            if char in ("", "\n"):
                raise _ScanError("unterminated string")
            self.pos += 2 if char == "\\" and quote == '"' else 1
            if char == quote:
                return

    def _multi_line_string(self, quote: str) -> None:
        start = self.pos
        delimiter = quote * 3
        self.pos += 3
        while True:
            char = self._peek()
            if char == "":
                raise _ScanError("unterminated multi-line string")
            if char == "\\" and quote == '"':
                self.pos += 2
            elif self.text.startswith(delimiter, self.pos):
                self.pos += 3
                # Up to two more quotes right before the delimiter belong to the content.
                for _ in range(2):
                    if self._peek() == quote:
                        self.pos += 1
                break
            else:
                self.pos += 1
        self.line += self.text.count("\n", start, self.pos)

    def _array(self, path: KeyPath) -> None:
        self.pos += 1
        index = 0
        while True:
            if not self._skip_blank():
                raise _ScanError("unterminated array")
            if self._peek() == "]":
                self.pos += 1
                return
            before = self.pos
            item = (*path, index)
            self._note(item, self.line)
            self._value(item)
            self._skip_blank()
            if self._peek() == ",":
                self.pos += 1
                index += 1
            elif self.pos == before:
                raise _ScanError(f"stuck in an array at offset {self.pos}")

    def _inline_table(self, path: KeyPath) -> None:
        self.pos += 1
        while True:
            if not self._skip_blank():
                raise _ScanError("unterminated inline table")
            if self._peek() == "}":
                self.pos += 1
                return
            before = self.pos
            self._key_value(path)
            self._skip_blank()
            if self._peek() == ",":
                self.pos += 1
            elif self.pos == before:
                raise _ScanError(f"stuck in an inline table at offset {self.pos}")
