"""The budget lines of issue 5, and bench/RESULTS.md + bench/results.json from one run's results."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NOTES = Path(__file__).with_name("NOTES.md")


@dataclass(frozen=True)
class Budget:
    line: str
    limit: float
    at_most: bool
    """True: the value must be <= limit; False: >= limit."""
    unit: str
    pick: Callable[[dict[str, Any]], float | None]


def _get(results: dict[str, Any], *path: str) -> float | None:
    node: Any = results
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return float(node) if isinstance(node, (int, float)) else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def _rss_peak(r: dict[str, Any]) -> float | None:
    values = [_get(r, "memory", "rss_after_warmup_mb", "claudex"),
              _get(r, "memory", "rss_after_mb"), _get(r, "memory", "rss_end_mb")]
    present = [v for v in values if v is not None]
    return max(present) if present else None


BUDGETS: tuple[Budget, ...] = (
    Budget("added p50 <= 0.5 ms, one client", 0.5, True, "ms",
           lambda r: _get(r, "latency", "added_ms", "claudex", "p50")),
    Budget("added p99 <= 1.5 ms, one client", 1.5, True, "ms",
           lambda r: _get(r, "latency", "added_ms", "claudex", "p99")),
    Budget("throughput at 64 connections >= 0.7 x reference", 0.7, False, "x",
           lambda r: _get(r, "throughput", "ratios", "64", "claudex_over_reference")),
    Budget("streaming added latency per event <= 0.1 ms", 0.1, True, "ms",
           lambda r: _get(r, "streaming", "added", "claudex", "per_event_ms")),
    Budget("failover, primary refusing connections: <= 2 ms extra", 2.0, True, "ms",
           lambda r: _get(r, "failover", "extra_ms", "refusing", "paired_p50")),
    Budget("skipping an open breaker: <= 0.05 ms extra", 0.05, True, "ms",
           lambda r: _get(r, "failover", "extra_ms", "tripped", "paired_p50")),
    Budget("RSS <= 80 MB headless", 80.0, True, "MB", _rss_peak),
    Budget("issue 21: throughput at 64 connections >= 0.9 x reference", 0.9, False, "x",
           lambda r: _get(r, "throughput", "ratios", "64", "claudex_over_reference")),
    Budget("issue 21: added p50 <= 1.15 x the reference's, one client", 1.15, True, "x",
           lambda r: _ratio(_get(r, "latency", "added_ms", "claudex", "p50"),
                            _get(r, "latency", "added_ms", "reference", "p50"))),
    Budget("issue 21: RSS <= 60 MB after 20,000 requests", 60.0, True, "MB",
           lambda r: _get(r, "memory", "rss_after_mb")),
    Budget("RSS growth <= 5 MB over 20,000 requests", 5.0, True, "MB",
           lambda r: _get(r, "memory", "growth_mb")),
    Budget("console open: added p50 <= 2 x headless", 2.0, True, "x",
           lambda r: _get(r, "console", "console_over_headless_p50")),
    Budget("1 MB Claude-Code-sized body: added p50 <= 1 ms (paired)", 1.0, True, "ms",
           lambda r: _get(r, "latency", "bodies", "1MB", "added_ms", "claudex", "paired_p50")),
    Budget("concurrent streams: errors up to 2,000 streams = 0", 0.0, True, "errors",
           lambda r: _stream_errors(r)),
    Budget("2,000 streams: first-content p99 <= 2 x the forwarder's", 2.0, True, "x",
           lambda r: _get(r, "streams", "claudex_over_reference", "2000", "first_content_p99")),
    Budget("hung streaming primary: first content within stream_first_byte_timeout + 1 s", 1.0,
           True, "s", lambda r: _hung_overshoot(r)),
    Budget("429 burst, 64 clients, adaptive: upstream attempts 429 <= 20 %", 0.2, True, "share",
           lambda r: _burst(r, 64, "upstream_429_share")),
    Budget("429 burst, 64 clients, adaptive: client answers 200 >= 90 %", 0.9, False, "share",
           lambda r: _burst(r, 64, "client_200_share")),
)

# The stream deadline the resilience section ran with (bench/resilience.py: --quick shortens it).
_FIRST_BYTE_S = {True: 2.0, False: 30.0}


def _hung_overshoot(r: dict[str, Any]) -> float | None:
    """Seconds past `stream_first_byte_timeout` a hung primary's request took to first content."""
    section = r.get("resilience") or {}
    for row in section.get("time_to_failover", []):
        if row.get("fault") == "hung before headers" and row.get("first_content_s") is not None:
            return float(row["first_content_s"]) - _FIRST_BYTE_S[bool(section.get("quick"))]
    return None


