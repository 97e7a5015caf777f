"""Fuzzed inputs for every parser that reads text claudex does not control (issue 6).

Each parser either answers or fails with its own documented error type, and never anything else:

- the config loader: any text, any bytes on disk, random TOML structure, mangled example files
  -> a `Config` or a `ConfigError` whose every issue names the file, a line and a key;
- Retry-After parsing and the 429 decision: any header value -> finite, non-negative waits,
  within `max_retry_after` / `max_delay` as DESIGN.md's failure table says;
- credential files and the token endpoint's answer: any bytes, any JSON shape -> a token, or
  `TokenFileError` / `CredentialError` / `RefreshFailed` naming the file and never a token;
- SSE: any bytes (invalid UTF-8, lone CR, missing blank lines, huge lines) split anywhere into
  the commit watcher, the tail scanner and both stream translators -> no exception, the same
  result for every split, and a well-formed client stream after `finish()`.

Recorded streams split at random are covered by test_sse.py and test_translate_streams.py; the
example-based config checks by test_config.py. `@example`s pin every crash this file found.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import math
import os
import re
import string
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomlkit
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from claudex.config.loader import _PROFILE_KEYS, _PROXY_KEYS, load_config, parse_config
from claudex.config.model import Config, ConfigError, Profile, RetrySettings
from claudex.engine.clock import FakeClock
from claudex.engine.core.backoff import cooldown_seconds, parse_retry_after, rate_limit_decision
from claudex.engine.credentials.cache import AuthHeaders, CredentialError, Credentials
from claudex.engine.credentials.oauth import (
    FORMATS,
    GrantResult,
    RefreshFailed,
    TokenFileError,
    read_token_file,
    request_refresh,
)
from claudex.engine.credentials.token_command import token_from_output
from claudex.providers import anthropic, openai
from claudex.providers.sse import (
    CommitWatcher,
    SignalFn,
    StreamSignal,
    anthropic_signal,
    openai_signal,
    split_events,
)
from claudex.providers.translate import (
    AnthropicToOpenAIStream,
    OpenAIToAnthropicStream,
    ToolNameMap,
)
from claudex.providers.translate.wire import EventReader
from tests.paths import GOLDEN, REPO

ROOT = REPO
EXAMPLE = (ROOT / "profiles.example.toml").read_text(encoding="utf-8")
GOLDEN_STREAMS = sorted(GOLDEN.glob("*_stream_*.json"))

# Deterministic and database-free, so CI sees the same examples every run. For a longer hunt:
# CLAUDEX_FUZZ_EXAMPLES=5000 CLAUDEX_FUZZ_RANDOM=1 pytest tests/providers/test_fuzz_parsers.py
_EXAMPLES = int(os.environ.get("CLAUDEX_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=_EXAMPLES,
    deadline=None,
    derandomize=os.environ.get("CLAUDEX_FUZZ_RANDOM") != "1",
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FEW = settings(FUZZ, max_examples=max(1, _EXAMPLES * 2 // 5))  # for the slower ones
MANY = settings(FUZZ, max_examples=_EXAMPLES * 2)  # for the fast ones


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    """`data` split at the given offsets (taken modulo its length, so any list of ints works)."""
    points = sorted({cut % (len(data) + 1) for cut in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


chunk_cuts = st.lists(st.integers(min_value=0, max_value=1 << 30), max_size=25)

# Text that looks like a token; planted in inputs, it must never come back in a message.
secrets = st.text(string.ascii_letters + string.digits, min_size=16, max_size=24).map(
    lambda tail: "tk_" + tail
)

# Numbers that break naive parsers: past float's range, past Python's 4300-digit limit for
# int<->str conversion once summed, past C long.
HUGE_INTS = [2**63, -(2**63) - 1, 10**400, -(10**400), 9 * 10**4299, -9 * 10**4299]


def json_values(keys: st.SearchStrategy[str], leaves: st.SearchStrategy[Any]) -> Any:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.sampled_from(HUGE_INTS),
        st.floats(),  # nan and +-inf too: json.loads accepts NaN and Infinity
        st.text(max_size=12),
        leaves,
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5),
        max_leaves=14,
    )


# =============================================================================================
# 1. The config loader
# =============================================================================================

FILE = "fuzz.toml"
ENV = {"HOME": "/nonexistent-home", "XAI_API_KEY": "k", "DEEPSEEK_API_KEY": "k"}
def check_loads_or_locates(text: str) -> Config | None:
    """The config property: a Config, or a ConfigError whose every issue is located."""
    try:
        config = parse_config(text, FILE, env=ENV)
    except ConfigError as error:
        assert error.issues
        last_line = text.count("\n") + 1  # TOML ends lines at LF only (CR must precede one)
        for issue in error.issues:
            assert issue.file == FILE
            assert issue.key and issue.message, issue
            assert issue.line is not None, issue
            assert 1 <= issue.line <= last_line, issue
        assert str(error)
        return None
    assert isinstance(config, Config)
    return config


@FUZZ
@given(st.text())
@example("[proxy]\nport = 1\n[[profiles]]\nname = \"a\"\n\rbad")  # a lone CR, always tried
def test_arbitrary_text_loads_or_every_issue_has_a_line(text: str) -> None:
    check_loads_or_locates(text)


@FUZZ
@given(st.binary(), st.sampled_from(["utf-8", "latin-1", "utf-16"]))
def test_arbitrary_bytes_decoded_leniently(raw: bytes, encoding: str) -> None:
    check_loads_or_locates(raw.decode(encoding, "replace"))


@FUZZ
@given(st.integers(min_value=0, max_value=len(EXAMPLE)))
def test_truncated_example_file(length: int) -> None:
    check_loads_or_locates(EXAMPLE[:length])


_SECTION_KEYS = {
    "proxy": sorted(_PROXY_KEYS),
    "breaker": ["failure_threshold", "recovery_seconds", "half_open_probes",
                "max_recovery_seconds"],
    "retry": ["initial_delay", "multiplier", "max_delay", "max_attempts", "jitter",
              "max_retry_after"],
    "health": ["enabled", "interval_seconds", "timeout_seconds", "degraded_latency_ms"],
}
_toml_leaves = st.one_of(
    st.datetimes(timezones=st.none() | st.just(UTC)),
    st.dates(),
    st.times(),
    st.sampled_from(["grok", "a", "OpenAICompatible", "DirectAnthropic", "oauth", "claude",
                     "https://a.test/v1", "127.0.0.1", "0.0.0.0", "XAI_API_KEY", "full"]),
)
_toml_keys = st.one_of(
    st.sampled_from(sorted(_PROFILE_KEYS)), st.text(max_size=8),
    st.sampled_from(["profiles", "proxy", "name", "0"]),
)
_toml_values = json_values(_toml_keys, _toml_leaves).filter(
    lambda value: value is not None and not _has_none(value)
)


def _has_none(value: object) -> bool:
    if isinstance(value, list):
        return any(item is None or _has_none(item) for item in value)
    if isinstance(value, dict):
        return any(item is None or _has_none(item) for item in value.values())
    return False


_profile_tables = st.dictionaries(_toml_keys, _toml_values, max_size=8)
_sections = {
    name: st.dictionaries(st.sampled_from(keys) | st.text(max_size=6), _toml_values, max_size=5)
    | _toml_values
    for name, keys in _SECTION_KEYS.items()
}
_documents = st.fixed_dictionaries(
    {},
    optional={
        **_sections,
        "profiles": st.lists(_profile_tables, max_size=4) | _toml_values,
        "extra": _toml_values,
        "port": _toml_values,
    },
)


def _dump(document: dict[str, Any]) -> str | None:
    try:
        return tomlkit.dumps(document)
    except Exception:  # tomlkit cannot write every structure; those are not our inputs
        return None


@FEW
@given(_documents)
def test_random_toml_structure(document: dict[str, Any]) -> None:
    text = _dump(document)
    if text is not None:
        check_loads_or_locates(text)


# Mostly valid profiles with a few keys replaced or dropped: these get past the per-key checks
# into the cross-checks (names, backup chains and cycles, default profile) and secret lookup.
_NAMES = ["a", "b", "c", "grok"]
_valid_profiles = st.fixed_dictionaries(
    {
        "name": st.sampled_from(_NAMES),
        "provider_type": st.sampled_from(["OpenAICompatible", "DirectAnthropic"]),
        "base_url": st.sampled_from(["https://a.test/v1", "http://127.0.0.1:9"]),
    },
    optional={
        "backup_providers": st.lists(st.sampled_from([*_NAMES, "zz"]), max_size=3),
        "api_key_env": st.sampled_from(["XAI_API_KEY", "UNSET_VAR"]),
        "auth_type": st.sampled_from(["api-key", "oauth", "passthrough"]),
        "oauth_provider": st.sampled_from(["claude", "codex", "chatgpt"]),
        "credentials_file": st.sampled_from(["~/x.json", "~", "/", "/etc/hostname", "a\x00b"])
        | st.text(min_size=1, max_size=8),
        "token_command": st.just("echo t"),
        "recovery_seconds": _toml_values,
        "max_recovery_seconds": st.floats(min_value=0.001, max_value=1e9),
        "initial_delay": st.floats(min_value=0, max_value=100),
        "max_delay": st.floats(min_value=0, max_value=100),
    },
)
_tweaked_profiles = st.tuples(
    _valid_profiles,
    st.dictionaries(_toml_keys, _toml_values, max_size=2),
    st.sets(st.sampled_from(["name", "provider_type", "base_url"]), max_size=1),
).map(lambda parts: {k: v for k, v in {**parts[0], **parts[1]}.items() if k not in parts[2]})


@FEW
@given(
    profiles=st.lists(_tweaked_profiles, max_size=5),
    proxy=st.fixed_dictionaries(
        {},
        optional={
            "default_profile": st.sampled_from([*_NAMES, "zz"]),
            "host": st.sampled_from(["127.0.0.1", "::1", "0.0.0.0", "[::1]", "h"]),
            "auth_token_env": st.sampled_from(["TOKEN", "1BAD"]),
        },
    ),
    retry=st.dictionaries(
        st.sampled_from(_SECTION_KEYS["retry"]),
        st.floats(min_value=0, max_value=100) | _toml_values,
        max_size=3,
    ),
)
def test_nearly_valid_profiles(
    profiles: list[dict[str, Any]], proxy: dict[str, Any], retry: dict[str, Any]
) -> None:
    text = _dump({"proxy": proxy, "retry": retry, "profiles": profiles})
    if text is not None:
        check_loads_or_locates(text)


# Hand-written TOML in the syntax tomlkit never writes: dotted and quoted keys, spaced headers,
# literal and multi-line strings, arrays across lines with comments, CRLF line ends.
_BARE_WORDS = ["proxy", "profiles", "retry", "breaker", "health", "name", "port", "host",
               "base_url", "models", "backup_providers", "x", "a-b", "0"]
_key_parts = st.sampled_from(_BARE_WORDS).flatmap(
    lambda k: st.sampled_from([k, k, f'"{k}"', f"'{k}'", f'"{k}\\u0041"', '""'])
)
_keys = st.lists(_key_parts, min_size=1, max_size=3).flatmap(
    lambda parts: st.sampled_from([".", " . "]).map(lambda sep: sep.join(parts))
)
_ws = st.sampled_from(["", " ", "\t"])
_comments = st.sampled_from(["", " # c", '#x"[=', " # ] } '''"])
_toml_scalars = st.sampled_from(
    ['"s"', "'lit'", '"a\\"b"', '"\\\\"', '"""\nml\\\n  x"""', "'''\nml'\n'''", '"""a""""',
     "''''a'''''", "1", "-0x1F", "0o17", "0b101", "1_000", "+inf", "nan", "-1.5e3", "true",
     "1979-05-27T07:32:00Z", "1979-05-27 07:32:00", "07:32:00", "1979-05-27", '"# no"',
     '"https://a.test/v1"', '"OpenAICompatible"', '"[x]"', "'a = b'"]
)


def _toml_texts(depth: int) -> st.SearchStrategy[str]:
    if depth == 0:
        return _toml_scalars
    inner = _toml_texts(depth - 1)
    items = st.lists(
        st.tuples(_ws, inner, _comments, st.sampled_from(["", "\n", "\r\n"])), max_size=3
    )
    arrays = st.tuples(items, st.booleans()).map(
        lambda t: "["
        + ",".join(a + v + (c + "\n" if c else "") + nl for a, v, c, nl in t[0])
        + ("," if t[1] and t[0] else "")
        + "]"
    )
    tables = st.lists(st.tuples(_keys, inner), max_size=3).map(
        lambda pairs: "{" + ", ".join(f"{k} = {v}" for k, v in pairs) + "}"
    )
    return _toml_scalars | arrays | tables


_statements = st.one_of(
    st.tuples(st.booleans(), _ws, _keys, _ws, _comments).map(
        lambda t: ("[[" if t[0] else "[") + t[1] + t[2] + t[3] + ("]]" if t[0] else "]") + t[4]
    ),
    st.tuples(_ws, _keys, _ws, _ws, _toml_texts(2), _comments).map(
        lambda t: f"{t[0]}{t[1]}{t[2]}={t[3]}{t[4]}{t[5]}"
    ),
    _comments,
)


@FUZZ
@given(st.lists(_statements, max_size=12), st.sampled_from(["\n", "\r\n"]))
def test_hand_written_toml_syntax(statements: list[str], newline: str) -> None:
    text = newline.join(statements)
    try:
        parse_config(text, FILE, env=ENV)
    except ConfigError as error:
        source = text.split("\n")
        for issue in error.issues:
            # An unknown key written bare must be on the line the issue names.
            last = issue.key.rsplit(".", 1)[-1]
            if issue.line and issue.message.startswith("unknown key") and last in ("x", "0"):
                assert last in source[issue.line - 1], (issue, text)
    check_loads_or_locates(text)


_example_lines = EXAMPLE.split("\n")
_value_texts = st.one_of(
    _toml_values.map(lambda value: _dump({"v": value}) or "1").map(
        lambda dumped: dumped.partition("=")[2].strip() or '""'
    ),
    st.sampled_from(["", "[", "{", '"', "'''", "9" * 5000, "[" * 3000, "nan", "-inf",
                     "1979-05-27T07:32:00Z", "0x7fffffffffffffff", "1e999", "true false"]),
    st.text(max_size=10),
)
_mutations = st.one_of(
    st.tuples(st.just("delete"), st.integers(0, 10**6)),
    st.tuples(st.just("duplicate"), st.integers(0, 10**6)),
    st.tuples(st.just("swap"), st.integers(0, 10**6), st.integers(0, 10**6)),
    st.tuples(st.just("value"), st.integers(0, 10**6), _value_texts),
    st.tuples(st.just("insert"), st.integers(0, 10**6),
              st.sampled_from(["[[profiles]]", "[proxy]", "[profiles]", "[retry]",
                               "[[profiles.x]]", "[profiles.models]", "name = \"grok\"",
                               "[breaker]"]) | st.text(max_size=20)),
)


def _mutate(lines: list[str], mutation: tuple[Any, ...]) -> None:
    kind, at = mutation[0], mutation[1] % len(lines)
    if kind == "delete" and len(lines) > 1:
        del lines[at]
    elif kind == "duplicate":
        lines.insert(at, lines[at])
    elif kind == "swap":
        other = mutation[2] % len(lines)
        lines[at], lines[other] = lines[other], lines[at]
    elif kind == "value":
        key, sep, _ = lines[at].partition("=")
        lines[at] = f"{key}={mutation[2]}" if sep else f"{lines[at]} = {mutation[2]}"
    elif kind == "insert":
        lines.insert(at, mutation[2])


@FUZZ
@given(st.lists(_mutations, min_size=1, max_size=6))
@example([("value", 17, "[[profiles]]")])  # a header where a value was, always tried
def test_mutated_example_file(mutations: list[tuple[Any, ...]]) -> None:
    lines = list(_example_lines)
    for mutation in mutations:
        _mutate(lines, mutation)
    check_loads_or_locates("\n".join(lines))


@pytest.fixture(scope="module")
def config_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as directory:
        yield Path(directory)


@FEW
@given(raw=st.binary(max_size=300) | st.text().map(lambda t: t.encode("utf-8", "surrogatepass")))
@example(raw=b"\xef\xbb\xbf\n\n\xff")  # a BOM shifted the line of a bad byte (now fixed)
def test_any_file_on_disk_loads_or_names_the_file(config_dir: Path, raw: bytes) -> None:
    path = config_dir / "profiles.toml"
    path.write_bytes(raw)
    try:
        config = load_config(path, env=ENV)
    except ConfigError as error:
        for issue in error.issues:
            assert issue.file == str(path) and issue.key
        if [issue.key for issue in error.issues] == ["file"]:
            (issue,) = error.issues
            assert issue.message == "not valid UTF-8 text"
            # The line of the first byte that is not UTF-8, counted after any byte-order mark.
            data = raw.removeprefix(b"\xef\xbb\xbf")
            with pytest.raises(UnicodeDecodeError) as bad:
                data.decode("utf-8")
            assert issue.line == data.count(b"\n", 0, bad.value.start) + 1
    else:
        assert config.path == path


@pytest.mark.parametrize("kind", ["missing", "directory", "dangling-symlink", "not-utf8"])
def test_unreadable_files_are_a_config_error_naming_the_file(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "profiles.toml"
    if kind == "directory":
        path.mkdir()
    elif kind == "dangling-symlink":
        path.symlink_to(tmp_path / "nowhere")
    elif kind == "not-utf8":
        path.write_bytes(b'[proxy]\nhost = "\xc3\x28"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path, env=ENV)
    (issue,) = caught.value.issues
    assert issue.file == str(path) and issue.key == "file"
    assert str(path) in str(caught.value)


# =============================================================================================
# 2. Retry-After and the 429 decision
# =============================================================================================

NOW_WALL = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC).timestamp()
_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
_digits = st.integers(min_value=-5, max_value=100) | st.integers(min_value=0, max_value=10**25)


@st.composite
def http_dates(draw: st.DrawFn) -> str:
    """IMF-fixdate, RFC 850 and asctime shapes with any numbers, zones and garbage around."""
    day_name = draw(st.sampled_from(["Sun", "Mon", "Sunday", "Tuesday", "Xyz", ""]))
    day, year = draw(_digits), draw(_digits)
    hour, minute, second = draw(_digits), draw(_digits), draw(_digits)
    month = draw(st.sampled_from([*_MONTHS, "Foo", ""]))
    zone = draw(st.sampled_from(["GMT", "UTC", "+0000", "-2359", "+9999", "EST", "Z", "",
                                 "+99999999999", "-0000"]))
    form = draw(st.sampled_from(["imf", "rfc850", "asctime"]))
    clock = f"{hour:02d}:{minute:02d}:{second:02d}"
    if form == "imf":
        text = f"{day_name}, {day:02d} {month} {year} {clock} {zone}"
    elif form == "rfc850":
        short_year = year % 100 if year >= 0 else year
        text = f"{day_name}, {day:02d}-{month}-{short_year:02d} {clock} {zone}"
    else:
        text = f"{day_name} {month} {day:2d} {clock} {year}"
    return draw(st.text(max_size=3)) + text + draw(st.text(max_size=3))


header_values = st.one_of(
    st.text(max_size=40),
    http_dates(),
    st.floats().map(repr),
    st.integers().map(str),
    st.sampled_from(HUGE_INTS).map(str),
    st.text(st.characters(categories=["Nd"]), min_size=1, max_size=30),  # ٣, ９, ...
    st.sampled_from(["", " ", "nan", "NaN", "inf", "-inf", "Infinity", "-1", "-0", "+5", "1e309",
                     "1e-400", ".5", "5.", "0x10", "1_000", "9" * 400, "9" * 5000, "1" * 309,
                     "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
                     "Sun Nov  6 08:49:37 1994", "Jan 1 00:00:00 9999999999"]),
)
header_names = st.sampled_from(
    ["retry-after", "Retry-After", "RETRY-AFTER", "retry-after-ms", "Retry-After-Ms", "x-other"]
)
_seconds = st.floats(min_value=0.0, max_value=1e300) | st.floats(min_value=0.0, max_value=600.0)


@st.composite
def retry_settings(draw: st.DrawFn) -> RetrySettings:
    """Any settings the config loader accepts (finite, multiplier >= 1, max >= initial)."""
    initial = draw(_seconds)
    return RetrySettings(
        initial_delay=initial,
        multiplier=draw(st.floats(min_value=1.0, max_value=1e300) | st.floats(1.0, 10.0)),
        max_delay=draw(st.floats(min_value=initial, max_value=max(initial, 1e300))),
        max_attempts=draw(st.integers(min_value=1, max_value=10**6)),
        jitter=draw(st.sampled_from(["full", "none"])),
        max_retry_after=draw(_seconds),
    )


def _finite_non_negative(value: float) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value >= 0.0


@FUZZ
@given(
    headers=st.dictionaries(header_names, header_values, max_size=3),
    config=retry_settings(),
    retry_number=st.integers(min_value=1, max_value=10**6),
    now_wall=st.just(NOW_WALL) | st.floats(min_value=0.0, max_value=1e10),
    draw=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
)
@example(headers={"Retry-After": "Jan 1 00:00:00 9999999999"}, config=RetrySettings(),
         retry_number=1, now_wall=NOW_WALL, draw=0.5)  # was OverflowError (a C long year)
@example(headers={"Retry-After": "Sun, 06 Nov 99999999999999999999 08:49:37 GMT"},
         config=RetrySettings(), retry_number=1, now_wall=NOW_WALL, draw=0.5)  # likewise
def test_retry_after_waits_are_finite_non_negative_and_capped(
    headers: dict[str, str], config: RetrySettings, retry_number: int, now_wall: float,
    draw: float,
) -> None:
    asked = parse_retry_after(headers, now_wall)
    assert asked is None or _finite_non_negative(asked)

    decision = rate_limit_decision(retry_number, headers, config, now_wall, rand=lambda: draw)
    assert isinstance(decision.reason, str) and decision.reason
    if retry_number >= config.max_attempts:
        assert decision.wait is None
    elif asked is not None:
        # DESIGN.md: the server's wait is honoured exactly; one over max_retry_after is not waited.
        expected = asked if asked <= config.max_retry_after else None
        assert decision.wait == expected
    else:
        assert decision.wait is not None and _finite_non_negative(decision.wait)
        assert decision.wait <= config.max_delay

    cooldown = cooldown_seconds(headers, config, now_wall)
    assert _finite_non_negative(cooldown)
    assert cooldown == (config.initial_delay if asked is None else asked)


# =============================================================================================
# 3. Credential files, the refresh grant, token commands
# =============================================================================================

CLOCK = FakeClock()
NOW_MS = int(CLOCK.wall() * 1000)
_CREDENTIAL_KEYS = st.sampled_from(
    ["claudeAiOauth", "tokens", "accessToken", "refreshToken", "expiresAt", "access_token",
     "refresh_token", "id_token", "expires_at", "expires_in", "error", "type", "scopes"]
) | st.text(max_size=6)
_expiries = st.one_of(
    st.integers(min_value=NOW_MS - 10**6, max_value=NOW_MS + 10**8),  # ms, near now
    st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from(HUGE_INTS),
    st.floats(),
    st.datetimes(timezones=st.none() | st.just(UTC)).map(lambda d: d.isoformat()),
    st.sampled_from(["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-23:59", "garbage",
                     "2025-01-01T00:00:00Z", ""]),
)


def _token_docs(secret: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    anything = json_values(_CREDENTIAL_KEYS, secret)
    token = secret | anything
    claude = st.fixed_dictionaries(
        {},
        optional={"accessToken": token, "refreshToken": token,
                  "expiresAt": _expiries | anything},
    )
    codex = st.fixed_dictionaries(
        {},
        optional={"access_token": token, "refresh_token": token, "id_token": token,
                  "expires_at": _expiries | anything, "expiresAt": _expiries},
    )
    return st.one_of(
        st.fixed_dictionaries({"claudeAiOauth": claude | anything}, optional={"other": anything}),
        st.fixed_dictionaries({"tokens": codex | anything}, optional={"OPENAI_API_KEY": token}),
        anything,
    )


def _planted(document: object) -> set[str]:
    """Every planted secret in a document, keys included."""
    text = json.dumps(document)
    return set(re.findall(r"tk_[A-Za-z0-9]{16,24}", text))


def _assert_clean(message: str, secrets_in: set[str]) -> None:
    for secret in secrets_in:
        assert secret not in message, (secret, message)


@pytest.fixture(scope="module")
def cred_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as directory:
        yield Path(directory)


def _read(provider: str, path: Path) -> None:
    """read_token_file's property: a token, or a TokenFileError naming the file, never a token."""
    text = path.read_bytes().decode("utf-8", "replace")
    planted = set(re.findall(r"tk_[A-Za-z0-9]{16,24}", text))
    try:
        token, doc = read_token_file(FORMATS[provider], path)
    except TokenFileError as error:
        assert str(path) in str(error)
        _assert_clean(str(error), planted)
    else:
        assert isinstance(token.access_token, str) and token.access_token
        assert token.expires_at is None or not math.isnan(token.expires_at)
        assert isinstance(doc, dict)


