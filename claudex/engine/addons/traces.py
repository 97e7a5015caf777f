"""OpenTelemetry traces of every request: a SERVER span per request, a CLIENT span per attempt
that went out to a provider (DESIGN.md "Telemetry and cost"), exported as OTLP/HTTP protobuf by
the opentelemetry-sdk's batch processor.

Only imported when traces are on (trace_settings.py decides, without OpenTelemetry): the engine
registers this addon then, and a request without it pays nothing.

What a request costs with traces on: at `request_started` and each `attempt_sent` a clock read
kept on the flow; at `attempt_ended` the attempt and its end time appended; at `request_ended`
the spans are made whole, with the times recorded, and handed to the batch processor (a deque
append). They are made as the SDK's finished spans (`ReadableSpan`, what its exporters encode)
rather than through `Tracer.start_span` and `end`: the tracer's path (sampler, attribute
copying and checking under a lock, a live span's bookkeeping) costs ~38 µs of CPU for a span of
ten attributes on the bench machine, a finished one ~5 µs: its attributes are claudex's own,
already well-typed (bench/NOTES.md, traces).
The sampling is the SDK default's, parent-based: a client's `traceparent` that is not sampled
(flags 00) gets no spans; one without a parent always does. The export runs on the processor's
own thread, its queue bounded (spans past it are dropped, not waited for), each export bounded
in time; a collector that is dead or slow costs one log line when it starts failing and one
when it answers again (`_OneLineExporter`), never a request's time. The SDK's own loggers are
quieted for that reason.

The attributes follow the OpenTelemetry GenAI semantic conventions, Development status, as the
registry stood when this was written (semantic-conventions v1.40: `gen_ai.provider.name`, which
replaced `gen_ai.system` in v1.37, and the cache counters added in v1.40; the later genai
repository renames `cache_creation` to `cache_write`, which is not followed here, DESIGN.md names
the former). The Anthropic convention's note is kept for every provider: `gen_ai.usage.
input_tokens` is the whole input, cache reads and writes included (core/usage.py's `all_input`).

SERVER span `POST {route}`: `claudex.request_id`, `claudex.outcome` (ok / failover / failed, as
the journal says), `claudex.trail` (`grok 503 -> deepseek 200`), `claudex.route`; its parent is
the client's W3C `traceparent` when it sent one. CLIENT span `chat {model}` per attempt sent:
`gen_ai.operation.name`, `gen_ai.provider.name` (the well-known name for the provider's host,
else the profile's name), `gen_ai.request.model` (as sent there), `gen_ai.request.max_tokens`,
`server.address`, `server.port`, `claudex.profile`; on the attempt that served,
`gen_ai.response.model`, `gen_ai.usage.*` and `gen_ai.response.finish_reasons` (answer_facts.py:
a Chat stream's finish reason is not kept); on one that failed, `error.type` (its status, or
its outcome when it has none: `timeout`, `stream_error`) and an ERROR status. Never content (no
body, no message text, no upstream error words), never a header: nothing a credential can be in.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from claudex import __version__
from claudex.config.model import Profile
from claudex.engine.addons.answer_facts import answer_facts
from claudex.engine.addons.trace_settings import TraceSettings
from claudex.engine.core.request import Attempt
from claudex.engine.core.runtime import ProviderRuntime
from claudex.engine.masking.secrets import SCRUBBER

if TYPE_CHECKING:
    from claudex.engine.core.exchange import Exchange
    from claudex.engine.core.hooks import Flow
    from claudex.engine.core.policy import Rule

log = logging.getLogger("claudex.engine")

SCHEMA_URL: Final = "https://opentelemetry.io/schemas/1.40.0"
MAX_QUEUE: Final = 4096       # spans waiting for the exporter; past it, new ones are dropped
BATCH: Final = 512
DELAY_MS: Final = 500         # how long a span may wait for its batch
_PLACE: Final = "traces"
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)
_ERROR: Final = Status(StatusCode.ERROR)
_UNSET: Final = Status(StatusCode.UNSET)
_MAX_TOKEN_KEYS: Final = ("max_tokens", "max_completion_tokens", "max_output_tokens")

# gen_ai.provider.name's well-known values by the provider's API host (the registry's list).
_PROVIDER_HOSTS: Final[dict[str, str]] = {
    "api.anthropic.com": "anthropic",
    "api.openai.com": "openai",
    "chatgpt.com": "openai",
    "api.deepseek.com": "deepseek",
    "api.x.ai": "x_ai",
    "api.groq.com": "groq",
    "api.mistral.ai": "mistral_ai",
    "api.perplexity.ai": "perplexity",
    "api.cohere.com": "cohere",
    "api.cohere.ai": "cohere",
    "generativelanguage.googleapis.com": "gcp.gemini",
    "aiplatform.googleapis.com": "gcp.vertex_ai",
}
_CLOUD_TYPES: Final = {"Bedrock": "aws.bedrock", "Vertex": "gcp.vertex_ai"}
_PROVIDER_SUFFIXES: Final = ((".openai.azure.com", "azure.ai.openai"),
                             (".amazonaws.com", "aws.bedrock"),
                             ("-aiplatform.googleapis.com", "gcp.vertex_ai"))


def provider_name(profile: Profile) -> str:
    """`gen_ai.provider.name` for a profile: the convention's name for its API host, else the
    profile's own name (a local model server, a gateway). Claude on a cloud is that cloud's
    whatever its address (a VPC endpoint, a regional host)."""
    cloud = _CLOUD_TYPES.get(profile.provider_type)
    if cloud is not None:
        return cloud
    if profile.auth_type == "aws-sigv4":
        return "aws.bedrock"
    host = (urlsplit(profile.base_url).hostname or "").lower()
    known = _PROVIDER_HOSTS.get(host)
    if known is not None:
        return known
    for suffix, name in _PROVIDER_SUFFIXES:
        if host.endswith(suffix):
            return name
    return profile.name


def _server(profile: Profile) -> tuple[str, int]:
    parts = urlsplit(profile.base_url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return parts.hostname or "", port or (443 if parts.scheme == "https" else 80)


def _error_type(attempt: Attempt) -> str:
    """The attempt's status, or its outcome when it has none (as its trail label says)."""
    return attempt.token().removeprefix(f"{attempt.provider}:")


