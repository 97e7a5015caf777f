"""Traces (engine/addons/traces.py) as a collector receives them: OTLP/HTTP protobuf decoded
with opentelemetry-proto at a receiver on 127.0.0.1 (tests/otlp_receiver.py), not an in-memory
exporter. A failed-over request's SERVER span and one CLIENT span per attempt with their GenAI
attributes and parentage, the client's traceparent continued; no credential in any exported
byte; a dead or stalled collector neither fails nor holds up a request and is told once; with no
endpoint, OpenTelemetry is never imported. The settings' rules and the answer facts too."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from claudex.config.model import TelemetrySettings
from claudex.demo.world import free_port
from claudex.engine.addons.answer_facts import answer_facts
from claudex.engine.addons.trace_settings import parse_pairs, trace_settings
from tests.conftest import TEST_ENV, anthropic_body, build_config, eventually, profile_toml
from tests.otlp_receiver import Receiver

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
CLIENT_KEY = "sk-ant-client-PLANTED-0123456789abcdef"
CLIENT_BEARER = "sk-client-bearer-PLANTED-fedcba9876543210"
COLLECTOR_TOKEN = "collector-token-PLANTED-5555aaaa"


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.close()


async def traced(fakes: Any, proxy_factory: Any, endpoint: str, *,
                 env: dict[str, str] | None = None, stream_backup: bool = False) -> Any:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    config = build_config(f'[telemetry]\notlp_endpoint = "{endpoint}"\n'
                          + profile_toml("primary", f["primary"], backups=["backup"])
                          + profile_toml("backup", f["backup"]))
    return await proxy_factory(config, fakes=f, env={**TEST_ENV, **(env or {})})


@pytest.mark.parametrize("stream", [False, True])
async def test_a_failed_over_request_as_the_collector_decodes_it(
        fakes: Any, proxy_factory: Any, receiver: Receiver, stream: bool) -> None:
    proxy = await traced(fakes, proxy_factory, receiver.endpoint)
    proxy.fakes["primary"].set_fault("500")
    resp = await proxy.messages(anthropic_body(stream=stream), profile="primary",
                                headers={"traceparent": TRACEPARENT})
    assert resp.status_code == 200
    if stream:
        assert b"message_stop" in resp.content
    request_id = resp.headers["x-claudex-request-id"]
    attempts = resp.headers["x-claudex-attempts"].split(",")
    assert attempts[0] == "primary:500" and attempts[-1] == "backup:200"
    await eventually(lambda: any(s.attributes.get("claudex.request_id") == request_id
                                 for s in receiver.spans), 20.0)
    server, clients = receiver.of_request(request_id)

    # The SERVER span continues the client's trace, under the client's span.
    assert server.name == "POST /proxy/primary/v1/messages"
    assert (server.trace_id, server.parent_span_id) == (TRACE_ID, PARENT_ID)
    assert server.attributes == {
        "claudex.request_id": request_id, "claudex.outcome": "failover",
        "claudex.trail": " -> ".join(a.replace(":", " ") for a in attempts),
        "claudex.route": "/proxy/primary/v1/messages",
    }
    assert server.resource["service.name"] == "claudex"
    assert server.scope == "claudex"

    # One CLIENT span per attempt sent, children of the SERVER span, inside its time.
    assert [c.attributes["claudex.profile"] for c in clients] == \
        [a.split(":")[0] for a in attempts]
    assert all(c.trace_id == TRACE_ID for c in clients)
    assert all(server.start_ns <= c.start_ns <= c.end_ns <= server.end_ns for c in clients)
    failed, served = clients[0], clients[-1]
    port = proxy.fakes["primary"].port
    assert failed.name == "chat claude-sonnet-4-5"
    assert failed.attributes == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "primary",
        "gen_ai.request.model": "claude-sonnet-4-5", "gen_ai.request.max_tokens": 64,
        "server.address": "127.0.0.1", "server.port": port, "claudex.profile": "primary",
        "error.type": "500",
    }
    assert failed.status == 2  # ERROR
    usage = json.loads(resp.content) if not stream else None
    tokens = proxy.engine.tokens.of_provider("backup")
    assert served.status == 0 and "error.type" not in served.attributes
    assert served.attributes["gen_ai.provider.name"] == "backup"
    # A backup is sent its own default model (the fake answers with the model it was sent).
    assert served.name == "chat backup-model"
    assert served.attributes["gen_ai.request.model"] == "backup-model"
    assert served.attributes["gen_ai.response.model"] == "backup-model"
    assert served.attributes["gen_ai.response.finish_reasons"] == ["end_turn"]
    assert served.attributes["gen_ai.usage.input_tokens"] == \
        tokens["input_tokens"] + tokens["cache_read_tokens"] + tokens["cache_write_tokens"]
    assert served.attributes["gen_ai.usage.output_tokens"] == tokens["output_tokens"] > 0
    assert served.attributes["gen_ai.usage.cache_read.input_tokens"] == 0
    assert served.attributes["gen_ai.usage.cache_creation.input_tokens"] == 0
    if usage is not None:
        assert served.attributes["gen_ai.usage.output_tokens"] == \
            usage["usage"]["output_tokens"]


async def test_without_a_traceparent_the_request_starts_a_trace(
        fakes: Any, proxy_factory: Any, receiver: Receiver) -> None:
    proxy = await traced(fakes, proxy_factory, receiver.endpoint)
    resp = await proxy.messages(profile="primary")
    request_id = resp.headers["x-claudex-request-id"]
    await eventually(lambda: any(s.attributes.get("claudex.request_id") == request_id
                                 for s in receiver.spans), 20.0)
    server, [client] = receiver.of_request(request_id)
    assert server.parent_span_id == "" and server.attributes["claudex.outcome"] == "ok"
    assert client.trace_id == server.trace_id != TRACE_ID


async def test_a_client_trace_that_is_not_sampled_gets_no_spans(
        fakes: Any, proxy_factory: Any, receiver: Receiver) -> None:
    """The SDK default's parent-based sampling: flags 00 in the client's traceparent."""
    proxy = await traced(fakes, proxy_factory, receiver.endpoint)
    unsampled = await proxy.messages(profile="primary",
                                     headers={"traceparent": TRACEPARENT[:-2] + "00"})
    sampled = await proxy.messages(profile="primary")
    ids = {r.headers["x-claudex-request-id"] for r in (unsampled, sampled)}
    await eventually(lambda: any(s.attributes.get("claudex.request_id") ==
                                 sampled.headers["x-claudex-request-id"]
                                 for s in receiver.spans), 20.0)
    assert {s.attributes.get("claudex.request_id") for s in receiver.spans
            if s.kind == "SERVER"} & ids == {sampled.headers["x-claudex-request-id"]}
    assert all(s.trace_id != TRACE_ID for s in receiver.spans)


async def test_no_credential_in_any_exported_byte(fakes: Any, proxy_factory: Any,
                                                  receiver: Receiver) -> None:
    """Keys planted where they would be: the client's x-api-key and Authorization, the
    provider's key (FAKE_KEY), the collector's own token in OTEL_EXPORTER_OTLP_HEADERS; a
    failing attempt too (an upstream error may quote what it was sent)."""
    proxy = await traced(fakes, proxy_factory, receiver.endpoint,
                         env={"OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer%20"
                                                            f"{COLLECTOR_TOKEN}"})
    proxy.fakes["primary"].set_fault("500")
    for stream in (False, True):
        resp = await proxy.messages(anthropic_body(stream=stream), profile="primary",
                                    headers={"x-api-key": CLIENT_KEY,
                                             "authorization": f"Bearer {CLIENT_BEARER}",
                                             "traceparent": TRACEPARENT})
        assert resp.status_code == 200
    await eventually(lambda: sum(s.kind == "SERVER" for s in receiver.spans) >= 2, 20.0)
    assert receiver.headers[0]["authorization"] == f"Bearer {COLLECTOR_TOKEN}"  # it was used
    exported = b"".join(receiver.bodies)
    planted = (CLIENT_KEY, CLIENT_BEARER, TEST_ENV["FAKE_KEY"], COLLECTOR_TOKEN, "PLANTED",
               "hello")  # and no content: "hello" is the prompt
    for secret in planted:
        assert secret.encode() not in exported, secret


class StalledCollector:
    """Takes the connection and never answers until told to: a collector that is slow."""

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.received = 0
        self.port = free_port()
        self._runner: web.AppRunner | None = None

    async def _traces(self, request: web.Request) -> web.Response:
        self.received += 1
        await self.go.wait()
        return web.Response(status=200, content_type="application/x-protobuf")

    async def start(self) -> StalledCollector:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def close(self) -> None:
        self.go.set()
        if self._runner is not None:
            await self._runner.cleanup()


async def test_a_stalled_collector_holds_up_no_request(fakes: Any, proxy_factory: Any) -> None:
    """While the collector sits on an export, requests go on being served: the export is on
    the batch processor's thread, the spans wait in its queue."""
    collector = await StalledCollector().start()
    try:
        proxy = await traced(fakes, proxy_factory, f"http://127.0.0.1:{collector.port}")
        assert (await proxy.messages(profile="primary")).status_code == 200
        await eventually(lambda: collector.received >= 1, 20.0)  # an export is now stuck
        for _ in range(20):
            assert (await proxy.messages(profile="primary")).status_code == 200
        assert collector.received == 1 and not collector.go.is_set()
    finally:
        await collector.close()


