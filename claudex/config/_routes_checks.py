"""The schemas of `[routes]` and Claudex's `[router]` (DESIGN.md "Routes"), and the checks that
need the profiles: every route, the classifier and every rule must name a profile (or pool) the
file defines."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from claudex.config._checks import (
    Checker,
    _Bad,
    _boolean,
    _did_you_mean,
    _integer,
    _profile_name,
    _quoted,
    _text,
    _type_name,
)
from claudex.config.model import ROUTE_NAMES

# A category is what the classifier answers with: one plain word.
_CATEGORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")

ROUTES_KEYS: Mapping[str, Checker] = {
    **{name: _profile_name for name in ROUTE_NAMES},
    # A prompt of 1,000 tokens is not long; below that a threshold is a typo.
    "long_context_tokens": _integer(1_000, 10_000_000),
}


def _rules(value: object) -> dict[str, str]:
    """`[router.rules]`: CATEGORY = "profile", `default` among them."""
    if not isinstance(value, dict):
        raise _Bad(f'must be a table ([router.rules]) of category = "profile" pairs, '
                   f"not {_type_name(value)}")
    rules: dict[str, str] = {}
    for category, target in value.items():
        if not _CATEGORY.fullmatch(category):
            raise _Bad(f"{_quoted(category)} is not a category name: one word of letters, "
                       "digits, '_' and '-' (the classifier answers with it)", (category,))
        try:
            rules[category] = _profile_name(target)
        except _Bad as bad:
            raise _Bad(bad.message, (category,)) from None
    return rules


ROUTER_KEYS: Mapping[str, Checker] = {
    "enabled": _boolean,
    "profile": _profile_name,
    "model": _text,
    "rules": _rules,
}


@dataclass(frozen=True)
class RouteProblem:
    """A problem at `path` (keys from the top of the file); `warning`: the file still loads."""

    path: tuple[str, ...]
    message: str
    warning: bool = False


def route_problems(routes: Mapping[str, Any], router: Mapping[str, Any],
                   profiles: Collection[str],
                   enabled: Mapping[str, bool]) -> list[RouteProblem]:
    """What is wrong with the routes' and the router's targets, given the profile names the
    file defines (`enabled`: whether each is on)."""
    problems: list[RouteProblem] = []

    def target(path: tuple[str, ...], name: str) -> None:
        if name not in profiles:
            problems.append(RouteProblem(
                path, f"unknown profile {_quoted(name)}{_did_you_mean(name, profiles)}"))

    for name in ROUTE_NAMES:
        if name in routes:
            target(("routes", name), routes[name])
    if "long_context_tokens" in routes and "long_context" not in routes:
        problems.append(RouteProblem(("routes", "long_context_tokens"),
                                     "has no effect without long_context (the profile that "
                                     "serves long prompts)", warning=True))
    classifier = router.get("profile")
    if classifier is not None:
        target(("router", "profile"), classifier)
    rules: Mapping[str, str] = router.get("rules", {})
    for category, name in rules.items():
        target(("router", "rules", category), name)
    if router.get("enabled"):
        problems += _enabled_router_problems(classifier, rules, enabled)
    return problems


def _enabled_router_problems(classifier: str | None, rules: Mapping[str, str],
                             enabled: Mapping[str, bool]) -> list[RouteProblem]:
    problems: list[RouteProblem] = []
    if classifier is None:
        problems.append(RouteProblem(("router", "enabled"),
                                     "the router needs profile: the profile asked to classify "
                                     "each conversation"))
    elif enabled.get(classifier) is False:
        problems.append(RouteProblem(("router", "profile"),
                                     f"profile {_quoted(classifier)} is disabled: every "
                                     "conversation goes to rules.default", warning=True))
    if not [category for category in rules if category != "default"]:
        problems.append(RouteProblem(("router", "rules") if rules else ("router", "enabled"),
                                     "the router has no categories ([router.rules] CATEGORY = "
                                     '"profile"): it routes nothing', warning=True))
    elif "default" not in rules:
        problems.append(RouteProblem(("router", "rules"),
                                     "no default rule: a conversation the classifier cannot "
                                     "place goes to the default profile", warning=True))
    return problems
