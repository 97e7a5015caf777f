"""claudex's own cost per non-streamed request, in-process and without sockets: the server's ASGI
app drives the engine, whose transport answers from memory, so neither the kernel nor a busy
machine's other processes blur what claudex itself does per request.

    python -m bench.request_cost [--requests 4000] [--profile] [--calls]

Reports, for a pass-through request (Anthropic client, Anthropic provider) and a translated one
(Anthropic client, OpenAI-compatible provider), with the default config (history on, in a
scratch directory):

- CPU µs per request (`time.process_time`, the journal's writer thread included);
- each addon's cost: the same run with that addon taken out of the engine's hooks, the
  difference (µs per request, the median of a few alternating runs);
- with `--calls`, claudex's own function calls per request (cProfile's counts, filtered to the
  claudex package: the same on every machine) — what `tests/test_call_budget.py` holds.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import pstats
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from claudex.config.loader import parse_config
from claudex.engine.core.transport import UpstreamResponse
from claudex.engine.engine import Engine
from claudex.engine.history.journal import Journal

PACKAGE = str(Path(__file__).resolve().parent.parent / "claudex")

CONFIG = """
[proxy]
default_profile = "{profile}"

[health]
enabled = false

[[profiles]]
name = "anth"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key = "sk-bench-not-a-secret-0000"

[[profiles]]
name = "chat"
provider_type = "OpenAICompatible"
base_url = "http://127.0.0.1:9/v1"
api_key = "sk-bench-not-a-secret-1111"
default_model = "gpt-4o-mini"
"""

ANTHROPIC_ANSWER = (b'{"id":"msg_bench","type":"message","role":"assistant","model":'
                    b'"claude-sonnet-4-5","content":[{"type":"text","text":"Hello there."}],'
                    b'"stop_reason":"end_turn","stop_sequence":null,'
                    b'"usage":{"input_tokens":12,"output_tokens":4}}')
CHAT_ANSWER = (b'{"id":"chatcmpl-bench","object":"chat.completion","created":1750000000,'
               b'"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant",'
               b'"content":"Hello there."},"finish_reason":"stop"}],'
               b'"usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16}}')
# The headers a real answer carries, rate limits included (every Anthropic API answer has the
# twelve anthropic-ratelimit-* ones, docs.anthropic.com/en/api/rate-limits; OpenAI's the six
# x-ratelimit-* ones, platform.openai.com/docs/guides/rate-limits): the windows addon keeps them.
_ANSWER_HEADERS = ((b"Content-Type", b"application/json"), (b"request-id", b"req_bench"),
                   *((f"anthropic-ratelimit-{name}-{part}".encode(), value)
                     for name in ("requests", "tokens", "input-tokens", "output-tokens")
                     for part, value in (("limit", b"4000"), ("remaining", b"3999"),
                                         ("reset", b"2026-12-02T02:00:00Z"))))
_CHAT_HEADERS = ((b"Content-Type", b"application/json"), (b"x-request-id", b"req_bench"),
                 *((f"x-ratelimit-{part}-{name}".encode(), value)
                   for name in ("requests", "tokens")
                   for part, value in (("limit", b"5000"), ("remaining", b"4999"),
                                       ("reset", b"12ms"))))

RAW = (b'{"model":"claude-sonnet-4-5","max_tokens":256,'
       b'"messages":[{"role":"user","content":"hi"}]}')
HEADERS = {"host": "127.0.0.1:13456", "user-agent": "claude-cli/2.0.0", "x-app": "cli",
           "content-type": "application/json", "anthropic-version": "2023-06-01",
           "anthropic-beta": "claude-code-20250219", "x-api-key": "sk-client-0000",
           "accept": "application/json", "content-length": str(len(RAW))}


class _Answer:
    def __init__(self, body: bytes, headers: Sequence[tuple[bytes, bytes]]) -> None:
        self._body = body
        self._headers = headers

    @property
    def status(self) -> int:
        return 200

    @property
    def headers(self) -> Mapping[str, str]:
        return {"content-type": "application/json"}

    @property
    def raw_headers(self) -> Sequence[tuple[bytes, bytes]]:
        return self._headers

    async def read(self) -> bytes:
        return self._body

    def chunks(self) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        pass


class _Memory:
    """A transport that answers every request at once, from memory."""

    async def send(self, provider: str, method: str, url: str, headers: Mapping[str, str],
                   body: bytes | None, *, connect_timeout: float,
                   read_timeout: float | None) -> UpstreamResponse:
        if provider == "anth":
            return _Answer(ANTHROPIC_ANSWER, _ANSWER_HEADERS)
        return _Answer(CHAT_ANSWER, _CHAT_HEADERS)

    async def close(self) -> None:
        pass


Run = Callable[[int], Awaitable[None]]


def engine_for(profile: str, state: Path) -> Engine:
    """The default config's engine (history on, its journal in `state`) on `profile`."""
    config = parse_config(CONFIG.format(profile=profile), "bench.toml", env={})
    journal = Journal(state / f"history-{profile}.sqlite3")
    return Engine(config, transport=_Memory(), journal=journal)


def runner(engine: Engine, *, flush: bool = True) -> Run:
    """`count` non-streamed requests through the server's ASGI app, as uvicorn calls it;
    `flush`: then wait for the journal to write their rows (its thread's CPU is theirs)."""
    from claudex.server.app import create_app

    app = create_app(engine, manage_engine=False)
    scope = {"type": "http", "method": "POST", "path": "/v1/messages", "query_string": b"",
             "headers": [(k.encode(), v.encode()) for k, v in HEADERS.items()],
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 13456)}
    request = {"type": "http.request", "body": RAW, "more_body": False}
    statuses: list[int] = []

    async def receive() -> MutableMapping[str, Any]:
        return request

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    async def run(count: int) -> None:
        for _ in range(count):
            await app(dict(scope), receive, send)
        if flush and engine.journal is not None:  # the rows written inside the measured run
            engine.journal.flush()
        if any(s != 200 for s in statuses):
            raise RuntimeError(f"a bench request was not answered 200: {set(statuses)}")
        statuses.clear()

    return run


