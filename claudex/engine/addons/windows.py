"""Quota windows, per provider: what each answer's headers say of the plan's windows is kept as
the provider's latest (`ProviderRuntime.windows`, read by status, the console, `/metrics`, the
pools' balance and `reserve`) and, for the journal, on the request's flow (DESIGN.md "State that
spans requests", Windows; the parsing is claudex/providers/windows.py).

An answer without quota headers (every API key's) costs one pass over its raw headers; nothing
is built for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from claudex.engine.core.hooks import Flow
from claudex.engine.core.runtime import ProviderRuntime
from claudex.providers.windows import Window, read_windows

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


def flow_windows(flow: Flow) -> tuple[str, tuple[Window, ...]] | None:
    """The provider and the windows this request's last answer described, if any did."""
    data = flow.data
    if data is None:
        return None
    place = data.get(NAME)
    return place.get("windows") if place else None
