"""Whether traces are on, and where they go: `[telemetry] otlp_endpoint` or the standard
OTEL_EXPORTER_OTLP_* variables (the OpenTelemetry specification's "OTLP Exporter Configuration").

Kept apart from traces.py so that deciding costs no import of OpenTelemetry: with no endpoint,
nothing of it is ever loaded.

- `[telemetry] otlp_endpoint` first (the file is the explicit choice), then
  `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the traces URL, used as it is), then
  `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL: `v1/traces` is added, as the specification says).
  The config key is a base URL too, unless it already ends in `/v1/traces`.
- `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn traces off whatever is set.
- Headers (a collector's credentials): `OTEL_EXPORTER_OTLP_TRACES_HEADERS`, else
  `OTEL_EXPORTER_OTLP_HEADERS`, as `key=value,key2=value2` with URL-encoded values. Their values
  are registered with the scrubber, so a log line never shows one.
- `service.name`: `OTEL_SERVICE_NAME`, else a `service.name` in `OTEL_RESOURCE_ATTRIBUTES`, else
  "claudex"; the other resource attributes there are kept.
- claudex exports OTLP/HTTP protobuf only: `OTEL_EXPORTER_OTLP_PROTOCOL=grpc` is named in one
  warning (a gRPC port would not take the requests).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import unquote

from claudex.config.model import TelemetrySettings

log = logging.getLogger("claudex.engine")

TRACES_PATH: Final = "v1/traces"
EXPORT_TIMEOUT_S: Final = 5.0  # one export request; it runs on the batch processor's thread


@dataclass(frozen=True)
class TraceSettings:
    endpoint: str                                  # the full traces URL
    headers: Mapping[str, str] = field(default_factory=dict)
    service_name: str = "claudex"
    resource: Mapping[str, str] = field(default_factory=dict)  # other resource attributes
    timeout_s: float = EXPORT_TIMEOUT_S


def _base_plus_traces(base: str) -> str:
    return base if base.rstrip("/").endswith("/" + TRACES_PATH) else \
        base.rstrip("/") + "/" + TRACES_PATH


def parse_pairs(text: str) -> dict[str, str]:
    """`k=v,k2=v2` with URL-encoded values (the W3C baggage form the OTLP variables use);
    entries without `=` are left out."""
    pairs: dict[str, str] = {}
    for item in text.split(","):
        key, eq, value = item.partition("=")
        if eq and key.strip():
            pairs[key.strip()] = unquote(value.strip())
    return pairs


def trace_settings(telemetry: TelemetrySettings, env: Mapping[str, str]) -> TraceSettings | None:
    """Where traces go, or None: off."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true" or \
            env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    if telemetry.otlp_endpoint:
        endpoint = _base_plus_traces(telemetry.otlp_endpoint)
    elif env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip():
        endpoint = env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"].strip()
    elif env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip():
        endpoint = _base_plus_traces(env["OTEL_EXPORTER_OTLP_ENDPOINT"].strip())
    else:
        return None
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "").strip()
    if protocol and protocol != "http/protobuf":
        log.warning("traces: OTEL_EXPORTER_OTLP_PROTOCOL is %r, but claudex exports OTLP/HTTP "
                    "protobuf only: sending to %s as such", protocol[:20], endpoint)
    headers = parse_pairs(env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
                          or env.get("OTEL_EXPORTER_OTLP_HEADERS") or "")
    resource = parse_pairs(env.get("OTEL_RESOURCE_ATTRIBUTES") or "")
    name = (env.get("OTEL_SERVICE_NAME") or "").strip() or resource.pop("service.name", "") \
        or "claudex"
    resource.pop("service.name", None)
    return TraceSettings(endpoint, headers, name, resource)
