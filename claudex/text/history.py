"""Words for the history journal's records: `claudex history` and the console's request detail.

A request record is shaped like a journal row (`GET /_claudex/history`'s `requests`): the
console turns a live `request` event into the same shape (`record_from_event`), so the listing,
`claudex history --id`, and the console's detail screen read one thing. Every field may be
missing (a journal written by an older claudex, an event without detail): it reads "—".

One line per request (time, request id, protocol, model, who served it, status, outcome, latency,
the attempt trail, tokens) and per event (time, kind, sentence), merged in time order. Every text
passes the scrubber on its way out; headers go through the engine's header policy again
(engine/masking/header_policy.py: values off its allow-list masked), so a row written by an older
claudex shows no more than a new one would.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from claudex.engine.events import Event
from claudex.engine.history.rows import outcome_of
from claudex.engine.masking.header_policy import shown_headers
from claudex.engine.masking.secrets import SCRUBBER
from claudex.text.cost import usd_text

NONE: Final = "—"
# The attempt table's headings, in `attempt_cells` order (short, so it fits 100 columns), and
# what the short ones mean.
ATTEMPT_COLUMNS: Final = ("#", "provider", "outcome", "status", "headers", "content", "total",
                          "model sent", "cap", "breaker")
ATTEMPT_LEGEND: Final = ("headers: time to the response headers · content: time to the first "
                         "content · total: the attempt's duration · cap: the max_tokens cap "
                         "applied · breaker: the state it met")

When = Callable[[float], str]


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def record_from_event(event: Event) -> dict[str, Any]:
    """A live `request` event in the journal row's shape."""
    d = event.data
    raw_usage = d.get("usage")
    usage: Mapping[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    return {
        "event_id": event.id, "time": event.time, "request_id": d.get("request_id"),
        "protocol": d.get("protocol"), "endpoint": d.get("endpoint"), "route": d.get("route"),
        "routed": d.get("routed"),
        "model": d.get("model"), "profile": d.get("profile"), "provider": d.get("provider"),
        "status": d.get("status"), "outcome": outcome_of(d), "latency_ms": d.get("latency_ms"),
        "first_content_ms": d.get("first_content_ms"), "stream": bool(d.get("stream")),
        "trail": d.get("trail"), "attempts": list(d.get("attempts") or []),
        "dropped": list(d.get("dropped") or []), "notes": list(d.get("notes") or []),
        "headers": d.get("headers") if isinstance(d.get("headers"), dict) else None,
        "input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens"),
        "cache_read_tokens": usage.get("cache_read_tokens"),
        "cache_write_tokens": usage.get("cache_write_tokens"),
        "cost_usd": d.get("cost_usd"), "cost_basis": d.get("cost_basis"),
    }


def ms_text(value: object) -> str:
    """`4.2 ms`, `420 ms`, `1.24 s`; "—" when unknown."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return NONE
    ms = float(value)
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    return f"{ms:.1f} ms" if ms < 10 else f"{ms:.0f} ms"


def _text(value: object) -> str:
    if value is None or value == "" or value == [] or value == ():
        return NONE
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


def _tokens(r: Mapping[str, Any]) -> str:
    tin, tout, cached = r.get("input_tokens"), r.get("output_tokens"), r.get("cache_read_tokens")
    written = r.get("cache_write_tokens")
    if tin is None and tout is None:
        return NONE
    text = f"{tin or 0} in / {tout or 0} out"
    extra = [f"{cached} cache reads" if cached else "",
             f"{written} cache writes" if written else ""]
    extra = [e for e in extra if e]
    return text + (f" (+{', '.join(extra)})" if extra else "")


def request_cost_words(r: Mapping[str, Any]) -> str:
    """A request's price: `$0.0123`, `$0.0123 API-equivalent` (a subscription login), or
    `unpriced` for tokens the price table has no price for."""
    if r.get("input_tokens") is None and r.get("output_tokens") is None:
        return NONE
    usd = r.get("cost_usd")
    if not isinstance(usd, int | float):
        return "unpriced"
    return usd_text(usd) + (" API-equivalent" if r.get("cost_basis") == "api_equivalent"
                            else "")


def detail_fields(r: Mapping[str, Any], when: When = _when) -> list[tuple[str, str]]:
    """The request's own lines: (label, value), in the order the detail shows them."""
    client = _text(r.get("protocol"))
    if r.get("endpoint"):
        client += f" {r['endpoint']}"
    if r.get("stream"):
        client += " (stream)"
    status = _text(r.get("status"))
    if r.get("outcome"):
        status += f" · {r['outcome']}"
    at = r.get("time")
    latency = ms_text(r.get("latency_ms"))
    if isinstance(r.get("first_content_ms"), int | float):
        latency += f" (first content {ms_text(r.get('first_content_ms'))})"
    fields = [
        ("request id", _text(r.get("request_id"))),
        ("time", when(float(at)) if isinstance(at, int | float) else NONE),
        ("client", client),
        ("route", _text(r.get("route"))),
        ("model", _text(r.get("model"))),
        ("profile", _text(r.get("profile")) if r.get("profile") or not r.get("route")
         else "the default profile"),
        *((("routed", f"route {r['routed']}"),) if r.get("routed") else ()),
        ("served by", _text(r.get("provider")) if r.get("provider") else "none"),
        ("status", status),
        ("latency", latency),
        ("tokens", _tokens(r)),
        ("cost", request_cost_words(r)),
        ("dropped", _text(r.get("dropped"))),
        ("notes", "; ".join(str(n) for n in r.get("notes") or ()) or NONE),
    ]
    return [(label, SCRUBBER.text(value)) for label, value in fields]


