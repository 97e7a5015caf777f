"""`claudex history`: the journal's requests and events as lines, oldest first.

One line per request (time, protocol, model, who served it, status, outcome, latency, the
attempt trail, tokens) and per event (time, kind, sentence), merged in time order."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from claudex.engine.secrets import SCRUBBER


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def request_line(r: Mapping[str, Any]) -> str:
    tokens = ""
    if r.get("input_tokens") is not None or r.get("output_tokens") is not None:
        tokens = f"  tokens {r.get('input_tokens') or 0} in / {r.get('output_tokens') or 0} out"
    latency = r.get("latency_ms")
    latency_text = f"{float(latency):.0f} ms" if isinstance(latency, int | float) else "-"
    stream = " stream" if r.get("stream") else ""
    return (f"{_when(float(r['time']))}  {r.get('protocol') or '-'} {r.get('model') or '-'}"
            f"{stream} -> {r.get('provider') or 'none'}  {r.get('status')} "
            f"{r.get('outcome')}  {latency_text}  [{r.get('trail') or ''}]{tokens}")


def event_line(e: Mapping[str, Any]) -> str:
    return f"{_when(float(e['time']))}  {e.get('kind') or '-':<10} {e.get('message') or ''}"


def history_lines(data: Mapping[str, Any]) -> list[str]:
    rows: list[tuple[float, str]] = []
    for r in data.get("requests") or []:
        rows.append((float(r["time"]), request_line(r)))
    for e in data.get("events") or []:
        rows.append((float(e["time"]), event_line(e)))
    rows.sort(key=lambda row: row[0])
    return [SCRUBBER.text(line) for _, line in rows]
