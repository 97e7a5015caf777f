"""Words and numbers for the console, as pure functions of the engine's snapshot and events.

Nothing here touches Textual, so every sentence an operator reads can be unit-tested. Every text
that came from outside (an upstream's error message) passes through `safe()`, which masks anything
shaped like a secret before it reaches the screen.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claudex.engine.breaker.trips import duration_words
from claudex.engine.events import Event
from claudex.engine.history.rows import outcome_of
from claudex.engine.masking.logs import REDACTOR
from claudex.text.history import record_from_event
from claudex.text.usage import compact_count

TimeText = Callable[[float], str]


def local_time_text(epoch: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(epoch))


def safe(text: str | None, limit: int = 200) -> str:
    """`text` with secrets masked, on one line, at most `limit` characters."""
    if not text:
        return ""
    one_line = " ".join(REDACTOR.redact(text).split())
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"


def duration(seconds: float) -> str:
    """`42s`, `3m05s`, `2h07m`, `3d04h`: two units at most, never a fraction."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def short_path(path: str | None, home: Path | None = None) -> str:
    if not path:
        return "(no config file)"
    home_text = str(home if home is not None else Path.home())
    if home_text not in ("", "/") and path.startswith(home_text + "/"):
        return "~" + path[len(home_text):]
    return path


def protocol_label(provider_type: str) -> str:
    return {"DirectAnthropic": "anthropic", "OpenAIResponses": "responses", "Bedrock": "bedrock",
            "Vertex": "vertex"}.get(provider_type, "openai")


def cloud_label(profile: Mapping[str, Any]) -> str:
    """A cloud profile's place and signing (`us-east-1 · sigv4`, `my-project/us-east5`), from
    status' `cloud`; "" for every other profile."""
    cloud = profile.get("cloud")
    if not isinstance(cloud, Mapping) or not cloud.get("region"):
        return ""
    region = str(cloud["region"])
    if cloud.get("project"):
        return f"{cloud['project']}/{region}"
    signed = cloud.get("signed")
    return f"{region} · {signed}" if signed == "sigv4" else region


def breaker_words(breaker: Mapping[str, Any]) -> str:
    """The breaker's state as an operator reads it, with the live countdown when open."""
    state = breaker.get("state", "closed")
    failures = int(breaker.get("consecutive_failures") or 0)
    retry_in = breaker.get("retry_in_s")
    if state == "open":
        if retry_in is not None and retry_in > 0:
            return f"open · half-open in {duration(retry_in + 0.999)}"
        return "open · half-open now"
    if state == "forced_open":
        return tripped_words(breaker)
    if state == "half_open":
        return "half-open · trial pending"
    if failures:
        return f"closed · {failures} consecutive failure{'s' if failures != 1 else ''}"
    return "closed"


def tripped_words(breaker: Mapping[str, Any], reason_limit: int = 60) -> str:
    """A trip as panels and the chain say it: `tripped · 12m left · maintenance`, `tripped ·
    until reset · maintenance`, `tripped by operator · r resets`. The time comes before the
    reason, so a narrow panel that cuts the line keeps it; the reason is the operator's words,
    masked all the same."""
    reason = safe(str(breaker.get("reason") or ""), reason_limit)
    left = breaker.get("retry_in_s")
    if isinstance(left, int | float) and not isinstance(left, bool):
        head = f"tripped · {duration_words(left)} left"
    elif reason:
        head = "tripped · until reset"
    else:
        return "tripped by operator · r resets"
    return f"{head} · {reason}" if reason else head


def state_label(state: str) -> str:
    return {"closed": "closed", "open": "open", "half_open": "half-open",
            "forced_open": "tripped"}.get(state, state)


def probe_words(health: Mapping[str, Any]) -> str:
    if health.get("probe_unsupported"):
        return "probe unsupported"
    latency = health.get("latency_ms")
    error = health.get("error")
    if error and latency is None:
        return f"probe failed: {safe(error, 60)}"
    if latency is not None:
        return f"probe {latency:.0f} ms"
    if health.get("last_checked") is None:
        return "probe pending"
    return "probe —"