def outcome_word(flow: Flow) -> str:
    """ok / failover / failed, as the journal counts them (engine/history/rows.py)."""
    result = flow.result
    if result is None or result.status >= 400:
        return "failed"
    return "failover" if len(flow.attempts) > 1 else "ok"


class _OneLineExporter(SpanExporter):
    """The OTLP exporter, telling a failing collector in one line, and its return in one."""

    def __init__(self, inner: SpanExporter, endpoint: str) -> None:
        self._inner = inner
        self._endpoint = endpoint
        self._failing = False
        self.exported = 0  # spans the collector took (tests, bench)
        self.dropped = 0   # spans it did not

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self._inner.export(spans)
            why = ""
        except Exception as exc:  # the SDK's exporter should not raise; it is not our request
            result, why = SpanExportResult.FAILURE, f" ({type(exc).__name__})"
        if result is SpanExportResult.SUCCESS:
            self.exported += len(spans)
            if self._failing:
                self._failing = False
                log.info("traces: the collector at %s takes spans again", self._endpoint)
        else:
            self.dropped += len(spans)
            if not self._failing:
                self._failing = True
                log.warning("traces: the collector at %s did not take %d span(s)%s; spans are "
                            "dropped until it does (requests go on)", self._endpoint,
                            len(spans), why)
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


