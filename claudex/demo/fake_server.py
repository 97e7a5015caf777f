"""What every fake provider is underneath: a server on 127.0.0.1 whose faults switch at run
time, and that records what it is asked.

`FakeServer` keeps the listening socket (closed while the fault is "down": `SwitchableListener`),
the fault state and its bookkeeping (a change releases hung requests, a `duration_s` ends the
fault by itself), the connections it serves (`connections_served`, `close_connections`) and the
request log (`requests`, `request_count`, `wait_for_requests`). What a request gets is the
subclass's: `FakeProvider` (fake_provider.py) answers API requests in its provider's protocol
(`_serve`) and the control routes under `/_fake/` (`_control`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from enum import Enum
from types import TracebackType
from typing import Any, Final, Self

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from claudex.demo.fake_streams import drop
from claudex.demo.faults import Fault, FaultState, make_fault_state
from claudex.demo.listener import SwitchableListener
from claudex.demo.recording import RecordedRequest


class _Keep(Enum):
    KEEP = "keep"


KEEP: Final = _Keep.KEEP
"""`set_fault(valid_tokens=KEEP)` (the default) leaves the accepted tokens as they are."""

_PEERS_KEPT: Final = 4096  # connections remembered for `connections_served`


class FakeServer:
    """A server listening on `host:port` (port 0 picks a free one at start) whose faults
    switch at run time; a subclass says what each request gets."""

    def __init__(self, host: str, port: int, *, max_recorded: int) -> None:
        self.host = host
        self.max_recorded = max_recorded
        """`requests` keeps at most this many (the oldest half goes when full); 0: record none."""
        self.requests: list[RecordedRequest] = []
        # Distinct connections requests came on: a proxy that keeps its pool reuses one.
        self.connections_served = 0
        self._peers: dict[Any, None] = {}  # the newest few thousand, oldest first
        self._request_count = 0
        self._port = port
        self._faults = FaultState()
        self._faults.observe(self._on_fault_changed)
        self._listener: SwitchableListener | None = None
        self._stopping = asyncio.Event()
        self._hang_release = asyncio.Event()
        self._busy: dict[RequestHandler, int] = {}
        self._expiry: asyncio.TimerHandle | None = None
        self._arrival: asyncio.Future[None] | None = None

    # ------------------------------------------------------------ public surface

    @property
    def port(self) -> int:
        return self._port

    @property
    def faults(self) -> FaultState:
        return self._faults

    @faults.setter
    def faults(self, state: FaultState) -> None:
        self._faults.observe(None)
        self._faults = state
        state.observe(self._on_fault_changed)
        self._release_hangs()
        self._sync_listener()
        self._schedule_expiry()

    def set_fault(
        self,
        mode: Fault,
        *,
        retry_after: float | str | None = 1.0,
        retry_after_ms: float | None = None,
        latency_ms: float | None = None,
        cut_after_events: int = 3,
        valid_tokens: Iterable[str] | _Keep | None = KEEP,
        times: int | None = None,
        duration_s: float | None = None,
    ) -> None:
        """Switch to `mode`; other settings take their defaults, accepted tokens are kept.

        `latency_ms` defaults to 0, or to 2000 for "slow". Raises FaultConfigError on bad values.
        """
        settings: dict[str, object] = {
            "retry_after": retry_after,
            "retry_after_ms": retry_after_ms,
            "latency_ms": latency_ms,
            "cut_after_events": cut_after_events,
            "times": times,
            "duration_s": duration_s,
        }
        if not isinstance(valid_tokens, _Keep):
            settings["valid_tokens"] = None if valid_tokens is None else list(valid_tokens)
        self.faults = make_fault_state(mode, settings, valid_tokens=self._faults.valid_tokens)

    @property
    def request_count(self) -> int:
        """Requests received since start or the last `reset_log` (control routes excluded)."""
        return self._request_count

    async def wait_for_requests(self, count: int) -> None:
        """Return once `request_count` reaches `count` (wrap in asyncio.timeout)."""
        while self._request_count < count:
            if self._arrival is None:
                self._arrival = asyncio.get_running_loop().create_future()
            # Shielded: one waiter giving up must not cancel the future the others share.
            await asyncio.shield(self._arrival)

    def reset_log(self) -> None:
        self.requests.clear()
        self._request_count = 0
        self._peers.clear()
        self.connections_served = 0

    def close_connections(self) -> None:
        """Close every kept-alive connection (busy ones after their answer), as a server that
        times idle clients out would; the listening socket stays as it is."""
        if self._listener is not None:
            self._listener.close_connections()

    @property
    def listening(self) -> bool:
        return self._listener is not None and self._listener.listening

    async def start(self) -> None:
        if self._listener is not None:
            return
        self._stopping = asyncio.Event()
        server = web.Server(self._handle, access_log=None)
        listener = SwitchableListener(server, self.host, self._port, self._busy)
        await listener.start()
        self._port = listener.port
        self._listener = listener
        self._sync_listener()
        self._schedule_expiry()

    async def stop(self) -> None:
        """Close the listener and every connection; hung and slow requests are dropped."""
        listener, self._listener = self._listener, None
        if listener is None:
            return
        self._stopping.set()
        self._release_hangs()
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        await listener.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    def _sync_listener(self) -> None:
        """Make the listening socket match the mode: closed while "down", open otherwise."""
        if self._listener is not None:
            self._listener.set_open(self._faults.mode != "down")

    # ------------------------------------------------------------ fault bookkeeping

    def _on_fault_changed(self, field_name: str) -> None:
        self._release_hangs()
        if field_name == "mode":
            self._sync_listener()
        if field_name in ("mode", "duration_s"):
            self._schedule_expiry()

    def _release_hangs(self) -> None:
        self._hang_release.set()
        self._hang_release = asyncio.Event()

    def _schedule_expiry(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        state = self._faults
        if self._listener is not None and state.duration_s is not None and state.mode != "ok":
            loop = asyncio.get_running_loop()
            self._expiry = loop.call_later(state.duration_s, self._expire, state)

    def _expire(self, state: FaultState) -> None:
        self._expiry = None
        if self._faults is state:
            self.set_fault("ok")

    async def hold(self) -> None:
        """Wait until the fault changes or the provider stops (a hung request's fate)."""
        await self._hang_release.wait()

    async def _pause(self, seconds: float) -> bool:
        """Sleep; False if the provider is stopping meanwhile."""
        if self._stopping.is_set():
            return False
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            return True
        return False

    # ------------------------------------------------------------ request handling

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        connection = request.protocol
        transport = request.transport
        peer = transport.get_extra_info("peername") if transport is not None else None
        if peer is not None and peer not in self._peers:
            self._peers[peer] = None  # the client's address and port: one per connection
            self.connections_served += 1
            if len(self._peers) > _PEERS_KEPT:  # a demo left running for days stays small
                del self._peers[next(iter(self._peers))]
        self._busy[connection] = self._busy.get(connection, 0) + 1
        try:
            if request.path.startswith("/_fake/"):
                return await self._control(request)
            return await self._serve(request)
        except ConnectionError:
            # The client went away mid-answer (a benchmark stopping, a client timeout).
            return drop(request)
        finally:
            remaining = self._busy[connection] - 1
            if remaining:
                self._busy[connection] = remaining
            else:
                del self._busy[connection]

    async def _serve(self, request: web.BaseRequest) -> web.StreamResponse:
        """An API request's answer: the subclass's."""
        raise NotImplementedError

    async def _control(self, request: web.BaseRequest) -> web.Response:
        """A control route's answer (`/_fake/...`): the subclass's."""
        raise NotImplementedError

    def _record(
        self, request: web.BaseRequest, headers: dict[str, str], body: Any
    ) -> RecordedRequest | None:
        self._request_count += 1
        if self._arrival is not None:
            if not self._arrival.done():
                self._arrival.set_result(None)
            self._arrival = None
        if self.max_recorded <= 0:
            return None
        record = RecordedRequest(request.method, request.path, headers, body, time.monotonic(),
                                 request.query_string)
        self.requests.append(record)
        if len(self.requests) > self.max_recorded:
            del self.requests[: len(self.requests) - self.max_recorded // 2]
        return record