def _burst(r: dict[str, Any], clients: int, key: str) -> float | None:
    for row in (r.get("resilience") or {}).get("burst", []):
        if row.get("clients") == clients and row.get("adaptive") and row.get(key) is not None:
            return float(row[key])
    return None


def _stream_errors(r: dict[str, Any]) -> float | None:
    runs = r.get("streams", {}).get("runs", {}).get("claudex")
    if not runs:
        return None
    return float(sum(row.get("errors", 0) for row in runs.values()))


def evaluate(results: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for budget in BUDGETS:
        value = budget.pick(results)
        if value is None or math.isnan(value):
            verdict = "not measured"
        elif (value <= budget.limit) if budget.at_most else (value >= budget.limit):
            verdict = "met"
        else:
            verdict = "MISSED"
        rows.append({"line": budget.line, "value": value, "limit": budget.limit,
                     "unit": budget.unit, "verdict": verdict})
    return rows


# ------------------------------------------------------------------ markdown


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 3) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        lines.append("| " + " | ".join(_fmt(c, digits) for c in row) + " |")
    return "\n".join(lines) + "\n"


def _unavailable(section: dict[str, Any]) -> str:
    return f"{section.get('reason', 'not yet available')}.\n"


def _frames(section: dict[str, Any]) -> str:
    if not section.get("available"):
        return _unavailable(section).strip()
    return ", ".join(
        f"{label.replace('_', ' ')}: p50 {_fmt(section[label]['p50_ms'], 1)}, "
        f"p95 {_fmt(section[label]['p95_ms'], 1)}"
        for label in ("5_profiles", "100_profiles") if label in section)


