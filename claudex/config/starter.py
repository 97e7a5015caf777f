"""`claudex init`: a commented starter config built from what this machine already has.

`discover(env)` looks for Claude Code's and Codex CLI's login files (through the same `~`
expansion the loader uses for credentials files, so `HOME` decides) and for the usual API-key
variables; `starter_text(found)` writes the config. Only the names of variables and files go into
the text, never what they hold: a variable's value is read only to see that it is not empty.

The profiles: `claude` first (Claude Code's own login when its credentials file exists, else
`passthrough`, so Claude Code keeps the login it has), backed up by every API-key provider found;
each of those backs up the next ones found and the ones before it (mutual backups are fine:
chains are not transitive). Codex CLI's login becomes the `codex` profile (the ChatGPT backend,
served through the Responses API), first in `claude`'s chain: the plan the user already pays
for before the API keys; its own chain is `claude` when that is a login of its own, else the
API-key profiles.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from claudex.config._secrets import DEFAULT_CREDENTIALS_FILES, _expand_home
from claudex.config.starter_clouds import (
    BEDROCK,
    VERTEX,
    CloudsFound,
    cloud_profiles,
    cloud_report,
    discover_clouds,
)

# How many backups each API-key profile lists: enough to survive two providers being down
# without making every request walk the whole machine's list.
BACKUPS_PER_KEY_PROFILE = 2


@dataclass(frozen=True)
class KeyProvider:
    """A provider reached with an API key from an environment variable."""

    variable: str
    name: str
    label: str
    provider_type: str
    base_url: str
    default_model: str | None = None
    models: Mapping[str, str] = field(default_factory=dict)
    # The provider's output-token limit for these models (Claude Code asks for more).
    max_tokens: int | None = None
    # Its context window for the main model (a smaller one's is learned from its 400).
    context_window: int | None = None


# In the order they are preferred as backups: Anthropic itself, then Claude models elsewhere,
# then the strongest general models. Context windows of the main models: Claude 200,000
# ("prompt is too long: ... > 200000 maximum" in Anthropic's 400s), GPT-4.1 1,047,576, Gemini
# 2.5 1,048,576 (its 400s: "maximum number of tokens allowed (1048576)"), grok-4 256,000,
# deepseek-chat 131,072 (its 400s), Mistral Large and Groq's Llama 3.3 128k.
KEY_PROVIDERS: tuple[KeyProvider, ...] = (
    # No default_model: as a backup it receives Claude Code's own model names unchanged.
    KeyProvider("ANTHROPIC_API_KEY", "anthropic", "Anthropic API", "DirectAnthropic",
                "https://api.anthropic.com"),
    KeyProvider("OPENROUTER_API_KEY", "openrouter", "OpenRouter", "OpenAICompatible",
                "https://openrouter.ai/api/v1", "anthropic/claude-sonnet-4.5",
                {"haiku": "anthropic/claude-haiku-4.5", "sonnet": "anthropic/claude-sonnet-4.5",
                 "opus": "anthropic/claude-opus-4.1"}, 32000, 200000),
    KeyProvider("OPENAI_API_KEY", "openai", "OpenAI", "OpenAICompatible",
                "https://api.openai.com/v1", "gpt-4.1",
                {"haiku": "gpt-4.1-mini", "sonnet": "gpt-4.1", "opus": "gpt-4.1"}, 32768, 1047576),
    KeyProvider("GEMINI_API_KEY", "gemini", "Google Gemini", "OpenAICompatible",
                "https://generativelanguage.googleapis.com/v1beta/openai", "gemini-2.5-pro",
                {"haiku": "gemini-2.5-flash", "sonnet": "gemini-2.5-pro",
                 "opus": "gemini-2.5-pro"}, 65536, 1048576),
    KeyProvider("XAI_API_KEY", "grok", "xAI Grok", "OpenAICompatible",
                "https://api.x.ai/v1", "grok-4",
                {"haiku": "grok-3-mini", "sonnet": "grok-4", "opus": "grok-4"}, 16384, 256000),
    KeyProvider("DEEPSEEK_API_KEY", "deepseek", "DeepSeek", "OpenAICompatible",
                "https://api.deepseek.com/v1", "deepseek-chat",
                {"haiku": "deepseek-chat", "sonnet": "deepseek-chat",
                 "opus": "deepseek-reasoner"}, 8192, 131072),
    KeyProvider("MISTRAL_API_KEY", "mistral", "Mistral AI", "OpenAICompatible",
                "https://api.mistral.ai/v1", "mistral-large-latest",
                {"haiku": "mistral-small-latest", "sonnet": "mistral-large-latest",
                 "opus": "mistral-large-latest"}, 8192, 131072),
    KeyProvider("GROQ_API_KEY", "groq", "Groq", "OpenAICompatible",
                "https://api.groq.com/openai/v1", "llama-3.3-70b-versatile",
                {"haiku": "llama-3.1-8b-instant", "sonnet": "llama-3.3-70b-versatile",
                 "opus": "llama-3.3-70b-versatile"}, 8192, 131072),
)

CLAUDE_LOGIN = DEFAULT_CREDENTIALS_FILES["claude"]
CODEX_LOGIN = DEFAULT_CREDENTIALS_FILES["codex"]
PRIMARY = "claude"
CODEX_PROFILE = "codex"


@dataclass(frozen=True)
class Found:
    claude_login: bool
    codex_login: bool
    providers: tuple[KeyProvider, ...]
    # Claude on Bedrock and Vertex (starter_clouds.py): the same models, the first backups.
    clouds: CloudsFound | None = None

    def cloud_names(self) -> list[str]:
        """The cloud profiles written active (a Vertex one needs its project)."""
        clouds = self.clouds
        if clouds is None:
            return []
        return ([BEDROCK] if clouds.bedrock else []) + (
            [VERTEX] if clouds.vertex and clouds.project else [])


def discover(env: Mapping[str, str]) -> Found:
    return Found(
        claude_login=_is_file(CLAUDE_LOGIN, env),
        codex_login=_is_file(CODEX_LOGIN, env),
        providers=tuple(p for p in KEY_PROVIDERS if env.get(p.variable, "").strip()),
        clouds=discover_clouds(env),
    )


def _is_file(shown: str, env: Mapping[str, str]) -> bool:
    try:
        return _expand_home(shown, env).is_file()
    except (OSError, ValueError):
        return False


def report(found: Found) -> list[str]:
    """One line per source looked at: what was found and the profile it became."""
    primary = (
        f'found    Claude Code login {CLAUDE_LOGIN} -> profile "{PRIMARY}" (oauth)'
        if found.claude_login
        else f"missing  Claude Code login {CLAUDE_LOGIN} -> profile \"{PRIMARY}\" (passthrough: "
        "Claude Code keeps its own login)"
    )
    codex = (
        f'found    Codex CLI login {CODEX_LOGIN} -> profile "{CODEX_PROFILE}" (oauth, a backup '
        f'of "{PRIMARY}")'
        if found.codex_login
        else f"missing  Codex CLI login {CODEX_LOGIN}"
    )
    lines = [primary, codex]
    if found.clouds is not None:
        lines += cloud_report(found.clouds)
    lines += [f'found    {p.variable} -> profile "{p.name}"' for p in found.providers]
    unset = [p.variable for p in KEY_PROVIDERS if p not in found.providers]
    if unset:
        lines.append(f"not set  {', '.join(unset)} (their profiles are written commented out)")
    return lines


def _s(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's for the text written here)."""
    return json.dumps(text, ensure_ascii=False)


