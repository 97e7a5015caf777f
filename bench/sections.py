"""One function per benchmark section; each returns plain JSON-able numbers (ms, req/s, MB).

"added" figures are a target's percentile minus the same percentile going direct to the upstream.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from dataclasses import dataclass
from typing import Any

from bench import procs, sections_bodies, wrk
from bench.console import ConsoleProcess
from bench.measure import (
    BenchError,
    Target,
    paired_extra_ms,
    request_once,
    sample,
    sample_streams,
)
from bench.stats import median, percentile, summary_ms
from bench.world import (
    ANTHROPIC_HEADERS,
    World,
    chat_body,
    claudex_argv,
    main_config,
    messages_body,
)

STREAM_EVENTS = 500
PACE_US = 1000


@dataclass(frozen=True)
class Settings:
    quick: bool
    latency_n: int
    throughput_s: int
    """wrk takes whole seconds."""
    connections: tuple[int, ...]
    paced_streams: int
    burst_streams: int
    failover_n: int
    memory_requests: int
    status_n: int
    health_rounds: int
    side_n: int
    """Samples for the side rows: translation, console, the 100-profile hot path."""

    @classmethod
    def for_mode(cls, quick: bool) -> Settings:
        if quick:
            return cls(True, 600, 1, (1, 16, 64), 1, 20, 500, 20_000, 100, 2, 300)
        return cls(False, 2000, 5, (1, 16, 64), 2, 60, 2000, 20_000, 300, 5, 1000)


def _added(runs: dict[str, dict[str, float]], base: str = "direct") -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for name, stats in runs.items():
        if name != base:
            out[name] = {q: round(stats[q] - runs[base][q], 4) for q in ("p50", "p95", "p99")}
    return out


def _anthropic(port: int, path: str = "/v1/messages", body: bytes | None = None) -> Target:
    return Target(port, path, body if body is not None else messages_body(), ANTHROPIC_HEADERS)


def _three(world: World, body: bytes) -> dict[str, Target]:
    p = world.ports
    return {"direct": _anthropic(p.upstream, body=body),
            "reference": _anthropic(p.reference, body=body),
            "claudex": _anthropic(p.claudex, body=body)}


# ------------------------------------------------------------------ warm-up


def warm_up(world: World, settings: Settings, wrk_bin: str | None) -> None:
    """Load every code path once and open pooled connections before anything is measured."""
    body = messages_body()
    sample(_three(world, body), 200 if settings.quick else 500, warmup=50)
    if wrk_bin:
        for port in (world.ports.reference, world.ports.claudex):
            wrk.run(wrk_bin, port, "/v1/messages", body, connections=64, seconds=1)
    paced = messages_body(f"events:{STREAM_EVENTS}", stream=True)
    sample_streams(_three(world, paced), 1, STREAM_EVENTS)
    p = world.ports
    sample(_failover_targets(world), 100, warmup=10)
    request_once(p.claudex, "GET", "/_claudex/status")


# ------------------------------------------------------------------ latency


def latency(world: World, settings: Settings) -> dict[str, Any]:
    samples = sample(_three(world, messages_body()), settings.latency_n)
    stats = {name: summary_ms(values) for name, values in samples.items()}
    added = _added(stats)
    for name in added:
        added[name]["paired_p50"] = paired_extra_ms(samples, name, "direct")
    # Claude Code's own sizes beside the small body: 20 KB, 100 KB, 1 MB (bench/bodies.py).
    return {"ms": stats, "added_ms": added,
            "bodies": sections_bodies.latency(world, settings.latency_n)}


# ------------------------------------------------------------------ throughput


def throughput(world: World, settings: Settings, wrk_bin: str) -> dict[str, Any]:
    body = messages_body()
    targets = {"direct": world.ports.upstream, "reference": world.ports.reference,
               "claudex": world.ports.claudex}
    rows: dict[str, dict[str, Any]] = {name: {} for name in targets}
    for conns in settings.connections:
        for name, port in targets.items():
            result = wrk.run(wrk_bin, port, "/v1/messages", body, connections=conns,
                             seconds=settings.throughput_s)
            if result.errors:
                raise BenchError(f"wrk against {name} at {conns} connections: "
                                 f"{result.errors} errors of {result.requests} requests")
            rows[name][str(conns)] = result.to_json()
    ratios = {
        str(c): {
            "claudex_over_reference": round(rows["claudex"][str(c)]["rps"]
                                            / rows["reference"][str(c)]["rps"], 3),
            "direct_over_claudex": round(rows["direct"][str(c)]["rps"]
                                         / rows["claudex"][str(c)]["rps"], 2),
        }
        for c in settings.connections
    }
    out: dict[str, Any] = {"wrk": rows, "ratios": ratios, "seconds_per_run": settings.throughput_s}
    if not settings.quick:  # nine more wrk runs: the full bench only
        out["bodies"] = sections_bodies.throughput(world, wrk_bin, settings.throughput_s)
    return out


# ------------------------------------------------------------------ streaming


def streaming(world: World, settings: Settings) -> dict[str, Any]:
    paced_body = messages_body(f"events:{STREAM_EVENTS} pace_us:{PACE_US}", stream=True)
    paced = sample_streams(_three(world, paced_body), settings.paced_streams, STREAM_EVENTS)
    per_event = {
        name: {
            "p50": round(percentile([v / 1e6 for r in runs for v in r.event_latencies_ns], 50), 4),
            "p99": round(percentile([v / 1e6 for r in runs for v in r.event_latencies_ns], 99), 4),
        }
        for name, runs in paced.items()
    }
    burst_body = messages_body(f"events:{STREAM_EVENTS}", stream=True)
    burst = sample_streams(_three(world, burst_body), settings.burst_streams, STREAM_EVENTS)
    first = {name: round(median([r.first_content_ns / 1e6 for r in runs]), 4)
             for name, runs in burst.items()}
    total = {name: round(median([r.total_ns / 1e6 for r in runs]), 4)
             for name, runs in burst.items()}
    out: dict[str, Any] = {
        "events": STREAM_EVENTS,
        "paced_event_latency_ms": per_event,
        "burst_first_content_ms": first,
        "burst_total_ms": total,
        "added": {},
    }
    for name in ("reference", "claudex"):
        ttfb = first[name] - first["direct"]
        out["added"][name] = {
            "per_event_ms": round(per_event[name]["p50"] - per_event["direct"]["p50"], 4),
            "per_event_p99_ms": round(per_event[name]["p99"] - per_event["direct"]["p99"], 4),
            "first_content_ms": round(ttfb, 4),
            "burst_per_event_ms": round((total[name] - total["direct"] - ttfb) / STREAM_EVENTS,
                                        5),
        }
    return out


# ------------------------------------------------------------------ failover


def _failover_targets(world: World) -> dict[str, Target]:
    port = world.ports.claudex
    return {name: _anthropic(port, f"/proxy/{name}/v1/messages")
            for name in ("backup", "refusing", "tripped")}


def trip(port: int, name: str) -> None:
    status, body, _ = request_once(port, "POST", f"/_claudex/breakers/{name}/trip")
    if status != 200:
        raise BenchError(f"tripping {name} answered {status}: {body[:200]!r}")


def failover(world: World, settings: Settings) -> dict[str, Any]:
    targets = _failover_targets(world)
    trails: dict[str, str] = {}
    for name, target in targets.items():
        status, body, headers = request_once(target.port, "POST", target.path, target.body,
                                             target.headers)
        if status != 200:
            raise BenchError(f"failover via {name}: {status} {body[:200]!r}")
        trails[name] = headers.get(b"x-claudex-attempts", b"").decode()
    if not trails["refusing"].startswith("refusing:") or "backup" not in trails["refusing"]:
        raise BenchError(f"the refusing profile did not fail over: {trails['refusing']!r}")
    if "backup" not in trails["tripped"] or trails["tripped"].startswith("tripped:200"):
        raise BenchError(f"the tripped profile was not skipped: {trails['tripped']!r}")
    samples = sample(targets, settings.failover_n)
    stats = {name: summary_ms(values) for name, values in samples.items()}
    extra = _added(stats, base="backup")
    for name in extra:
        extra[name]["paired_p50"] = paired_extra_ms(samples, name, "backup")
    return {"ms": stats, "extra_ms": extra, "attempts_header": trails}


# ------------------------------------------------------------------ translation


def translation(world: World, settings: Settings) -> dict[str, Any]:
    p = world.ports
    translated = _anthropic(p.claudex, "/proxy/oai/v1/messages")
    status, _, headers = request_once(translated.port, "POST", translated.path,
                                         translated.body, translated.headers)
    if status != 200:
        trail = headers.get(b"x-claudex-attempts", b"").decode()
        return {"available": False,
                "reason": f"Anthropic request to an OpenAI-compatible profile answered {status}"
                          + (f" ({trail})" if trail else "")}
    openai_body = chat_body()
    targets = {
        "direct_openai": Target(p.oai, "/v1/chat/completions", openai_body, {}),
        "claudex_openai_passthrough": Target(p.claudex, "/proxy/oai/v1/chat/completions",
                                             openai_body, {}),
        "claudex_translated": translated,
    }
    samples = sample(targets, settings.side_n)
    stats = {name: summary_ms(values) for name, values in samples.items()}
    added = _added(stats, base="claudex_openai_passthrough")["claudex_translated"]
    return {"available": True, "ms": stats, "translation_overhead_ms": added}


# ------------------------------------------------------------------ memory


def rss_now(world: World) -> dict[str, float]:
    assert world.claudex is not None and world.reference is not None
    return {"claudex": round(world.claudex.rss_mb(), 1),
            "reference": round(world.reference.rss_mb(), 1)}


def _served(port: int) -> int:
    status, body, _ = request_once(port, "GET", "/_claudex/status")
    if status != 200:
        raise BenchError(f"status endpoint answered {status}")
    return int(json.loads(body)["requests"])


def memory(world: World, settings: Settings, wrk_bin: str | None,
           after_warmup: dict[str, float]) -> dict[str, Any]:
    assert world.claudex is not None
    port = world.ports.claudex
    before_count = _served(port)
    before = world.claudex.rss_mb()
    count = settings.memory_requests
    if wrk_bin:
        # wrk runs for a fixed time, so run it in one-second slices until enough were served.
        while _served(port) - before_count < count:
            wrk.run(wrk_bin, port, "/v1/messages", messages_body(), connections=16, seconds=1)
    else:
        sample({"claudex": _anthropic(port)}, count, warmup=0)
    served = _served(port) - before_count
    after = world.claudex.rss_mb()
    return {
        "rss_after_warmup_mb": after_warmup,
        "rss_before_mb": round(before, 1),
        "rss_after_mb": round(after, 1),
        "requests": served,
        "growth_mb": round(after - before, 2),
    }


# ------------------------------------------------------------------ scale


def _json_helper(world: World, module: str, *args: str) -> dict[str, Any]:
    """Run a bench helper on the proxy's core and read the JSON line it prints last."""
    test_cores, _ = procs.cpu_sets()
    proc = procs.spawn(module.rsplit(".", 1)[-1], procs.python("-m", module, *args),
                       cores=test_cores, log_dir=world.workdir, env=world.env)
    try:
        proc.popen.wait(timeout=180)
    finally:
        proc.stop()
    text = proc.log_path.read_text()
    try:
        result: dict[str, Any] = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise BenchError(f"{module} failed:\n{text[-2000:]}") from None
    return result