@FUZZ
@given(provider=st.sampled_from(["claude", "codex"]), doc=_token_docs(secrets))
@example(provider="claude",  # was OverflowError: an int past float's range
         doc={"claudeAiOauth": {"accessToken": "tk_AAAAAAAAAAAAAAAA", "expiresAt": 10**400}})
@example(provider="codex",
         doc={"tokens": {"access_token": "tk_AAAAAAAAAAAAAAAA", "expires_at": -(10**400)}})
def test_any_json_credentials_file(cred_dir: Path, provider: str, doc: Any) -> None:
    path = cred_dir / f"{provider}.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    _read(provider, path)


_DEEP = "[" * 100_000 + "]" * 100_000


@FUZZ
@given(
    provider=st.sampled_from(["claude", "codex"]),
    raw=st.one_of(
        st.binary(max_size=200),
        st.tuples(st.binary(max_size=30), secrets, st.binary(max_size=30)).map(
            lambda parts: parts[0] + parts[1].encode() + parts[2]
        ),
        st.text(max_size=60).map(lambda t: t.encode("utf-8", "surrogatepass")),
    ),
)
@example(provider="claude", raw=_DEEP.encode())  # was RecursionError out of json.loads
@example(provider="codex",  # was ValueError: an integer literal past 4300 digits
         raw=b'{"tokens": {"access_token": "tk_AAAAAAAAAAAAAAAA", "expires_at": '
         + b"9" * 5000 + b"}}")