def render(results: dict[str, Any]) -> str:
    meta = results["meta"]
    out = ["# claudex benchmark results\n",
           f"Generated by `make bench{' ARGS=--quick' if meta['quick'] else ''}` on "
           f"{meta['date']}. Do not edit by hand: re-run it.\n",
           _table(["", ""], [
               ["machine", f"{meta['cpu_count']} CPUs ({meta['cpu_model']}), "
                           f"{meta['memory_gb']} GB RAM"],
               ["Python", meta["python"]],
               ["libraries", meta["libraries"]],
               ["claudex", meta["claudex_commit"]],
               ["mode", f"{'quick' if meta['quick'] else 'full'}, medians over "
                        f"{meta['repetitions']} repetition(s) of the repeated sections"],
               ["placement", meta["placement"]],
               ["other load", f"other processes kept {meta.get('other_cores', '?')} of "
                              f"{meta['cpu_count']} cores busy on average during the run "
                              f"(1-min load average {meta.get('loadavg_at_start')} at the "
                              "start); run time "
                              f"{meta.get('duration_s', 0):.0f} s"],
           ]),
           "\n## Budget (issue 5)\n\n",
           _table(["budget line", "measured", "verdict"],
                  [[b["line"], f"{_fmt(b['value'])} {b['unit']}" if b["value"] is not None
                    else "–", b["verdict"]] for b in results["budget"]])]

    lat = results.get("latency")
    if lat:
        out.append("\n## Non-streaming latency, one keep-alive client (ms)\n\n"
                   "Round-robin over the three targets, "
                   f"{lat['ms']['direct']['n']:,} requests each after warm-up. "
                   "*added* = the target's percentile minus direct's.\n\n")
        out.append(_table(["target", "p50", "p95", "p99", "added p50", "added p95", "added p99",
                           "added p50 (paired)"],
                          [[n, s["p50"], s["p95"], s["p99"],
                            *(lat["added_ms"].get(n, {}).get(q)
                              for q in ("p50", "p95", "p99", "paired_p50"))]
                           for n, s in lat["ms"].items()]))

    if lat and lat.get("bodies"):
        out.append("\nClaude-Code-shaped bodies (a long system prompt, 24 tool schemas, the "
                   "conversation; bench/bodies.py), the same client, fewer rounds for bigger "
                   "bodies:\n\n")
        body_rows: list[list[Any]] = []
        for label, row in lat["bodies"].items():
            for name in ("direct", "reference", "claudex"):
                added = row["added_ms"].get(name, {})
                body_rows.append([f"{label} ({row['bytes']:,} B)", name, row["ms"][name]["p50"],
                             row["ms"][name]["p99"], added.get("p50"), added.get("p99"),
                             added.get("paired_p50")])
        out.append(_table(["body", "target", "p50", "p99", "added p50", "added p99",
                           "added p50 (paired)"], body_rows))

    thr = results.get("throughput")
    if thr and "wrk" in thr:
        conns = list(thr["ratios"])
        out.append(f"\n## Throughput (req/s, wrk, one thread, {thr['seconds_per_run']:g} s a run)"
                   "\n\n")
        rows: list[list[Any]] = [[n, *(row[c]["rps"] for c in conns)]
                                 for n, row in thr["wrk"].items()]
        rows.append(["claudex / reference", *(thr["ratios"][c]["claudex_over_reference"]
                                              for c in conns)])
        rows.append(["direct / claudex (upstream headroom)",
                     *(thr["ratios"][c]["direct_over_claudex"] for c in conns)])
        out.append(_table(["target", *(f"{c} conn" for c in conns)], rows, digits=2))
        out.append("\nwrk latency at 64 connections, p50 / p99 ms: " + ", ".join(
            f"{n} {_fmt(row['64']['p50_ms'])} / {_fmt(row['64']['p99_ms'])}"
            for n, row in thr["wrk"].items() if "64" in row) + ".\n")
        if thr.get("bodies"):
            first = next(iter(thr["bodies"].values()))
            conns = list(first["connections"])
            out.append(f"\nWith Claude-Code-shaped bodies (req/s, {', '.join(conns)} "
                       "connections):\n\n")
            rows = [[f"{label} ({row['bytes']:,} B)",
                     *(row["connections"][c][n]["rps"] for c in conns
                       for n in ("direct", "reference", "claudex")),
                     *(row["connections"][c]["claudex_over_reference"] for c in conns)]
                    for label, row in thr["bodies"].items()]
            out.append(_table(["body", *(f"{n} @{c}" for c in conns
                                         for n in ("direct", "reference", "claudex")),
                               *(f"claudex / reference @{c}" for c in conns)], rows, digits=2))
    elif thr:
        out.append(f"\n## Throughput\n\n{_unavailable(thr)}")

    st = results.get("streaming")
    if st:
        out.append(f"\n## Streaming, {st['events']}-event SSE stream\n\n"
                   "*per event*: each text delta carries the upstream's write time "
                   "(CLOCK_MONOTONIC); its delivery latency is arrival at the client minus that, "
                   "with deltas paced 1 ms apart. *first content*: request sent to the first "
                   "content event, whole stream sent at once (burst). *burst per event*: the "
                   "burst stream's extra total time, less the first-content overhead, per "
                   "event.\n\n")
        rows = []
        for name in ("direct", "reference", "claudex"):
            added = st["added"].get(name, {})
            rows.append([name, st["paced_event_latency_ms"][name]["p50"],
                         st["paced_event_latency_ms"][name]["p99"],
                         added.get("per_event_ms"), st["burst_first_content_ms"][name],
                         added.get("first_content_ms"), st["burst_total_ms"][name],
                         added.get("burst_per_event_ms")])
        out.append(_table(["target", "per event p50", "per event p99", "added per event",
                           "first content", "added first content", "burst total",
                           "burst added per event"], rows, digits=4))

    fo = results.get("failover")
    if fo:
        out.append("\n## Failover cost (claudex, ms)\n\n"
                   "*backup* addresses the backup profile directly; *refusing* starts at a "
                   "profile whose port refuses connections (breaker kept closed) and fails over "
                   "to the same backup; *tripped* starts at a profile whose breaker was tripped "
                   "through the admin API. *extra p50 (paired)*: the median of the per-round "
                   "differences from *backup* (each round sends one request on each path, back "
                   "to back), which cancels drifts of a busy machine.\n\n")
        out.append(_table(["path", "p50", "p95", "p99", "extra p50 (paired)", "extra p95",
                           "x-claudex-attempts"],
                          [[n, s["p50"], s["p95"], s["p99"],
                            fo["extra_ms"].get(n, {}).get("paired_p50"),
                            fo["extra_ms"].get(n, {}).get("p95"),
                            f"`{fo['attempts_header'][n]}`"]
                           for n, s in fo["ms"].items()]))

    tr = results.get("translation")
    out.append("\n## Translation (Anthropic client -> OpenAI-compatible provider)\n\n")
    if tr and tr.get("available"):
        out.append(_table(["path", "p50", "p95", "p99"],
                          [[n, s["p50"], s["p95"], s["p99"]] for n, s in tr["ms"].items()]))
        o = tr["translation_overhead_ms"]
        out.append(f"\nTranslation overhead over the pass-through: p50 {_fmt(o['p50'])} ms, "
                   f"p99 {_fmt(o['p99'])} ms.\n")
    else:
        out.append(_unavailable(tr or {}))

    mem = results.get("memory")
    if mem:
        warm = mem["rss_after_warmup_mb"]
        out.append("\n## Memory (VmRSS, MB)\n\n")
        out.append(_table(["", "claudex", "reference"], [
            ["after warm-up", warm["claudex"], warm["reference"]],
            [f"before the {mem['requests']:,}-request run", mem["rss_before_mb"], None],
            [f"after it (growth {_fmt(mem['growth_mb'], 2)} MB)", mem["rss_after_mb"], None],
            ["at the end of the run", mem.get("rss_end_mb"), mem.get("reference_end_mb")],
        ], digits=1))

    sc = results.get("scale")
    if sc:
        hr = sc["health_round"]
        out.append(f"\n## Scale: {sc['profiles']} profiles\n\n")
        rows = [
            ["GET /_claudex/status p50 / p99 (ms)",
             f"{_fmt(sc['status_ms']['p50'])} / {_fmt(sc['status_ms']['p99'])} "
             f"({sc['status_bytes']:,} bytes)"],
            ["health round, in-process Engine (ms)",
             f"median {_fmt(hr['median_ms'], 1)}, cold {_fmt(hr['cold_ms'], 1)} "
             f"(colours {hr['colors']})"],
            ["hot path p50, 5 vs 100 profiles (ms)",
             f"{_fmt(sc['hot_path_ms']['5_profiles']['p50'])} vs "
             f"{_fmt(sc['hot_path_ms']['100_profiles']['p50'])}"],
            ["RSS with 100 profiles (MB)", _fmt(sc["rss_mb"], 1)],
            ["console frame time, headless (ms)", _frames(sc["console_frame"])],
        ]
        out.append(_table(["", ""], rows))

    out.append(_streams(results.get("streams")))

    con = results.get("console")
    out.append(_addons(results.get("addons")))
    out.append(_clouds(results.get("clouds")))
    out.append(_network(results.get("network")))
    out.append("\n## Console open (proxy hosted by the console, in-process)\n\n")
    if con and con.get("available"):
        out.append(_table(["target", "p50", "p99", "added p50", "added p99"],
                          [[n, s["p50"], s["p99"], con["added_ms"].get(n, {}).get("p50"),
                            con["added_ms"].get(n, {}).get("p99")]
                           for n, s in con["ms"].items()]))
        out.append(f"\nConsole added p50 / headless added p50: "
                   f"{_fmt(con['console_over_headless_p50'], 2)}.\n")
    else:
        out.append(_unavailable(con or {}))

    out.append(_resilience(results.get("resilience")))
    out.append(_traces(results.get("traces")))
    out.append(_pools(results.get("pools")))
    out.append(_seed(results.get("seed")))
    out.append(_slowness(results.get("slowness")))

    if results.get("errors"):
        out.append("\n## Sections that failed\n\n")
        out.extend(f"- {name}: {message}\n" for name, message in results["errors"].items())

    if NOTES.exists():
        out.append("\n---\n\n" + NOTES.read_text())
    return "".join(out)


