"""The schemas of `[network]`, `[[upstream_proxies]]` and a profile's network keys (issue 36,
DESIGN.md "Upstream proxies and certificates"), and the checks that need more than one value:
proxy names that exist, files that can be read, passwords that belong in the environment.

Each problem is a `NetProblem` (key, sentence, where below the key, warning or not); `_validate.py`
locates it. No message ever quotes a proxy URL or a password: a URL may hold one.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from claudex.config._checks import (
    _BREAKER_KEYS,
    _PROFILE_NAME,
    _RETRY_KEYS,
    Checker,
    _Bad,
    _boolean,
    _did_you_mean,
    _env_name,
    _profile_name,
    _quoted,
    _string_list,
    _text,
    _type_name,
)
from claudex.config._lines import KeyPath
from claudex.config.network import (
    DIRECT,
    ENV,
    ENV_HOP_NAMES,
    PROXY_VARIABLES,
    SPECIAL_ROUTES,
    ProxyURLError,
    expand_path,
    is_url,
    parse_proxy_url,
)


def _route(value: object) -> tuple[str, ...]:
    """`upstream_proxy`: one entry or a list, each "env", "direct", a proxy URL or a name."""
    if isinstance(value, str):
        entries: tuple[str, ...] = (_text(value),)
        single = True
    elif isinstance(value, list):
        entries = _string_list(value)
        single = False
        if not entries:
            raise _Bad('must name at least one way out ("env", "direct", a URL or a proxy)')
    else:
        raise _Bad(f'must be "env", "direct", a proxy URL, a proxy\'s name or an array of '
                   f"them, not {_type_name(value)}")
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        at: KeyPath = () if single else (index,)
        item = "" if single else f"item {index} "
        if is_url(entry):
            try:
                parse_proxy_url(entry)
            except ProxyURLError as error:
                raise _Bad(f"{item}{error}", at) from None
        elif entry not in SPECIAL_ROUTES and not _PROFILE_NAME.fullmatch(entry):
            # Not quoted: a scheme-less URL could carry a password.
            raise _Bad(f'{item}is neither "env", "direct", a proxy URL (http://, https://, '
                       "socks5://, socks5h://) nor a proxy's name", at)
        if entry in seen:
            shown = "a URL" if is_url(entry) else _quoted(entry)
            raise _Bad(f"{shown} is listed twice", at)
        seen.add(entry)
    if DIRECT in entries and len(entries) > 1:
        raise _Bad('"direct" cannot be listed with proxies: a proxy that is out is never '
                   'replaced by a direct connection (write "direct" alone)',
                   (entries.index(DIRECT),))
    return entries


def _proxy_url(value: object) -> str:
    """`[[upstream_proxies]] url`: the scheme is required (the file says what it means)."""
    text = _text(value)
    try:
        parse_proxy_url(text)
    except ProxyURLError as error:
        raise _Bad(str(error)) from None
    return text


def _proxy_name(value: object) -> str:
    name = _profile_name(value)
    if name in SPECIAL_ROUTES:
        raise _Bad(f'{_quoted(name)} means {"the environment" if name == ENV else "no proxy"} '
                   "in upstream_proxy: a proxy needs another name")
    if name.lower() in ENV_HOP_NAMES:
        raise _Bad(f"{_quoted(name)} names the environment's proxy in status and events: a "
                   "proxy needs another name")
    return name


# Keys of `[network]`, and of a profile, which overrides each for itself.
NETWORK_KEYS: Mapping[str, Checker] = {
    "upstream_proxy": _route,
    "ca_bundle": _text,
    "client_cert": _text,
    "client_key": _text,
    "client_key_password_env": _env_name,
}
PROFILE_NETWORK_KEYS: Mapping[str, Checker] = NETWORK_KEYS
UPSTREAM_PROXY_KEYS: Mapping[str, Checker] = {
    "name": _proxy_name,
    "url": _proxy_url,
    "password_env": _env_name,
    "enabled": _boolean,
    **_BREAKER_KEYS,
    **_RETRY_KEYS,
}
REQUIRED_UPSTREAM_PROXY_KEYS = ("name", "url")


@dataclass(frozen=True)
class NetProblem:
    """A problem at `key` of the table checked (`at`: below it, an item); `warning`: it loads."""

    key: str
    message: str
    at: KeyPath = ()
    warning: bool = False


def table_problems(values: Mapping[str, Any], env: Mapping[str, str],
                   proxies: Mapping[str, bool], *, fill: Mapping[str, Any] | None = None
                   ) -> list[NetProblem]:
    """What is wrong with the network keys of `[network]` or of one profile (`values`, checked):
    `proxies` maps each `[[upstream_proxies]]` name to whether it is enabled. `fill` is
    `[network]`'s values, which a profile takes what it does not set from (for the warning
    about a route whose proxies are all disabled)."""
    problems: list[NetProblem] = []
    route: tuple[str, ...] = values.get("upstream_proxy", ())
    single = len(route) == 1 and "upstream_proxy" in values
    for index, entry in enumerate(route):
        at: KeyPath = () if single else (index,)
        if is_url(entry):
            if parse_proxy_url(entry).password is not None:
                problems.append(NetProblem(
                    "upstream_proxy", "a password written in the URL is readable by anyone who "
                    "can read this file: name an [[upstream_proxies]] entry with password_env "
                    "instead", at, warning=True))
        elif entry not in SPECIAL_ROUTES and entry not in proxies:
            hint = _did_you_mean(entry, [*proxies, *SPECIAL_ROUTES])
            problems.append(NetProblem("upstream_proxy",
                                       f"unknown proxy {_quoted(entry)}{hint}", at))
    effective = route or (fill or {}).get("upstream_proxy", ())
    named = [entry for entry in effective if entry in proxies]
    if named and len(named) == len(effective) and not any(proxies[n] for n in named) \
            and "upstream_proxy" in values:
        problems.append(NetProblem("upstream_proxy", "every proxy named here is disabled: "
                                   "nothing is sent (never directly instead)", warning=True))
    if "client_key" in values and "client_cert" not in values:
        problems.append(NetProblem("client_key", "client_key without client_cert (the "
                                   "certificate the key belongs to)"))
    if "client_key_password_env" in values and "client_cert" not in values:
        problems.append(NetProblem("client_key_password_env", "client_key_password_env "
                                   "without client_cert"))
    problems += _file_problems(values, env)
    return problems


def _file_problems(values: Mapping[str, Any], env: Mapping[str, str]) -> list[NetProblem]:
    problems: list[NetProblem] = []
    unreadable: set[str] = set()
    for key in ("ca_bundle", "client_cert", "client_key"):
        if key in values and (reason := _unreadable(values[key], env)) is not None:
            problems.append(NetProblem(key, f"cannot read {values[key]}: {reason}"))
            unreadable.add(key)
    if "ca_bundle" in values and "ca_bundle" not in unreadable:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(
                cafile=expand_path(values["ca_bundle"], env))
        except (ssl.SSLError, ValueError) as error:
            problems.append(NetProblem("ca_bundle", f"{values['ca_bundle']} holds no PEM "
                                       f"certificate ({_ssl_reason(error)})"))
    if "client_cert" in values and not unreadable & {"client_cert", "client_key"}:
        variable = values.get("client_key_password_env")
        password = env.get(variable, "") if variable else ""
        if variable and not password:
            problems.append(NetProblem("client_key_password_env", f"environment variable "
                                       f"{variable} is not set: the key cannot be unlocked",
                                       warning=True))
        else:
            problems += _chain_problems(values, env, password)
    return problems


def _chain_problems(values: Mapping[str, Any], env: Mapping[str, str],
                    password: str) -> list[NetProblem]:
    """Load the certificate with its key, as the engine will. The password is always given
    (empty when none): without one, OpenSSL would prompt on the terminal for an encrypted key."""
    cert = expand_path(values["client_cert"], env)
    key = expand_path(values["client_key"], env) if "client_key" in values else None
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(
            cert, key, password=lambda: password)
    except (ssl.SSLError, ValueError) as error:
        return [NetProblem("client_cert", f"cannot use {values['client_cert']} with "
                           f"{values.get('client_key', 'the key it holds')} "
                           f"({_ssl_reason(error)})")]
    return []


def _ssl_reason(error: Exception) -> str:
    if isinstance(error, ssl.SSLError) and error.reason:
        return str(error.reason).replace("_", " ").lower()
    return str(error) or type(error).__name__


def _unreadable(shown: str, env: Mapping[str, str]) -> str | None:
    """Why the file at `shown` cannot be read, in the operating system's words, or None."""
    try:
        with expand_path(shown, env).open("rb") as file:
            file.read(1)
    except OSError as error:
        return error.strerror or type(error).__name__
    except (ValueError, RuntimeError) as error:  # a NUL in the path, an unknown ~user
        return type(error).__name__
    return None


