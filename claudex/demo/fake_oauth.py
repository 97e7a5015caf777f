"""A fake OAuth token endpoint for testing refresh-then-retry.

`POST /oauth/token` takes `{"grant_type": "refresh_token", "refresh_token": ..., "client_id": ...}`
(JSON or form-encoded) and answers `{"access_token", "refresh_token", "expires_in", "token_type"}`.
The next answer can be set (`set_next`), otherwise fresh tokens are made up; it can be made to fail
with `400 {"error": "invalid_grant"}`; `valid_refresh_tokens` turns on rotation (a used refresh
token stops working); every call is recorded in `calls`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from claudex.demo.recording import RecordedRequest, parse_json_body

_SHUTDOWN_TIMEOUT_S: Final = 1.0


@dataclass(frozen=True, slots=True)
class TokenGrant:
    access_token: str
    refresh_token: str
    expires_in: int = 3600


class FakeTokenServer:
    """Serves `POST /oauth/token` on `host:port` (port 0 picks a free one at start)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self._port = port
        self.calls: list[RecordedRequest] = []
        self.next_grant: TokenGrant | None = None
        """Answered (once) by the next successful call; None: make up fresh tokens."""
        self.fail_with: str | None = None
        """When set (e.g. "invalid_grant"), every call gets 400 with this error code."""
        self.valid_refresh_tokens: set[str] | None = None
        """When set, only these refresh tokens work; a used one is swapped for the new one."""
        self.expected_client_id: str | None = None
        """When set, another client_id gets 401 invalid_client."""
        self.delay_s = 0.0
        """Wait this long before answering (lets concurrent refreshes overlap in tests)."""
        self._issued = 0
        self._server: web.Server | None = None
        self._listener: asyncio.AbstractServer | None = None

    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self._port}"

    @property
    def token_url(self) -> str:
        return self.base_url + "/oauth/token"

    @property
    def call_count(self) -> int:
        return len(self.calls)

    def set_next(self, access_token: str, refresh_token: str, expires_in: int = 3600) -> None:
        self.next_grant = TokenGrant(access_token, refresh_token, expires_in)

    def set_failing(self, error: str | None = "invalid_grant") -> None:
        """Make every call fail with `error` (None: succeed again)."""
        self.fail_with = error

    async def start(self) -> None:
        if self._server is not None:
            return
        loop = asyncio.get_running_loop()
        self._server = web.Server(self._handle, access_log=None)
        self._listener = await loop.create_server(self._server, self.host, self._port)
        sockets = self._listener.sockets
        self._port = sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._server is not None:
            self._server.pre_shutdown()
            await self._server.shutdown(_SHUTDOWN_TIMEOUT_S)
            self._server = None

    async def __aenter__(self) -> FakeTokenServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _handle(self, request: web.BaseRequest) -> web.Response:
        if request.path != "/oauth/token":
            return _oauth_error(404, "not_found", f"no route {request.path}")
        if request.method != "POST":
            return _oauth_error(405, "invalid_request", "use POST")
        body = await self._read_body(request)
        headers = {name.lower(): value for name, value in request.headers.items()}
        self.calls.append(
            RecordedRequest(request.method, request.path, headers, body, time.monotonic())
        )
        if self.delay_s > 0:
            await asyncio.sleep(self.delay_s)
        if not isinstance(body, dict):
            return _oauth_error(400, "invalid_request", "expected a JSON or form body")
        if body.get("grant_type") != "refresh_token":
            return _oauth_error(400, "unsupported_grant_type", "grant_type must be refresh_token")
        refresh_token = body.get("refresh_token")
        if not isinstance(refresh_token, str) or not refresh_token:
            return _oauth_error(400, "invalid_request", "refresh_token is required")
        if self.expected_client_id is not None and body.get("client_id") != self.expected_client_id:
            return _oauth_error(401, "invalid_client", "unknown client_id")
        if self.fail_with is not None:
            return _oauth_error(400, self.fail_with, "Refresh token is invalid or expired")
        if self.valid_refresh_tokens is not None and refresh_token not in self.valid_refresh_tokens:
            return _oauth_error(400, "invalid_grant", "Refresh token is invalid or expired")
        grant = self._next_grant()
        if self.valid_refresh_tokens is not None:
            self.valid_refresh_tokens.discard(refresh_token)
            self.valid_refresh_tokens.add(grant.refresh_token)
        return web.json_response(
            {
                "access_token": grant.access_token,
                "refresh_token": grant.refresh_token,
                "expires_in": grant.expires_in,
                "token_type": "Bearer",
            }
        )

    @staticmethod
    async def _read_body(request: web.BaseRequest) -> Any:
        if request.content_type == "application/x-www-form-urlencoded":
            form = await request.post()
            return {key: str(value) for key, value in form.items()}
        return parse_json_body(await request.read())

    def _next_grant(self) -> TokenGrant:
        self._issued += 1
        if self.next_grant is not None:
            grant, self.next_grant = self.next_grant, None
            return grant
        return TokenGrant(f"fake-access-{self._issued}", f"fake-refresh-{self._issued}")


def _oauth_error(status: int, error: str, description: str) -> web.Response:
    return web.json_response({"error": error, "error_description": description}, status=status)