def attempts_of(r: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [a for a in r.get("attempts") or () if isinstance(a, Mapping)]


def attempt_cells(index: int, a: Mapping[str, Any]) -> tuple[str, ...]:
    """One attempt's cells, in `ATTEMPT_COLUMNS` order."""
    cap = a.get("max_tokens")
    return tuple(SCRUBBER.text(cell) for cell in (
        str(index), _text(a.get("provider")), _text(a.get("outcome")), _text(a.get("status")),
        ms_text(a.get("headers_ms")), ms_text(a.get("first_content_ms")),
        ms_text(a.get("latency_ms")), _text(a.get("model")),
        str(cap) if isinstance(cap, int) else NONE, _text(a.get("breaker")),
    ))


def attempt_reasons(a: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What an attempt said beyond its numbers: the upstream's message (masked by the engine,
    and again here) and what translation dropped for it."""
    out = []
    if a.get("message"):
        out.append(("message", SCRUBBER.text(" ".join(str(a["message"]).split()))))
    if a.get("dropped"):
        out.append(("dropped", SCRUBBER.text(_text(a.get("dropped")))))
    return out


def header_items(r: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The client's headers as the header policy shows them, sorted by name."""
    headers = r.get("headers")
    if not isinstance(headers, Mapping):
        return []
    shown = shown_headers({str(name): str(value) for name, value in headers.items()})
    return sorted(shown.items(), key=lambda item: item[0].lower())


def _aligned(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]


def detail_lines(r: Mapping[str, Any], when: When = _when) -> list[str]:
    """`claudex history --id`: what the console's detail screen shows, as plain text."""
    fields = detail_fields(r, when)
    width = max(len(label) for label, _ in fields)
    lines = [f"{label:<{width}}  {value}" for label, value in fields]
    attempts = attempts_of(r)
    lines += ["", f"attempts ({len(attempts)})" if attempts else "attempts  —"]
    if attempts:
        lines += _aligned([ATTEMPT_COLUMNS, *(attempt_cells(i, a)
                                               for i, a in enumerate(attempts, 1))])
        lines.append(f"  ({ATTEMPT_LEGEND})")
        for i, a in enumerate(attempts, 1):
            for label, text in attempt_reasons(a):
                lines.append(f"  #{i} {label}: {text}")
    headers = header_items(r)
    lines += ["", "client headers" if headers else f"client headers  {NONE}"]
    lines += [f"  {name}: {value}" for name, value in headers]
    return lines


def request_line(r: Mapping[str, Any]) -> str:
    tokens = ""
    if r.get("input_tokens") is not None or r.get("output_tokens") is not None:
        tokens = (f"  tokens {r.get('input_tokens') or 0} in / {r.get('output_tokens') or 0} out"
                  f"  {request_cost_words(r)}")
    latency = r.get("latency_ms")
    latency_text = f"{float(latency):.0f} ms" if isinstance(latency, int | float) else "-"
    stream = " stream" if r.get("stream") else ""
    return (f"{_when(float(r['time']))}  {r.get('request_id') or '-':<12} "
            f"{r.get('protocol') or '-'} {r.get('model') or '-'}"
            f"{stream} -> {r.get('provider') or 'none'}  {r.get('status')} "
            f"{r.get('outcome')}  {latency_text}  [{r.get('trail') or ''}]{tokens}"
            + (f"  route {r['routed']}" if r.get("routed") else ""))


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
