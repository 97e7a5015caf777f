"""The `[history]` table's schema: the journal's file, how long and how much it keeps, and the
switch (see claudex/engine/history/journal.py); and `[telemetry]`'s, beside it: both say what
claudex keeps or sends about the requests it served."""

from __future__ import annotations

from collections.abc import Mapping

from claudex.config._checks import Checker, _boolean, _number, _text, _url

HISTORY_KEYS: Mapping[str, Checker] = {
    "enabled": _boolean,
    "path": _text,
    "max_age_days": _number(above=0),
    "max_mb": _number(above=0),
}

# `[telemetry]` (engine/addons/traces.py): where traces go. The URL may not hold a user or a
# password (`_url`): a collector's credentials belong in OTEL_EXPORTER_OTLP_HEADERS.
TELEMETRY_KEYS: Mapping[str, Checker] = {
    "otlp_endpoint": _url(allow_query=False),
}
