"""Messages the console's widgets and workers exchange (dataclasses, as in harlequin; Textual's
`Message.__post_init__` initialises the base, so no `__init__` is written by hand).

`EngineActivity` is how the event pump says "something happened": it carries nothing and any
pending one replaces the next (`can_replace`), so a burst of a thousand requests queues a single
message; the main screen then refreshes at most ~10 times a second whatever the request rate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.message import Message


@dataclass(eq=False)
class EngineActivity(Message):
    """New engine events are waiting in the screen's inbox."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, EngineActivity)


@dataclass(eq=False)
class ProfileSelected(Message):
    """The operator picked a profile (clicked its panel)."""

    name: str


@dataclass(eq=False)
class ProxySelected(Message):
    """The operator picked an upstream proxy (clicked its row in the proxies' strip)."""

    name: str


@dataclass(eq=False)
class ConfigReloaded(Message):
    """A changed config file was applied (posted by the config watcher or after an edit)."""

    profiles: int


@dataclass(eq=False)
class ConfigRejected(Message):
    """A changed config file has problems; the previous config stays live."""

    path: str
    problems: list[str] = field(default_factory=list)
