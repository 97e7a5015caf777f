"""The profile editor's form: which keys it shows, how, and how its widgets map to TOML values.

`claudex.console.editor` holds the screens; this module holds what the form is made of, so the
screen is left with loading, live checking and saving:

- the field table (`FIELDS` by section, `FORM_KEYS`), the form's layout (`form_columns`) and its
  CSS (`FORM_CSS`): every widget id comes from `widget_id`, in one place;
- the conversions: `fill_field` shows a profile's keys as written, `read_form` turns the widgets
  back into the values to write (None removes a key) and the problems in the form's own text;
- `read_snapshot`, the file as the editor read it, and `check_edit`, the issues `claudex check`
  would report for the file the form would write: these live in `claudex.console.editor_snapshot`
  and stay importable from here.

Widgets are reached through a `WidgetLookup` (the screen's remembered `query_one`): the form is
read on every keystroke.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from textual.containers import Grid, Horizontal, VerticalScroll
from textual.markup import escape
from textual.widget import Widget
from textual.widgets import (
    Button,
    Checkbox,
    Input,
    Label,
    OptionList,
    Select,
    Static,
    Switch,
    TextArea,
)

from claudex.config.model import AUTH_TYPES, OAUTH_PROVIDERS, PROVIDER_TYPES, Config
from claudex.console.editor_snapshot import FileSnapshot, check_edit, read_snapshot, short_key

__all__ = [
    "AUTH_FIELDS",
    "BREAKER_FIELDS",
    "FIELDS",
    "FORM_CSS",
    "FORM_KEYS",
    "LIMIT_FIELDS",
    "MAP_FIELDS",
    "PROVIDER_FIELDS",
    "RETRY_FIELDS",
    "TIMEOUT_FIELDS",
    "UNEDITED_KEYS",
    "Field",
    "FileSnapshot",
    "Kind",
    "WidgetLookup",
    "check_edit",
    "fill_field",
    "form_columns",
    "read_form",
    "read_snapshot",
    "short_key",
    "show_switch_state",
    "widget_id",
]

_W = TypeVar("_W", bound=Widget)
Kind = Literal["text", "int", "number", "select", "switch", "lines", "secret"]


@dataclass(frozen=True)
class Field:
    """One profile key in the form: how it is shown and how its text becomes a TOML value."""

    key: str
    label: str
    kind: Kind = "text"
    options: tuple[str, ...] = ()
    hint: str = ""
    default: bool = True  # switches only


PROVIDER_FIELDS = (
    Field("name", "name", hint="letters, digits . _ -"),
    Field("provider_type", "provider_type", "select", PROVIDER_TYPES, hint="(choose)"),
    Field("base_url", "base_url", hint="https://api.example.com/v1"),
    Field("default_model", "default_model", hint="model for failed-over requests"),
    Field("max_tokens", "max_tokens", "int", hint="no cap"),
    Field("context_window", "context_window", "int", hint="unset: learned from a 400"),
    Field("reserve", "reserve", "number", hint="0 = off; 0.05 keeps 5%"),
    Field("enabled", "enabled", "switch"),
    Field("health_probe", "health_probe", "switch"),
)
AUTH_FIELDS = (
    Field("auth_type", "auth_type", "select", AUTH_TYPES, hint="(default: api-key)"),
    Field("api_key_env", "api_key_env", hint="env var name, e.g. XAI_API_KEY"),
    Field("api_key", "api_key", "secret"),
    Field("oauth_provider", "oauth_provider", "select", OAUTH_PROVIDERS, hint="(not set)"),
    Field("credentials_file", "credentials_file", hint="provider default"),
    Field("token_url", "token_url", hint="https://…/oauth/token"),
    Field("client_id", "client_id"),
    Field("token_command", "token_command", hint="command printing a token"),
)
# Claude on clouds (config/clouds.py): Bedrock's and Vertex's region, Vertex's project, AWS's
# named profile and signing service.
CLOUD_FIELDS = (
    Field("region", "region", hint="us-east-1, us-east5, global"),
    Field("project", "project", hint="Vertex: Google Cloud project"),
    Field("aws_profile", "aws_profile", hint="AWS_PROFILE, else default"),
    Field("aws_service", "aws_service", hint="bedrock / bedrock-mantle"),
)
MAP_FIELDS = (
    Field("models", "models: family=model per line", "lines"),
    Field("custom_headers", "custom_headers: Name=value per line", "lines"),
)
TIMEOUT_FIELDS = (
    Field("connect_timeout", "connect_timeout", "number"),
    Field("read_timeout", "read_timeout", "number"),
    Field("stream_first_byte_timeout", "stream first byte", "number"),
    Field("stream_commit_timeout", "stream commit", "number"),
    Field("stream_idle_timeout", "stream idle", "number"),
)
LIMIT_FIELDS = (
    Field("max_connections", "max_connections", "int"),
    Field("max_concurrency", "max_concurrency", "int"),
    Field("queue_timeout", "queue_timeout", "number"),
    Field("retry_budget", "retry_budget", "number"),
)
BREAKER_FIELDS = (
    Field("failure_threshold", "failure_threshold", "int"),
    Field("recovery_seconds", "recovery_seconds", "number"),
    Field("half_open_probes", "half_open_probes", "int"),
    Field("max_recovery_seconds", "max_recovery_seconds", "number"),
)
RETRY_FIELDS = (
    Field("initial_delay", "initial_delay", "number"),
    Field("multiplier", "multiplier", "number"),
    Field("max_delay", "max_delay", "number"),
    Field("max_attempts", "max_attempts", "int"),
    Field("jitter", "jitter", "select", ("full", "none"), hint="inherit"),
    Field("max_retry_after", "max_retry_after", "number"),
)
FIELDS = (
    *PROVIDER_FIELDS,
    *AUTH_FIELDS,
    *CLOUD_FIELDS,
    *MAP_FIELDS,
    *TIMEOUT_FIELDS,
    *LIMIT_FIELDS,
    *BREAKER_FIELDS,
    *RETRY_FIELDS,
)
# Every profile key the form edits; `backup_providers` has its own list widget.
FORM_KEYS = (*(f.key for f in FIELDS), "backup_providers")
# Claudex's profile keys the form does not show yet: saving leaves them as written.
# Profile numbers with no [proxy]-wide default to show as the placeholder: empty means unset.
_NOT_INHERITED = frozenset({"max_tokens", "context_window", "reserve"})
# The network keys (issue 36: a profile's own route and certificates) too, for now: written by
# hand, kept as written (docs/networks.md).
UNEDITED_KEYS = ("priority", "query_params", "strip_params", "extra_env", "upstream_proxy",
                 "ca_bundle", "client_cert", "client_key", "client_key_password_env")

_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = r"[0-9.eE+-]*"

# The form's part of the editor screen's CSS (the screen prepends it to its own).
FORM_CSS = """
    #editor-columns { height: 1fr; }
    .editor-column { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
    #editor-col-main { width: 50; }
    #editor-col-tuning { width: 42; }
    #editor-col-tuning .field-grid { grid-columns: 21 1fr; }
    #editor-col-side { width: 1fr; }
    .section-title { color: $text-accent; text-style: bold; margin-top: 1; height: 1; }
    .field-grid { layout: grid; grid-size: 2; grid-columns: 18 1fr; grid-rows: 1; height: auto; }
    .field-label { color: $text-muted; }
    .field-label.-error, .field-lines-label.-error, .section-title.-error {
        color: $text-error; text-style: bold;
    }
    .field-grid > * { height: 1; }
    .switch-cell Switch { border: none; height: 1; padding: 0; width: 6; }
    .switch-cell Switch:focus { border: none; background-tint: $foreground 10%; }
    .switch-state { width: auto; padding-left: 1; color: $text-muted; }
    .switch-state.-on { color: $text-success; }
    .field-note { color: $text-muted; height: auto; margin-top: 1; }
    .field-lines-label { height: 1; color: $text-muted; margin-top: 1; }
    #field-models { height: 4; }
    #field-custom_headers { height: 3; }
    #remove-stored-key { height: 1; margin-left: 18; }
    #backup-list { height: 6; border: round $primary 40%; }
    #backup-list:focus { border: round $primary; }
    #backup-add-row, #backup-buttons { height: 1; margin-top: 1; }
    #backup-choice { width: 1fr; }
    #backup-add-row Button { margin-left: 1; min-width: 7; }
    #backup-buttons Button { margin-right: 1; min-width: 7; }
"""


class WidgetLookup(Protocol):
    """Finds the form's widget for a selector, checking its type."""

    def __call__(self, selector: str, expect: type[_W], /) -> _W: ...


def widget_id(key: str) -> str:
    return f"field-{key}"


# -- layout ------------------------------------------------------------------------------------


def form_columns() -> Iterator[Widget]:
    """The form's three columns: provider and auth; timeouts and tuning; backups and maps."""
    with Horizontal(id="editor-columns"):
        with VerticalScroll(id="editor-col-main", classes="editor-column"):
            yield Static("Provider", classes="section-title")
            yield from _rows(PROVIDER_FIELDS)
            yield Static("Authentication", classes="section-title")
            yield from _rows(AUTH_FIELDS)
            yield Checkbox("remove the stored key", id="remove-stored-key", compact=True)
            yield Static("Bedrock, Vertex", classes="section-title")
            yield from _rows(CLOUD_FIELDS)
        with VerticalScroll(id="editor-col-tuning", classes="editor-column"):
            yield Static("Timeouts, seconds", classes="section-title")
            yield from _rows(TIMEOUT_FIELDS)
            yield Static("Limits at this provider", classes="section-title")
            yield from _rows(LIMIT_FIELDS)
            yield Static("Circuit breaker", classes="section-title")
            yield from _rows(BREAKER_FIELDS)
            yield Static("Retry on 429", classes="section-title")
            yield from _rows(RETRY_FIELDS)
            yield Static(
                escape("Empty: inherit from [proxy], [breaker], [retry]."), classes="field-note"
            )
        with VerticalScroll(id="editor-col-side", classes="editor-column"):
            yield Static(
                "Backup chain, tried in order", classes="section-title", id="label-backup_providers"
            )
            yield OptionList(id="backup-list", compact=True)
            with Horizontal(id="backup-add-row"):
                yield Select[str]([], prompt="another profile…", id="backup-choice", compact=True)
                yield Button("Add", id="backup-add", compact=True)
            with Horizontal(id="backup-buttons"):
                yield Button("▲ Up", id="backup-up", compact=True)
                yield Button("▼ Down", id="backup-down", compact=True)
                yield Button("✕ Remove", id="backup-remove", compact=True)
            for field in MAP_FIELDS:
                yield Label(field.label, classes="field-lines-label", id=f"label-{field.key}")
                yield TextArea("", id=widget_id(field.key), compact=True, soft_wrap=False)


def _rows(fields: tuple[Field, ...]) -> Iterator[Widget]:
    """One grid per section: a label column and a widget column, one row per key."""
    cells: list[Widget] = []
    for field in fields:
        cells.append(Label(field.label, classes="field-label", id=f"label-{field.key}"))
        if field.kind == "select":
            cells.append(
                Select[str](
                    [(option, option) for option in field.options],
                    prompt=field.hint,
                    id=widget_id(field.key),
                    compact=True,
                )
            )
        elif field.kind == "switch":
            cells.append(
                Horizontal(
                    Switch(value=field.default, id=widget_id(field.key)),
                    Label("", classes="switch-state", id=f"state-{field.key}"),
                    classes="switch-cell",
                )
            )
        else:
            cells.append(
                Input(
                    placeholder=field.hint,
                    id=widget_id(field.key),
                    compact=True,
                    password=field.kind == "secret",
                    restrict=_NUMBER if field.kind in ("int", "number") else None,
                )
            )
    yield Grid(*cells, classes="field-grid")


# -- values into the form ----------------------------------------------------------------------


def fill_field(
    get: WidgetLookup, field: Field, raw: Mapping[str, Any], config: Config | None
) -> None:
    """Show the key as written in the profile (`raw`); `config` gives the inherited values."""
    value = raw.get(field.key)
    selector = f"#{widget_id(field.key)}"
    if field.kind == "select":
        select: Select[str] = get(selector, Select)
        options = list(field.options)
        if isinstance(value, str) and value not in options:
            options.append(value)  # shown as written; the check says what is wrong with it
        if field.key == "jitter":
            select.prompt = _inherited(config, field.key)
        select.set_options([(option, option) for option in options])
        select.value = value if isinstance(value, str) else Select.NULL
    elif field.kind == "switch":
        switch = get(selector, Switch)
        switch.value = value if isinstance(value, bool) else field.default
        show_switch_state(get, switch)
    elif field.kind == "lines":
        text = "\n".join(f"{k}={v}" for k, v in value.items()) if isinstance(value, dict) else ""
        get(selector, TextArea).text = text
    elif field.kind == "secret":
        stored = isinstance(value, str) and value.strip() != ""
        secret = get(selector, Input)
        secret.value = ""  # never the stored key
        secret.placeholder = (
            "(set — leave empty to keep)" if stored else "(not set — prefer api_key_env)"
        )
        get("#remove-stored-key", Checkbox).display = stored
    else:
        entry = get(selector, Input)
        entry.value = "" if value is None else str(value)
        if field.kind in ("int", "number") and field.key not in _NOT_INHERITED:
            entry.placeholder = _inherited(config, field.key)


def show_switch_state(get: WidgetLookup, switch: Switch) -> None:
    """The on/off word next to a switch."""
    key = (switch.id or "").removeprefix("field-")
    state = get(f"#state-{key}", Label)
    state.update("on" if switch.value else "off")
    state.set_class(switch.value, "-on")


def _inherited(config: Config | None, key: str) -> str:
    """The value an empty override falls back to, for the placeholder."""
    if config is None:
        return "inherit"
    for section in (config.breaker, config.retry, config.proxy):
        if hasattr(section, key):
            value = getattr(section, key)
            if value is None:  # max_concurrency: no fixed limit, the adaptive one applies
                return "inherit (adaptive)"
            shown = f"{value:g}" if isinstance(value, float) else str(value)
            return f"inherit ({shown})"
    return "inherit"


# -- the form into values ----------------------------------------------------------------------


def read_form(
    get: WidgetLookup, raw: Mapping[str, Any], backups: list[str]
) -> tuple[dict[str, Any], list[str]]:
    """The values to write (None removes a key) and problems in the form's own text.

    `raw` is the profile as written, so a key the form leaves at its default stays absent.
    """
    values: dict[str, Any] = {}
    errors: list[str] = []
    for field in FIELDS:
        selector = f"#{widget_id(field.key)}"
        present = field.key in raw
        if field.kind == "select":
            chosen = get(selector, Select).value
            values[field.key] = chosen if isinstance(chosen, str) else None
        elif field.kind == "switch":
            on_ = get(selector, Switch).value
            # Leave an absent key absent while it says the default.
            values[field.key] = on_ if present or on_ != field.default else None
        elif field.kind == "lines":
            text = get(selector, TextArea).text
            table = _parse_lines(text, field.key, errors)
            values[field.key] = table if table or present else None
        elif field.kind == "secret":
            typed = get(selector, Input).value.strip()
            if typed:
                values[field.key] = typed
            elif get("#remove-stored-key", Checkbox).value:
                values[field.key] = None
            # else: not in `values` at all, so the stored key stays as it is
        else:
            text = get(selector, Input).value.strip()
            values[field.key] = _parse_scalar(text, field, errors)
    chain = list(backups)
    values["backup_providers"] = chain if chain or "backup_providers" in raw else None
    return values, errors


def _parse_scalar(text: str, field: Field, errors: list[str]) -> Any:
    if not text:
        return None
    if field.kind == "int":
        if not _INTEGER.fullmatch(text):
            errors.append(f"{field.key}: must be a whole number")
            return None
        return int(text)
    if field.kind == "number":
        if _INTEGER.fullmatch(text):
            return int(text)
        try:
            return float(text)
        except ValueError:
            errors.append(f"{field.key}: must be a number")
            return None
    return text


def _parse_lines(text: str, key: str, errors: list[str]) -> dict[str, str]:
    table: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            errors.append(f"{key}: line {number} must look like name=value")
            continue
        table[name.strip()] = value.strip()
    return table
