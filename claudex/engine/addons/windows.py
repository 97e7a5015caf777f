"""Quota windows, per provider: what each answer's headers say of the plan's windows is kept as
the provider's latest (`ProviderRuntime.windows`, read by status, the console, `/metrics`, the
pools' balance and `reserve`) and, for the journal, on the request's flow (DESIGN.md "State that
spans requests", Windows; the parsing is claudex/providers/windows.py).

An answer without quota headers costs one pass over its raw headers; nothing is built for it.
One with them (a plan's, or an API key's rate limits: a dozen headers on every Anthropic
answer) costs a tuple of those headers and the time: they are read into windows only when
someone asks (`ProviderRuntime.windows`: status, the console, a pool's balance; the journal's
writer thread for the request's row), never on the request's path.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Final

from claudex.engine.core.answer_headers import KNOWN, PLAN, WINDOW, kind
from claudex.engine.core.hooks import Flow
from claudex.engine.core.runtime import ProviderRuntime
from claudex.providers.windows import Described, windows_in_event

NAME: Final = "windows"


class WindowsAddon:
    name = NAME

    def __init__(self, wall: Callable[[], float] = time.time) -> None:
        self._wall = wall  # when an answer arrived (an OpenAI reset is a duration from then)

    def upstream_headers(self, flow: Flow, rt: ProviderRuntime, status: int,
                         headers: Sequence[tuple[bytes, bytes]]) -> None:
        found = None
        plan = 0  # whether any is a plan's (the journal keeps only those: no second walk)
        known = KNOWN  # each raw name classified once (engine/core/answer_headers.py)
        for pair in headers:
            flags = (known.get(pair[0]) or kind(pair[0]))[0]
            if flags & WINDOW:
                plan |= flags & PLAN
                if found is None:
                    found = [pair]
                else:
                    found.append(pair)
        if found is None:
            return
        seen = (self._wall(), tuple(found))
        rt.window_headers = seen
        data = flow.data  # (Flow.addon_data, inlined)
        if data is None:
            data = flow.data = {}
        place = data.get(NAME)
        if place is None:
            place = data[NAME] = {}
        place["windows"] = (rt.profile.name, seen)  # (rt.name, without the property call)
        place["plan"] = bool(plan)


def windows_in_stream(flow: Flow, rt: ProviderRuntime, chunk: bytes) -> None:
    """The ChatGPT backend's `codex.rate_limits` event in a stream's chunk before its commit
    (the core calls this for that backend's streams only, and only when the chunk names it)."""
    for line in chunk.split(b"\n"):
        if line.startswith(b"data:") and b"codex.rate_limits" in line:
            try:
                event = json.loads(line[5:])
            except ValueError:
                return
            windows = windows_in_event(event) if isinstance(event, dict) else ()
            if windows:
                rt.windows = windows
                flow.addon_data(NAME)["windows"] = (rt.name, windows)
            return


def flow_windows(flow: Flow) -> tuple[str, Described] | None:
    """The provider and what this request's last answer described of its windows, if any
    did (`described_windows` reads it)."""
    data = flow.data
    if data is None:
        return None
    place = data.get(NAME)
    return place.get("windows") if place else None