@example(provider="claude",  # parses, but copying the document recursed too deeply
         raw=b'{"claudeAiOauth": {"accessToken": "tk_AAAAAAAAAAAAAAAA"}, "x": '
         + b"[" * 900 + b"]" * 900 + b"}")
@example(provider="claude",  # a quoted secret inside broken JSON
         raw=b'{"claudeAiOauth": {"accessToken": "tk_BBBBBBBBBBBBBBBB", }')
def test_any_bytes_credentials_file(cred_dir: Path, provider: str, raw: bytes) -> None:
    path = cred_dir / f"raw-{provider}.json"
    path.write_bytes(raw)
    _read(provider, path)


def test_credentials_path_that_is_a_directory_or_missing(tmp_path: Path) -> None:
    for path in (tmp_path, tmp_path / "absent.json"):
        with pytest.raises(TokenFileError) as caught:
            read_token_file(FORMATS["claude"], path)
        assert str(path) in str(caught.value)


# The token endpoint's answers: any status, any bytes, any JSON shape.
_grant_bodies = st.one_of(
    st.binary(max_size=100),
    json_values(_CREDENTIAL_KEYS, secrets).map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {},
        optional={
            "access_token": secrets | json_values(_CREDENTIAL_KEYS, secrets),
            "refresh_token": secrets | json_values(_CREDENTIAL_KEYS, secrets),
            "id_token": secrets,
            "expires_in": json_values(_CREDENTIAL_KEYS, st.nothing())
            | st.floats(min_value=1e290)
            | st.sampled_from([3600, 0.001, 1e306, 10**400, float("inf")]),
            "error": json_values(_CREDENTIAL_KEYS, st.nothing()),
        },
    ).map(lambda v: json.dumps(v).encode()),
    st.just(_DEEP.encode()),
)
_statuses = st.sampled_from([200, 200, 200, 400, 401, 500, 302])