async def test_a_dead_collector_fails_no_request_and_is_told_once(
        fakes: Any, proxy_factory: Any, caplog: pytest.LogCaptureFixture) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    proxy = await traced(fakes, proxy_factory, dead)
    exporter = proxy.engine.traces.exporter
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            assert (await proxy.messages(profile="primary")).status_code == 200
        await eventually(lambda: exporter.dropped >= 1, 30.0)
        for _ in range(3):
            assert (await proxy.messages(profile="primary")).status_code == 200
        await eventually(lambda: exporter.dropped >= 8, 30.0)
    told = [r for r in caplog.records if "did not take" in r.getMessage()]
    assert len(told) == 1 and dead in told[0].getMessage()
    assert not [r for r in caplog.records if r.name.startswith("opentelemetry")]


def test_with_no_endpoint_opentelemetry_is_never_imported() -> None:
    """Importing the server and the engine, building an engine and its addons: not one module
    of OpenTelemetry (traces off costs nothing, not even an import)."""
    code = (
        "import sys\n"
        "import claudex.server.serve, claudex.server.app\n"
        "from claudex.engine.engine import Engine\n"
        "from tests.conftest import build_config\n"
        "engine = Engine(build_config(''), env={})\n"
        "assert engine.traces is None\n"
        "assert [a for a in engine.hooks.addons if getattr(a, 'name', '') == 'traces'] == []\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
        "assert not loaded, loaded\n"
        "print('ok')\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


# -- settings and answer facts -------------------------------------------------------------------


def test_where_traces_go() -> None:
    none = TelemetrySettings()
    assert trace_settings(none, {}) is None
    s = trace_settings(none, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"})
    assert s is not None and s.endpoint == "http://c:4318/v1/traces"
    s = trace_settings(none, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/",
                              "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:1/custom"})
    assert s is not None and s.endpoint == "http://t:1/custom"
    own = TelemetrySettings(otlp_endpoint="http://file:4318/v1/traces")
    s = trace_settings(own, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:1/custom"})
    assert s is not None and s.endpoint == "http://file:4318/v1/traces"
    for off in ({"OTEL_SDK_DISABLED": "true"}, {"OTEL_TRACES_EXPORTER": "none"}):
        assert trace_settings(own, off) is None
    s = trace_settings(own, {"OTEL_SERVICE_NAME": "gateway-7",
                             "OTEL_RESOURCE_ATTRIBUTES": "service.name=x,deployment.env=prod",
                             "OTEL_EXPORTER_OTLP_HEADERS": "a=1,b=two%20words",
                             "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-token=abc"})
    assert s is not None and s.service_name == "gateway-7"
    assert dict(s.resource) == {"deployment.env": "prod"} and dict(s.headers) == {"x-token": "abc"}
    s = trace_settings(own, {"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attrs"})
    assert s is not None and s.service_name == "from-attrs"
    assert parse_pairs("a=1, b = %3D ,broken,=x") == {"a": "1", "b": "="}


def test_answer_facts_in_each_protocol() -> None:
    start = ('{"type":"message_start","message":{"id":"m","model":"claude-x-1","content":[],'
             '"stop_reason":null,"usage":{"input_tokens":3}}}')
    delta = ('{"type":"message_delta","delta":{"stop_reason":"tool_use"},'
             '"usage":{"output_tokens":9}}')
    assert answer_facts(start, delta) == ("claude-x-1", ("tool_use",))
    chat = ('{\n  "id": "c", "model": "gpt-4o-2024", "choices": [{"index": 0, "message": '
            '{"content": "\\"model\\": \\"fake\\""}, "finish_reason": "stop"}, {"index": 1, '
            '"finish_reason": "length"}]}')
    assert answer_facts(chat) == ("gpt-4o-2024", ("stop", "length"))
    done = ('{"type":"response.completed","response":{"id":"resp_1","object":"response",'
            '"status":"completed","model":"gpt-5","output":[],"usage":{}}}')
    assert answer_facts(done) == ("gpt-5", ("completed",))
    cut = done.replace('"status":"completed"', '"status":"incomplete","incomplete_details":'
                       '{"reason":"max_output_tokens"}')
    assert answer_facts(cut) == ("gpt-5", ("max_output_tokens",))
    assert answer_facts(None, "") == (None, ())
