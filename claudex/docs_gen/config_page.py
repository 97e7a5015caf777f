"""docs/reference/config.md: every key of `profiles.toml`, from the schema the loader checks
(config/_checks.py and the tables beside it), the defaults of the settings it builds
(config/model.py), and the words of profiles.example.toml above each key."""

from __future__ import annotations

import dataclasses
import json
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from claudex.config import _checks
from claudex.config._checks import Checker
from claudex.config._fleet_checks import FLEET_KEYS
from claudex.config._history_checks import HISTORY_KEYS, TELEMETRY_KEYS
from claudex.config._network_checks import (
    NETWORK_KEYS,
    REQUIRED_UPSTREAM_PROXY_KEYS,
    UPSTREAM_PROXY_KEYS,
)
from claudex.config._routes_checks import ROUTER_KEYS, ROUTES_KEYS
from claudex.config.model import (
    BreakerSettings,
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
from claudex.docs_gen.example_file import ExampleFile, parse
from claudex.docs_gen.markdown import code, table

EXAMPLE = "profiles.example.toml"
SOURCES = ("claudex/config/_checks.py", "claudex/config/model.py", EXAMPLE)
NOT_DESCRIBED = f"*(not described in {EXAMPLE})*"


@dataclasses.dataclass(frozen=True)
class Section:
    """A `[table]` of the file: the keys the loader accepts there, the settings class that holds
    their defaults, and what the section heading says besides its name."""

    name: str
    keys: Mapping[str, Checker]
    settings: type[Any]
    note: str = ""
    array: bool = False  # an array of tables: `[[name]]`
    required: tuple[str, ...] = ()


# Every table the loader reads (`_checks._SECTIONS`) has a place here or below; a new one that
# does not makes `make docs-gen` stop and say so.
SECTIONS: tuple[Section, ...] = (
    Section("proxy", _checks._PROXY_KEYS, ProxySettings),
    Section("breaker", _checks._BREAKER_KEYS, BreakerSettings, "every key also per profile"),
    Section("retry", _checks._RETRY_KEYS, RetrySettings, "every key also per profile"),
    Section("health", _checks._HEALTH_KEYS, HealthSettings),
    Section("history", HISTORY_KEYS, HistorySettings),
    Section("fleet", FLEET_KEYS, FleetSettings, "read at start; a reload does not change it"),
    Section("telemetry", TELEMETRY_KEYS, TelemetrySettings,
            "read at start; a reload does not change it"),
    Section("routes", ROUTES_KEYS, RoutesSettings, "requests on /v1/... only"),
    Section("router", ROUTER_KEYS, RouterSettings, "Claudex's"),
    Section("network", NETWORK_KEYS, NetworkSettings, "every key also per profile"),
    # A proxy's breaker and retry keys are named below the table, as a profile's are.
    Section("upstream_proxies", {k: v for k, v in UPSTREAM_PROXY_KEYS.items()
                                 if k not in {**_checks._BREAKER_KEYS, **_checks._RETRY_KEYS}},
            UpstreamProxy, "also every [breaker] and [retry] key, for itself alone", array=True,
            required=REQUIRED_UPSTREAM_PROXY_KEYS),
)
_SPECIAL_TABLES = ("profiles", "model_aliases")
# Defaults the loader applies that differ from the model's field (which holds the resolved
# value): `strip_params = "auto"` is resolved by the profile's host.
_FILE_DEFAULTS: Mapping[tuple[str, str], str] = {
    ("profiles", "strip_params"): json.dumps(_checks.STRIP_AUTO),
}
# Forms the checker accepts beyond the model's type (`_checks._strip_params`).
_FILE_TYPES: Mapping[tuple[str, str], str] = {
    ("profiles", "strip_params"): f"list of strings, {code(json.dumps(_checks.STRIP_AUTO))} or "
                                  f"{code(json.dumps('none'))}",
    ("network", "upstream_proxy"): "string or list of strings",
}


def _type_words(hint: Any) -> str:
    origin, args = get_origin(hint), get_args(hint)
    if origin is Literal:
        return " or ".join(code(json.dumps(a)) for a in args)
    if origin in (Union, types.UnionType):
        return " or ".join(_type_words(a) for a in args if a is not type(None))
    if origin is tuple:
        return "list of strings"
    if origin in (dict, Mapping):
        return "table of strings"
    names = {bool: "true or false", int: "integer", float: "number", str: "string"}
    return names.get(hint, str(hint))


def _value_text(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return code("true" if value else "false")
    if isinstance(value, float):
        return code(f"{value:g}")
    if isinstance(value, int):
        return code(str(value))
    if isinstance(value, str):
        return code(json.dumps(value))
    if isinstance(value, tuple | list):
        return code(json.dumps(list(value)))
    if isinstance(value, Mapping):
        return code("{}") if not value else code(json.dumps(dict(value)))
    return code(repr(value))


def _defaults(settings: type[Any]) -> dict[str, object]:
    found: dict[str, object] = {}
    for f in dataclasses.fields(settings):
        if f.default is not dataclasses.MISSING:
            found[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            found[f.name] = f.default_factory()
    return found


def _rows(table_name: str, keys: Mapping[str, Checker], settings: type[Any],
          example: ExampleFile, required: tuple[str, ...] = ()) -> list[list[str]]:
    hints = get_type_hints(settings)
    defaults = _defaults(settings)
    rows = []
    for key in keys:
        if key in required:
            default = "required"
        elif (table_name, key) in _FILE_DEFAULTS:
            default = code(_FILE_DEFAULTS[(table_name, key)])
        else:
            default = _value_text(defaults[key]) if key in defaults else ""
        kind = _FILE_TYPES.get((table_name, key)) or (
            _type_words(hints[key]) if key in hints else "")
        rows.append([code(key), default, kind, example.words(table_name, key) or NOT_DESCRIBED])
    return rows


_HEADERS = ("key", "default", "type", "meaning")


def _section(section: Section, example: ExampleFile) -> list[str]:
    note = f" ({section.note})" if section.note else ""
    header = f"[[{section.name}]]" if section.array else f"[{section.name}]"
    lines = [f"## `{header}`{note} {{#{section.name}}}", ""]
    if words := example.tables.get(section.name):
        lines += [words, ""]
    lines += [table(_HEADERS, _rows(section.name, section.keys, section.settings, example,
                                    section.required)), ""]
    return lines


def _profiles(example: ExampleFile) -> list[str]:
    own = _checks._PROFILE_OWN_KEYS
    lines = ["## `[[profiles]]` {#profiles}", ""]
    if words := example.tables.get("profiles"):
        lines += [words, ""]
    lines += [table(_HEADERS, _rows("profiles", own, Profile, example,
                                    _checks._REQUIRED_PROFILE_KEYS)), ""]
    overrides = [(name, [k for k in keys if k not in own]) for name, keys in (
        ("breaker", _checks._BREAKER_KEYS), ("retry", _checks._RETRY_KEYS),
        ("proxy", _checks._TIMEOUT_KEYS), ("network", NETWORK_KEYS))]
    named = "; ".join(f"[`[{name}]`](#{name}) " + ", ".join(code(k) for k in keys)
                      for name, keys in overrides if keys)
    lines += [f"A profile may also set, for itself alone: {named}.", ""]
    pool_keys = {k: v for k, v in _checks._POOL_KEYS.items() if k not in own}
    lines += ["A table with `members` and no `base_url` is a pool (see "
              "[Pools](../pools-and-routes.md#pools)): it takes `name`, `backup_providers` and "
              "these keys, and none of a provider's:",
              "", table(_HEADERS, _rows("profiles", pool_keys, Pool, example,
                                        _checks._REQUIRED_POOL_KEYS)), ""]
    lines += ["Accepted from Claudex and not used: "
              + ", ".join(code(k) for k in sorted(_checks._CLAUDEX_ONLY_PROFILE_KEYS))
              + " (the profile loads, shown misconfigured: claudex does not read the keyring).",
              ""]
    return lines


def _aliases(example: ExampleFile) -> list[str]:
    lines = ["## `[model_aliases]` {#model_aliases}", ""]
    lines.append(example.tables.get("model_aliases", NOT_DESCRIBED))
    lines += ["", "Each entry is `alias = \"model\"`.", ""]
    return lines


def _top_level(example: ExampleFile) -> list[str]:
    rows = [[code(key), f"Claudex's spelling of [`[proxy]`](#proxy) {code(target)}; "
             "`[proxy]` wins when both are set"]
            for key, (target, _) in _checks._TOP_LEVEL_PROXY_KEYS.items()]
    rows.append([code("claude_binary"), example.words("", "claude_binary") or NOT_DESCRIBED])
    rows += [[code(key), "Claudex's; not implemented by claudex: the file loads with a warning "
              "and the key is ignored"] for key in _checks._NOT_IMPLEMENTED]
    return ["## Top-level keys {#top-level}", "",
            "Keys outside any table, read so that a file written for Claudex loads as it is.",
            "", table(("key", "meaning"), rows), ""]


def _check_coverage() -> None:
    known = {s.name for s in SECTIONS} | set(_SPECIAL_TABLES) | set(
        _checks._TOP_LEVEL_PROXY_KEYS) | {"claude_binary"} | set(_checks._NOT_IMPLEMENTED)
    missing = [key for key in _checks._TOP_LEVEL_KEYS if key not in known]
    if missing:
        raise LookupError(f"config key(s) {', '.join(missing)} have no place in the "
                          "configuration reference: add them to SECTIONS in "
                          "claudex/docs_gen/config_page.py")


def undescribed(root: Path) -> list[str]:
    """Keys the example file says nothing about, as `table.key`."""
    example = parse((root / EXAMPLE).read_text(encoding="utf-8"))
    tables = [(s.name, s.keys) for s in SECTIONS] + [("profiles", {**_checks._PROFILE_OWN_KEYS,
                                                                   **_checks._POOL_KEYS}),
                                                     ("", {"claude_binary": _checks._text})]
    return [f"{name}.{key}" if name else key
            for name, keys in tables for key in keys if not example.words(name, key)]


def render(root: Path) -> str:
    _check_coverage()
    text = (root / EXAMPLE).read_text(encoding="utf-8")
    example = parse(text)
    lines = [
        "# Configuration reference", "",
        "Every key `claudex check` accepts, with its default and what it means. Where the file "
        "lives, how it is checked and reloaded: [Configuration](../configuration.md).", "",
        "Durations are seconds unless the key says otherwise; an integer is fine wherever a "
        "number is expected (30 means 30.0). *Unset* means the key has no value unless "
        "written.", "",
    ]
    for section in SECTIONS:
        lines += _section(section, example)
    lines += _aliases(example)
    lines += _profiles(example)
    lines += _top_level(example)
    lines += [f"## `{EXAMPLE}` {{#example}}", "",
              "The example file, in full (`claudex check --config profiles.example.toml` loads "
              "it):", "", "```toml", text.rstrip("\n"), "```", ""]
    return "\n".join(lines)