def _endpoint(status: int, body: bytes) -> httpx.AsyncClient:
    def answer(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body,
                              headers={"content-type": "application/json"})

    return httpx.AsyncClient(transport=httpx.MockTransport(answer))


@FUZZ
@given(status=_statuses, body=_grant_bodies)
@example(status=200, body=_DEEP.encode())  # was RecursionError out of response.json()
@example(status=200,  # was OverflowError: an int past float's range
         body=b'{"access_token": "tk_CCCCCCCCCCCCCCCC", "expires_in": 1' + b"0" * 400 + b"}")
def test_any_token_endpoint_answer(status: int, body: bytes) -> None:
    planted = set(re.findall(r"tk_[A-Za-z0-9]{16,24}", body.decode("utf-8", "replace")))

    async def refresh() -> GrantResult:
        async with _endpoint(status, body) as http:
            return await request_refresh(http, "http://127.0.0.1:9/token", "cid",
                                         "tk_REFRESH0000000000")

    try:
        grant = asyncio.run(refresh())
    except RefreshFailed as error:
        # A short plain error code (`invalid_grant`) is echoed on purpose; tokens are not.
        planted -= {secret for secret in planted if f"({secret})" in error.reason}
        _assert_clean(error.reason, planted)
    else:
        assert status == 200 and grant.access_token
        assert grant.expires_in is None or (math.isfinite(grant.expires_in)
                                            and grant.expires_in > 0)


