"""Which header values claudex shows as they were sent, and how it masks every other one.

`shown_headers` is the one place that decides it, for every place a client's headers are
recorded or shown: the request event (and so `GET /_claudex/events`), the history journal,
`GET /_claudex/history`, the console's request detail, `claudex history` (text and `--json`),
the log, and the fake providers' request log. A header is kept by name always; its value is
shown as is only when the name is on the allow-list below, and even then it passes the scrubber
(a registered secret, or a value shaped like a key, is masked inside it). Every other value is
masked the way credentials are (`mask_secret`: `…1111`, `sk-…abcd`), with an auth scheme kept
(`Bearer sk-…abcd`).

Why an allow-list: a list of names known to hold secrets (`authorization`, `x-api-key`, ...)
always misses one — Azure's `api-key`, Google's `x-goog-api-key`, a gateway's
`x-portkey-api-key` or `cf-aig-authorization`, a header a user adds (`x-my-token`). A header
nobody thought of is masked; a useful one that is masked costs a line here, a secret that is
shown costs a leaked key in a bug report.

What is on the list, and why each is harmless and worth seeing in an incident:
- HTTP's own description of the message (`content-type`, `content-length`, `accept`,
  `accept-encoding`, `accept-language`, `cache-control`, `connection`, `content-encoding`,
  `expect`, `host`, `pragma`, `te`, `transfer-encoding`, `user-agent`): which client, which
  body, whether it asked for a stream.
- Anthropic's protocol headers and what Claude Code sends beside them (`anthropic-version`,
  `anthropic-beta`, `anthropic-dangerous-direct-browser-access`, `x-app`,
  `x-claude-code-session-id`): the API version and betas decide how a request is served, the
  session id is the conversation claudex keys its memory on (DESIGN.md "Conversations").
- OpenAI's and Codex CLI's (`openai-beta`, `originator`, `version`, `session_id`,
  `conversation_id`): which client build, which conversation.
- The SDKs' telemetry, `x-stainless-*` (language, OS, runtime, package version, retry count,
  timeout): which SDK retried, how long it was willing to wait.
- Trace context (`traceparent`, `tracestate`, `x-request-id`): ids that join a request to the
  client's own trace; identifiers, not credentials.
- claudex's own request headers, `x-claudex-*` (`x-claudex-failover: off`).

Left off on purpose although they hold no credential: account and organisation ids
(`chatgpt-account-id`, `openai-organization`, `openai-project`), `baggage`, `referer`,
`x-forwarded-*` — they say who, not what went wrong, and may carry more than they should.

Upstream answers: claudex records none of an upstream's response headers. `retry-after` and
its kin are read as numbers; `request-id`, `x-request-id` and the rate-limit headers are passed
to the client only (engine/core/answers.py `passed_headers`); a malformed header line becomes
the exception's type name (engine/core/classify.py). Error bodies pass the scrubber with the
values of the client's masked headers too (`masked_values`, engine/core/answers.py
`scrub_error_body`), since claudex forwards those headers and an upstream may quote one back
("invalid api-key ..."), and the attempt's message is read from the scrubbed body. Whatever
comes to record response headers (traces) shows them through `shown_headers` too.

Cost: this runs for each request event, so it is remembered. A client sends the same headers
on request after request and every request event keeps its copy in the event backlog (2,000 of
them): the same header set gives the same dict object, so the backlog holds one copy, not 2,000
(about 1.3 µs for Claude Code's twenty headers). A set seen for the first time (its
content-length differs) is built from the (name, value) pairs already decided, so each distinct
value is scrubbed or masked once (about 5 µs). Both memories are forgotten when a secret is
registered (a value shown before may have to be masked now) and when they are full.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, Generic, TypeVar

from claudex.engine.masking.secrets import SCRUBBER, mask_secret

K = TypeVar("K")
V = TypeVar("V")

SHOWN_AS_IS: Final = frozenset({
    # HTTP's description of the message
    "accept", "accept-encoding", "accept-language", "cache-control", "connection",
    "content-encoding", "content-length", "content-type", "expect", "host", "pragma", "te",
    "transfer-encoding", "user-agent",
    # Anthropic's protocol and Claude Code
    "anthropic-version", "anthropic-beta", "anthropic-dangerous-direct-browser-access", "x-app",
    "x-claude-code-session-id",
    # OpenAI's and Codex CLI's
    "openai-beta", "originator", "version", "session_id", "conversation_id",
    # trace context
    "traceparent", "tracestate", "x-request-id",
})
SHOWN_AS_IS_PREFIXES: Final = ("x-stainless-", "x-claudex-")

# Auth schemes kept in front of a masked value: `Bearer sk-…abcd` still says how it was sent.
_SCHEMES: Final = frozenset({"bearer", "basic", "token"})
# A value that is already a mask (a journal row shown again, a header the engine masked): at
# most four characters either side of the ellipsis, after a scheme. Masking it again would
# only lose its last characters.
_MASKED: Final = re.compile(r"(?:(?:bearer|basic|token) )?[^…]{0,4}…[^…]{0,4}",
                            re.IGNORECASE | re.DOTALL)


def shown_as_is(name: str) -> bool:
    """Whether a header called `name` (any case) has its value shown, scrubbed, rather than
    masked."""
    lower = name.lower()
    return lower in SHOWN_AS_IS or lower.startswith(SHOWN_AS_IS_PREFIXES)


def masked_value(value: str) -> str:
    """A header value as credentials are shown: `…cdef`, `Bearer sk-…cdef`; a value that is
    already a mask stays as it is."""
    if _MASKED.fullmatch(value):
        return value
    scheme, space, rest = value.partition(" ")
    if space and scheme.lower() in _SCHEMES:
        return f"{scheme} {mask_secret(rest.strip())}"
    return mask_secret(value)


def masked_values(headers: Mapping[str, str]) -> list[str]:
    """The values `shown_headers` masks, without their auth scheme: what an upstream's error
    may quote back of the headers it was sent, to be masked there too (error paths only).
    Values shorter than 8 characters are left out: they would mask ordinary words ("true",
    "cookie") in the upstream's sentence, and their mask shows nothing of them anyway."""
    found = []
    for name, value in headers.items():
        if not shown_as_is(name):
            scheme, space, rest = value.strip().partition(" ")
            secret = rest.strip() if space and scheme.lower() in _SCHEMES else value.strip()
            if len(secret) >= _QUOTABLE:
                found.append(secret)
    return found


