"""docs/reference/metrics.md: what `/metrics` exposes, read from the collector itself
(server/metrics.py) run over an engine with one idle profile."""

from __future__ import annotations

from claudex.config.model import Config, Profile
from claudex.docs_gen.markdown import code, table
from claudex.engine.engine import Engine
from claudex.server.metrics import EngineCollector

SOURCES = ("claudex/server/metrics.py",)
_EXAMPLE_PROFILE = "example"
# The names Prometheus's text format gives a family's samples.
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}


def render() -> str:
    profile = Profile(name=_EXAMPLE_PROFILE, provider_type="DirectAnthropic",
                      base_url="http://127.0.0.1:9")
    engine = Engine(Config(profiles=(profile,)), env={})
    rows = []
    for family in EngineCollector(engine).collect():
        names = [family.name + s for s in _SUFFIXES.get(family.type, ("",))]
        labels: tuple[str, ...] = tuple(getattr(family, "_labelnames", ()))
        values: dict[str, list[str]] = {}
        for sample in family.samples:
            for label, value in sample.labels.items():
                if label != "provider" and value not in values.setdefault(label, []):
                    values[label].append(value)
        shown = []
        for label in labels:
            if label == "le" or label not in values:
                shown.append(code(label))
            else:
                shown.append(f"{code(label)} ({', '.join(values[label])})")
        rows.append(["<br>".join(code(n) for n in names), family.type, ", ".join(shown),
                     family.documentation])
    buckets = []
    for family in EngineCollector(engine).collect():
        if family.type == "histogram":
            buckets = [s.labels["le"] for s in family.samples if "le" in s.labels]
            break
    return "\n".join((
        "# Metrics", "",
        "`GET /metrics` answers in Prometheus's text format. Every value is read from the "
        "engine when it is scraped, so the request path pays nothing for it; counters count "
        "since the process started. `provider` is the profile's name.", "",
        table(("name", "type", "labels", "meaning"), rows), "",
        f"Histogram buckets (seconds): {', '.join(buckets)}." if buckets else "", "",
    ))