def health_round(world: World, rounds: int) -> dict[str, Any]:
    """An in-process Engine with 100 profiles: time whole health rounds."""
    return _json_helper(world, "bench.health_round", str(world.scale_config), str(rounds))


def console_frames(world: World, frames: int) -> dict[str, Any]:
    """The console app, headless, with 5 and with 100 profiles: time refreshes."""
    missing = _console_missing()
    if missing:
        return {"available": False, "reason": missing}
    out: dict[str, Any] = {"available": True}
    for label, config in (("5_profiles", world.main_config), ("100_profiles",
                                                              world.scale_config)):
        result = _json_helper(world, "bench.console_frame", str(config), str(frames))
        if not result.get("available"):
            return result
        out[label] = result
    return out


def scale(world: World, settings: Settings) -> dict[str, Any]:
    p = world.ports
    proc = world.start_claudex("claudex-100", world.scale_config, p.claudex_scale)
    try:
        status_target = Target(p.claudex_scale, "/_claudex/status", b"", {}, method="GET")
        status_samples = sample({"status": status_target}, settings.status_n, warmup=10)
        _, status_body, _ = request_once(p.claudex_scale, "GET", "/_claudex/status")
        hot = sample({
            "5_profiles": _anthropic(p.claudex, "/proxy/fast/v1/messages"),
            "100_profiles": _anthropic(p.claudex_scale, "/proxy/p099/v1/messages"),
        }, settings.side_n)
        rss = round(proc.rss_mb(), 1)
    finally:
        world.fleet.stop(proc)
    hot_stats = {name: summary_ms(values) for name, values in hot.items()}
    return {
        "profiles": 100,
        "status_ms": summary_ms(status_samples["status"]),
        "status_bytes": len(status_body),
        "hot_path_ms": hot_stats,
        "rss_mb": rss,
        "health_round": health_round(world, settings.health_rounds),
        "console_frame": console_frames(world, 5 if settings.quick else 20),
    }