def _quiet_sdk_logs() -> None:
    """The SDK logs each failed export and each dropped span; claudex says it once."""
    for name in ("opentelemetry.exporter.otlp.proto.http", "opentelemetry.sdk._shared_internal",
                 "opentelemetry.exporter.otlp.proto.common", "opentelemetry.exporter"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


class TracesAddon:
    """The spans of each request, made at its end from what its hooks recorded."""

    name = "traces"

    def __init__(self, settings: TraceSettings,
                 runtimes: Callable[[], Mapping[str, ProviderRuntime]], *,
                 exporter: SpanExporter | None = None,
                 clock_ns: Callable[[], int] = time.time_ns) -> None:
        _quiet_sdk_logs()
        for value in settings.headers.values():
            SCRUBBER.note(value)  # a collector's credentials: never in a log line
        self.settings = settings
        self._runtimes = runtimes
        self._now = clock_ns
        inner = exporter or OTLPSpanExporter(endpoint=settings.endpoint,
                                             headers=dict(settings.headers),
                                             timeout=settings.timeout_s)
        self.exporter = _OneLineExporter(inner, settings.endpoint)
        self._resource = Resource.create({**settings.resource,
                                          "service.name": settings.service_name,
                                          "service.version": __version__})
        self._scope = InstrumentationScope("claudex", __version__, SCHEMA_URL)
        self.processor = BatchSpanProcessor(
            self.exporter, max_queue_size=MAX_QUEUE, schedule_delay_millis=DELAY_MS,
            max_export_batch_size=BATCH, export_timeout_millis=settings.timeout_s * 1000)
        self._propagator = TraceContextTextMapPropagator()
        self._ids = random.Random().getrandbits  # span and trace ids, as the SDK's generator
        log.info("traces: OTLP/HTTP to %s as service %s", settings.endpoint,
                 settings.service_name)

    # -- the hooks: clock reads kept on the flow --------------------------------------------

    def request_started(self, flow: Flow) -> None:
        flow.addon_data(_PLACE)["start"] = self._now()

    def attempt_sent(self, flow: Flow, rt: ProviderRuntime, exchange: Exchange) -> None:
        flow.addon_data(_PLACE)["sent"] = self._now()

    def attempt_ended(self, flow: Flow, rt: ProviderRuntime, attempt: Attempt,
                      rule: Rule | None) -> None:
        if rule is None:  # a skip: nothing went out
            return
        place = flow.addon_data(_PLACE)
        sent = place.pop("sent", None)
        if sent is None:  # ended before sending (claudex's queue, credentials)
            return
        tries: list[tuple[Attempt, Profile, int, int]] = place.setdefault("tries", [])
        # Ended when its answer was read, which for the served one of a whole answer is before
        # this hook runs (engine/core/hooks.py: it is told after the client has the body).
        took = attempt.latency_ms
        ended = self._now() if took is None else sent + int(took * 1_000_000)
        tries.append((attempt, rt.profile, sent, ended))

    def request_ended(self, flow: Flow) -> None:
        place = flow.addon_data(_PLACE)
        end = self._now()
        parent = self._parent(flow)
        if parent is not None and not parent.trace_flags.sampled:
            return  # the client's trace is not sampled: neither is its part here
        ids = self._ids
        context = SpanContext(parent.trace_id if parent is not None else ids(128), ids(64),
                              is_remote=False, trace_flags=_SAMPLED)
        route = SCRUBBER.text(flow.req.route or "/")
        result = flow.result
        self.processor.on_end(ReadableSpan(
            f"POST {route}", context, parent, self._resource,
            {"claudex.request_id": flow.request_id, "claudex.outcome": outcome_word(flow),
             "claudex.trail": " -> ".join(a.label() for a in flow.attempts),
             "claudex.route": route},
            kind=SpanKind.SERVER, start_time=place.get("start", end), end_time=end,
            status=_ERROR if result is None or result.status >= 500 else _UNSET,
            instrumentation_scope=self._scope))
        tries: list[tuple[Attempt, Profile, int, int]] = place.get("tries") or []
        served = self._served_index(flow, tries)
        for i, (attempt, profile, sent, ended) in enumerate(tries):
            self._client_span(flow, attempt, profile, sent, ended, context, i == served)

    def _parent(self, flow: Flow) -> SpanContext | None:
        """The client's span, from its W3C `traceparent` (and `tracestate`), if it sent one."""
        if "traceparent" not in flow.req.headers:
            return None
        found = trace.get_current_span(self._propagator.extract(flow.req.headers))
        parent = found.get_span_context()
        return parent if parent.is_valid else None

    # -- spans ----------------------------------------------------------------------------------

    @staticmethod
    def _served_index(flow: Flow, tries: list[tuple[Attempt, Profile, int, int]]) -> int:
        result = flow.result
        if result is None or result.provider is None:
            return -1
        for i in range(len(tries) - 1, -1, -1):
            attempt = tries[i][0]
            if attempt.provider == result.provider and attempt.outcome == "ok":
                return i
        return -1

    def _client_span(self, flow: Flow, attempt: Attempt, profile: Profile, sent: int,
                     ended: int, parent: SpanContext, served: bool) -> None:
        model = attempt.model or flow.req.model or ""
        host, port = _server(profile)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name(profile),
            "server.address": host,
            "server.port": port,
            "claudex.profile": profile.name,
        }
        if model:
            attributes["gen_ai.request.model"] = model
        max_tokens = attempt.max_tokens or self._asked_max_tokens(flow)
        if max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = max_tokens
        if served:
            self._served_attributes(flow, attributes)
        failed = attempt.outcome != "ok"
        if failed:
            attributes["error.type"] = _error_type(attempt)
        self.processor.on_end(ReadableSpan(
            f"chat {model}".rstrip(),
            SpanContext(parent.trace_id, self._ids(64), is_remote=False, trace_flags=_SAMPLED),
            parent, self._resource, attributes, kind=SpanKind.CLIENT, start_time=sent,
            end_time=ended, status=_ERROR if failed else _UNSET,
            instrumentation_scope=self._scope))

    @staticmethod
    def _asked_max_tokens(flow: Flow) -> int | None:
        body = flow.req.body
        for key in _MAX_TOKEN_KEYS:
            value = body.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return None

    @staticmethod
    def _served_attributes(flow: Flow, attributes: dict[str, Any]) -> None:
        usage, result = flow.usage, flow.result
        if usage is not None:
            attributes["gen_ai.usage.input_tokens"] = usage.all_input
            attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
            attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
            attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
        if result is None:
            return
        if result.stream is not None:
            model, reasons = answer_facts(*result.stream.usage_lines())
        elif result.body is not None and result.status < 400:
            model, reasons = answer_facts(result.body.decode("utf-8", "replace"))
        else:
            return
        if model:
            attributes["gen_ai.response.model"] = model
        if reasons:
            attributes["gen_ai.response.finish_reasons"] = list(reasons)

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self, closed: Callable[[], None]) -> None:
        """Export what is queued and stop, on a thread of its own, then call `closed` (from
        that thread): the engine waits for it a bounded time, since a dead collector must not
        hold up an exit (the thread is a daemon)."""
        def shut() -> None:
            try:
                self.processor.shutdown()  # type: ignore[no-untyped-call]
            finally:
                closed()

        threading.Thread(target=shut, name="claudex-traces-close", daemon=True).start()