def counts_words(stats: Mapping[str, Any]) -> str:
    requests = int(stats.get("requests") or 0)
    ok = int(stats.get("successes") or 0)
    failures = int(stats.get("failures") or 0)
    limited = int(stats.get("rate_limited") or 0)
    text = f"requests {requests} · ok {ok} · errors {failures}"
    if limited:
        text += f" · 429s {limited}"
    return text


def token_words(profile: Mapping[str, Any]) -> str:
    """` · 1.2k/340 tok` (in/out), once the provider has answered with usage: the panel's
    counts line has room for little more. In is the whole input, cache reads and writes
    included (what a Claude Code session mostly is)."""
    tokens = profile.get("tokens") or {}
    tin = sum(int(tokens.get(key) or 0) for key in ("input_tokens", "cache_read_tokens",
                                                   "cache_write_tokens"))
    tout = int(tokens.get("output_tokens") or 0)
    if not (tin or tout):
        return ""
    return f" · {compact_count(tin)}/{compact_count(tout)} tok"


def limit_words(profile: Mapping[str, Any]) -> str:
    """The output-token cap a provider stated in a 400, when claudex has learned one (the
    lowest, if it stated several for different models)."""
    learned = profile.get("learned_max_tokens") or {}
    caps = [v for v in learned.values() if isinstance(v, int)]
    words = f" · max_tokens ≤ {min(caps)}" if caps else ""
    # The context window it holds, configured or learned from its 400 (the smallest).
    windows = [v for v in (profile.get("learned_context_window") or {}).values()
               if isinstance(v, int)]
    if isinstance(profile.get("context_window"), int):
        windows.append(profile["context_window"])
    words += f" · context ≤ {_thousands(min(windows))}" if windows else ""
    return words + learned_drops(profile)


def learned_drops(profile: Mapping[str, Any]) -> str:
    """What a cloud refused of the Anthropic API and is left out now (engine/clouds/): the
    fields, and the betas when some are held back."""
    learned = (profile.get("cloud") or {}).get("learned") or {}
    fields = sorted({f for lesson in learned.values() for f in lesson.get("dropped_fields", [])})
    betas = {lesson.get("betas") for lesson in learned.values()} - {"all", None}
    words = f" · drops {', '.join(fields)}" if fields else ""
    if betas:
        words += " · betas: " + ("none" if "none" in betas else "documented only")
    return words


def _thousands(tokens: int) -> str:
    """131072 -> 131k; 8192 -> 8.2k; 900 -> 900."""
    if tokens >= 100_000:
        return f"{tokens // 1000}k"
    return f"{tokens / 1000:.1f}k" if tokens >= 1000 else str(tokens)


def last_error_words(stats: Mapping[str, Any], now_wall: float) -> str:
    error = stats.get("last_error")
    if not error:
        return "no errors"
    at = stats.get("last_error_at")
    age = f" {duration(now_wall - at)} ago" if isinstance(at, int | float) else ""
    return f"last error{age}: {safe(error, 120)}"


def colour_counts(profiles: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    counts = {"green": 0, "yellow": 0, "red": 0}
    for p in profiles:
        colour = p.get("health", {}).get("color", "green")
        counts[colour] = counts.get(colour, 0) + 1
    return counts


@dataclass(frozen=True)
class RequestRow:
    """One line of the request log, built from a `request` event or a journal row."""

    time: str
    request: str
    provider: str
    trail: str
    status: int | None
    latency_ms: float
    failed_over: bool
    dropped: str = ""  # what translation left out: "thinking, cache_control"
    notes: str = ""    # what claudex changed to keep the conversation valid there
    routed: str = ""   # the route that chose the profile: "long_context → gemini"
    broke: bool = False  # the served stream broke after it began (the client got an error)
    at: float = 0.0    # wall time it was served (the journal is asked for rows before it)
    key: int | str | None = None  # the event id (or request id): one row per request
    from_history: bool = False    # read from the journal, not seen live
    # What the detail screen shows: a journal row, or the data of the live event the row came
    # from (`event`), put in a journal row's shape only when the detail opens.
    data: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False,
                                    repr=False)
    event: Event | None = field(default=None, compare=False, hash=False, repr=False)

    @property
    def record(self) -> Mapping[str, Any]:
        """The request in a journal row's shape (`claudex.text.history.record_from_event`)."""
        return record_from_event(self.event) if self.event is not None else self.data

    @property
    def status_text(self) -> str:
        return "-" if self.status is None else str(self.status)

    @property
    def trail_text(self) -> str:
        """The route that chose the profile, the attempts, then what translation left out and
        what claudex changed (the cell cuts it when long)."""
        text = f"route {self.routed} · {self.trail}" if self.routed else self.trail
        text = f"{text} · dropped: {self.dropped}" if self.dropped else text
        return f"{text} · {self.notes}" if self.notes else text

    @property
    def latency_text(self) -> str:
        ms = self.latency_ms
        if ms >= 1000:
            return f"{ms / 1000:.2f} s"
        return f"{ms:.1f} ms" if ms < 10 else f"{ms:.0f} ms"

    @property
    def outcome(self) -> str:
        """`ok`, `failover` or `failed` (a stream that broke after a 200 included), as the
        journal says it (history/rows.py outcome_of)."""
        if self.status is None or self.status >= 400 or self.broke:
            return "failed"
        return "failover" if self.failed_over else "ok"

    def text(self) -> str:
        """Everything the filter matches against."""
        return " ".join((self.time, self.request, self.provider, self.trail_text,
                         self.status_text, self.outcome, str(self.data.get("request_id") or "")))

    def matches(self, needle: str) -> bool:
        return not needle or needle.lower() in self.text().lower()


