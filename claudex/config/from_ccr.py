"""`claudex init --from-ccr FILE`: a claude-code-router `config.json` as a commented claudex
config (DESIGN.md "Routes").

ccr's format (its README and src/utils/router.ts, v1.0.x; ccr 2 and later keep their config in
SQLite and read a `config.json` only once, to migrate it — this is that file):

    Providers[]  name, api_base_url (the full endpoint URL), api_key, models[], transformer
    Router       default, background, think, longContext, webSearch (each "provider,model"),
                 longContextThreshold (tokens, default 60000), image (not converted)
    APIKEY       the key clients must send  ·  API_TIMEOUT_MS  ·  HOST, PORT

What comes out: one profile per (provider, model) the Router uses, named after the provider
(`provider-model` when the Router uses several of its models), `Router.default` as the default
profile and the other Router entries as `[routes]`; providers the Router does not use are
written commented out. No secret is copied: an inline key becomes `api_key_env` with a variable
named for the provider (the report and a comment say which to set), a `$VAR` / `${VAR}` key
(ccr's interpolation) becomes that variable. What claudex does differently (transformers: it
translates protocols itself) is said in comments where it applies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from claudex.config.ccr_json import (
    CcrFileError,
    interpolated_name,
    mentions_variable,
    read_ccr_json,
)
from claudex.config.model import DEFAULT_LONG_CONTEXT_TOKENS

# ccr's Router entries -> claudex's routes, in the order the file shows them.
_ROUTER_ROUTES: Final = (("longContext", "long_context"), ("webSearch", "web_search"),
                         ("think", "thinking"), ("background", "background"))
_ROUTER_ORDER: Final = ("default", "background", "think", "longContext", "webSearch")
_MIN_THRESHOLD: Final = 1_000  # what `[routes] long_context_tokens` accepts
_NOT_A_NAME: Final = re.compile(r"[^A-Za-z0-9._-]+")
# ccr transformers whose effect claudex has built in, and what it does instead.
_BUILT_IN: Final = {
    "anthropic": "the Anthropic protocol is spoken natively (DirectAnthropic)",
    "openrouter": "OpenRouter is an OpenAI-compatible provider",
    "deepseek": "DeepSeek is an OpenAI-compatible provider",
    "groq": "Groq is an OpenAI-compatible provider",
    "gemini": "Gemini's OpenAI-compatible endpoint is used instead of its native API",
    "reasoning": "reasoning_content is translated to thinking",
    "tooluse": "tool calls are translated both ways",
    "enhancetool": "tool calls are translated both ways",
    "cleancache": "cache_control is dropped where the provider has no prompt caching",
}
_GEMINI_OPENAI: Final = "https://generativelanguage.googleapis.com/v1beta/openai"


@dataclass
class Converted:
    text: str                          # the claudex config
    profiles: list[str]                # the profiles made, in order
    routes: dict[str, str]             # route -> profile
    default_profile: str
    variables: dict[str, str] = field(default_factory=dict)  # to set: variable -> why


@dataclass
class _Provider:
    index: int
    name: str
    url: str
    key: str | None
    models: list[str]
    transformer: Any


@dataclass
class _Target:
    provider: _Provider
    model: str
    profile: str = ""


def convert_ccr(text: str, source: str) -> Converted:
    """The claudex config for the ccr config `text` (read from `source`); raises CcrFileError
    naming the problem when it is not one."""
    data = read_ccr_json(text, source)
    providers = _providers(data, source)
    router = data.get("Router")
    if router is None:
        router = {}
    if not isinstance(router, dict):
        raise CcrFileError(f"{source}: Router must be an object of \"provider,model\" entries")
    targets = _targets(router, providers, source)
    if "default" not in targets:  # ccr falls back to it for everything: one must exist
        first = next((p for p in providers if p.models), None)
        if first is None:
            raise CcrFileError(f"{source}: Router has no default and no provider lists a model")
        targets["default"] = _Target(first, first.models[0])
    _name_profiles(targets)
    return _Writer(source, data, providers, router, targets).write()


def _providers(data: Mapping[str, Any], source: str) -> list[_Provider]:
    raw = data.get("Providers", data.get("providers"))
    if not isinstance(raw, list) or not raw:
        raise CcrFileError(f"{source}: no Providers: a ccr config lists its providers in "
                           '"Providers": [{"name": ..., "api_base_url": ..., "models": [...]}]')
    out: list[_Provider] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        where = f"{source}: Providers[{index}]"
        if not isinstance(item, dict):
            raise CcrFileError(f"{where} must be an object")
        name = item.get("name")
        if not isinstance(name, str) or not name.strip():
            raise CcrFileError(f"{where} has no name")
        if name in seen:
            raise CcrFileError(f"{where}: the name {name!r} is used twice")
        seen.add(name)
        url = item.get("api_base_url", item.get("baseUrl"))
        if not isinstance(url, str) or "://" not in url:
            raise CcrFileError(f"{where} ({name}): api_base_url must be the provider's URL "
                               "(https://...)")
        models = item.get("models", [])
        if not isinstance(models, list) or not all(isinstance(m, str) and m for m in models):
            raise CcrFileError(f"{where} ({name}): models must be a list of model names")
        key = item.get("api_key", item.get("apiKey"))
        if key is not None and not isinstance(key, str):
            raise CcrFileError(f"{where} ({name}): api_key must be a string")
        out.append(_Provider(index, name, url.strip(), key, list(models),
                             item.get("transformer")))
    return out


def _targets(router: Mapping[str, Any], providers: list[_Provider],
             source: str) -> dict[str, _Target]:
    by_name = {p.name.lower(): p for p in providers}  # ccr matches provider names so
    out: dict[str, _Target] = {}
    for entry in _ROUTER_ORDER:
        value = router.get(entry)
        if value is None or value == "":
            continue
        provider_name, comma, model = value.partition(",") if isinstance(value, str) \
            else ("", "", "")
        if not comma or not provider_name.strip() or not model.strip():
            raise CcrFileError(f"{source}: Router.{entry} must be \"provider,model\", not "
                               f"{json.dumps(value)[:60]}")
        provider = by_name.get(provider_name.strip().lower())
        if provider is None:
            names = ", ".join(p.name for p in providers)
            raise CcrFileError(f"{source}: Router.{entry} names provider "
                               f"{provider_name.strip()!r}, which Providers does not have "
                               f"(it has {names})")
        out[entry] = _Target(provider, model.strip())
    return out


def _name_profiles(targets: dict[str, _Target]) -> None:
    """A profile per distinct (provider, model): the provider's name, or `provider-model`
    when the Router uses more than one of its models."""
    pairs: dict[tuple[str, str], str] = {}
    per_provider: dict[str, set[str]] = {}
    for target in targets.values():
        per_provider.setdefault(target.provider.name, set()).add(target.model)
    taken: set[str] = set()
    for target in targets.values():
        pair = (target.provider.name, target.model)
        if pair not in pairs:
            several = len(per_provider[target.provider.name]) > 1
            base = _profile_name(_model_profile(target.provider.name, target.model)
                                 if several else target.provider.name)
            name, n = base, 2
            while name in taken:
                name, n = f"{base}-{n}", n + 1
            taken.add(name)
            pairs[pair] = name
        target.profile = pairs[pair]


def _model_profile(provider: str, model: str) -> str:
    """`deepseek` + `deepseek-reasoner` -> `deepseek-reasoner`; `openrouter` +
    `google/gemini-2.5-pro` -> `openrouter-gemini-2.5-pro`."""
    short = model.rsplit("/", 1)[-1]
    return short if short.lower().startswith(provider.lower()) else f"{provider}-{short}"


def _profile_name(text: str) -> str:
    name = _NOT_A_NAME.sub("-", text).strip("-._") or "provider"
    return name if name[0].isalnum() else f"p{name}"


def _variable_for(provider: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", provider.upper()).strip("_") + "_API_KEY"


def _kind(url: str, transformer: Any) -> tuple[str, str, str | None]:
    """(provider_type, base_url, a note) for ccr's endpoint URL and transformer."""
    uses = _transformer_names(transformer)
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if "gemini" in uses or parts.hostname == "generativelanguage.googleapis.com":
        if not path.endswith("/openai/chat/completions"):
            return ("OpenAICompatible", _GEMINI_OPENAI,
                    f"ccr called Gemini's native API at {url}; claudex uses its "
                    "OpenAI-compatible endpoint")
    for suffix, kind in (("/v1/messages", "DirectAnthropic"), ("/chat/completions",
                                                                "OpenAICompatible"),
                         ("/responses", "OpenAIResponses")):
        if path.endswith(suffix):
            return kind, url.rstrip("/")[: len(url.rstrip("/")) - len(suffix)], None
    if "anthropic" in uses:
        return "DirectAnthropic", url.rstrip("/"), None
    return ("OpenAICompatible", url.rstrip("/"),
            f"{url} does not end in /chat/completions: check that base_url is the API's base "
            "(claudex adds /chat/completions)")


