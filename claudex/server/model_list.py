"""`GET /v1/models`: the model names a client may ask claudex for, in the client's format.

opencode and aider offer their user this list, so it names what works: the profiles' own models
(`default_model`, and both sides of `models` — a key is asked for and mapped, a value is the
provider's name, kept at the profile a request addresses), the `[model_aliases]` names and
their targets, and the models of the profiles `[routes]` and `[router]` send requests to. The
profile a request on this route reaches comes first (the default profile, or the `/proxy/NAME`
one), then the routes' targets, then the rest. The bare family keys (`haiku`, `sonnet`, `opus`)
are patterns, not models: their targets are listed instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from claudex.config.model import Config, Profile

_FAMILY_KEYS: Final = frozenset({"haiku", "sonnet", "opus"})
_CREATED_AT: Final = "2025-01-01T00:00:00Z"


def model_ids(config: Config, chosen: str | None = None) -> list[str]:
    """The names to list at `/v1/models` (`chosen` None) or `/proxy/CHOSEN/v1/models`."""
    ids: dict[str, None] = {}  # ordered, without repeats

    def add(names: Iterable[str | None]) -> None:
        for name in names:
            if name:
                ids.setdefault(name, None)

    for profile in _profiles_in_order(config, chosen):
        add((profile.default_model,))
        for key, target in profile.models.items():
            add((None if key.lower() in _FAMILY_KEYS else key, target))
    for alias, target in config.model_aliases.items():
        add((alias, target))
    return list(ids)


def _profiles_in_order(config: Config, chosen: str | None) -> list[Profile]:
    if chosen is not None:
        pool = config.pool(chosen)
        if pool is not None:  # a pool: what its members serve
            return [p for name in pool.members if (p := config.profile(name)) is not None]
        found = config.profile(chosen)
        return [found] if found is not None else []
    first = config.default_profile
    targets = [*config.routes.targets().values()]
    if config.router.active:
        targets += config.router.rules.values()
    order = [first.name] if first is not None else []
    order += [name for name in targets if name not in order]
    order += [p.name for p in config.profiles if p.enabled and p.name not in order]
    members = [m for name in order if (pool := config.pool(name)) is not None
               for m in pool.members]
    order += [name for name in members if name not in order]
    return [p for name in order if (p := config.profile(name)) is not None]


def anthropic_list(ids: list[str]) -> dict[str, Any]:
    """Anthropic's `GET /v1/models` shape."""
    return {"data": [{"type": "model", "id": m, "display_name": m, "created_at": _CREATED_AT}
                     for m in ids],
            "has_more": False, "first_id": ids[0] if ids else None,
            "last_id": ids[-1] if ids else None}


def openai_list(ids: list[str], created: int) -> dict[str, Any]:
    """OpenAI's `GET /v1/models` shape."""
    return {"object": "list", "data": [
        {"id": m, "object": "model", "created": created, "owned_by": "claudex"} for m in ids]}
