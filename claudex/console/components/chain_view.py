"""The selected profile's failover chain, each member with its colour and breaker state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from textual.markup import escape

from claudex.console.colors import variable
from claudex.console.components.text_line import TextLine
from claudex.console.format import duration, state_label, tripped_words


def member_text(name: str, profile: Mapping[str, Any] | None) -> str:
    if profile is None:
        return f"[dim]{escape(name)} (unknown profile)[/]"
    health = profile.get("health") or {}
    breaker = profile.get("breaker") or {}
    colour = str(health.get("color") or "green")
    state = str(breaker.get("state") or "closed")
    words = state_label(state)
    retry_in = breaker.get("retry_in_s")
    if state == "open" and isinstance(retry_in, int | float) and retry_in > 0:
        words += f" {duration(retry_in + 0.999)}"
    elif state == "forced_open" and (breaker.get("reason") or retry_in is not None):
        words = tripped_words(breaker, reason_limit=24)
    if not profile.get("enabled", True):
        words = "disabled"
    elif profile.get("problem"):
        words = "misconfigured"
    return f"[{variable(colour)}]●[/] [b]{escape(name)}[/] [dim]{escape(words)}[/]"


class ChainView(TextLine):
    """One line in a fixed-height box: a changed chain repaints it, with no layout."""

    def __init__(self, text: str = "", *, id: str | None = None) -> None:
        super().__init__(text, fixed_size=True, id=id)
        self._title: str | None = None

    def show(self, selected: str | None, profiles: Mapping[str, Mapping[str, Any]],
             pools: Sequence[Mapping[str, Any]] = ()) -> None:
        if selected is None or selected not in profiles:
            self.set_text("[dim]no profile selected[/]")
            return
        pool = next((p for p in pools if selected in [m.get("name") for m in
                                                       p.get("members") or []]), None)
        if pool is not None:  # a member: the pool's chain (its members' backups are unused)
            names = [str(m.get("name")) for m in pool.get("members") or []]
            group = " [dim]|[/] ".join(member_text(n, profiles.get(n)) for n in names)
            backups = [str(b) for b in pool.get("backup_providers") or []]
            members = "  [dim]→[/]  ".join([f"[dim]([/]{group}[dim])[/]",
                                            *(member_text(n, profiles.get(n)) for n in backups)])
            title = f"{escape(selected)} serves in pool {escape(str(pool.get('name')))}"
            if title != self._title:
                self._title = title
                self.border_title = title
            self.set_text(members)
            return
        chain = [selected, *profiles[selected].get("backup_providers", [])]
        members = "  [dim]→[/]  ".join(member_text(n, profiles.get(n)) for n in chain)
        title = f"failover chain of {escape(selected)}"
        if title != self._title:  # (setting it repaints, even to the same text)
            self._title = title
            self.border_title = title
        if len(chain) == 1:
            members += "  [dim](no backups: requests fail when it fails)[/]"
        self.set_text(members)