def _addons(section: dict[str, Any] | None) -> str:
    if not section:
        return ""
    out = ["\n## claudex's own work per request, in-process (bench/request_cost.py)\n\n"
           "Non-streamed requests through the server's ASGI app to a transport that answers "
           "from memory (no sockets), history on: CPU µs per request (the journal's writer "
           "thread included), claudex's own function calls per request (what "
           "tests/test_call_budget.py holds), and each addon's cost, measured by taking it out "
           "of the hooks: µs (the median of alternating runs; a few µs either way is noise) "
           "and the calls it makes (exact; the journal is an event sink, not counted there: "
           "its row is built in its writer thread).\n\n"]
    labels = [k for k in ("pass-through", "translated") if k in section]
    names = sorted({n for k in labels for n in section[k]["addons_us"]})
    rows: list[list[Any]] = [["CPU per request (µs)"] + [section[k]["cpu_us"] for k in labels],
                             ["claudex calls per request"] + [section[k].get("calls")
                                                              for k in labels]]
    rows += [[f"addon `{n}`: µs / calls"] + [
        f"{_fmt(section[k]['addons_us'].get(n), 1)} / "
        f"{_fmt(section[k].get('addons_calls', {}).get(n), 1)}" for k in labels]
        for n in names]
    out.append(_table(["", *labels], rows, digits=1))
    return "".join(out)


