"""Handling secrets safely: showing them masked and scrubbing them out of text.

`mask_secret` is the one way a key or token is ever shown (`sk-…wxyz`). `SecretScrubber` masks
known secrets and secret-shaped strings in text and bytes; the process-wide `SCRUBBER` is what the
log filter, the engine's error answers, status and events all use, so one registry of secrets
covers every place a secret could surface. Files that hold secrets are written by
`claudex.config.atomic_files` (below config and engine both) so that a reader never sees a
half-written file and nobody else can read the result: a temp file in the same directory, fsync,
chmod, then `os.replace` over the target.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from claudex.config.model import Config

# Below this length even the last few characters give away too much of the secret.
_SHORT = 12
_TINY = 8
_ELLIPSIS = "…"


def mask_secret(value: str) -> str:
    """Show a secret as a non-secret prefix and its last 4 characters: `sk-ant-…wxyz` -> `sk-…wxyz`.

    The prefix is kept only when the value starts with a short tag ending in '-' (at most three
    characters and the dash, like `sk-`); it names the kind of key, not the key. Values shorter
    than 12 characters keep only their last two characters, and those shorter than 8 keep nothing.
    """
    if len(value) < _TINY:
        return _ELLIPSIS
    if len(value) < _SHORT:
        return _ELLIPSIS + value[-2:]
    dash = value.find("-")
    prefix = value[: dash + 1] if 0 < dash <= 3 else ""
    return f"{prefix}{_ELLIPSIS}{value[-4:]}"


# Shapes of secrets worth masking even when nobody registered them: a bearer credential, a key
# with a known vendor tag (`sk-`, `sk-ant-`, `xai-`, `gsk_`, ...), and a value labelled as a key
# or token (`"api_key": "..."`, `refresh_token=...`). Each keeps its label and masks the value.
_SHAPES = (
    r"(?i)(bearer\s+)([A-Za-z0-9._~+/=-]{8,})",
    r"()\b((?:sk|xai|pk|rk|gsk)[-_][A-Za-z0-9_-]{8,})",
    r"(?i)((?:api[_-]?key|access[_-]?token|refresh[_-]?token|secret|password)"
    r"[\"']?\s*[:=]\s*[\"']?)([A-Za-z0-9._~+/=-]{8,})",
)
_TEXT_SHAPES = tuple(re.compile(shape) for shape in _SHAPES)
_BYTES_SHAPES = tuple(re.compile(shape.encode()) for shape in _SHAPES)
# Shorter values are not worth masking: they would match ordinary words.
MIN_SECRET_LENGTH = 6


def _mask_text_shape(match: re.Match[str]) -> str:
    return match.group(1) + mask_secret(match.group(2))


def _mask_bytes_shape(match: re.Match[bytes]) -> bytes:
    return match.group(1) + mask_secret(match.group(2).decode("ascii")).encode()


def _written_forms(secret: str) -> dict[str, str]:
    """How `secret` may appear in text -> what replaces it: as is, and escaped inside a JSON
    string (an upstream error body quoting it), where the mask must stay valid JSON too."""
    masked = mask_secret(secret)
    forms = {secret: masked}
    for ascii_only in (True, False):
        escaped = json.dumps(secret, ensure_ascii=ascii_only)[1:-1]
        if escaped != secret:
            forms[escaped] = json.dumps(masked, ensure_ascii=ascii_only)[1:-1]
    return forms


@dataclass(frozen=True)
class _Compiled:
    """Everything a scrub needs, built once per change of the registry and swapped in whole,
    so a thread scrubbing meanwhile sees either the old state or the new one."""

    known: frozenset[str]
    text_pattern: re.Pattern[str] | None
    text_forms: dict[str, str]
    bytes_pattern: re.Pattern[bytes] | None
    bytes_forms: dict[bytes, bytes]

    @classmethod
    def build(cls, known: frozenset[str]) -> _Compiled:
        forms: dict[str, str] = {}
        for secret in known:
            forms.update(_written_forms(secret))
        if not forms:
            return cls(known, None, {}, None, {})
        # Longest first, so a secret containing another is masked whole.
        ordered = sorted(forms, key=len, reverse=True)
        text_pattern = re.compile("|".join(re.escape(form) for form in ordered))
        bytes_forms = {k.encode(): v.encode() for k, v in forms.items()}
        bytes_pattern = re.compile(b"|".join(re.escape(form.encode()) for form in ordered))
        return cls(known, text_pattern, forms, bytes_pattern, bytes_forms)


class SecretScrubber:
    """Masks registered secrets and secret-shaped strings, in text and in bytes.

    Registering is rare (a config load, a new token) and rebuilds one pattern; scrubbing is a
    few regex passes and is meant for the control plane and error paths only, never for every
    successful body.
    """

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._state = _Compiled.build(frozenset())
        self._adding = threading.Lock()  # the engine's thread and the console's may both add
        # Goes up with every change of the registry: a cache of scrubbed texts is valid while
        # it stays the same.
        self.generation = 0
        self.add(secrets)

    def add(self, secrets: Iterable[str | None]) -> None:
        wanted = {s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}
        if wanted <= self._state.known:
            return
        with self._adding:
            state = self._state
            self._state = _Compiled.build(state.known | wanted)
            self.generation += 1

    def note(self, secret: str) -> None:
        """Register one secret; costs a set lookup when it is already known (the usual case)."""
        if secret not in self._state.known:
            self.add((secret,))

    def knows(self, secret: str) -> bool:
        return secret in self._state.known

    def text(self, value: str) -> str:
        """`value` with every known secret and secret-shaped string masked."""
        if not value:
            return value
        state = self._state
        if state.text_pattern is not None:
            forms = state.text_forms
            value = state.text_pattern.sub(lambda m: forms[m.group(0)], value)
        for shape in _TEXT_SHAPES:
            value = shape.sub(_mask_text_shape, value)
        return value

    def data(self, value: bytes, extra: Iterable[str] = ()) -> bytes:
        """`value` (an upstream error body) with secrets masked; `extra` are secrets of this
        request only (a client's own credential), masked without being registered. A body
        holding no secret comes back byte for byte."""
        if not value:
            return value
        for secret in extra:
            if secret and len(secret) >= MIN_SECRET_LENGTH:
                encoded = secret.encode()
                if encoded in value:
                    value = value.replace(encoded, mask_secret(secret).encode())
        state = self._state
        if state.bytes_pattern is not None:
            forms = state.bytes_forms
            value = state.bytes_pattern.sub(lambda m: forms[m.group(0)], value)
        for shape in _BYTES_SHAPES:
            value = shape.sub(_mask_bytes_shape, value)
        return value


SCRUBBER = SecretScrubber()
"""The process-wide registry: config secrets, the local token and every upstream token in use."""


def config_secrets(config: Config, env: Mapping[str, str] | None = None) -> list[str]:
    """Every secret a config names: inline `api_key`s and the values of the environment
    variables it points at (`api_key_env`, the local token's `auth_token_env`, an upstream
    proxy's `password_env`, a client key's `client_key_password_env`)."""
    environ = os.environ if env is None else env
    variables = [p.api_key_env for p in config.profiles if p.api_key_env]
    if any(p.provider_type == "Bedrock" or p.auth_type == "aws-sigv4" for p in config.profiles):
        # What the SDKs and the AWS chain read (a Bedrock API key; keys in the environment).
        variables += ["AWS_BEARER_TOKEN_BEDROCK", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"]
    if config.proxy.auth_token_env:
        variables.append(config.proxy.auth_token_env)
    # The network's (issue 36): upstream proxies' passwords and client keys' passwords.
    variables += [u.password_env for u in config.upstream_proxies if u.password_env]
    variables += [name for name in (config.network.client_key_password_env,
                                    *(p.client_key_password_env for p in config.profiles))
                  if name]
    found = [p.api_key for p in config.profiles if p.api_key]
    found += [value.strip() for name in variables if (value := environ.get(name, ""))]
    return found
