"""A tiny OTLP/HTTP trace receiver on 127.0.0.1, as a collector is: `POST /v1/traces` with
`Content-Type: application/x-protobuf`, the body an `ExportTraceServiceRequest` (the protocol's
own message types, from opentelemetry-proto), answered 200 with an empty
`ExportTraceServiceResponse` (OTLP specification, "OTLP/HTTP"). It keeps every raw body, so a
test can scan each exported byte, and the spans decoded into plain dicts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from claudex.demo.world import free_port

KINDS = {1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


def value_of(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [value_of(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, which) if which else None


@dataclass
class Span:
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_span_id: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status: int          # 0 unset, 1 ok, 2 error
    resource: dict[str, Any]
    scope: str


@dataclass
class Receiver:
    port: int = 0
    bodies: list[bytes] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    _runner: web.AppRunner | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        self.port = free_port()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _traces(self, request: web.Request) -> web.Response:
        if request.content_type != "application/x-protobuf":
            return web.Response(status=415)
        body = await request.read()
        self.bodies.append(body)
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        message = ExportTraceServiceRequest()
        message.ParseFromString(body)
        for rs in message.resource_spans:
            resource = {kv.key: value_of(kv.value) for kv in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    self.spans.append(Span(
                        s.name, KINDS.get(s.kind, str(s.kind)), s.trace_id.hex(), s.span_id.hex(),
                        s.parent_span_id.hex(), s.start_time_unix_nano, s.end_time_unix_nano,
                        {kv.key: value_of(kv.value) for kv in s.attributes}, s.status.code,
                        resource, ss.scope.name))
        return web.Response(body=ExportTraceServiceResponse().SerializeToString(),
                            content_type="application/x-protobuf")

    def of_request(self, request_id: str) -> tuple[Span, list[Span]]:
        """The request's SERVER span and its CLIENT spans, in start order."""
        [server] = [s for s in self.spans if s.kind == "SERVER"
                    and s.attributes.get("claudex.request_id") == request_id]
        clients = sorted((s for s in self.spans if s.kind == "CLIENT"
                          and s.parent_span_id == server.span_id), key=lambda s: s.start_ns)
        return server, clients