def _clouds(section: dict[str, Any] | None) -> str:
    """What a request to Claude on Bedrock or Vertex costs (bench/cloud_cost.py)."""
    if not section or "requests" not in section:
        return ""
    from bench.cloud_cost import lines

    out = ["\n## Claude on Bedrock and Vertex: what a request costs claudex (bench/cloud_cost.py, "
           "in-process)\n\n"
           "Non-streamed requests through the ASGI app to a transport answering from memory, as "
           "in the section above, beside the DirectAnthropic pass-through (`anth`): a Bedrock "
           "profile with an API key (the body rewrite), one signed SigV4 (the rewrite and "
           "botocore's signature over the exact bytes sent) and a Vertex one (the rewrite; its "
           "token cached). CPU µs per request, what it adds, claudex's own calls per request. "
           "Then a streamed answer of 60 deltas: through the Anthropic relay as SSE, and as "
           "Bedrock's eventstream decoded in front of the same relay.\n\n```\n"]
    out.append("\n".join(lines(section)))
    out.append("\n```\n")
    return "".join(out)


def _network(section: dict[str, Any] | None) -> str:
    """A provider behind a local HTTP proxy (bench/network_cost.py)."""
    if not section or "latency_ms" not in section:
        return ""
    from bench.network_cost import lines

    out = ["\n## Behind an upstream proxy (bench/network_cost.py)\n\n"
           "The forwarder and claudex, each direct and through one local tinyproxy to the same "
           "upstream: latency one request at a time (added = p50 minus going direct to the "
           "upstream) and wrk at 64 connections. The route is resolved when the config loads; "
           "the ratios through the proxy are judged against the same floors as direct.\n\n```\n"]
    out.append("\n".join(lines(section)))
    out.append("\n```\n")
    return "".join(out)


def _seed(section: dict[str, Any] | None) -> str:
    if not section:
        return ""
    out = [f"\n## Seeding the counters at start (bench/seed_cost.py)\n\n"
           f"A journal of {section['rows']:,} request rows over one day (a busy day): what a "
           "start reads to seed the panels' counters, best of three (engine/history/seed.py), "
           "from the rows as before the per-minute aggregates and from the aggregates "
           f"(same numbers: {'yes' if section['same'] else 'NO'}); the one-time migration "
           "of an older journal; and the writer's CPU per request without and with keeping "
           "the aggregates.\n\n"]
    out.append(_table(["", "wall s", "CPU s"], [
        ["seed from the rows (before)", section["before_s"], section["before_cpu_s"]],
        ["seed from the minutes (after)", section["after_s"], section["after_cpu_s"]],
        [f"migration, once ({section['aggregate_rows']:,} aggregate rows)",
         section["migration_s"], section["migration_cpu_s"]],
    ]))
    out.append(f"\nWriter per request: {_fmt(section['writer_us'], 1)} µs CPU without the "
               f"aggregates, {_fmt(section['writer_minutes_us'], 1)} µs with.\n")
    return "".join(out)


def _slowness(section: dict[str, Any] | None) -> str:
    """What slow is yellow costs an answer and a judge round (bench/slowness_cost.py)."""
    if not section or "busy_us" not in section:
        return ""
    from bench.slowness_cost import lines

    out = ["\n## Slowness: the latency bookkeeping and a judge round (bench/slowness_cost.py, "
           "in-process)\n\n"
           "The sample every served answer records (the watch reads those windows; it adds "
           "nothing else to an answer but the forwarding core's test of `slow.avoided`), ns "
           "per call, best of five; and one round of the slow watch (every 5 s, off the "
           "request path) over 20 providers with full windows, µs, the median of the rounds: "
           "*busy* with a new answer in every window since the last round, *steady* with "
           "rings reaching back past the five minutes, *idle* with none.\n\n```\n"]
    out.append("\n".join(lines(section)))
    out.append("\n```\n")
    return "".join(out)


