"""A finished request is freed when the server lets go of it, not at the collector's next pass.

A request's flow holds its result, which holds its stream; a stream that still held the flow (its
ledger, its `count` callback) after its end made every stream's objects — the upstream response,
its buffers, the trail — a reference cycle. And aiohttp's reader keeps the exception a broken
stream raised, whose traceback holds the frames that read it (and so the request). Under the
soak's load (issue 38) ~8 MB of such cycles piled up between the collector's passes, and the
RSS they left behind failed the soak's memory check.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from claudex.engine.core.hooks import Flow
from claudex.engine.core.streaming import RelayedStream
from tests.conftest import anthropic_body, build_config, eventually, profile_toml


def alive() -> int:
    """Requests whose objects are still alive: their flows and streams."""
    return sum(1 for obj in gc.get_objects() if isinstance(obj, (Flow, RelayedStream)))


@contextmanager
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.parametrize(("fault", "stream"), [
    ("ok", True), ("ok", False),
    ("500", True), ("500", False), ("down", True), ("down", False), ("429", False),
    ("cut_before_content", True),                     # broken before the commit: failed over
    ("cut", True), ("stream_error", True),           # broken after it: the client's stream ends
])
async def test_a_finished_request_is_freed_without_the_collector(
        fakes: Any, proxy_factory: Any, fault: str, stream: bool) -> None:
    f = await fakes(("primary", "anthropic"), ("backup", "openai"))
    config = build_config(profile_toml("primary", f["primary"], backups=["backup"])
                          + profile_toml("backup", f["backup"]))
    proxy = await proxy_factory(config, fakes=f)
    for warm in (True, False):  # lazy imports and first-use caches
        await proxy.messages(anthropic_body(stream=warm))
    with no_collector():
        await eventually(lambda: alive() == 0, limit_s=2.0)
        if fault != "ok":
            f["primary"].set_fault(fault, duration_s=30, retry_after=None)  # type: ignore[arg-type]
        for _ in range(3):
            resp = await proxy.messages(anthropic_body("events:5", stream=stream))
            assert resp.status_code == 200
        await eventually(lambda: alive() == 0, limit_s=2.0)
