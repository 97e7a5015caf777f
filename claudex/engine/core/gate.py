"""claudex's own limits at one provider, in front of its connection pool.

A request takes a slot before it is sent and gives it back when its answer (or stream) ends.
Slots are bounded by `max_connections` and by the adaptive limit (`concurrency.AdaptiveLimit`);
a request over them waits in a FIFO queue for at most `queue_timeout`, then fails over as
`queue_full`. Waiting here is claudex's doing: it is never a connect timeout and never a
breaker failure (aiohttp's own pool is left unbounded so that it never queues behind us).

`RetryBudget` bounds same-provider 429 retries to a share of the provider's recent requests
(Envoy's retry budget), so a throttled provider is not sent a second wave of retries.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence

from claudex.engine.core.concurrency import AdaptiveLimit
from claudex.engine.core.transport import UpstreamResponse

BUDGET_WINDOW_S = 10.0
BUDGET_FLOOR = 3     # retries always allowed within a window, however few the requests


class RetryBudget:
    """Same-provider retries in the last `window_s` may be at most `share` of the requests
    started there plus `floor`. Pure: the caller passes `now`."""

    def __init__(self, share: float, *, floor: int = BUDGET_FLOOR,
                 window_s: float = BUDGET_WINDOW_S) -> None:
        self.share = share
        self.floor = floor
        self.window_s = window_s
        self._requests: deque[float] = deque()
        self._retries: deque[float] = deque()
        self.refused = 0     # retries refused since start: counted in status and metrics

    def request(self, now: float) -> None:
        self._requests.append(now)
        self._forget(now)

    def try_retry(self, now: float) -> bool:
        self._forget(now)
        if len(self._retries) >= self.share * len(self._requests) + self.floor:
            self.refused += 1
            return False
        self._retries.append(now)
        return True

    def _forget(self, now: float) -> None:
        for times in (self._requests, self._retries):
            while times and now - times[0] > self.window_s:
                times.popleft()


class ProviderGate:
    """Slots for requests in flight at one provider, handed out in arrival order."""

    def __init__(self, max_connections: int, limit: AdaptiveLimit) -> None:
        self.max_connections = max_connections
        self.limit = limit
        self.in_flight = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.queue_full = 0          # requests that gave up waiting, since start
        self.waited = 0              # requests that had to wait, since start

    @property
    def queued(self) -> int:
        return sum(1 for w in self._waiters if not w.done())

    def _has_room(self) -> bool:
        return self.in_flight < self.max_connections and self.limit.allows(self.in_flight)

    def take_now(self) -> bool:
        """A slot at once when there is room and nobody waits (the usual request: no
        coroutine); False when the caller must `acquire` (wait in line)."""
        if not self._waiters and self._has_room():
            self.in_flight += 1
            return True
        return False

    async def acquire(self, patience: float) -> bool:
        """Take a slot, waiting up to `patience` seconds in line; False when the wait ran
        out."""
        if not self._waiters and self._has_room():
            self.in_flight += 1
            return True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self.waited += 1
        try:
            await asyncio.wait_for(asyncio.shield(waiter), patience)
        except TimeoutError:
            if waiter.done() and not waiter.cancelled():
                return True  # the slot arrived as the wait ran out: take it
            waiter.cancel()
            self.queue_full += 1
            return False
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot, but this request is gone: pass it on
            else:
                waiter.cancel()
            raise
        finally:
            self._drop_done_head()
        return True

    def release(self) -> None:
        self.in_flight -= 1
        self.wake()

    def wake(self) -> None:
        """Hand free slots to the longest waiters (after a release or a raised limit)."""
        while self._waiters and self._has_room():
            waiter = self._waiters.popleft()
            if waiter.done():
                continue
            self.in_flight += 1
            waiter.set_result(None)

    def _drop_done_head(self) -> None:
        while self._waiters and self._waiters[0].done():
            self._waiters.popleft()


class GatedResponse:
    """An upstream response that gives its gate slot back exactly once: when it has been read
    or when it is closed — and the upstream proxy's slot (`hop_gate`) with it, when the
    request went through one."""

    def __init__(self, inner: UpstreamResponse, gate: ProviderGate,
                 hop_gate: ProviderGate | None = None) -> None:
        self._inner = inner
        self._gate: ProviderGate | None = gate
        self._hop_gate = hop_gate
        # Read once: the lifecycle hook and the pass-through both look at them.
        self.raw_headers: Sequence[tuple[bytes, bytes]] = inner.raw_headers

    def _release(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.release()
            if self._hop_gate is not None:
                self._hop_gate.release()

    @property
    def status(self) -> int:
        return self._inner.status

    @property
    def headers(self) -> Mapping[str, str]:
        return self._inner.headers

    async def read(self) -> bytes:
        try:
            return await self._inner.read()
        finally:
            self._release()

    def chunks(self) -> AsyncIterator[bytes]:
        # Not wrapped (a generator layer per chunk costs on the hot path): every stream ends
        # in close() (engine/core/streaming.py), which gives the slot back.
        return self._inner.chunks()

    def close(self) -> None:
        self._inner.close()
        self._release()
