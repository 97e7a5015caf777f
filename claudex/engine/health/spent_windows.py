"""Ending a plan's spent window before the reset the provider stated (issue 30).

A plan whose window is spent (core/retries.py `mark_spent`) is skipped until its reset, which
can be days away for a 7-day window. Two things end the mark early, because each means claudex
no longer knows the plan is spent:

- the operator's reset (`claudex reset`, console `r`, the admin API): they bought extra usage,
  logged in elsewhere, or the provider lifted the limit. It ends the breaker, the cooldown and
  the window together, and the event names what it ended;
- a new credential for the profile, put there by something other than this engine: a fresh
  login rewrote its credentials file, or its token_command prints another token. It may be
  another account, with a window of its own. This engine's own OAuth refresh keeps the same
  account and changes nothing here (the file then holds the token the engine already uses).

Either way, if the plan is still spent its next answer marks it again: one request, no retry
(core/retries.py `after_reset`). A change the engine cannot tell from a login (another program
on this machine refreshing the same file, Claude Code itself or a fleet peer) costs exactly
that one request.

The credential check runs off the request path, every `CHECK_S`, and only for plans that are
spent right now: a `stat` of the file (read only when it changed), or a token_command re-run at
most once a minute (credentials/cache.py `changed_outside`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from claudex.engine.breaker import BreakerState
from claudex.engine.core.runtime import ProviderRuntime
from claudex.engine.events import Event
from claudex.providers.windows import window_words

log = logging.getLogger("claudex.engine")

CHECK_S = 5.0  # how often spent plans' credentials are looked at


def end_spent(rt: ProviderRuntime, wall: float) -> str | None:
    """Forget `rt`'s spent mark. The words for what ended (`5-hour window no longer treated
    as spent`), or None when the window was not spent at `wall`."""
    spent = rt.window_spent(wall)
    name = rt.window_spent_name
    rt.window_spent_until, rt.window_spent_name = 0.0, None
    if not spent:
        return None
    return f"{window_words(name) if name else 'plan window'} no longer treated as spent"


def operator_reset(rt: ProviderRuntime, now: float, wall: float) -> list[str]:
    """An operator's reset of `rt`: the breaker closed and cleared, the cooldown and a spent
    window ended, an auth failure forgotten. What it ended, in words, in that order."""
    ended: list[str] = []
    if rt.breaker.state is not BreakerState.CLOSED:
        ended.append("breaker closed")
    rt.breaker.reset()
    if rt.cooldown_until > now:
        ended.append("cooldown ended")
    rt.cooldown_until = 0.0
    rt.health.auth_failing = False
    rt.health.untrusted = None
    window = end_spent(rt, wall)
    if window is not None:
        ended.append(window)
    return ended


class CredentialWatch:
    """Ends the spent mark of a plan whose credential changed outside this engine."""

    def __init__(self, runtimes: Callable[[], Mapping[str, ProviderRuntime]],
                 wall: Callable[[], float], publish: Callable[[Event], None]) -> None:
        self._runtimes = runtimes
        self._wall = wall
        self._publish = publish

    async def check(self) -> None:
        """One round: every plan spent now whose source holds a credential it did not."""
        for name, rt in list(self._runtimes().items()):
            if not rt.window_spent(self._wall()):
                continue
            why = await rt.credentials.changed_outside()
            if why is None or not rt.window_spent(self._wall()):
                continue
            words = end_spent(rt, self._wall())
            message = f"{name}: {why} ({words})"
            log.info("%s", message)
            self._publish(Event("window", message, name, {"ended": "credentials"}))

    async def run_forever(self, sleep: Callable[[float], Awaitable[object]],
                          every: float = CHECK_S) -> None:
        while True:
            await sleep(every)
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception:  # a round that failed is logged; the next one runs
                log.exception("looking at spent plans' credentials failed")
