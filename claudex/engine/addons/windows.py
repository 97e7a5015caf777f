"""Quota windows, per provider: what each answer's headers say of the plan's windows is kept as
the provider's latest (`ProviderRuntime.windows`, read by status, the console, `/metrics`, the
pools' balance and `reserve`) and, for the journal, on the request's flow (DESIGN.md "State that
spans requests", Windows; the parsing is claudex/providers/windows.py).

An answer without quota headers (every API key's) costs one pass over its raw headers; nothing
is built for it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from claudex.engine.core.hooks import Flow
from claudex.engine.core.runtime import ProviderRuntime
from claudex.providers.windows import Window, read_windows, windows_in_event

NAME: Final = "windows"
_FIRST_BYTES: Final = (b"anthropi", b"x-codex-")


class WindowsAddon:
    name = NAME

    def upstream_headers(self, flow: Flow, rt: ProviderRuntime, status: int,
                         headers: Sequence[tuple[bytes, bytes]]) -> None:
        for key, _ in headers:  # (read_windows' own test, inlined: most answers have none)
            if key[:8].lower() in _FIRST_BYTES:
                break
        else:
            return
        windows = read_windows(headers)
        if windows is not None:
            rt.windows = windows
            flow.addon_data(NAME)["windows"] = (rt.name, windows)


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


def flow_windows(flow: Flow) -> tuple[str, tuple[Window, ...]] | None:
    """The provider and the windows this request's last answer described, if any did."""
    data = flow.data
    if data is None:
        return None
    place = data.get(NAME)
    return place.get("windows") if place else None