def _oauth_profile(provider: str, path: Path) -> Profile:
    return Profile(
        name="fuzz", provider_type="DirectAnthropic", base_url="https://a.test",
        auth_type="oauth", oauth_provider=provider, credentials_file=str(path),
        token_url="http://127.0.0.1:9/token",
    )


_expiring = st.integers(min_value=NOW_MS - 10**7, max_value=NOW_MS + 30_000)


@FEW
@given(
    provider=st.sampled_from(["claude", "codex"]),
    doc=_token_docs(secrets)
    | st.builds(
        lambda access, refresh, expires, extra: {
            "claudeAiOauth": {"accessToken": access, "refreshToken": refresh,
                              "expiresAt": expires},
            "tokens": {"access_token": access, "refresh_token": refresh,
                       "expires_at": expires // 1000, "id_token": access},
            "extra": extra,
        },
        secrets, secrets, _expiring,
        json_values(_CREDENTIAL_KEYS, st.sampled_from(["\ud800", "x"])),
    ),
    status=_statuses,
    body=_grant_bodies,
)
@example(provider="claude",  # was OverflowError writing expiresAt = now + 1e306 s
         doc={"claudeAiOauth": {"accessToken": "tk_DDDDDDDDDDDDDDDD",
                                "refreshToken": "tk_EEEEEEEEEEEEEEEE", "expiresAt": NOW_MS}},
         status=200, body=b'{"access_token": "tk_FFFFFFFFFFFFFFFF", "expires_in": 1e306}')
@example(provider="codex",  # was OverflowError: a date string expiry moved past year 9999
         doc={"tokens": {"access_token": "tk_DDDDDDDDDDDDDDDD",
                         "refresh_token": "tk_EEEEEEEEEEEEEEEE",
                         "expires_at": "2025-01-01T00:00:00Z"}},
         status=200, body=b'{"access_token": "tk_FFFFFFFFFFFFFFFF", "expires_in": 1e300}')
@example(provider="claude",  # was UnicodeEncodeError writing a lone surrogate back
         doc={"claudeAiOauth": {"accessToken": "tk_DDDDDDDDDDDDDDDD",
                                "refreshToken": "tk_EEEEEEEEEEEEEEEE", "expiresAt": NOW_MS},
              "note": "\ud800"},
         status=200, body=b'{"access_token": "tk_FFFFFFFFFFFFFFFF", "expires_in": 3600}')
def test_credentials_raise_only_credential_error(
    cred_dir: Path, provider: str, doc: Any, status: int, body: bytes
) -> None:
    path = cred_dir / f"creds-{provider}.json"
    # ensure_ascii keeps lone surrogates writable as \\ud800 escapes, as other tools write them.
    path.write_text(json.dumps(doc), encoding="utf-8")
    planted = _planted(doc)

    async def use() -> None:
        async with _endpoint(status, body) as http:
            credentials = Credentials(_oauth_profile(provider, path), env={}, http=http,
                                      wall=CLOCK.wall)
            try:
                headers = await credentials.auth_headers()
            except CredentialError as error:
                assert str(path) in str(error)
                _assert_clean(str(error), planted)
                headers = AuthHeaders({}, "tk_NOT_A_TOKEN000000")
            assert headers is not None
            retried = await credentials.refresh_after_401(headers)
            assert isinstance(retried, bool)
            if credentials.needs_login is not None:
                _assert_clean(str(credentials.needs_login), planted)

    asyncio.run(use())


@FUZZ
@given(st.text() | st.binary().map(lambda b: b.decode("utf-8", "replace")))
def test_token_from_output_is_the_first_non_blank_line(output: str) -> None:
    token = token_from_output(output)
    if not output.strip():
        assert token is None
    else:
        assert token and token == token.strip() and token in output
        assert token.splitlines() == [token]


# =============================================================================================
# 4. SSE: the commit watcher, the tail scanner and both stream translators
# =============================================================================================

_SSE_KEYS = st.sampled_from(
    ["type", "index", "delta", "content", "text", "partial_json", "content_block", "id", "name",
     "input", "message", "model", "usage", "stop_reason", "error", "choices", "tool_calls",
     "function", "arguments", "finish_reason", "refusal", "role", "created", "prompt_tokens",
     "completion_tokens", "prompt_tokens_details", "cached_tokens", "input_tokens",
     "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
     "function_call", "reasoning_content", "code"]
) | st.text(max_size=5)
_SSE_WORDS = st.sampled_from(
    ["message_start", "content_block_start", "content_block_delta", "content_block_stop",
     "message_delta", "message_stop", "ping", "error", "text", "tool_use", "text_delta",
     "input_json_delta", "thinking", "stop", "tool_calls", "length", "end_turn", "assistant"]
)
_sse_json = json_values(_SSE_KEYS, _SSE_WORDS)
_sse_lines = st.one_of(
    _sse_json.map(lambda v: "data: " + json.dumps(v, ensure_ascii=False)),
    _sse_json.map(lambda v: "data:" + json.dumps(v)),
    _SSE_WORDS.map(lambda w: "event: " + w),
    st.text(max_size=15).map(lambda t: "event:" + t),
    st.text(max_size=30).map(lambda t: "data: " + t),
    st.sampled_from(["data: [DONE]", ":", ": ping", "id: 7", "retry: 10", "data", "event",
                     "data: " + "[" * 5000, "data: {" + '"a":' * 3000, "x" * 3000]),
    st.text(max_size=20),
)
_terminators = st.sampled_from(["\n", "\n", "\r\n", "\r", "\n\n", "\n\n", "\r\n\r\n", "\r\r", ""])
_garbage_streams = st.one_of(
    st.lists(st.tuples(_sse_lines, _terminators), max_size=12).map(
        lambda lines: "".join(line + end for line, end in lines).encode("utf-8", "surrogatepass")
    ),
    st.binary(max_size=300),
)


def _golden_inputs() -> list[bytes]:
    streams = []
    for path in GOLDEN_STREAMS:
        case = json.loads(path.read_text(encoding="utf-8"))
        streams.append(case["input"].encode("utf-8"))
    return streams


@st.composite
def mutated_recordings(draw: st.DrawFn) -> bytes:
    """A recorded upstream stream with bytes inserted, deleted or repeated."""
    data = bytearray(draw(st.sampled_from(_golden_inputs())))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["insert", "delete", "repeat"]))
        if kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8)
                               | st.sampled_from([b"\r", b"\n", b"\n\n", b"\xff", b"\xe2\x80"]))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 20))]
        else:
            data[at:at] = data[at : at + draw(st.integers(1, 200))]
    return bytes(data)