def _names(names: list[str]) -> str:
    return "[" + ", ".join(_s(name) for name in names) + "]"


def _backups_for(provider: KeyProvider, found: tuple[KeyProvider, ...]) -> list[str]:
    # The ones after it first, wrapping round: spreads the load instead of every profile
    # falling back on the same first one.
    position = found.index(provider)
    others = [*found[position + 1 :], *found[:position]]
    return [p.name for p in others[:BACKUPS_PER_KEY_PROFILE]]


_HEADER = """\
# claudex configuration, written by `claudex init` from what it found on this machine.
#
#   claudex check            validate it (every problem with its line)
#   claudex serve            run the proxy (or `claudex` for the console)
#   claudex run [PROFILE]    run Claude Code through it
#
# No secret is written here: API keys are read from the environment variables named in
# api_key_env when the proxy starts, and logins from the files their tools keep up to date.
# A profile whose variable is unset loads anyway, shown as misconfigured, and failover skips it.
# Every key is explained in the example config: {example}

[proxy]
host = "127.0.0.1"
port = 13456
# Served at the plain /v1/... routes; /proxy/NAME/v1/... reaches any profile by name.
default_profile = "{primary}"
"""


def starter_text(found: Found, example: str) -> str:
    """The config for `found`; `example` is where the full example config is, for the header."""
    parts = [_HEADER.format(example=example, primary=PRIMARY)]
    parts.append(_primary(found))
    if found.clouds is not None and found.clouds.any:
        names = found.cloud_names()
        parts.append(cloud_profiles(found.clouds, {n: [o for o in names if o != n]
                                                   for n in (BEDROCK, VERTEX)}))
    for provider in found.providers:
        parts.append(_key_profile(provider, _backups_for(provider, found.providers)))
    if found.codex_login:
        parts.append(_codex(found))
    missing = [p for p in KEY_PROVIDERS if p not in found.providers]
    if missing:
        parts.append(
            "\n# " + "-" * 78 + "\n"
            "# Providers whose API-key variable was not set. To use one, set the variable where\n"
            "# the proxy runs, uncomment its profile and add its name to backup_providers above.\n"
        )
        parts += [_commented(_key_profile(provider, [])) for provider in missing]
    return "".join(parts)


