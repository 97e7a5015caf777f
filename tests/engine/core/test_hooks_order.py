"""When the lifecycle hooks are told (engine/core/hooks.py): every attempt that does not serve
the client tells `upstream_headers` and `attempt_ended` as it happens (what follows may read
what an addon kept of it); the served attempt of a whole answer tells them after the client's
answer is made, just before `request_ended` — so observing it adds nothing to the client's
latency — and a stream's served attempt as it happens. Real sockets, the fake providers."""

from __future__ import annotations

from typing import Any

from tests.conftest import anthropic_body, build_config, eventually, profile_toml


class Recorder:
    """Each hook call as (hook, provider, whether the request's answer existed by then)."""

    name = "recorder"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, bool]] = []

    def upstream_headers(self, flow: Any, rt: Any, status: int, headers: Any) -> None:
        self.calls.append(("upstream_headers", rt.name, flow.result is not None))

    def attempt_ended(self, flow: Any, rt: Any, attempt: Any, rule: Any) -> None:
        self.calls.append(("attempt_ended", rt.name, flow.result is not None))

    def request_ended(self, flow: Any) -> None:
        self.calls.append(("request_ended", flow.result.provider, flow.result is not None))


async def two(fakes: Any, proxy_factory: Any) -> tuple[Any, Recorder]:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    proxy = await proxy_factory(build_config(
        profile_toml("primary", f["primary"], backups=["backup"])
        + profile_toml("backup", f["backup"])), fakes=f)
    recorder = Recorder()
    proxy.engine.hooks.set([*proxy.engine.hooks.addons, recorder])
    return proxy, recorder


async def test_a_whole_answers_served_attempt_is_told_after_the_answer_is_made(
    fakes: Any, proxy_factory: Any,
) -> None:
    proxy, recorder = await two(fakes, proxy_factory)
    proxy.fakes["primary"].set_fault("500")
    resp = await proxy.messages(anthropic_body())
    assert resp.status_code == 200 and resp.headers["x-claudex-provider"] == "backup"
    await eventually(lambda: recorder.calls and recorder.calls[-1][0] == "request_ended")
    # The primary's 500 (retried, then failed over): told at once, before any answer existed;
    # the backup's 200: told once the answer was made, in order, before the request's end.
    primary = [c for c in recorder.calls if c[1] == "primary"]
    assert primary and all(answered is False for _hook, _p, answered in primary)
    assert recorder.calls[-3:] == [("upstream_headers", "backup", True),
                                   ("attempt_ended", "backup", True),
                                   ("request_ended", "backup", True)]
    # What the addons kept is the same as when they were told at once.
    stats = proxy.engine.runtimes["backup"].stats
    assert stats.successes == 1 and stats.last_status == 200
    assert proxy.engine.runtimes["backup"].window_headers is not None


async def test_a_streams_served_attempt_is_told_as_it_happens(
    fakes: Any, proxy_factory: Any,
) -> None:
    proxy, recorder = await two(fakes, proxy_factory)
    resp = await proxy.messages(anthropic_body("events:3", stream=True))
    assert resp.status_code == 200
    await eventually(lambda: recorder.calls and recorder.calls[-1][0] == "request_ended")
    assert recorder.calls[0] == ("upstream_headers", "primary", False)
    assert [c[0] for c in recorder.calls] == ["upstream_headers", "attempt_ended",
                                               "request_ended"]