streams = _garbage_streams | mutated_recordings()

# Inputs that crashed a parser before the fixes in this change; each stays as an @example.
CHOICES_NOT_A_LIST = b'data: {"choices": 5}\n\n'
TOOL_CALLS_NOT_A_LIST = b'data: {"choices": [{"delta": {"tool_calls": 7}}]}\n\n'
UNHASHABLE_TOOL_ID = (b'data: {"choices": [{"delta": {"tool_calls": '
                      b'[{"id": [1], "function": {"name": "x"}}]}}]}\n\n')
TOO_DEEP = b"data: " + b"[" * 100_000 + b"\n\n"
DEEP_BUT_PARSEABLE = (b'data: {"choices": [{"delta": {"content": "x"}}], "id": '
                      + b"[" * 980 + b"]" * 980 + b"}\n\n")
DEEP_ANTHROPIC = (b'event: message_start\ndata: {"type": "message_start", "message": {"id": '
                  + b"[" * 980 + b"]" * 980 + b"}}\n\n")
DEEP_ERROR_MESSAGE = (b'event: error\ndata: {"type": "error", "error": {"message": '
                      + b"[" * 980 + b"]" * 980 + b"}}\n\n")
_N = b"9" * 4300
USAGE_PAST_4300_DIGITS = (b'data: {"choices": [{"delta": {"content": "x"}}], "usage": '
                          b'{"prompt_tokens": ' + _N + b', "prompt_tokens_details": '
                          b'{"cached_tokens": -' + _N + b"}}}\n\ndata: [DONE]\n\n")