def _commented(block: str) -> str:
    return "".join(
        line if not line.strip() or line.startswith("#") else f"# {line}"
        for line in block.splitlines(keepends=True)
    )


def _primary(found: Found) -> str:
    lines = ["", "[[profiles]]", f"name = {_s(PRIMARY)}"]
    lines += ['provider_type = "DirectAnthropic"', 'base_url = "https://api.anthropic.com"']
    if found.claude_login:
        lines += [
            f"# Your Claude subscription, through Claude Code's login ({CLAUDE_LOGIN}); tokens",
            "# are refreshed before they expire. `claude login` fixes a \"needs login\".",
            'auth_type = "oauth"',
            'oauth_provider = "claude"',
        ]
    else:
        lines += [
            "# No Claude Code login file was found: forward the client's own credentials, so",
            "# Claude Code keeps using whatever login it has.",
            'auth_type = "passthrough"',
        ]
    backups = [p.name for p in found.providers]
    if found.codex_login:
        backups.insert(0, CODEX_PROFILE)
    backups[:0] = found.cloud_names()  # the same models elsewhere: first
    if backups:
        lines.append("# Tried in this order when this profile fails"
                     + (" (your ChatGPT plan first, then the API keys)." if found.codex_login
                        and found.providers else "."))
        lines.append(f"backup_providers = {_names(backups)}")
    else:
        lines.append("# No API-key variable was found, so there is no backup yet. Add profiles")
        lines.append('# and list them here: backup_providers = ["grok", "deepseek"]')
    return "\n".join(lines) + "\n"


def _key_profile(provider: KeyProvider, backups: list[str]) -> str:
    lines = [
        "",
        f"# {provider.label}",
        "[[profiles]]",
        f"name = {_s(provider.name)}",
        f"provider_type = {_s(provider.provider_type)}",
        f"base_url = {_s(provider.base_url)}",
        f"api_key_env = {_s(provider.variable)}",
    ]
    if provider.default_model is not None:
        lines.append("# Claude model names are never sent to this provider: these go instead.")
        lines.append(f"default_model = {_s(provider.default_model)}")
    if provider.models:
        pairs = ", ".join(f"{family} = {_s(model)}" for family, model in provider.models.items())
        lines.append(f"models = {{ {pairs} }}")
    if provider.max_tokens is not None:
        lines.append("# Its output limit: Claude Code asks for more, which it would refuse.")
        lines.append(f"max_tokens = {provider.max_tokens}")
    if provider.context_window is not None:
        lines.append("# Its context window: a longer conversation passes it over unsent.")
        lines.append(f"context_window = {provider.context_window}")
    if backups:
        lines.append(f"backup_providers = {_names(backups)}")
    return "\n".join(lines) + "\n"


def _codex(found: Found) -> str:
    # Its own chain, for Codex CLI sent here: claude only when that is a login of its own (a
    # passthrough claude would forward Codex CLI's ChatGPT token to Anthropic).
    backups = ([PRIMARY] if found.claude_login else []) + [
        p.name for p in found.providers][:BACKUPS_PER_KEY_PROFILE]
    lines = [
        "",
        f"# Codex CLI's ChatGPT login ({CODEX_LOGIN}): your ChatGPT plan, through the backend",
        "# Codex CLI uses (the Responses API). Claude Code's requests are translated for it;",
        "# `claudex run codex -- codex` sends Codex CLI here.",
        "[[profiles]]",
        f"name = {_s(CODEX_PROFILE)}",
        'provider_type = "OpenAIResponses"',
        'base_url = "https://chatgpt.com/backend-api/codex"',
        'auth_type = "oauth"',
        'oauth_provider = "codex"',
        'default_model = "gpt-5-codex"',
    ]
    if backups:
        lines.append(f"backup_providers = {_names(backups)}")
    return "\n".join(lines) + "\n"


def starter_path_free(path: Path) -> bool:
    """True when nothing (not even a dangling link) is at `path`: init never replaces a file."""
    return not path.exists() and not path.is_symlink()
