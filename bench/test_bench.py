"""Unit tests for the benchmark's own parsing and arithmetic (run: pytest bench/test_bench.py).

The measurements themselves need real processes and a quiet machine, so they are not tests;
what can silently go wrong in code (framing, report parsing, medians, verdicts) is checked here.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench import report, wrk
from bench.httpclient import _Dechunker
from bench.measure import paired_extra_ms
from bench.profile import summarize
from bench.stats import merge_runs, percentile, summary_ms


def _chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


@pytest.mark.parametrize("step", [1, 2, 3, 7, 1000])
def test_dechunker_reassembles_a_body_fed_in_any_slices(step: int) -> None:
    wire = _chunked(b"event: a\n\n", b"data: 12345\n", b"\n") + b"HTTP/1.1 200 OK\r\n"
    decoder = _Dechunker()
    body = b""
    for start in range(0, len(wire), step):
        body += decoder.feed(wire[start:start + step])
    assert decoder.done
    assert body == b"event: a\n\ndata: 12345\n\n"
    assert decoder.pending.endswith(b"HTTP/1.1 200 OK\r\n")  # the next response is kept


def test_dechunker_is_not_done_before_the_final_empty_line() -> None:
    decoder = _Dechunker()
    decoder.feed(_chunked(b"x")[:-2])
    assert not decoder.done
    decoder.feed(b"\r\n")
    assert decoder.done and decoder.pending == b""


WRK_OUTPUT = """Running 5s test @ http://127.0.0.1:9000/v1/messages
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    10.20ms    2.00ms  40.00ms   90.00%
    Req/Sec     6.10k   300.00     6.50k    80.00%
  Latency Distribution
     50%    9.80ms
     75%   11.00ms
     90%   12.00ms
     99%  850.00us
  30500 requests in 5.00s, 9.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:   6100.25
Transfer/sec:      1.80MB
"""


def test_wrk_report_is_read_with_units_and_errors() -> None:
    result = wrk.parse(WRK_OUTPUT)
    assert result.rps == 6100.25
    assert result.requests == 30500
    assert result.errors == 7
    assert result.p50_ms == 9.8
    assert result.p99_ms == 0.85


def test_wrk_report_without_figures_is_an_error() -> None:
    with pytest.raises(RuntimeError):
        wrk.parse("unable to connect to 127.0.0.1:9 Connection refused")


def test_percentiles_interpolate_and_summaries_are_in_ms() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5], 99) == 5
    assert math.isnan(percentile([], 50))
    stats = summary_ms([1_000_000, 2_000_000, 3_000_000])
    assert stats["p50"] == 2.0 and stats["n"] == 3


def test_merge_runs_takes_the_median_of_every_number() -> None:
    runs = [{"a": {"p50": 1.0, "n": 10}, "label": "x"},
            {"a": {"p50": 9.0, "n": 30}, "label": "y"},
            {"a": {"p50": 2.0, "n": 20}, "label": "z"}]
    assert merge_runs(runs) == {"a": {"p50": 2.0, "n": 20}, "label": "x"}


def test_paired_extra_is_the_median_of_per_round_differences() -> None:
    samples = {"base": [100_000, 5_000_000, 100_000], "t": [150_000, 5_050_000, 160_000]}
    assert paired_extra_ms(samples, "t", "base") == 0.05


def _results(added_p50: float, ratio: float) -> dict[str, object]:
    return {
        "meta": {"quick": True, "date": "today", "cpu_count": 2, "cpu_model": "cpu",
                 "memory_gb": 1.0, "python": "3.11", "libraries": "", "claudex_commit": "abc",
                 "repetitions": 1, "placement": "", "loadavg_at_start": 0.1},
        "latency": {"ms": {"direct": {"p50": 0.1, "p95": 0.1, "p99": 0.2, "n": 5}},
                    "added_ms": {"claudex": {"p50": added_p50, "p95": 0.5, "p99": 1.0}}},
        "throughput": {"ratios": {"64": {"claudex_over_reference": ratio}}},
        "errors": {},
    }


def test_budget_verdicts_respect_the_direction_of_each_limit() -> None:
    rows = {r["line"]: r["verdict"] for r in report.evaluate(_results(0.4, 0.6))}
    assert rows["added p50 <= 0.5 ms, one client"] == "met"
    assert rows["throughput at 64 connections >= 0.7 x reference"] == "MISSED"
    assert rows["console open: added p50 <= 2 x headless"] == "not measured"
    rows = {r["line"]: r["verdict"] for r in report.evaluate(_results(0.6, 0.8))}
    assert rows["added p50 <= 0.5 ms, one client"] == "MISSED"
    assert rows["throughput at 64 connections >= 0.7 x reference"] == "met"


def test_render_survives_missing_sections() -> None:
    results = _results(0.4, 0.6)
    results["budget"] = report.evaluate(results)
    text = report.render(results)
    assert "| added p50 <= 0.5 ms, one client | 0.400 ms | met |" in text


def test_profile_summary_counts_own_and_total_time(tmp_path: Path) -> None:
    raw = tmp_path / "p.raw"
    raw.write_text("main (a.py:1);f (b.py:2) 3\nmain (a.py:1);f (b.py:3);g (c.py:9) 1\n")
    text = summarize(raw)
    assert "75.0%  f (b.py:2)" in text
    assert "100.0%  f (b.py)" in text


def test_claude_code_bodies_have_the_size_and_shape_asked_for() -> None:
    import json

    from bench.bodies import SIZES, claude_code_body, claude_code_object

    for size in SIZES.values():
        raw = claude_code_body(size)
        assert size <= len(raw) < size * 1.25 + 25_000
        assert raw == claude_code_body(size)  # deterministic
    body = claude_code_object(100_000, stream=True, text="events:3")
    assert body["stream"] is True and len(body["tools"]) == 24
    messages = body["messages"]
    assert messages[0]["content"][0]["text"] == "events:3"
    assert [m["role"] for m in messages] == ["user", "assistant"] * (len(messages) // 2) + ["user"]
    calls = [b["id"] for m in messages for b in m["content"] if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for m in messages for b in m["content"]
               if b["type"] == "tool_result"]
    assert calls == results and len(set(calls)) == len(calls) > 10
    assert json.loads(json.dumps(body)) == body


def test_render_shows_bodies_and_concurrent_streams() -> None:
    results = _results(0.4, 0.6)
    stats = {"p50": 1.0, "p95": 1.0, "p99": 2.0, "n": 5}
    results["latency"]["bodies"] = {  # type: ignore[index]
        "1MB": {"bytes": 1_000_123, "ms": {"direct": stats, "reference": stats, "claudex": stats},
                "added_ms": {"claudex": {"p50": 0.9, "p99": 1.0, "paired_p50": 0.8}}}}
    row = {"streams": 2000, "errors": 0, "event_p50_ms": 0.5, "event_p99_ms": 3.0,
           "first_content_p50_ms": 4.0, "first_content_p99_ms": 30.0, "cpu_us_per_event": 36.0,
           "core_pct_per_1000_eps": 3.6, "rss_peak_mb": 90.0}
    results["streams"] = {"seconds": 10, "rate": 20, "ramp_s": 2,
                          "runs": {"reference": {"2000": row}, "claudex": {"2000": row}},
                          "claudex_over_reference": {"2000": {"first_content_p99": 1.0,
                                                              "cpu_per_event": 1.0}}}
    results["budget"] = report.evaluate(results)
    verdicts = {r["line"]: r["verdict"] for r in results["budget"]}
    assert verdicts["1 MB Claude-Code-sized body: added p50 <= 1 ms (paired)"] == "met"
    assert verdicts["concurrent streams: errors up to 2,000 streams = 0"] == "met"
    text = report.render(results)
    assert "| 1MB (1,000,123 B) | claudex | 1.000 | 2.000 | 0.900 | 1.000 | 0.800 |" in text
    assert "| claudex | 2,000 | 0 | 0.50 | 3.00 | 4.00 | 30.00 | 36.00 | 3.60 | 90.00 |" in text


def test_the_streams_client_counts_every_delta_and_error(tmp_path: Path) -> None:
    """bench/streams_scale.py's client against the bench upstream itself: 8 paced streams."""
    import asyncio

    from bench import procs
    from bench.streams_scale import measure
    from bench.world import http_ok, messages_body
    from claudex.demo.world import free_port

    port = free_port()
    fleet = procs.Fleet(tmp_path)
    try:
        proc = fleet.start("upstream", procs.python("-m", "bench.upstream", str(port)),
                           under_test=False, port=port,
                           ready=lambda: http_ok(port, "POST", "/v1/messages", messages_body()))
        row = asyncio.run(measure(port, proc.pid, 8, 0.5))
        assert row["errors"] == 0 and row["events"] == 8 * 10
        assert 0 < row["event_p50_ms"] <= row["event_p99_ms"]
        assert 0 < row["first_content_p50_ms"] <= row["first_content_p99_ms"]
        refused = asyncio.run(measure(procs.refusing_port()[1], proc.pid, 3, 0.5))
        assert refused["errors"] == 3 and refused["events"] == 0
    finally:
        fleet.stop_all()


