"""The one interface between the console and an engine.

Every screen reaches the engine through `EngineLink` only, so the same screens serve a hosted engine
and one attached over the admin API. `LocalLink` wraps an engine on the console's own loop (tests,
screenshots, the frame benchmark); `ThreadedLink` (threaded_link.py) one on its own thread, as
`claudex console` hosting and `claudex demo` run it; `HttpLink` (http_link.py) a `claudex serve`
elsewhere, through `GET /_claudex/status`, `GET /_claudex/events` and the admin POSTs.

`history()` reads the engine's journal (requests or events older than the console's tail, or
matching a search): `LocalLink` and `ThreadedLink` open the journal's file on a worker thread
(SQLite in WAL mode: a reader never blocks the writer), `HttpLink` asks `GET /_claudex/history`.

Rules for implementations: `snapshot()` and `in_flight` are instant (no I/O, no waiting),
because the console calls them on its UI loop; everything that may wait is `async`. The main
screen's refresh awaits `fresh_snapshot()` once (at most ~10 times a second), and `snapshot()`
may return what that last fetched.
"""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

from claudex.config.model import Config
from claudex.engine.engine import Engine
from claudex.engine.events import Event
from claudex.engine.history.journal import Journal
from claudex.engine.history.query import HistoryQuery, read_history
from claudex.server.serve import register_secrets


class LinkError(Exception):
    """An action could not reach the engine (an attached engine that stopped answering, or
    refused); the message is a sentence for the operator."""


HistoryKind = Literal["requests", "events"]
HISTORY_PAGE: Final = 200  # rows a scroll past the oldest asks for
FLUSH_WAIT_S: Final = 1.0  # a search waits this long for the journal to write what is pending


@dataclass(frozen=True)
class HistoryPage:
    """Rows from the journal, oldest first, shaped like `GET /_claudex/history`'s."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    problem: str | None = None  # why there is none: the journal is off, or cannot be read


@dataclass(frozen=True)
class LinkState:
    """What the console is connected to, for its header."""

    mode: Literal["hosting", "attached"]
    target: str  # host:port (the proxy's, or the engine's URL without the scheme)
    connected: bool = True
    problem: str | None = None  # why it is not connected
    lost_at: float | None = None  # wall time it stopped answering


class EngineLink(Protocol):
    def state(self) -> LinkState:
        """Hosting or attached, and whether the engine answers (instant)."""
        ...

    def snapshot(self) -> dict[str, Any]:
        """The engine's state, shaped like `GET /_claudex/status` (holds no secret); it may be
        the one `fresh_snapshot()` last fetched."""
        ...

    async def fresh_snapshot(self) -> dict[str, Any]:
        """The engine's state now (what `snapshot()` returns from then on)."""
        ...

    def subscribe(self) -> AbstractContextManager[asyncio.Queue[Event]]:
        """A queue of every event published while the context is open."""
        ...

    def recent_events(self) -> list[Event]:
        """The last non-request events, oldest first (fills the event log on start)."""
        ...

    @property
    def in_flight(self) -> int:
        """Requests the proxy is serving right now."""
        ...

    async def trip(self, name: str, seconds: float | None = None,
                   reason: str | None = None) -> bool:
        """Force `name`'s breaker open, until reset or for `seconds` (then half-open), with the
        operator's `reason`; False when there is no such profile."""
        ...

    async def reset(self, name: str) -> bool:
        """Close `name`'s breaker and clear it; False when there is no such profile."""
        ...

    async def apply_config(self, config: Config) -> None:
        """Register the config's secrets with the log redactor and swap the config in, keeping
        the state of unchanged profiles (both where the engine runs)."""
        ...

    async def check_health_now(self) -> None:
        """Probe every enabled profile once, now."""
        ...

    async def history(self, kind: HistoryKind, *, until: float | None = None,
                      limit: int = HISTORY_PAGE, text: str | None = None) -> HistoryPage:
        """The newest `limit` journal rows of `kind` at or before `until` (wall time; None:
        up to now) that match `text` (None: all), oldest first; never raises."""
        ...


class LocalLink:
    """`EngineLink` for an engine running in this process (and this event loop)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def state(self) -> LinkState:
        return hosting_state(self.engine)

    def snapshot(self) -> dict[str, Any]:
        return self.engine.snapshot()

    async def fresh_snapshot(self) -> dict[str, Any]:
        return self.snapshot()

    def subscribe(self) -> AbstractContextManager[asyncio.Queue[Event]]:
        return self.engine.events.subscribe()

    def recent_events(self) -> list[Event]:
        return list(self.engine.events.recent)

    @property
    def in_flight(self) -> int:
        return self.engine.totals.in_flight

    async def trip(self, name: str, seconds: float | None = None,
                   reason: str | None = None) -> bool:
        return self.engine.trip(name, seconds, reason)

    async def reset(self, name: str) -> bool:
        return self.engine.reset(name)

    async def apply_config(self, config: Config) -> None:
        register_secrets(config)
        self.engine.apply_config(config)

    async def check_health_now(self) -> None:
        await self.engine.check_health_now()

    async def history(self, kind: HistoryKind, *, until: float | None = None,
                      limit: int = HISTORY_PAGE, text: str | None = None) -> HistoryPage:
        return await asyncio.to_thread(read_journal, self.engine.journal, kind, until, limit,
                                       text)


def read_journal(journal: Journal | None, kind: HistoryKind, until: float | None, limit: int,
                 text: str | None) -> HistoryPage:
    """A page of the journal of an engine in this process (blocks: call it on a thread)."""
    if journal is None:
        return HistoryPage(problem="not kept by this engine ([history] enabled = false, "
                                   "or started without it)")
    if journal.problem is not None:
        return HistoryPage(problem=journal.problem)
    journal.flush(FLUSH_WAIT_S)  # what was served a moment ago is found too
    query = HistoryQuery(until=until, limit=limit, text=text or None, kind=kind)
    try:
        found = read_history(journal.path, query)
    except (sqlite3.Error, OSError) as exc:
        return HistoryPage(problem=f"{str(exc) or type(exc).__name__} ({journal.path})")
    return HistoryPage(rows=list(found.get(kind) or []))


def hosting_state(engine: Engine) -> LinkState:
    proxy = engine.config.proxy
    return LinkState("hosting", f"{proxy.host}:{proxy.port}")


class DemoHooks(Protocol):
    """What the console needs from the demo world: fault injection (a fake provider's, the
    demo's upstream proxy's) and the traffic switch.

    Present only in `claudex demo`; the demo keys are hidden otherwise.
    """

    def has_fake(self, name: str) -> bool:
        """Whether `name` is one of the demo's fake providers."""
        ...

    def inject(self, name: str, mode: str) -> str:
        """Make fake provider `name` misbehave as `mode`; returns a sentence for the operator."""
        ...

    def fault_of(self, name: str) -> str | None:
        """The fault mode currently set on `name`, or None when it is not a fake."""
        ...

    def toggle_proxy(self, key: str) -> str:
        """Key "down" or "429": take the demo's upstream proxy down (connections refused) or
        make it answer 429, or back to ok when it already is; returns a sentence."""
        ...

    def toggle_traffic(self) -> bool:
        """Start or stop the traffic generator; returns whether it now runs."""
        ...

    def traffic_text(self) -> str:
        """A few words on the traffic generator for the header (`traffic 3/s`, `traffic off`)."""
        ...
