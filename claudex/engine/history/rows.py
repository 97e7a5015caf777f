"""What the history journal keeps of a request and of an event: the row each becomes.

What is kept: for a request, its time, client protocol, endpoint, model, profile, the provider that
answered, status, outcome (`ok`, `failover`, `failed`), latency, the attempt trail, what translation
dropped, tokens when known (input, output, cache read, cache write: the four parts core/usage.py
counts), what they cost at API prices (`cost_usd`, NULL when the price table does not know the
model; `cost_basis` says `api_equivalent` for a subscription login, whose real cost is its plan),
its request id, the route the client used, the client's headers (engine/masking/header_policy.py:
every name, values off its allow-list masked) and the route that chose its profile (`routed`:
"long_context -> gemini") and the plan's quota windows its last answer described (`windows`, JSON:
`{"provider": "claude", "windows": [{"name": "5h", "used": 0.42, ...}]}`); for every other event its
kind, profile, sentence and data. Never a body or a secret (the engine's events hold none: their
texts pass the scrubber before they are published, and headers are masked then).

A request's row is made from its event (`_request_row`) or, as the engine hands it over, from
the facts its deferred event holds (`RequestFacts`, `_facts_row`): in the journal's writer thread
(journal.py), never on the request's path.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, cast

import orjson

from claudex.engine.core.answer_headers import KNOWN, PLAN
from claudex.engine.core.answer_headers import kind as header_kind
from claudex.engine.core.request import Attempt
from claudex.engine.core.usage import Usage
from claudex.engine.events import Event, Kept
from claudex.engine.masking.header_policy import shown_headers
from claudex.engine.masking.secrets import SCRUBBER
from claudex.providers.windows import Described, RawHeaders, Window, described_windows


def outcome_of(data: dict[str, Any]) -> str:
    """`ok` (served by the first provider tried), `failover` (served after another failed or
    was skipped) or `failed` (no provider answered well, or the stream it committed to broke:
    the client got an error event after a 200)."""
    attempts = data.get("attempts") or []
    status = data.get("status")
    last = attempts[-1] if attempts else None
    broke = isinstance(last, dict) and last.get("outcome") in _BROKE_AFTER_COMMIT
    if not isinstance(status, int) or status >= 400 or broke:
        return "failed"
    return "failover" if len(attempts) > 1 else "ok"


def outcome_of_attempts(status: int, attempts: Sequence[Attempt]) -> str:
    """`outcome_of` for a request as the engine has it (before its event is made)."""
    if status >= 400 or (attempts and attempts[-1].outcome in _BROKE_AFTER_COMMIT):
        return "failed"
    return "failover" if len(attempts) > 1 else "ok"


# The served attempt's outcome when the stream broke after its commit (engine/core/ledger.py
# `broke_mid_stream`); before the commit the same failure is followed by another attempt or
# ends in an error status.
_BROKE_AFTER_COMMIT = frozenset({"stream_error"})


def _request_row(event: Event) -> tuple[Any, ...]:
    d = event.data
    usage = d.get("usage") or {}
    return (event.id, event.time, d.get("protocol"), d.get("endpoint"), d.get("model"),
            d.get("profile"), d.get("provider"), d.get("status"), outcome_of(d),
            d.get("latency_ms"), 1 if d.get("stream") else 0, d.get("trail"),
            json.dumps(d.get("attempts") or []), json.dumps(d.get("dropped") or []),
            usage.get("input_tokens"), usage.get("output_tokens"),
            usage.get("cache_read_tokens"), d.get("request_id") or None, d.get("route") or None,
            json.dumps(d["headers"]) if d.get("headers") is not None else None,
            usage.get("cache_write_tokens"), d.get("cost_usd"), d.get("cost_basis"),
            d.get("routed") or None,
            json.dumps(d["windows"]) if d.get("windows") is not None else None)


class RequestFacts(Protocol):
    """What a finished request's deferred event (engine/addons/request_report.py
    `RequestRecord`) holds: the journal makes its row from these, in its writer thread, without
    building the event."""

    id: int
    time: float
    protocol: str
    endpoint: str
    model: str | None
    profile: str | None
    provider: str | None
    status: int
    ms: float
    stream: bool

    @property
    def attempts(self) -> list[Attempt]: ...

    dropped: tuple[str, ...]
    usage: Usage | None
    request_id: str
    route: str
    headers: Mapping[str, str]
    cost_usd: float | None
    cost_basis: str | None
    routed: str | None
    windows: tuple[str, Described] | None
    plan: bool  # whether `windows` has a plan's (the quota-windows addon looked)

    def trail(self) -> str: ...


def _facts_row(r: RequestFacts) -> tuple[Any, ...]:
    """The same row `_request_row` makes of its event, made directly (orjson, and each header
    set's JSON once: this runs for every request)."""
    attempts = r.attempts
    usage = r.usage
    outcome = outcome_of_attempts(r.status, attempts)
    return (r.id, r.time, r.protocol, r.endpoint, r.model, r.profile, r.provider, r.status,
            outcome, round(r.ms, 2), 1 if r.stream else 0, r.trail(),
            orjson.dumps([a.to_json() for a in attempts]).decode(),
            orjson.dumps(r.dropped).decode(),
            usage.input_tokens if usage is not None else None,
            usage.output_tokens if usage is not None else None,
            usage.cache_read_tokens if usage is not None else None,
            r.request_id or None, r.route or None, _client_headers_json(r.headers),
            usage.cache_write_tokens if usage is not None else None, r.cost_usd, r.cost_basis,
            r.routed, None if r.windows is None or not r.plan else _windows_json(r.windows))


# The journal keeps a plan's windows (a subscription's: Anthropic's unified headers, ChatGPT's
# x-codex-*), not an API key's rate limits: those come with every answer of an API-key provider,
# change with each one, and reading them (RFC 3339 resets, a dozen headers) cost ~19 µs of this
# process's CPU a row; status and /metrics show an API key's limits as they are now. Which
# headers are a plan's: engine/core/answer_headers.py, one lookup a header.


def _windows_json(seen: tuple[str, Described]) -> str | None:
    provider, described = seen
    if described and not isinstance(described[0], Window):
        at, raw = cast("tuple[float, RawHeaders]", described)
        known = KNOWN
        plan = tuple(pair for pair in raw if (known.get(pair[0]) or header_kind(pair[0]))[0] & PLAN)
        if not plan:
            return None
        described = (at, plan)
    windows = described_windows(described)  # read here, in the writer thread
    if not windows:
        return None
    return orjson.dumps({"provider": provider,
                         "windows": [w.to_json() for w in windows]}).decode()


_HEADERS_JSON: dict[int, tuple[dict[str, str], str]] = {}


def _headers_json(shown: dict[str, str]) -> str:
    """`shown`'s JSON, remembered by identity: the header policy gives the same dict for the
    same header set, and a client sends the same set request after request. Only the writer
    thread calls this."""
    known = _HEADERS_JSON.get(id(shown))
    if known is not None and known[0] is shown:
        return known[1]
    if len(_HEADERS_JSON) >= 256:
        _HEADERS_JSON.clear()
    text = orjson.dumps(shown).decode()
    _HEADERS_JSON[id(shown)] = (shown, text)
    return text


_CLIENT_HEADERS_JSON: dict[int, tuple[Mapping[str, str], int, str]] = {}


def _client_headers_json(headers: Mapping[str, str]) -> str:
    """The JSON of what is shown of a client's `headers`, remembered by the mapping's identity
    while no secret is registered: request records share one mapping per distinct header set
    (engine/addons/request_report.py), so a row skips `shown_headers`' key tuple, its hash and
    its comparison. Only the writer thread calls this."""
    generation = SCRUBBER.generation
    known = _CLIENT_HEADERS_JSON.get(id(headers))
    if known is not None and known[0] is headers and known[1] == generation:
        return known[2]
    if len(_CLIENT_HEADERS_JSON) >= 256:
        _CLIENT_HEADERS_JSON.clear()
    text = _headers_json(shown_headers(headers))
    _CLIENT_HEADERS_JSON[id(headers)] = (headers, generation, text)
    return text


def _row_of(item: Kept) -> tuple[Any, ...]:
    return _request_row(item) if isinstance(item, Event) else _facts_row(
        item)  # type: ignore[arg-type]


def _event_row(event: Event) -> tuple[Any, ...]:
    return (event.id, event.time, event.kind, event.profile, event.message,
            json.dumps(event.data, default=str))