ANTHROPIC_USAGE_PAST_4300_DIGITS = (
    b'event: message_delta\ndata: {"type": "message_delta", "delta": {}, "usage": '
    b'{"input_tokens": ' + _N + b', "cache_read_input_tokens": ' + _N + b"}}\n\n"
    b'event: message_stop\ndata: {"type": "message_stop"}\n\n'
)
# Not a crash: an unterminated error event flushed by finish() was followed by a normal ending.
O2A_ERROR_AT_EOF = (b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n'
                    b'data: {"error": {"message": "x"}}')
A2O_ERROR_AT_EOF = (b'event: message_start\ndata: {"type": "message_start", "message": {}}\n\n'
                    b'event: error\ndata: {"type": "error", "error": {"message": "x"}}')
CRASHERS = [O2A_ERROR_AT_EOF, A2O_ERROR_AT_EOF, CHOICES_NOT_A_LIST, TOOL_CALLS_NOT_A_LIST,
            UNHASHABLE_TOOL_ID, TOO_DEEP, DEEP_BUT_PARSEABLE, DEEP_ANTHROPIC, DEEP_ERROR_MESSAGE,
            USAGE_PAST_4300_DIGITS, ANTHROPIC_USAGE_PAST_4300_DIGITS]


def _first_signal(signal: SignalFn, pieces: list[bytes]) -> tuple[StreamSignal, str]:
    """Feed until the first decisive signal, as streaming.open_stream does."""
    watcher = CommitWatcher(signal)
    for piece in pieces:
        result = watcher.feed(piece)
        if result is not StreamSignal.NONE:
            return result, watcher.error_message
    return StreamSignal.NONE, ""


@MANY
@given(data=streams, cuts=chunk_cuts, protocol=st.sampled_from(["anthropic", "openai"]))
@example(data=CHOICES_NOT_A_LIST, cuts=[], protocol="openai")  # was TypeError
@example(data=TOO_DEEP, cuts=[], protocol="anthropic")  # was RecursionError
@example(data=DEEP_ERROR_MESSAGE, cuts=[], protocol="anthropic")  # was RecursionError (str)
def test_commit_watcher_never_raises_and_ignores_how_bytes_are_split(
    data: bytes, cuts: list[int], protocol: str
) -> None:
    signal = anthropic_signal if protocol == "anthropic" else openai_signal
    whole = _first_signal(signal, [data])
    assert _first_signal(signal, _cut(data, cuts)) == whole
    assert isinstance(whole[1], str)
    # Pass-through streams are relayed whole after the commit; the tail scanner sees them all.
    scanner = (anthropic if protocol == "anthropic" else openai).tail_scanner()
    reference = (anthropic if protocol == "anthropic" else openai).tail_scanner()
    for piece in _cut(data, cuts):
        scanner.feed(piece)
    reference.feed(data)
    assert (scanner.saw_error, scanner.saw_end) == (reference.saw_error, reference.saw_end)
    buffer = bytearray(data)
    split_events(buffer)
    assert len(buffer) <= len(data)


