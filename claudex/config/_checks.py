"""Value checks and the schema of `profiles.toml`.

Each check takes a parsed TOML value and returns it converted, or raises `_Bad` with a message
meant for the user. The schema tables below map every key a table may hold to its check.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from claudex.config._lines import KeyPath
from claudex.config.model import (
    AUTH_TYPES,
    BALANCES,
    OAUTH_PROVIDERS,
    PROVIDER_TYPES,
    UNSERVED_PROVIDER_TYPES,
    UNSUPPORTED_OAUTH_PROVIDERS,
)

Checker = Callable[[object], Any]

# ---------------------------------------------------------------------------------------------
# Value checks. Each takes the parsed TOML value and returns it converted, or raises `_Bad`.


class _Bad(Exception):
    """A value failed its check; `at` narrows the location below the key (an item, a sub-key)."""

    def __init__(self, message: str, at: KeyPath = ()) -> None:
        super().__init__(message)
        self.message = message
        self.at = at


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
    import difflib  # only for a config with a misspelt key: not in every process's memory

    matches = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {_quoted(matches[0])}?)" if matches else ""


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise _Bad(f"must be a string, not {_type_name(value)}")
    if not value.strip():
        raise _Bad("must not be empty")
    return value


def _api_key(value: object) -> str:
    # Claudex writes `api_key = ""` for local servers that take no key: kept as "" (send none).
    if isinstance(value, str) and not value.strip():
        return ""
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


def _fraction(value: object) -> float:
    """A share: a number from 0 up to, not including, 1 (`0.05`: 5 %)."""
    number: float = _number(minimum=0)(value)
    if number >= 1:
        raise _Bad(f"must be below 1 (a share of the window: 0.05 is 5%), not {number:g}")
    return number


def _slow_factor(value: object) -> float:
    """How many times its usual p95 makes a provider slow: 0 (off), or 1.5 and more (below
    that, ordinary jitter would turn providers yellow)."""
    number: float = _number(minimum=0)(value)
    if 0 < number < 1.5:
        raise _Bad(f"must be 0 (off) or at least 1.5 (times the usual p95), not {number:g}")
    return number


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


_CLOUD_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")


def _region(value: object) -> str:
    """A cloud region as its URLs spell it: `us-east-1`, `us-east5`, `global`, `eu`."""
    name = _text(value)
    if not _CLOUD_NAME.fullmatch(name):
        raise _Bad(f"{_quoted(name)} is not a region name (lower-case letters, digits and '-', "
                   'such as "us-east-1" or "us-east5")')
    return name


def _cloud_id(value: object) -> str:
    """A project id, an AWS profile or service name: text without spaces or '/'."""
    name = _text(value)
    if any(char.isspace() or char in "/?#" for char in name):
        raise _Bad(f"{_quoted(name)} must not contain spaces, '/', '?' or '#'")
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


def _query_table(value: object) -> dict[str, str]:
    """`query_params`: names and values are URL-encoded when sent, so any text will do; an empty
    value is kept (`?flag=`), an empty name is not."""
    if not isinstance(value, dict):
        raise _Bad(f"must be a table of strings, not {_type_name(value)}")
    for key, item in value.items():
        if not key.strip():
            raise _Bad("a query parameter needs a name", (key,))
        if not isinstance(item, str):
            raise _Bad(f"must be a table of strings; {_quoted(key)} is {_type_name(item)}", (key,))
    return dict(value)


def _env_table(value: object) -> dict[str, str]:
    """`extra_env`: what the operating system can take as environment entries."""
    if not isinstance(value, dict):
        raise _Bad(f"must be a table of strings, not {_type_name(value)}")
    for key, item in value.items():
        if not key or "=" in key or "\0" in key:
            raise _Bad(f"{_quoted(key)} cannot be the name of an environment variable", (key,))
        if not isinstance(item, str):
            raise _Bad(f"must be a table of strings; {_quoted(key)} is {_type_name(item)}", (key,))
        if "\0" in item:
            raise _Bad(f"the value of {_quoted(key)} must not contain a NUL character", (key,))
    return dict(value)


# `strip_params = "auto"` (Claudex's default): strip what the endpoint is known to refuse, decided
# from base_url when the profile is built.
STRIP_AUTO = "auto"


def _strip_params(value: object) -> tuple[str, ...] | str:
    """A list of body keys, or (as Claudex reads it) a string: "auto", "none"/"false"/"" for
    nothing, or names separated by commas. Returns the tuple, or STRIP_AUTO."""
    if isinstance(value, str):
        word = value.strip().lower()
        if word == STRIP_AUTO:
            return STRIP_AUTO
        if word in ("none", "false", ""):
            return ()
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, list):
        return _string_list(value)
    raise _Bad(
        f'must be "auto", "none" or an array of parameter names, not {_type_name(value)}'
    )


# Claudex's levels (and Python's own names) onto the four claudex logs at.
_LOG_LEVELS = {
    "trace": "debug",
    "debug": "debug",
    "info": "info",
    "warn": "warning",
    "warning": "warning",
    "error": "error",
}


def _log_level(value: object) -> str:
    text = _text(value)
    level = _LOG_LEVELS.get(text.strip().lower())
    if level is None:
        expected = ", ".join(_quoted(name) for name in ("debug", "info", "warn", "error"))
        raise _Bad(f"unknown log level {_quoted(text)}; expected one of {expected}")
    return level


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
    "stream_first_byte_timeout": _number(above=0),
    "stream_commit_timeout": _number(above=0),
    "stream_idle_timeout": _number(above=0),
    # claudex's own limits at one provider (DESIGN.md failure table, "queue_full").
    "max_connections": _integer(1, 1_000_000),
    "max_concurrency": _integer(1, 1_000_000),
    "queue_timeout": _number(above=0),
    "retry_budget": _number(minimum=0),
}
_PROXY_KEYS: Mapping[str, Checker] = {
    "host": _text,
    "port": _integer(1, 65535),
    "default_profile": _text,
    "auth_token_env": _env_name,
    "log_level": _log_level,
    **_TIMEOUT_KEYS,
}
# Claudex keeps these at the top level; each means the `[proxy]` key named, which wins when both
# are set.
_TOP_LEVEL_PROXY_KEYS: Mapping[str, tuple[str, Checker]] = {
    "proxy_port": ("port", _PROXY_KEYS["port"]),
    "proxy_host": ("host", _PROXY_KEYS["host"]),
    "log_level": ("log_level", _log_level),
}
_HEALTH_KEYS: Mapping[str, Checker] = {
    "enabled": _boolean,
    "interval_seconds": _number(above=0),
    "timeout_seconds": _number(above=0),
    "degraded_latency_ms": _number(above=0),
    "slow_factor": _slow_factor,
    "slow_min_samples": _integer(1),
    "avoid_slow": _boolean,
}
_PROFILE_OWN_KEYS: Mapping[str, Checker] = {
    "name": _profile_name,
    "provider_type": _choice("provider_type", (*PROVIDER_TYPES, *UNSERVED_PROVIDER_TYPES)),
    "base_url": _url(allow_query=False),
    "default_model": _text,
    "api_key_env": _env_name,
    "api_key": _api_key,
    # Claudex's documentation spells the default "api_key".
    "auth_type": _choice("auth_type", AUTH_TYPES, aliases={"api_key": "api-key"}),
    "backup_providers": _string_list,
    "enabled": _boolean,
    "models": _string_table,
    "custom_headers": _header_table,
    "max_tokens": _integer(1),
    "context_window": _integer(1024),
    # A share of a plan's quota window kept for direct use (DESIGN.md "Windows"), 0 <= r < 1.
    "reserve": _fraction,
    # Claudex spells the Codex/ChatGPT login "chatgpt" or "openai".
    "oauth_provider": _choice(
        "oauth_provider",
        (*OAUTH_PROVIDERS, *UNSUPPORTED_OAUTH_PROVIDERS),
        aliases={"chatgpt": "codex", "openai": "codex"},
    ),
    "credentials_file": _text,
    "token_url": _url(allow_query=True),
    "client_id": _text,
    "token_command": _text,
    "health_probe": _boolean,
    # Claude on clouds (config/clouds.py; their combinations: config/_cloud_checks.py).
    "region": _region,
    "project": _cloud_id,
    "aws_profile": _cloud_id,
    "aws_service": _cloud_id,
    # Claudex keys (DESIGN.md "Claudex keys").
    "priority": _integer(0),
    "query_params": _query_table,
    "strip_params": _strip_params,
    "extra_env": _env_table,
}
_PROFILE_KEYS: Mapping[str, Checker] = {
    **_PROFILE_OWN_KEYS,
    **_BREAKER_KEYS,
    **_RETRY_KEYS,
    **_TIMEOUT_KEYS,
}
_REQUIRED_PROFILE_KEYS = ("name", "provider_type", "base_url")


def _weights(value: object) -> dict[str, int]:
    if not isinstance(value, dict):
        raise _Bad(f"must be a table of member = weight (an integer), not {_type_name(value)}")
    weight = _integer(1, 1000)
    for key, item in value.items():
        try:
            weight(item)
        except _Bad as bad:
            raise _Bad(f"{_quoted(key)}: {bad.message}", (key,)) from None
    return dict(value)


# A pool: a `[[profiles]]` table with `members` and no `base_url` (DESIGN.md "Pools").
_POOL_KEYS: Mapping[str, Checker] = {
    "name": _profile_name,
    "members": _string_list,
    "balance": _choice("balance", BALANCES),
    "weights": _weights,
    "backup_providers": _string_list,
}
_REQUIRED_POOL_KEYS = ("name", "members")
# A Claudex profile key claudex cannot use: accepted, and the profile is shown misconfigured.
_CLAUDEX_ONLY_PROFILE_KEYS = frozenset({"api_key_keyring"})
_SECTIONS = ("proxy", "breaker", "retry", "health", "fleet", "history", "telemetry",
             "profiles", "model_aliases", "routes", "router", "network", "upstream_proxies")
# Claudex features claudex does not have: a warning, and the key is ignored.
_NOT_IMPLEMENTED = ("hyperlinks", "context")
_TOP_LEVEL_KEYS = (*_SECTIONS, *_TOP_LEVEL_PROXY_KEYS, "claude_binary", *_NOT_IMPLEMENTED)