def _transformer_names(transformer: Any) -> list[str]:
    """The transformers a provider's `transformer` uses, lowercased (global and per model)."""
    names: list[str] = []

    def uses(value: Any) -> None:
        for item in value if isinstance(value, list) else ():
            name = item[0] if isinstance(item, list) and item else item
            if isinstance(name, str):
                names.append(name.lower())

    if isinstance(transformer, dict):
        uses(transformer.get("use"))
        for key, value in transformer.items():
            if key != "use" and isinstance(value, dict):
                uses(value.get("use"))
    return names


def _max_tokens(transformer: Any, model: str) -> int | None:
    """ccr's `maxtoken` transformer option for `model` (its own entry, else the provider's)."""
    found: int | None = None
    for scope in (transformer, transformer.get(model) if isinstance(transformer, dict)
                  else None):
        if not isinstance(scope, dict):
            continue
        for item in scope.get("use") or ():
            if isinstance(item, list) and len(item) == 2 and item[0] == "maxtoken" \
                    and isinstance(item[1], dict):
                value = item[1].get("max_tokens")
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    found = value
    return found


def _toml(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


class _Writer:
    def __init__(self, source: str, data: Mapping[str, Any], providers: list[_Provider],
                 router: Mapping[str, Any], targets: dict[str, _Target]) -> None:
        self.source = source
        self.data = data
        self.providers = providers
        self.router = router
        self.targets = targets
        self.lines: list[str] = []
        self.variables: dict[str, str] = {}
        self._key_vars: dict[tuple[str, str], str] = {}  # (provider, key) -> variable

    def write(self) -> Converted:
        default = self.targets["default"].profile
        routes = {route: self.targets[entry].profile for entry, route in _ROUTER_ROUTES
                  if entry in self.targets}
        self._header()
        self._proxy(default)
        self._routes(routes)
        made: list[str] = []
        for target in self.targets.values():
            if target.profile not in made:
                made.append(target.profile)
                self._profile(target, default)
        self._unused()
        return Converted("\n".join(self.lines).rstrip() + "\n", made, routes, default,
                         self.variables)

    def out(self, *lines: str) -> None:
        self.lines.extend(lines)

    def _header(self) -> None:
        self.out(f"# claudex config converted by `claudex init --from-ccr` from {self.source}",
                 "# (a claude-code-router config.json). Check it with `claudex check`; the "
                 "comments say",
                 "# what claudex does differently. No key was copied: set the variables named "
                 "below.", "")

    def _proxy(self, default: str) -> None:
        self.out("[proxy]", f"default_profile = {_toml(default)}  # ccr's Router.default")
        apikey = self.data.get("APIKEY")
        if isinstance(apikey, str) and apikey:
            variable = interpolated_name(apikey) or "CLAUDEX_TOKEN"
            self.out(f"auth_token_env = {_toml(variable)}  # clients must send it (ccr's "
                     "APIKEY)")
            if not interpolated_name(apikey):
                self.variables[variable] = "the key your clients send (config.json's APIKEY)"
        timeout = self.data.get("API_TIMEOUT_MS")
        if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0:
            self.out(f"read_timeout = {timeout / 1000:g}  # ccr's API_TIMEOUT_MS")
        port = self.data.get("PORT")
        if port is not None:
            self.out(f"# ccr listened on port {port}; claudex listens on 13456 unless `port` "
                     "is set here.")
        if self.data.get("HOST") not in (None, "127.0.0.1", "localhost"):
            self.out("# ccr's HOST is not carried over: claudex listens on 127.0.0.1 unless "
                     "host is set (with auth_token_env).")
        if self.data.get("PROXY_URL"):
            self.out("# ccr's PROXY_URL (an outgoing HTTP proxy) has no claudex equivalent.")
        if self.data.get("CUSTOM_ROUTER_PATH"):
            self.out("# ccr's CUSTOM_ROUTER_PATH script is not converted: [routes] and "
                     "[router] below are claudex's routing.")
        self.out("")

    def _routes(self, routes: dict[str, str]) -> None:
        image = self.router.get("image")
        if not routes and not image:
            return
        self.out("# ccr's Router: the first route a request matches picks its profile, whose "
                 "own chain", "# (backup_providers) serves it. Only on /v1/... (not "
                 "/proxy/NAME/...).", "[routes]")
        names = {"long_context": "longContext", "web_search": "webSearch",
                 "thinking": "think", "background": "background"}
        for route, profile in routes.items():
            self.out(f"{route} = {_toml(profile)}  # ccr's Router.{names[route]}")
        if "long_context" in routes:
            threshold = self.router.get("longContextThreshold", DEFAULT_LONG_CONTEXT_TOKENS)
            if not isinstance(threshold, int) or isinstance(threshold, bool):
                threshold = DEFAULT_LONG_CONTEXT_TOKENS
            if threshold < _MIN_THRESHOLD:
                self.out(f"# ccr's longContextThreshold was {threshold}; claudex takes 1000 "
                         "at least.")
                threshold = _MIN_THRESHOLD
            self.out(f"long_context_tokens = {threshold}  # ccr's longContextThreshold")
        if image:
            self.out(f"# ccr's Router.image ({_toml(str(image))}) is not converted: claudex "
                     "has no image route.")
        self.out("")

    def _profile(self, target: _Target, default: str) -> None:
        provider, model = target.provider, target.model
        kind, base_url, note = _kind(provider.url, provider.transformer)
        used_by = [entry for entry, t in self.targets.items() if t.profile == target.profile]
        self.out(f"# ccr provider {provider.name!r}, model {model!r} (Router."
                 f"{', Router.'.join(used_by)})")
        if note:
            self.out(f"# {note}")
        if model not in provider.models:
            self.out(f"# {model!r} is not among the provider's models in config.json.")
        self._transformer_note(provider)
        self.out("[[profiles]]", f"name = {_toml(target.profile)}",
                 f'provider_type = "{kind}"', f"base_url = {_toml(base_url)}")
        self._key(provider)
        self.out(f"default_model = {_toml(model)}")
        if kind == "DirectAnthropic":  # ccr replaced the model: Claude Code's names map to it
            self.out(f"models = {{ haiku = {_toml(model)}, sonnet = {_toml(model)}, "
                     f"opus = {_toml(model)} }}")
        cap = _max_tokens(provider.transformer, model)
        if cap is not None:
            self.out(f"max_tokens = {cap}  # ccr's maxtoken transformer")
        if target.profile == default:
            others = [t.profile for t in self.targets.values() if t.profile != default]
            backups = ", ".join(_toml(p) for p in dict.fromkeys(others))
            self.out("# claudex fails over along backup_providers; ccr had none:",
                     f"# backup_providers = [{backups}]")
        self.out("")

    def _key(self, provider: _Provider) -> None:
        key = provider.key
        if key is None or not key.strip():
            self.out('api_key = ""  # none in config.json')
            return
        named = interpolated_name(key)
        if named is not None:
            self.out(f"api_key_env = {_toml(named)}  # config.json's ${named}")
            self.variables.setdefault(named, f"named in config.json for provider "
                                             f"{provider.name!r}: the same variable")
            return
        variable = self._key_vars.get((provider.name, key))
        if variable is None:
            variable, n = _variable_for(provider.name), 2
            while variable in self.variables:
                variable, n = f"{_variable_for(provider.name)}_{n}", n + 1
            self._key_vars[(provider.name, key)] = variable
            built = " (it was built from variables there)" if mentions_variable(key) else ""
            self.variables[variable] = (f"the key config.json had inline for provider "
                                        f"{provider.name!r} (Providers[{provider.index}]"
                                        f".api_key){built}")
        self.out(f"api_key_env = {_toml(variable)}  # set it to Providers[{provider.index}]"
                 ".api_key (not copied)")
        if urlsplit(provider.url).hostname in ("localhost", "127.0.0.1", "::1"):
            self.out('# (a local server: write api_key = "" instead if it takes no key)')

    def _transformer_note(self, provider: _Provider) -> None:
        names = list(dict.fromkeys(_transformer_names(provider.transformer)))
        if not names:
            return
        said = [f"{name}: {_BUILT_IN[name]}" for name in names if name in _BUILT_IN]
        said += [f"{name}: max_tokens below" for name in names if name == "maxtoken"]
        other = [name for name in names if name not in _BUILT_IN and name != "maxtoken"]
        if other:
            said.append(f"{', '.join(other)}: no claudex equivalent, left out")
        self.out(f"# ccr transformers -> {'; '.join(said)}")

    def _unused(self) -> None:
        used = {t.provider.name for t in self.targets.values()}
        for provider in self.providers:
            if provider.name in used:
                continue
            kind, base_url, _ = _kind(provider.url, provider.transformer)
            models = ", ".join(provider.models) or "none listed"
            variable = interpolated_name(provider.key or "") or _variable_for(provider.name)
            self.out(f"# ccr provider {provider.name!r} is in no Router entry (models: "
                     f"{models}); as a profile:", "# [[profiles]]",
                     f"# name = {_toml(_profile_name(provider.name))}",
                     f'# provider_type = "{kind}"', f"# base_url = {_toml(base_url)}",
                     f"# api_key_env = {_toml(variable)}")
            if provider.models:
                self.out(f"# default_model = {_toml(provider.models[0])}")
            self.out("")