Translator = OpenAIToAnthropicStream | AnthropicToOpenAIStream


def _translator(direction: str, include_usage: bool) -> Translator:
    if direction == "o2a":
        return OpenAIToAnthropicStream(tool_names=ToolNameMap(), model="m")
    return AnthropicToOpenAIStream(tool_names=ToolNameMap(), model="m",
                                   include_usage=include_usage, created=0)


def _translate(make: Callable[[], Translator], pieces: list[bytes]) -> bytes:
    codec = make()
    out = b"".join(codec.feed(piece) for piece in pieces) + codec.finish()
    # After finish (or an error) the stream is over: nothing more comes out.
    assert codec.finish() == b""
    assert codec.feed(b'data: {"choices": [{"delta": {"content": "late"}}]}\n\n') == b""
    return out


def _client_events(out: bytes) -> list[tuple[str | None, str]]:
    reader = EventReader()
    return [(event.event, event.data) for event in reader.feed(out) + reader.flush()]


def _assert_well_formed(direction: str, out: bytes) -> None:
    """The client stream ends exactly once: normally, or with one error event, last.

    (Event-by-event validation is test_translate_streams.py's job: garbage upstream tool
    arguments legitimately stay garbage, so a full validator would reject them.)"""
    events = _client_events(out)
    assert events, "finish() always ends the client stream"
    payloads = [None if data == "[DONE]" else json.loads(data) for _name, data in events]
    assert all(payload is None or isinstance(payload, dict) for payload in payloads)
    if direction == "o2a":
        kinds = [name for name, _data in events]
        assert kinds == [payload["type"] for payload in payloads if payload is not None]
        assert kinds[0] in ("message_start", "error")
        assert kinds[-1] in ("message_stop", "error")
        assert kinds.count("error") + kinds.count("message_stop") == 1
    else:
        errors = [i for i, payload in enumerate(payloads) if payload and "error" in payload]
        done = [i for i, payload in enumerate(payloads) if payload is None]
        assert errors + done == [len(events) - 1]


@MANY
@given(data=streams, cuts=chunk_cuts, direction=st.sampled_from(["o2a", "a2o"]),
       include_usage=st.booleans())
@example(data=CHOICES_NOT_A_LIST, cuts=[], direction="o2a", include_usage=False)
@example(data=TOOL_CALLS_NOT_A_LIST, cuts=[], direction="o2a", include_usage=False)
@example(data=UNHASHABLE_TOOL_ID, cuts=[], direction="o2a", include_usage=False)
@example(data=TOO_DEEP, cuts=[], direction="o2a", include_usage=False)
@example(data=TOO_DEEP, cuts=[], direction="a2o", include_usage=False)
@example(data=DEEP_BUT_PARSEABLE, cuts=[], direction="o2a", include_usage=False)
@example(data=DEEP_ANTHROPIC, cuts=[], direction="a2o", include_usage=False)
@example(data=DEEP_ERROR_MESSAGE, cuts=[], direction="a2o", include_usage=False)
@example(data=USAGE_PAST_4300_DIGITS, cuts=[], direction="o2a", include_usage=False)
@example(data=ANTHROPIC_USAGE_PAST_4300_DIGITS, cuts=[], direction="a2o", include_usage=True)
@example(data=O2A_ERROR_AT_EOF, cuts=[], direction="o2a", include_usage=False)
@example(data=A2O_ERROR_AT_EOF, cuts=[], direction="a2o", include_usage=False)
def test_stream_translators_never_raise_and_ignore_how_bytes_are_split(
    data: bytes, cuts: list[int], direction: str, include_usage: bool
) -> None:
    def make() -> Translator:
        return _translator(direction, include_usage)

    whole = _translate(make, [data])
    assert _translate(make, _cut(data, cuts)) == whole
    _assert_well_formed(direction, whole)
    # As in streaming.open_stream: the translated bytes go through the client's commit watcher.
    client_signal = anthropic_signal if direction == "o2a" else openai_signal
    _first_signal(client_signal, [whole])


@pytest.mark.parametrize("direction", ["o2a", "a2o"])
@pytest.mark.parametrize(
    "data",
    [
        b"data: " + b"x" * 300_000,  # one huge line, never terminated
        b"data: x\r" * 20_000,  # lone CRs only
        b"event: message_start\ndata: {}\n" * 5_000,  # no blank line ever
        b"\xff\xfe\x00" * 30_000,  # not UTF-8 at all
    ],
    ids=["huge-line", "lone-cr", "no-blank-line", "binary"],
)
def test_pathological_streams_fed_byte_chunks_terminate(direction: str, data: bytes) -> None:
    codec = _translator(direction, include_usage=True)
    for start in range(0, len(data), 4096):
        codec.feed(data[start : start + 4096])
    _assert_well_formed(direction, codec.finish())
    watcher = CommitWatcher(openai_signal if direction == "o2a" else anthropic_signal)
    for start in range(0, len(data), 4096):
        watcher.feed(data[start : start + 4096])


@pytest.mark.parametrize("data", CRASHERS, ids=lambda d: d[:24].decode("utf-8", "replace"))
def test_former_crashers_in_both_directions(data: bytes) -> None:
    for direction in ("o2a", "a2o"):
        out = _translate(functools.partial(_translator, direction, True), [data])
        _assert_well_formed(direction, out)
    for signal in (anthropic_signal, openai_signal):
        _first_signal(signal, [data])
