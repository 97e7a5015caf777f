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
        headers: dict[bytes, bytes] = dict(scope["headers"])
        path: str = scope["path"]
        if self.check_host and host_name(headers.get(b"host", b"")) not in _ALLOWED_HOST_NAMES:
            await _deny(send, 403, path, "Host header not allowed: claudex answers only on "
                        "127.0.0.1/localhost (DNS-rebinding protection).")
            return
        if path.startswith("/_claudex/") and b"origin" in headers:
            await _deny(send, 403, path, "Admin routes refuse browser requests (Origin header).")
            return
        if self.token is not None and not self._token_ok(headers):
            await _deny(send, 401, path, "Missing or wrong claudex token: send "
                        "'Authorization: Bearer <token>' or 'x-api-key: <token>'.")
            return
        await self.app(scope, receive, send)

    def _token_ok(self, headers: dict[bytes, bytes]) -> bool:
        assert self.token is not None
        auth = headers.get(b"authorization", b"")
        if auth[:7].lower() == b"bearer " and hmac.compare_digest(auth[7:].strip(), self.token):
            return True
        key = headers.get(b"x-api-key")
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