def _streams(section: dict[str, Any] | None) -> str:
    if not section or "runs" not in section:
        return ""
    out = [f"\n## Concurrent streams ({section['seconds']:g} s each at {section['rate']} "
           f"events/s, started over {section['ramp_s']:g} s; bench/streams_scale.py)\n\n"
           "Each proxy alone on its core, one after the other at each count. *CPU per 1,000 "
           "ev/s*: the share of one core the proxy used for each 1,000 events a second it "
           "relayed (new streams included).\n\n"]
    rows = []
    for target, runs in section["runs"].items():
        for count, row in runs.items():
            if "skipped" in row:
                rows.append([target, int(count), row["skipped"], *([None] * 7)])
                continue
            rows.append([target, int(count), row["errors"], row["event_p50_ms"],
                         row["event_p99_ms"], row["first_content_p50_ms"],
                         row["first_content_p99_ms"], row["cpu_us_per_event"],
                         row["core_pct_per_1000_eps"], row["rss_peak_mb"]])
    rows.sort(key=lambda r: (r[1], r[0]))
    out.append(_table(["proxy", "streams", "errors", "event p50 ms", "event p99 ms",
                       "first content p50 ms", "first content p99 ms", "CPU µs / event",
                       "% core per 1,000 ev/s", "peak RSS MB"], rows, digits=2))
    ratios = section.get("claudex_over_reference") or {}
    if ratios:
        out.append("\nclaudex / forwarder, first-content p99 and CPU per event: " + ", ".join(
            f"{c} streams {_fmt(v['first_content_p99'], 2)} x / {_fmt(v['cpu_per_event'], 2)} x"
            for c, v in ratios.items()) + ".\n")
    return "".join(out)


def _resilience(section: dict[str, Any] | None) -> str:
    """Time to failover per fault, and the 429 burst with and without the adaptive limit."""
    if not section or "burst" not in section:
        return ""
    out = ["\n## Under failure (bench/resilience.py)\n\n"
           "Time to the first content of one streamed request, faulty primary, healthy backup"
           + (" (quick: stream timeouts shortened)" if section.get("quick") else
              " (default timeouts)") + ":\n\n"]
    rows = [list(r.values()) for r in section["time_to_failover"]]
    out.append(_table(list(section["time_to_failover"][0]), rows, digits=3))
    out.append(f"\n429 burst, {section['seconds']:g} s against a provider that allows 8 in "
               "flight (0.2 s each) and answers 429 beyond:\n\n")
    burst = section["burst"]
    out.append(_table(list(burst[0]), [list(r.values()) for r in burst], digits=3))
    return "".join(out) + "\n"


def _traces(section: dict[str, Any] | None) -> str:
    """Traces off and on, and the cost addon, per non-streamed request (bench/traces_cost.py)."""
    if not section or "off_us" not in section:
        return ""
    out = ["\n## Traces and prices (bench/traces_cost.py, in-process, CPU µs per request)\n\n"]
    out.append(_table(["", "µs"], [
        ["traces off", section["off_us"]],
        ["traces on, exported to an OTLP sink (the batch thread included)",
         section["exported_us"]],
        ["  added by traces", section["exported_added_us"]],
        ["  of which on the request's path (the traces addon's hooks)",
         section["traces_hooks_us"]],
        ["the cost addon (prices every answer; always on)", section["cost_addon_us"]],
        ["traces addon's hooks, called directly on a finished flow",
         section.get("traces_hooks_direct_us")],
        ["cost addon, called directly on a finished flow", section.get("cost_addon_direct_us")],
    ], digits=2))
    out.append(f"\n{section['spans_exported']:,} spans taken by the sink.\n")
    return "".join(out)


def _pools(section: dict[str, Any] | None) -> str:
    """The prompt cache through a pool of three accounts (bench/pool_cache.py)."""
    if not section or "single_account" not in section:
        return ""
    from bench.pool_cache import lines

    out = ["\n## Pools and the prompt cache (bench/pool_cache.py, in-process)\n\n```\n"]
    out.append("\n".join(lines(section)))
    out.append("\n```\n")
    return "".join(out)


def write(results: dict[str, Any], directory: Path) -> tuple[Path, Path]:
    md = directory / "RESULTS.md"
    js = directory / "results.json"
    md.write_text(render(results))
    js.write_text(json.dumps(results, indent=2, allow_nan=True) + "\n")
    return md, js