# ------------------------------------------------------------------ console


def _console_missing() -> str | None:
    if importlib.util.find_spec("claudex.console") is None:
        return "not yet available (claudex/console is not built)"
    return None


def console(world: World, settings: Settings) -> dict[str, Any]:
    missing = _console_missing()
    if missing:
        return {"available": False, "reason": missing}
    p = world.ports
    config = world.workdir / "console.toml"
    config.write_text(main_config(p, world.refusing_port, p.claudex_console))
    test_cores, _ = procs.cpu_sets()
    env = {**os.environ, "PYTHONPATH": str(procs.ROOT), **world.env}
    count = 60 if settings.quick else 300
    body = messages_body()
    # Headless first, while the console is not running: both share the proxy's core, and the
    # console's rendering would slow the headless proxy down too.
    headless = sample({"direct": _anthropic(p.upstream, body=body),
                       "headless": _anthropic(p.claudex, body=body)}, count)
    with ConsoleProcess(claudex_argv(config, "console"), env=env, cores=test_cores,
                        log_path=world.workdir / "console.log") as app:
        if not app.wait_for_port(p.claudex_console, timeout=30.0):
            return {"available": False,
                    "reason": "`claudex console` did not serve the proxy port within 30 s: "
                              + app.output_tail()}
        time.sleep(1.0)  # let the first frames render
        opened = sample({"direct": _anthropic(p.upstream, body=body),
                         "console": _anthropic(p.claudex_console, body=body)}, count)
    stats = {"direct": summary_ms(headless["direct"]),
             "headless": summary_ms(headless["headless"]),
             "direct (console run)": summary_ms(opened["direct"]),
             "console": summary_ms(opened["console"])}
    added = {"headless": {q: round(stats["headless"][q] - stats["direct"][q], 4)
                          for q in ("p50", "p95", "p99")},
             "console": {q: round(stats["console"][q] - stats["direct (console run)"][q], 4)
                         for q in ("p50", "p95", "p99")}}
    ratio = added["console"]["p50"] / added["headless"]["p50"] if added["headless"]["p50"] else 0
    return {"available": True, "ms": stats, "added_ms": added,
            "console_over_headless_p50": round(ratio, 2)}


# ------------------------------------------------------------------ addons


def addons(world: World, settings: Settings) -> dict[str, Any]:
    """claudex's own CPU per request in-process, and each addon's share of it, measured by
    taking it out of the hooks (bench/request_cost.py, on the proxy's core)."""
    count = "1500" if settings.quick else "4000"
    return _json_helper(world, "bench.request_cost", "--json", "--requests", count)
def clouds(world: World, settings: Settings) -> dict[str, Any]:
    """What a Bedrock or Vertex request costs beside a DirectAnthropic pass-through: the body
    rewrite, SigV4, the eventstream decoder (bench/cloud_cost.py, on the proxy's core)."""
    count = "1500" if settings.quick else "4000"
    return _json_helper(world, "bench.cloud_cost", "--json", "--requests", count)


# ------------------------------------------------------------------ traces


def traces(world: World, settings: Settings) -> dict[str, Any]:
    """CPU per request with traces off, on (exported to a local OTLP sink) and the addons'
    share (bench/traces_cost.py, on the proxy's core)."""
    count = "1500" if settings.quick else "4000"
    return _json_helper(world, "bench.traces_cost", "--json", "--requests", count)