def request_row(event: Event, time_text: TimeText) -> RequestRow:
    """A request log row from a live `request` event (the console's hot path: no copy)."""
    return _row(event.data, event.time, event.id or None, time_text, event=event)


def record_row(record: Mapping[str, Any], time_text: TimeText, *,
               from_history: bool = False) -> RequestRow:
    """A request log row from a journal row (`GET /_claudex/history`'s `requests`)."""
    at = record.get("time")
    key = record.get("event_id") or record.get("request_id") or None
    return _row(record, float(at) if isinstance(at, int | float) else 0.0,
                key if isinstance(key, int | str) else None, time_text,
                from_history=from_history)


def _row(data: Mapping[str, Any], epoch: float, key: int | str | None, time_text: TimeText,
         *, from_history: bool = False, event: Event | None = None) -> RequestRow:
    protocol = str(data.get("protocol") or "?")
    model = str(data.get("model") or "-")
    stream = " stream" if data.get("stream") else ""
    attempts = data.get("attempts") or []
    status = data.get("status")
    return RequestRow(
        time=time_text(epoch),
        request=f"{protocol} {model}{stream}",
        provider=str(data.get("provider") or "none"),
        trail=safe(str(data.get("trail") or ""), 160).replace(" -> ", " → "),
        status=status if isinstance(status, int) else None,
        latency_ms=float(data.get("latency_ms") or 0.0),
        failed_over=len(attempts) > 1,
        dropped=safe(", ".join(str(d) for d in data.get("dropped") or ()), 160),
        notes=safe("; ".join(str(n) for n in data.get("notes") or ()), 160),
        routed=safe(str(data.get("routed") or ""), 80).replace(" -> ", " → "),
        broke=_broke_stream(attempts, status),
        at=epoch, key=key, from_history=from_history, data=data, event=event,
    )


def _broke_stream(attempts: Any, status: Any) -> bool:
    """The served stream broke after its 200 (history/rows.py outcome_of's rule)."""
    if not isinstance(status, int) or status >= 400 or not isinstance(attempts, list):
        return False
    return outcome_of({"status": status, "attempts": attempts}) == "failed"


def event_colour(event: Event) -> str | None:
    """Which status colour an event line takes (None: the plain text colour)."""
    if event.kind == "breaker":
        new = event.data.get("new")
        return {"closed": "green", "half_open": "yellow"}.get(str(new), "red")
    if str(event.kind) == "proxy":  # an upstream proxy's transition (issue 36)
        new = event.data.get("new") or event.data.get("state")
        return {"closed": "green", "ok": "green", "half_open": "yellow",
                "cooling": "yellow"}.get(str(new), "red")
    if event.kind in ("escalation", "trip"):  # a trip's new terms: still tripped
        return "red"
    if event.kind in ("cooldown", "limit"):
        return "yellow"
    if event.kind == "slow":  # turned slow, or no longer is
        return "yellow" if event.data.get("slow") else "green"
    if event.kind == "reset":  # the operator's reset: what it ended is usable again
        return "green"
    return None