def test_served_instructions_reads_self_costs_and_calls_from_a_callgrind_file(
        tmp_path: Path) -> None:
    from bench.served_instructions import difference, read_profile

    text = """version: 1
positions: line
events: Ir
ob=(1) /usr/lib/libpython3.11.so.1.0
fl=(1) /src/Python-3.11.7/Python/ceval.c
fn=(1) _PyEval_EvalFrameDefault
10 100
+2 50
cob=(2) /lib/x86_64-linux-gnu/libc.so.6
cfi=(2) ???
cfn=(2) write
calls=3 0
* 900
fn=(1)
5 25
ob=(2)
fl=(2)
fn=(2)
0 30
summary: 205
"""
    short, long = tmp_path / "short", tmp_path / "long"
    short.write_text(text.replace("calls=3", "calls=1").replace("summary: 205", "summary: 5")
                     .replace("10 100", "10 0").replace("+2 50", "+2 0").replace("5 25", "5 0")
                     .replace("0 30", "0 5"))
    long.write_text(text)
    per = difference(read_profile(short), read_profile(long), 2)
    assert per.total == 100.0
    assert per.by_function[("libpython3.11.so.1.0", "_PyEval_EvalFrameDefault")] == 87.5
    assert per.by_object == {"libpython3.11.so.1.0": 87.5, "libc.so.6": 12.5}
    assert per.by_source == {"3.11.7/Python/ceval.c": 87.5}
    assert per.calls[("libc.so.6", "write")] == 1.0


def test_slowness_cost_measures_both_and_renders_its_section() -> None:
    from bench import slowness_cost

    m = slowness_cost.measure(providers=3, records=2_000, rounds=3)
    assert m["providers"] == 3 and m["samples_per_window"] == 512
    assert all(m[k] >= 0 for k in ("busy_us", "steady_us", "idle_us"))
    results = _results(0.4, 0.6)
    results["slowness"] = m
    results["budget"] = report.evaluate(results)
    text = report.render(results)
    assert "## Slowness: the latency bookkeeping and a judge round" in text
    assert "one judge round, 3 providers, both windows full (512 samples)" in text
