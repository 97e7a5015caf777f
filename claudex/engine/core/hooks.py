"""The request lifecycle as hooks, and the addons that implement them (DESIGN.md part 2,
"Features as addons on one request lifecycle").

The forwarding core knows nothing of statistics, latency windows, tokens, the journal, events,
quota windows or traces. It keeps one record per request (`Flow`) and, at six points of its
life, calls the addons that implement the hook for that point:

``request_started(flow)``
    the engine took the request (its id is set; nothing was tried yet).
``attempt_sent(flow, rt, exchange)``
    a try at provider `rt` is going out now (`exchange`: how it is expressed there).
``upstream_headers(flow, rt, status, headers)``
    the provider's answer headers arrived (any status; `headers` are aiohttp's raw headers,
    a sequence of (bytes, bytes)). Read them here, before the body is relayed.
``attempt_ended(flow, rt, attempt, rule)``
    one attempt at `rt` is over, and `rule` (engine/core/policy.py) is what its outcome does;
    a skip (breaker open, cooling down...) ends with `rule` None and was never sent.

The served attempt of a whole answer (a 2xx read whole, the client's answer) tells its
``upstream_headers`` and ``attempt_ended`` later: after the client has the body, just before
``request_ended`` (`Flow.later`, run by `Forwarder.finish`). The breaker, the gate and the
trail are settled at once; only what observes waits, so observing adds nothing to the
client's latency. Every other attempt (a failure, a retry, a stream's) tells them as they
happen, since what follows may read what they kept.
``stream_committed(flow, rt)``
    a stream's first content arrived from `rt`: from here on nothing is retried.
``request_ended(flow)``
    the client has its whole answer (a stream's last byte, or the client left; a whole answer's
    body is sent before this runs, engine/core/failover.py `Forwarder.answer`), or the request
    failed everywhere: `flow.result`, `flow.usage` and `flow.ms` are final.

An addon is any object with some of these methods. `Hooks` collects, per hook, the bound
methods of the addons that define it, once, when the addons are set; the core calls
``for hook in hooks.request_ended: hook(flow)``, so a hook no addon implements costs one empty
loop, and nothing is built for it. Decisions stay in the core (the breaker, the failure policy,
the chain): a hook observes, it never changes where a request goes.

An addon must not raise; one that does is logged (once per addon and hook, `addon_failed`) and
the request goes on unaffected.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

from claudex.engine.core.request import Attempt, Trail

if TYPE_CHECKING:
    from claudex.engine.core.request import ForwardResult, ProxyRequest
    from claudex.engine.core.usage import Usage

log = logging.getLogger("claudex.engine")

HOOK_NAMES: Final = ("request_started", "attempt_sent", "upstream_headers", "attempt_ended",
                     "stream_committed", "request_ended")


class Flow:
    """One request's record, from the moment the engine takes it to its last byte.

    Slots, not a dataclass: one is made per request, and its fields are written as the request
    goes (the trail grows, the result and usage come at the end)."""

    __slots__ = ("addressed", "all_failed", "cost_basis", "cost_usd", "data", "failed_over",
                 "later", "ms", "req", "request_id", "result", "started", "started_wall",
                 "trail", "usage")

    def __init__(self, req: ProxyRequest, started: float, started_wall: float) -> None:
        self.req = req
        self.request_id = req.request_id
        self.started = started            # the engine's monotonic clock
        self.started_wall = started_wall  # epoch seconds, for what is kept across restarts
        self.addressed: str | None = None  # the profile the request addressed, once known
        self.trail = Trail()               # every attempt and skip, in order
        self.failed_over = False           # served, after another provider failed or was skipped
        self.all_failed = False            # no provider of the chain could serve it
        self.result: ForwardResult | None = None
        self.usage: Usage | None = None    # the tokens the answer reported, when it did
        self.ms = 0.0                      # time to the answer (a stream's: to its commit)
        # What the usage cost at API prices (engine/addons/cost.py; None: unpriced or no usage)
        # and whether that is a subscription's API-equivalent.
        self.cost_usd: float | None = None
        self.cost_basis: str | None = None
        # What addons keep about this request between their hooks, by addon name; None until
        # one needs it (most requests never allocate it).
        self.data: dict[str, Any] | None = None
        # Hooks of the served attempt of a whole answer, told at `Forwarder.finish`, after the
        # client has the body: (the hook's methods, *their arguments), in order; None when
        # there are none.
        self.later: list[tuple[Any, ...]] | None = None

    @property
    def attempts(self) -> list[Attempt]:
        return self.trail.attempts

    def addon_data(self, name: str) -> dict[str, Any]:
        """`name`'s own place on this flow, made on first use."""
        if self.data is None:
            self.data = {}
        place = self.data.get(name)
        if place is None:
            place = self.data[name] = {}
        return place


Hook = Callable[..., None]


class Hooks:
    """Per hook, the addons' methods that implement it, in the order the addons were given."""

    request_started: tuple[Hook, ...]
    attempt_sent: tuple[Hook, ...]
    upstream_headers: tuple[Hook, ...]
    attempt_ended: tuple[Hook, ...]
    stream_committed: tuple[Hook, ...]
    request_ended: tuple[Hook, ...]

    def __init__(self, addons: Iterable[object] = ()) -> None:
        self.addons: tuple[object, ...] = ()
        self.set(addons)

    def set(self, addons: Iterable[object]) -> None:
        self.addons = tuple(addons)
        for name in HOOK_NAMES:
            setattr(self, name, tuple(getattr(addon, name) for addon in self.addons
                                      if callable(getattr(addon, name, None))))

    def named(self, name: str) -> object | None:
        """The addon called `name` (its `name` attribute), if one is set."""
        for addon in self.addons:
            if getattr(addon, "name", None) == name:
                return addon
        return None


_told: set[str] = set()


def addon_failed(hook: Hook) -> None:
    """An addon's hook raised: logged once per addon and hook (the request goes on). Called
    from the core's `except` around each hook call — Python's `try` costs nothing until
    something is raised, so the guard is free on the hot path."""
    label = getattr(hook, "__qualname__", repr(hook))
    if label not in _told:
        _told.add(label)
        log.exception("addon hook %s failed (the request goes on; told once)", label)


def call_each(hooks: tuple[Hook, ...], *args: Any) -> None:
    """Call every hook with `args`, each guarded (for the hooks off the hottest path; the
    forwarding loop inlines the same loop)."""
    for hook in hooks:
        try:
            hook(*args)
        except Exception:
            addon_failed(hook)


def addon_names(hooks: Hooks) -> Sequence[str]:
    return [str(getattr(a, "name", type(a).__name__)) for a in hooks.addons]
