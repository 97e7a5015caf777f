"""The `[fleet]` table's schema (docs/fleet.md): where the instances
meet (a Redis URL), what this one is called there, and the prefix of every key it writes."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from claudex.config._checks import Checker, _Bad, _env_name, _quoted, _text

_SCHEMES = ("redis", "rediss", "unix")
# Names and prefixes become parts of Redis keys and appear in status tables: no spaces,
# nothing a shell or a key pattern would read specially.
_KEY_PART = re.compile(r"[A-Za-z0-9._:\-\[\]]+")


def _redis_url(value: object) -> str:
    text = _text(value)
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 -- raises ValueError for a malformed port
    except ValueError:
        raise _Bad("is not a valid URL") from None
    if parts.scheme not in _SCHEMES:
        expected = ", ".join(f"{s}://" for s in _SCHEMES)
        raise _Bad(f"must start with one of {expected}, not {_quoted(text[:20])}")
    if parts.password is not None:
        # Never echo it; the password belongs in the environment.
        raise _Bad("must not contain a password (name its variable in [fleet] password_env)")
    if parts.scheme != "unix" and not parts.hostname:
        raise _Bad("must name a host (redis://127.0.0.1:6379/0)")
    return text


def _key_part(value: object) -> str:
    text = _text(value)
    if not _KEY_PART.fullmatch(text) or len(text) > 100:
        raise _Bad(f"{_quoted(text)} may only contain letters, digits and . _ : - [ ] "
                   "(at most 100)")
    return text


FLEET_KEYS: Mapping[str, Checker] = {
    "redis_url": _redis_url,
    "name": _key_part,
    "key_prefix": _key_part,
    "password_env": _env_name,
    "secret_env": _env_name,
}

GENERATE_KEY = ('python -c "from cryptography.fernet import Fernet; '
                'print(Fernet.generate_key().decode())"')


def fleet_key_problem(value: str) -> str | None:
    """Why `value` is not a Fernet key (32 bytes in URL-safe base64: 44 characters), or None.
    The sentence never quotes the value: it is a secret even when malformed."""
    text = value.strip()
    try:
        raw = base64.b64decode(text.encode("ascii"), altchars=b"-_", validate=True)
    except (ValueError, UnicodeEncodeError):
        raw = b""
    if len(text) != 44 or len(raw) != 32:
        return "does not hold a Fernet key (32 bytes in URL-safe base64, 44 characters)"
    return None
