"""Advice on a config that loads: chain members that would get requests they cannot serve well.

Each rule reads built `Profile`s and returns `Advice` naming a profile and the key to add; the
loader turns it into a warning with file and line, which `claudex check` prints (exit status 0).

Rules (DESIGN.md "Models" and the max_tokens part of issue 10), for every enabled
OpenAI-compatible profile, since a Claude client may address any profile (`/proxy/NAME`) and a
backup receives whatever its chain's head was asked:
- a Claude model name is never sent to it, so without `default_model` and without `models`
  covering haiku, sonnet and opus some Claude requests have no model to go to;
- Claude Code asks for 32,000-128,000 output tokens, which such providers often refuse, so it
  should cap them with `max_tokens`;
- as a backup of a Claude profile (an Anthropic-protocol one) it receives Claude Code's whole
  conversation, often longer than its window: without `context_window` the first such request
  costs a refused call before claudex learns the window from the 400.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from claudex.config._cloud_checks import cloud_model_advice
from claudex.config.model import Profile

FAMILIES = ("haiku", "sonnet", "opus")


@dataclass(frozen=True)
class Advice:
    profile: str
    key: str  # the key that would fix it; located at the profile when it is not written
    message: str


def chain_advice(profiles: Sequence[Profile]) -> list[Advice]:
    backup_of: dict[str, list[str]] = {}
    claude_heads: dict[str, list[str]] = {}  # backups of Anthropic-protocol profiles
    for head in profiles:
        if head.enabled:
            for name in head.backup_providers:
                backup_of.setdefault(name, []).append(head.name)
                if head.provider_type == "DirectAnthropic":
                    claude_heads.setdefault(name, []).append(head.name)
    advice: list[Advice] = []
    for profile in profiles:
        heads = backup_of.get(profile.name, [])
        role = f" (it is a backup of {', '.join(heads)})" if heads else ""
        if profile.enabled and (cloud := cloud_model_advice(profile, FAMILIES, role)):
            advice.append(Advice(profile.name, "default_model", cloud))
        if not profile.enabled or profile.provider_type != "OpenAICompatible":
            continue
        missing = [family for family in FAMILIES if family not in profile.models]
        if profile.default_model is None and missing:
            advice.append(Advice(
                profile.name,
                "default_model",
                f"no default_model, and models maps no {', '.join(missing)}: Claude model names "
                f"(claude-...) are never sent to an OpenAI-compatible provider, so such a request "
                f"would have no model here{role}; add default_model = \"<a model this provider "
                f"serves>\" or map haiku, sonnet and opus in models",
            ))
        if profile.max_tokens is None:
            advice.append(Advice(
                profile.name,
                "max_tokens",
                f"not set: Claude Code asks for 32,000-128,000 output tokens and such providers "
                f"often refuse more than 8,192{role}; add max_tokens = <this provider's output "
                f"limit>, e.g. max_tokens = 8192",
            ))
        claude = claude_heads.get(profile.name, [])
        if claude and profile.context_window is None:
            advice.append(Advice(
                profile.name,
                "context_window",
                f"not set: as a backup of {', '.join(claude)} it receives Claude Code's whole "
                f"conversation (up to 200,000 tokens), and one longer than this provider holds "
                f"costs a refused request before claudex learns its window; add "
                f"context_window = <its context window in tokens>, e.g. context_window = 131072",
            ))
    return advice
