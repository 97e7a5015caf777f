"""The request body Bedrock takes, from the Anthropic one, and back.

As anthropic-sdk-python's `lib/bedrock/_client.py` (`_prepare_options`) rewrites it: `model`
and `stream` leave the body (the path says them), `anthropic_version` is
`bedrock-2023-05-31` unless the body has one, and the `anthropic-beta` header's flags become the
body's `anthropic_beta` array unless the body has one. `anthropic_body` is the mirror, for
claudex serving Bedrock's wire to a client in Bedrock mode.

Bedrock refuses some fields and flags the Anthropic API accepts (`errors.BedrockFailure`):
`without_fields` and `without_betas` make the body of the one retry.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from claudex.providers.bedrock.errors import FieldPath

__all__ = [
    "ANTHROPIC_VERSION",
    "DOCUMENTED_BETAS",
    "FieldPattern",
    "anthropic_body",
    "bedrock_body",
    "betas_from_header",
    "field_pattern",
    "pattern_name",
    "without_betas",
    "without_fields",
    "without_patterns",
]

ANTHROPIC_VERSION: Final = "bedrock-2023-05-31"
DOCUMENTED_BETAS: Final = frozenset({
    # The beta flags AWS documents for Claude's Messages API on Bedrock (as quoted from AWS's
    # docs in BerriAI/litellm#19875/#19877). Not every model takes all of them: Opus 4.7 takes
    # only interleaved-thinking (anthropics/claude-code#49370); Claude Code's own
    # claude-code-20250219 is accepted by most models though not documented (CLIProxyAPI#4750).
    "computer-use-2024-10-22", "computer-use-2025-01-24", "token-efficient-tools-2025-02-19",
    "interleaved-thinking-2025-05-14", "output-128k-2025-02-19", "dev-full-thinking-2025-05-14",
    "context-1m-2025-08-07", "context-management-2025-06-27", "effort-2025-11-24",
    "tool-search-tool-2025-10-19", "tool-examples-2025-10-29",
})
ANY: Final = "*"
FieldPattern = tuple[str, ...]
"""A refused field's place with every list index as "*": ("tools", "*", "defer_loading")."""


def betas_from_header(value: str | None) -> list[str]:
    """`anthropic-beta: a,b` as a list (blank items dropped)."""
    if not value:
        return []
    return [flag.strip() for flag in value.split(",") if flag.strip()]


def bedrock_body(body: Mapping[str, Any], *, betas: Sequence[str] = ()) -> dict[str, Any]:
    """A new body for InvokeModel(WithResponseStream): the client's `body` is not changed."""
    rewritten = {key: value for key, value in body.items() if key not in ("model", "stream")}
    rewritten.setdefault("anthropic_version", ANTHROPIC_VERSION)
    if betas:
        rewritten.setdefault("anthropic_beta", list(betas))
    return rewritten


def anthropic_body(body: Mapping[str, Any], *, model: str,
                   stream: bool) -> tuple[dict[str, Any], list[str]]:
    """An Anthropic Messages body from an invoke request's (the model from its path, `stream`
    from the route), and the betas to send as `anthropic-beta`."""
    rewritten = {key: value for key, value in body.items()
                 if key not in ("anthropic_version", "anthropic_beta")}
    betas = body.get("anthropic_beta")
    rewritten["model"] = model
    if stream:
        rewritten["stream"] = True
    flags = [flag for flag in betas if isinstance(flag, str)] if isinstance(betas, list) else []
    return rewritten, flags


def without_betas(body: Mapping[str, Any], names: Iterable[str] | None = None) -> dict[str, Any]:
    """The body without those `anthropic_beta` flags (None: without the array)."""
    rewritten = dict(body)
    betas = rewritten.get("anthropic_beta")
    if names is None or not isinstance(betas, list):
        rewritten.pop("anthropic_beta", None)
        return rewritten
    dropped = set(names)
    kept = [flag for flag in betas if flag not in dropped]
    if kept:
        rewritten["anthropic_beta"] = kept
    else:
        rewritten.pop("anthropic_beta", None)
    return rewritten


def without_fields(body: Mapping[str, Any],
                   paths: Iterable[FieldPath]) -> dict[str, Any] | None:
    """The body without the fields at `paths` (a deep copy where a nested one goes); None when
    a path is not in the body, so the refusal cannot be mended by dropping it."""
    rewritten: dict[str, Any] = dict(body)
    for path in paths:
        if not path or not _drop(rewritten, path):
            return None
    return rewritten


def _drop(body: dict[str, Any], path: FieldPath) -> bool:
    head = path[0]
    if len(path) == 1:
        if isinstance(head, str) and head in body:
            del body[head]
            return True
        return False
    if not isinstance(head, str) or head not in body:
        return False
    body[head] = child = copy.deepcopy(body[head])
    node: Any = child
    for step in path[1:-1]:
        if isinstance(node, dict) and isinstance(step, str) and step in node:
            node = node[step]
        elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            node = node[step]
        else:
            return False
    last = path[-1]
    if isinstance(node, dict) and isinstance(last, str) and last in node:
        del node[last]
        return True
    return False


def field_pattern(path: FieldPath) -> FieldPattern:
    """The place of a refused field in any request: `tools.11.defer_loading` is refused in
    every tool, so its index becomes "*"."""
    return tuple(ANY if isinstance(step, int) else step for step in path)


def pattern_name(pattern: FieldPattern) -> str:
    return ".".join(pattern)


def without_patterns(body: Mapping[str, Any], patterns: Iterable[FieldPattern]
                     ) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The body without the fields at `patterns` (copied where something goes, shared
    elsewhere), and the names of the patterns that removed something. A step the body does not
    have is passed over when more follow: in `tools.11.custom.defer_loading` the validator
    names the tool's kind (`custom`), which is no key of the tool."""
    rewritten: Any = body if isinstance(body, dict) else dict(body)
    gone: list[str] = []
    for pattern in patterns:
        rewritten, dropped = _drop_pattern(rewritten, pattern)
        if dropped:
            gone.append(pattern_name(pattern))
    return (rewritten if rewritten is not body else dict(body)), tuple(gone)


def _drop_pattern(node: Any, pattern: FieldPattern) -> tuple[Any, bool]:
    if not pattern:
        return node, False
    head, rest = pattern[0], pattern[1:]
    if isinstance(node, list):
        if head != ANY:
            return node, False
        items, changed = list(node), False
        for index, item in enumerate(node):
            new, dropped = _drop_pattern(item, rest)
            if dropped:
                items[index], changed = new, True
        return (items if changed else node), changed
    if not isinstance(node, dict) or head == ANY:
        return node, False
    if head in node:
        if not rest:
            return {key: value for key, value in node.items() if key != head}, True
        new, dropped = _drop_pattern(node[head], rest)
        return ({**node, head: new} if dropped else node), dropped
    return _drop_pattern(node, rest) if rest else (node, False)
