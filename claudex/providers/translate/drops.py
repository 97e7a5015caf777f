"""Collects what a translation had to leave out, so the caller can list it in one debug line."""

from __future__ import annotations


class Drops:
    """An ordered set of dropped field or content names, e.g. "top_k", "content.thinking"."""

    def __init__(self) -> None:
        self._names: dict[str, None] = {}

    def add(self, name: str) -> None:
        self._names.setdefault(name, None)

    def __bool__(self) -> bool:
        return bool(self._names)

    def as_tuple(self) -> tuple[str, ...]:
        return tuple(self._names)