_QUOTABLE: Final = 8


def shown_header(name: str, value: str) -> str:
    """What is shown of one header's value."""
    return SCRUBBER.text(value) if shown_as_is(name) else masked_value(value)


def shown_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """`headers` as claudex records and shows them: every name, allow-listed values scrubbed,
    every other value masked. Applying it again changes nothing. The result is shared with
    every caller that passed the same headers: never mutate it."""
    key = tuple(headers.items())
    shown = _SHOWN.get(key)
    if shown is None:
        values = _VALUES.current()
        shown = {}
        for pair in key:
            value = values.get(pair)
            if value is None:
                value = values[pair] = shown_header(*pair)
            shown[pair[0]] = value
        _SHOWN.put(key, shown)
    return shown


class _Remembered(Generic[K, V]):
    """A dict of results forgotten whenever a secret is registered (a value shown before may
    have to be masked now) and when it holds `size` entries."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._seen: dict[K, V] = {}
        self._generation = -1

    def current(self) -> dict[K, V]:
        if self._generation != SCRUBBER.generation or len(self._seen) >= self._size:
            self._seen = {}
            self._generation = SCRUBBER.generation
        return self._seen

    def get(self, key: K) -> V | None:
        if self._generation != SCRUBBER.generation:
            return None
        return self._seen.get(key)

    def put(self, key: K, value: V) -> None:
        self.current()[key] = value


# One header's shown value, by (name, value): a header set seen for the first time (its
# content-length or trace id differs) mostly holds pairs seen before.
_VALUES: _Remembered[tuple[str, str], str] = _Remembered(4096)
# The last distinct header sets shown.
_SHOWN: _Remembered[tuple[tuple[str, str], ...], dict[str, str]] = _Remembered(256)
