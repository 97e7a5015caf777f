"""`EngineLink` for an engine in another process (`claudex serve`), over its admin API.

State comes from `GET /_claudex/status`, fetched when the screen refreshes (at most ~10 times a
second, and once a second by its tick) — while the engine does not answer, at most once every
`retry_s`, and `snapshot()` keeps the last picture. Events come from `GET /_claudex/events`: the
first connection asks for the engine's whole backlog (`since=0`, which also fills the request
log), every reconnection for what came after the last id seen (`Last-Event-ID`), and an event
whose id was seen already is dropped, so a reconnect loses nothing the backlog still holds and
shows nothing twice. A restarted engine's ids start above the old one's (events.py), so the
same rule backfills from a new engine too.

Losing the engine is news, not an error: the event stream ending (or a status fetch failing)
marks the link lost and puts a `link` event in the console's queue at once; the next answer
marks it connected again. Actions raise `LinkError` with a sentence while it is lost.

httpx is the client (the control plane's, DESIGN.md); the client is made on first use, on the
console's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import httpx

from claudex.config.model import Config
from claudex.console.link import HISTORY_PAGE, HistoryKind, HistoryPage, LinkError, LinkState
from claudex.engine.events import Event
from claudex.engine.masking.secrets import SCRUBBER

INBOX_MAX: Final = 2000     # events waiting on the console's side (a stalled UI drops the oldest)
STATUS_TIMEOUT_S: Final = 2.0
ACTION_TIMEOUT_S: Final = 10.0
RETRY_S: Final = 1.0        # how often a lost engine is asked again
STREAM_READ_TIMEOUT_S: Final = 45.0  # the route sends a keep-alive every 15 s
HISTORY_TIMEOUT_S: Final = 10.0

Sleep = Callable[[float], Awaitable[None]]


def target_of(url: str) -> str:
    """`http://127.0.0.1:13456/` -> `127.0.0.1:13456`, for the header."""
    parts = urlsplit(url)
    return parts.netloc or url


def is_local_url(url: str) -> bool:
    """Whether the engine at `url` runs on this machine (so its config file is ours to edit)."""
    host = (urlsplit(url if "://" in url else f"//{url}").hostname or "").lower()
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


class HttpLink:
    def __init__(self, url: str, *, headers: Mapping[str, str] | None = None,
                 wall: Callable[[], float] = time.time, sleep: Sleep = asyncio.sleep,
                 retry_s: float = RETRY_S,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self.target = target_of(self.url)
        self._headers = dict(headers or {})
        self._wall = wall
        self._sleep = sleep
        self._retry_s = retry_s
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._snapshot: dict[str, Any] = {"listen": self.target, "profiles": []}
        self._connected = False
        self._problem: str | None = "not asked yet"
        self._lost_at: float | None = None
        self._last_try = -1e18
        self._queues: list[asyncio.Queue[Event]] = []
        self.reconnects = 0  # event-stream connections after the first (tests, the header)

    # -- connection ----------------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(base_url=self.url, headers=self._headers,
                                             transport=self._transport,
                                             follow_redirects=False,
                                             # never an environment proxy for this machine
                                             trust_env=not is_local_url(self.url))
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def connect(self) -> bool:
        """Fetch the first snapshot; whether the engine answered."""
        await self._fetch_status()
        return self._connected

    def state(self) -> LinkState:
        return LinkState("attached", self.target, self._connected, self._problem, self._lost_at)

    def _lost(self, why: str) -> None:
        if not self._connected and self._problem is not None and self._lost_at is not None:
            return
        was_connected = self._connected
        self._connected = False
        self._problem = why
        self._lost_at = self._wall()
        if was_connected:
            self._tell(f"engine at {self.target} stopped answering ({why}); "
                       "showing the last picture, re-attaching…")

    def _found(self) -> None:
        if self._connected:
            return
        came_back = self._lost_at is not None
        self._connected = True
        self._problem = None
        self._lost_at = None
        if came_back:
            self._tell(f"engine at {self.target} answers again")

    def _tell(self, message: str) -> None:
        """A `link` event into every subscriber's queue: the screen refreshes at once."""
        for queue in self._queues:
            _put(queue, Event("link", message, time=self._wall()))

    # -- state ---------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return self._snapshot

    async def fresh_snapshot(self) -> dict[str, Any]:
        if self._connected or time.monotonic() - self._last_try >= self._retry_s:
            await self._fetch_status()
        return self._snapshot

    async def _fetch_status(self) -> None:
        self._last_try = time.monotonic()
        try:
            resp = await self._http().get("/_claudex/status", timeout=STATUS_TIMEOUT_S)
        except httpx.HTTPError as exc:
            self._lost(_transport_reason(exc))
            return
        if resp.status_code != 200:
            self._lost(_refusal(resp))
            return
        try:
            data = resp.json()
        except ValueError:
            self._lost("its status is not JSON: is this a claudex engine?")
            return
        if not isinstance(data, dict) or not isinstance(data.get("profiles"), list):
            self._lost("its status has no profiles: is this a claudex engine?")
            return
        self._snapshot = data
        self._found()

    def recent_events(self) -> list[Event]:
        # The event stream's first connection replays the engine's backlog instead.
        return []

    @property
    def in_flight(self) -> int:
        return int(self._snapshot.get("in_flight") or 0)

    # -- actions -------------------------------------------------------------------------------

    async def _post(self, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        try:
            resp = await self._http().post(path, timeout=ACTION_TIMEOUT_S, json=body)
        except httpx.HTTPError as exc:
            reason = _transport_reason(exc)
            self._lost(reason)
            raise LinkError(f"The engine at {self.target} did not answer ({reason}).") from None
        if resp.status_code in (401, 403):
            raise LinkError(f"The engine at {self.target} refused: {_refusal(resp)}.")
        return resp

    async def trip(self, name: str, seconds: float | None = None,
                   reason: str | None = None) -> bool:
        body = None if seconds is None and not reason else {"for": seconds, "reason": reason}
        return await self._breaker(name, "trip", body)

    async def reset(self, name: str) -> bool:
        return await self._breaker(name, "reset")

    async def _breaker(self, name: str, action: str,
                       body: dict[str, Any] | None = None) -> bool:
        resp = await self._post(f"/_claudex/breakers/{name}/{action}", body)
        if resp.status_code == 404:
            return False
        if resp.status_code == 400:  # the engine's sentence ("not tripped: ...")
            raise LinkError(f"The engine at {self.target} said: {_error_text(resp)}.")
        if resp.status_code != 200:
            raise LinkError(f"The engine answered {resp.status_code} to {action} {name}.")
        return True

    async def apply_config(self, config: Config) -> None:
        """The engine re-reads its own file (which the console has just checked and saved);
        `config` itself stays here: secrets never cross the wire."""
        resp = await self._post("/_claudex/reload")
        if resp.status_code == 200:
            return
        try:
            body = resp.json()
        except ValueError:
            body = {}
        issues = "; ".join(str(i) for i in (body.get("issues") or [])[:3])
        error = str(body.get("error") or f"status {resp.status_code}")
        raise LinkError(f"The engine did not reload: {error}" + (f": {issues}" if issues else ""))

    async def check_health_now(self) -> None:
        resp = await self._post("/_claudex/health")
        if resp.status_code == 200:
            with contextlib.suppress(ValueError):
                data = resp.json()
                if isinstance(data, dict) and isinstance(data.get("profiles"), list):
                    self._snapshot = data

    # -- history -------------------------------------------------------------------------------

    async def history(self, kind: HistoryKind, *, until: float | None = None,
                      limit: int = HISTORY_PAGE, text: str | None = None) -> HistoryPage:
        params = {"kind": kind, "limit": str(limit)}
        if until is not None:
            params["until"] = repr(float(until))
        if text:
            params["q"] = text
        try:
            resp = await self._http().get("/_claudex/history", params=params,
                                          timeout=HISTORY_TIMEOUT_S)
        except httpx.HTTPError as exc:
            return HistoryPage(problem=f"the engine did not answer ({_transport_reason(exc)})")
        try:
            body = resp.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return HistoryPage(problem=f"the engine {_refusal(resp)}")
        found_status = body.get("history")
        journal: dict[str, Any] = found_status if isinstance(found_status, dict) else {}
        if resp.status_code != 200:
            # 409: it keeps none; 503: its file cannot be read; 400: a query it refused.
            return HistoryPage(problem=str(journal.get("problem") or body.get("error")
                                           or _refusal(resp)))
        rows = body.get(kind)
        found = [row for row in rows if isinstance(row, dict)] if isinstance(rows, list) else []
        if not found and journal.get("enabled") is False:
            return HistoryPage(problem=str(journal.get("problem") or "turned off"))
        return HistoryPage(rows=found)

    # -- events --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def subscribe(self) -> Iterator[asyncio.Queue[Event]]:
        """A queue of the engine's events (its backlog first), on the calling loop, for as
        long as the context is open; a lost stream is reconnected every `retry_s`."""
        queue: asyncio.Queue[Event] = asyncio.Queue(INBOX_MAX)
        self._queues.append(queue)
        task = asyncio.get_running_loop().create_task(self._follow(queue),
                                                      name="claudex-attached-events")
        try:
            yield queue
        finally:
            self._queues.remove(queue)
            task.cancel()

    async def _follow(self, queue: asyncio.Queue[Event]) -> None:
        last_id = 0  # since=0: the whole backlog on the first connection
        while True:
            try:
                last_id = await self._stream_once(queue, last_id)
                self._lost("its event stream ended")
            except httpx.HTTPError as exc:
                self._lost(_transport_reason(exc))
            except _Refused as exc:
                self._lost(str(exc))
            await self._sleep(self._retry_s)
            self.reconnects += 1

    async def _stream_once(self, queue: asyncio.Queue[Event], last_id: int) -> int:
        """One connection to the event stream; returns the last id seen when it ends."""
        timeout = httpx.Timeout(STATUS_TIMEOUT_S, read=STREAM_READ_TIMEOUT_S)
        headers = {"last-event-id": str(last_id)}
        async with self._http().stream("GET", "/_claudex/events", headers=headers,
                                       timeout=timeout) as resp:
            if resp.status_code != 200:
                await resp.aread()
                raise _Refused(_refusal(resp))
            if not self._connected:
                # The stream answers: fetch the picture now rather than at the next tick.
                await self._fetch_status()
            data_lines: list[str] = []
            async for line in resp.aiter_lines():
                if line.startswith("data:"):
                    data_lines.append(line[5:].lstrip())
                elif not line and data_lines:
                    event = _parse("\n".join(data_lines))
                    data_lines = []
                    if event is None or event.id <= last_id:
                        continue  # seen before the reconnect
                    last_id = event.id
                    _put(queue, event)
        return last_id


class _Refused(Exception):
    """The event stream answered something other than 200."""


def _put(queue: asyncio.Queue[Event], event: Event) -> None:
    if queue.full():
        queue.get_nowait()  # a stalled console loses the oldest, as the bus's queues do
    queue.put_nowait(event)


def _parse(payload: str) -> Event | None:
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    try:
        return Event.from_json(data)
    except (TypeError, ValueError):
        return None


def _transport_reason(exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.ConnectError):
        return "connection refused"
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "connection closed"
    return type(exc).__name__


def _refusal(resp: httpx.Response) -> str:
    if resp.status_code == 401:
        return "401: wrong or missing token (set the variable auth_token_env names)"
    if resp.status_code == 403:
        return "403: refused (Host or Origin check)"
    return f"answered {resp.status_code}"


def _error_text(resp: httpx.Response) -> str:
    """An engine's `{"error": "..."}` sentence, masked (it may quote what was sent)."""
    try:
        data = resp.json()
    except ValueError:
        data = None
    text = data.get("error") if isinstance(data, dict) else None
    return SCRUBBER.text(str(text))[:200] if text else f"{resp.status_code}"
