"""Request checks that run before any route: Host (DNS-rebinding), browser Origin on admin routes,
and the optional local bearer token. A pure ASGI middleware so the hot path pays one dict lookup.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def is_loopback_host(host: str) -> bool:
    if host in ("localhost", "::1", "[::1]"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(header: bytes) -> bytes:
    """The name part of a Host header: `127.0.0.1:13456` -> `127.0.0.1`, `[::1]:80` -> `[::1]`."""
    if header.startswith(b"["):
        end = header.find(b"]")
        return header[: end + 1] if end > 0 else header
    return header.split(b":", 1)[0]


_ALLOWED_HOST_NAMES = frozenset(n.encode() for n in LOOPBACK_NAMES)


class SecurityMiddleware:
    def __init__(self, app: ASGIApp, *, check_host: bool, token: str | None) -> None:
        self.app = app
        self.check_host = check_host
        self.token = token.encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = origin = auth = key = None
        for name, value in scope["headers"]:  # one pass over a short list; no dict per request
            if name == b"host":
                host = value
            elif name == b"origin":
                origin = value
            elif name == b"authorization":
                auth = value
            elif name == b"x-api-key":
                key = value
        path: str = scope["path"]
        if self.check_host and host_name(host or b"") not in _ALLOWED_HOST_NAMES:
            await _deny(send, 403, path, "Host header not allowed: claudex answers only on "
                        "127.0.0.1/localhost (DNS-rebinding protection).")
            return
        if origin is not None and path.startswith("/_claudex/"):
            await _deny(send, 403, path, "Admin routes refuse browser requests (Origin header).")
            return
        if self.token is not None and not self._token_ok(auth, key):
            await _deny(send, 401, path, "Missing or wrong claudex token: send "
                        "'Authorization: Bearer <token>' or 'x-api-key: <token>'.")
            return
        await self.app(scope, receive, send)

    def _token_ok(self, auth: bytes | None, key: bytes | None) -> bool:
        assert self.token is not None
        if auth is not None and auth[:7].lower() == b"bearer " and hmac.compare_digest(
            auth[7:].strip(), self.token
        ):
            return True
        return key is not None and hmac.compare_digest(key.strip(), self.token)


async def _deny(send: Send, status: int, path: str, message: str) -> None:
    if "chat/completions" in path:
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error",
                                     "param": None, "code": "forbidden"}})
    elif path.startswith("/v1/messages") or "/v1/messages" in path:
        kind = "authentication_error" if status == 401 else "permission_error"
        body = json.dumps({"type": "error", "error": {"type": kind, "message": message}})
    else:
        body = json.dumps({"error": message})
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body.encode()})
