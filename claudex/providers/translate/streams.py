"""Streaming translators, both directions (see each module for the event sequences).

Both take upstream bytes split at any position through `feed()` and return client-protocol SSE
bytes (possibly empty until something complete arrives); `finish()` ends the client stream when
the upstream closed without its terminal event and is idempotent; `finished` says whether the
upstream reached its own end; `error` holds the message of an upstream in-stream error, after
which the output carries the client protocol's error event and nothing more is produced.

For the commit rule the translated output is what counts: its first content event is emitted
only when the upstream's first content arrives (`message_start` and the role-only first chunk
are not content).
"""

from __future__ import annotations

from claudex.providers.translate.stream_to_anthropic import OpenAIToAnthropicStream
from claudex.providers.translate.stream_to_openai import AnthropicToOpenAIStream

__all__ = ["AnthropicToOpenAIStream", "OpenAIToAnthropicStream"]
