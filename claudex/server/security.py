"""Request checks that run before any route: Host (DNS-rebinding), browser Origin on admin routes,
and the optional local bearer token. A pure ASGI middleware so the hot path pays one pass over
the request's headers.

- Host: while claudex listens on a loopback address, a request whose Host is not 127.0.0.1,
  localhost or [::1] (with or without a port) is refused with 403 on every route: a web page
  that rebinds its own name to 127.0.0.1 still sends its name.
- Origin: admin routes (`/_claudex/...`) refuse any request carrying a browser `Origin`, so a
  page cannot trip breakers or reload the config even where the Host check is off. Every other
  route refuses an `Origin` that is not a loopback page (`http://localhost:3000` is fine): a
  page on the web could otherwise POST a "simple" cross-site request to the proxy and spend the
  user's quota (CSRF). SDKs and CLIs send no Origin.
- Token: with `proxy.auth_token_env` set, every route needs `Authorization: Bearer <token>` or
  `x-api-key: <token>`, compared in constant time. The header that carried the token is then
  removed, so it is never forwarded upstream (a passthrough profile forwards the client's own
  credentials, and the local token is not one of them).

Refusals answer in the client's protocol on proxy routes (Anthropic or OpenAI error JSON), and
`{"error": ...}` elsewhere; they never echo what the client sent.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from claudex.providers import anthropic, openai

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_ALLOWED_HOST_NAMES = frozenset(n.encode() for n in LOOPBACK_NAMES)

HOST_REFUSED = ("Host header not allowed: claudex answers only on 127.0.0.1/localhost "
                "(DNS-rebinding protection).")
ORIGIN_REFUSED = "Admin routes refuse browser requests (Origin header)."
FOREIGN_ORIGIN_REFUSED = ("claudex refuses requests from web pages not served from this machine "
                          "(Origin header).")
TOKEN_REFUSED = ("Missing or wrong claudex token: send 'Authorization: Bearer <token>' or "
                 "'x-api-key: <token>'.")


def is_loopback_host(host: str) -> bool:
    """Whether listening on `host` keeps claudex to this machine (`127.0.0.1`, `::1`,
    `localhost`, any 127.x address). Anything unclear — an empty host, a name — is not."""
    bare = host.strip().lower()
    if bare == "localhost":
        return True
    if bare.startswith("[") and bare.endswith("]"):
        bare = bare[1:-1]
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False


def host_name(header: bytes) -> bytes:
    """The name part of a Host header, lowercased: `127.0.0.1:13456` -> `127.0.0.1`,
    `[::1]:80` -> `[::1]`. Anything after the name other than `:digits` makes it malformed,
    and a malformed header gives b"" (allowed nowhere)."""
    header = header.lower()
    if header.startswith(b"["):
        end = header.find(b"]")
        if end < 0:
            return b""
        name, rest = header[: end + 1], header[end + 1 :]
    else:
        name, colon, port = header.partition(b":")
        rest = colon + port
    if rest and not (rest[:1] == b":" and rest[1:].isdigit()):
        return b""
    return name


def is_loopback_origin(origin: bytes) -> bool:
    """Whether an Origin header names a page on this machine: `http://localhost:3000`,
    `http://127.0.0.1`, `https://[::1]:8443`. `null` and anything malformed are not."""
    scheme, separator, rest = origin.partition(b"://")
    if not separator or scheme.lower() not in (b"http", b"https"):
        return False
    return host_name(rest) in _ALLOWED_HOST_NAMES


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
        version = False
        for name, value in scope["headers"]:  # one pass over a short list; no dict per request
            if name == b"host":
                host = value
            elif name == b"origin":
                origin = value
            elif name == b"authorization":
                auth = value
            elif name == b"x-api-key":
                key = value
            elif name == b"anthropic-version":
                version = True
        path: str = scope["path"]
        if self.check_host and host_name(host or b"") not in _ALLOWED_HOST_NAMES:
            await _deny(send, 403, path, version, HOST_REFUSED)
            return
        if origin is not None:
            if path.startswith("/_claudex/"):
                await _deny(send, 403, path, version, ORIGIN_REFUSED)
                return
            if not is_loopback_origin(origin):
                await _deny(send, 403, path, version, FOREIGN_ORIGIN_REFUSED)
                return
        if self.token is not None:
            carriers = self._token_carriers(auth, key)
            if not carriers:
                await _deny(send, 401, path, version, TOKEN_REFUSED)
                return
            # The local token is claudex's own credential: nothing behind this point sees it.
            scope["headers"] = [(n, v) for n, v in scope["headers"] if n not in carriers]
        await self.app(scope, receive, send)

    def _token_carriers(self, auth: bytes | None, key: bytes | None) -> tuple[bytes, ...]:
        """The headers that carry the right token (none: refuse). Both are always compared,
        so the time taken does not tell which one was right."""
        assert self.token is not None
        bearer = auth[7:].strip() if auth is not None and auth[:7].lower() == b"bearer " else b""
        by_auth = hmac.compare_digest(bearer, self.token)
        by_key = hmac.compare_digest(key.strip() if key is not None else b"", self.token)
        return ((b"authorization",) if by_auth else ()) + ((b"x-api-key",) if by_key else ())


def refusal_body(status: int, path: str, anthropic_client: bool, message: str) -> bytes:
    """A refusal in the format the route's client understands."""
    if "/v1/chat/completions" in path or (path.endswith("/v1/models") and not anthropic_client):
        code = "invalid_api_key" if status == 401 else "forbidden"
        return openai.error_body(status, message, code=code)
    if "/v1/messages" in path or path.endswith("/v1/models"):
        return anthropic.error_body(status, message)
    return json.dumps({"error": message}).encode()


async def _deny(send: Send, status: int, path: str, anthropic_client: bool,
                message: str) -> None:
    body = refusal_body(status, path, anthropic_client, message)
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="claudex"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