async def cpu_us(run: Run, count: int) -> float:
    gc.collect()
    started = time.process_time()
    await run(count)
    return (time.process_time() - started) / count * 1e6


def claudex_calls(run: Run, count: int) -> tuple[float, Counter[str]]:
    """claudex's own function calls per request (cProfile, filtered to the package), and the
    count per function (`file:function`) over the `count` requests."""
    prof = cProfile.Profile()
    loop = asyncio.get_event_loop()
    prof.enable()
    loop.run_until_complete(run(count))
    prof.disable()
    stats = pstats.Stats(prof)
    per: Counter[str] = Counter()
    for (filename, _line, func), (_cc, calls, *_rest) in stats.stats.items():  # type: ignore[attr-defined]
        if filename.startswith(PACKAGE):
            per[f"{Path(filename).relative_to(PACKAGE).as_posix()}:{func}"] += calls
    return sum(per.values()) / count, per


async def addon_costs(engine: Engine, run: Run, count: int, reps: int) -> dict[str, float]:
    """µs per request each addon costs: runs with and without it, alternating, the median of
    the differences."""
    everything = list(engine.hooks.addons)
    costs: dict[str, float] = {}
    for addon in everything:
        name = str(getattr(addon, "name", type(addon).__name__))
        diffs = []
        for _ in range(reps):
            engine.hooks.set(everything)
            on = await cpu_us(run, count)
            engine.hooks.set([a for a in everything if a is not addon])
            off = await cpu_us(run, count)
            diffs.append(on - off)
        engine.hooks.set(everything)
        costs[name] = statistics.median(diffs)
    if engine.journal is not None:  # history: an event-bus sink beside the addons
        sink, diffs = engine.journal.record, []
        for _ in range(reps):
            on = await cpu_us(run, count)
            engine.events.sinks.remove(sink)
            off = await cpu_us(run, count)
            engine.events.sinks.append(sink)
            diffs.append(on - off)
        costs["journal (history)"] = statistics.median(diffs)
    return costs


async def measure(count: int, profile: bool, reps: int = 3) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="claudex-bench-") as state:
        for label, name in (("pass-through", "anth"), ("translated", "chat")):
            engine = engine_for(name, Path(state))
            await engine.start(health=False)
            try:
                run = runner(engine)
                await run(500)  # warm-up
                per = min([await cpu_us(run, count) for _ in range(reps)])
                out[label] = {"cpu_us": round(per, 1),
                              "addons_us": {k: round(v, 2) for k, v in
                                            (await addon_costs(engine, run, count // 8,
                                                               15)).items()}}
                if profile:
                    prof = cProfile.Profile()
                    prof.enable()
                    await run(count)
                    prof.disable()
                    text = io.StringIO()
                    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(35)
                    out[label]["profile"] = text.getvalue()
            finally:
                await engine.close()
    return out


def calls_per_request(count: int = 200, by_addon: dict[str, dict[str, float]] | None = None
                      ) -> dict[str, tuple[float, Counter[str]]]:
    """For the call budget (tests/test_call_budget.py): claudex's own calls per pass-through
    and per translated request, after a warm-up, on a fresh event loop."""
    out: dict[str, tuple[float, Counter[str]]] = {}
    with tempfile.TemporaryDirectory(prefix="claudex-calls-") as state:
        for label, name in (("pass-through", "anth"), ("translated", "chat")):
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                engine = engine_for(name, Path(state))
                loop.run_until_complete(engine.start(health=False))
                if engine.seeding is not None:  # reading the journal: done before counting
                    loop.run_until_complete(engine.seeding)
                run = runner(engine, flush=False)
                loop.run_until_complete(run(50))  # warm-up: caches filled, first-use paths run
                out[label] = claudex_calls(run, count)
                if by_addon is not None:  # each addon's calls: the count without it, less
                    everything = list(engine.hooks.addons)
                    for addon in everything:
                        engine.hooks.set([a for a in everything if a is not addon])
                        without, _ = claudex_calls(run, count)
                        by_addon.setdefault(label, {})[str(getattr(addon, "name", addon))] = \
                            out[label][0] - without
                    engine.hooks.set(everything)
                loop.run_until_complete(engine.close())
            finally:
                asyncio.set_event_loop(None)
                loop.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.request_cost")
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", action="store_true",
                        help="print the figures as one JSON line (make bench reads it)")
    parser.add_argument("--calls", action="store_true",
                        help="claudex's own function calls per request, the top 25 functions")
    args = parser.parse_args(argv)
    if args.calls:
        for label, (per, by_function) in calls_per_request().items():
            print(f"{label}: {per:.1f} claudex calls per request")
            for func, n in by_function.most_common(25):
                print(f"    {n / 200:6.2f}  {func}")
        return 0
    import uvloop

    result = uvloop.run(measure(args.requests, args.profile))
    if args.json:
        import json

        addon_calls: dict[str, dict[str, float]] = {}
        calls = calls_per_request(by_addon=addon_calls)
        for label, (per, _by) in calls.items():
            result[label]["calls"] = per
            result[label]["addons_calls"] = addon_calls.get(label, {})
        print(json.dumps(result))
        return 0
    for label, figures in result.items():
        print(f"{label}: {figures['cpu_us']} µs CPU per request")
        for name, us in figures["addons_us"].items():
            print(f"    addon {name:<10} {us:7.2f} µs")
        if "profile" in figures:
            print(figures["profile"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