def proxy_problems(values: Mapping[str, Any], env: Mapping[str, str]) -> list[NetProblem]:
    """What is wrong with one `[[upstream_proxies]]` entry beyond its keys' own checks."""
    problems: list[NetProblem] = []
    url = values.get("url")
    written = parse_proxy_url(url).password is not None if url is not None else False
    variable = values.get("password_env")
    if written and variable:
        problems.append(NetProblem("url", "the URL holds a password and password_env names "
                                   "one: keep password_env and remove it from the URL"))
    elif written:
        problems.append(NetProblem("url", "a password written in the URL is readable by "
                                   "anyone who can read this file: use password_env",
                                   warning=True))
    if variable and url is not None and parse_proxy_url(url).username is None:
        problems.append(NetProblem("password_env", "the password needs a user name: write it "
                                   "in the url (http://alice@proxy.corp:3128)"))
    elif variable and not env.get(variable):
        problems.append(NetProblem("password_env", f"environment variable {variable} is not "
                                   "set: the proxy is asked without a password", warning=True))
    return problems


def environment_problems(env: Mapping[str, str]) -> list[str]:
    """The proxy variables whose value claudex cannot use (a route through "env" that would
    take one fails, never goes direct): for `claudex check` to say so before a request does."""
    problems: list[str] = []
    for variable in PROXY_VARIABLES:
        value = env.get(variable, "").strip()
        if not value:
            continue
        try:
            parse_proxy_url(value, default_scheme="http")
        except ProxyURLError as error:
            problems.append(f"environment variable {variable}: {error}; a request through "
                            "it fails (it is never sent directly instead)")
    return problems
