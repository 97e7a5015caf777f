"""The proxy's own thread: an event loop (uvloop when installed) that hosts the engine, uvicorn
and, in the demo, the fake providers and the traffic generator.

Why a thread: Textual renders on its event loop, and a frame can take tens of milliseconds. A
proxy sharing that loop made every request that arrived during a frame wait for it. On a loop of
its own, a request only waits for the GIL, and the console's frames are kept short and rare.

`EngineThread.start()` runs an async factory on the new loop and returns what it built, or
raises what it raised (a `HostError` saying the port is taken, ...), so the caller reports
startup failures exactly as before. `stop()` closes what was built (uvicorn stops gracefully),
cancels what is left, closes the loop and joins the thread. Everything else crosses threads
through `submit` (a coroutine) and `call` (a plain function), both run on the engine's loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final, Generic, Protocol, TypeVar

log = logging.getLogger("claudex.console")

START_TIMEOUT_S: Final = 60.0
STOP_TIMEOUT_S: Final = 20.0   # uvicorn's graceful window (5 s) plus the rest of the close
CALL_TIMEOUT_S: Final = 5.0


class Closable(Protocol):
    async def close(self) -> None: ...


H = TypeVar("H", bound=Closable)
T = TypeVar("T")


class EngineThreadError(RuntimeError):
    """The engine's thread is not running (not started, stopped, or it did not answer)."""


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when it is installed (as `claudex serve` uses), else asyncio's."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux and macOS
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class EngineThread(Generic[H]):
    def __init__(self, factory: Callable[[], Awaitable[H]], *, name: str = "claudex-engine",
                 loop_factory: Callable[[], asyncio.AbstractEventLoop] = new_event_loop) -> None:
        self._factory = factory
        self._loop_factory = loop_factory
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._ready: concurrent.futures.Future[H] = concurrent.futures.Future()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._stop_requested = threading.Event()
        self.hosted: H | None = None

    # -- lifecycle (called from the console's thread) ------------------------------------------

    def start(self, timeout: float = START_TIMEOUT_S) -> H:
        """Start the thread and build what it hosts; raises the factory's exception."""
        self._thread.start()
        try:
            self.hosted = self._ready.result(timeout)
        except concurrent.futures.TimeoutError:
            self.stop()  # what the factory builds after all is closed as soon as it is built
            raise EngineThreadError(f"The proxy did not start within {timeout:g} s.") from None
        except BaseException:  # the factory's error, or ctrl-c while waiting for it
            self.stop()
            raise
        return self.hosted

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Close what was built, end the loop and join the thread (idempotent)."""
        self._stop_requested.set()  # seen by the thread even before its loop exists
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed already
                loop.call_soon_threadsafe(stop.set)
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("the engine thread did not stop within %.0f s", timeout)

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and self.hosted is not None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise EngineThreadError("The engine thread has not started.")
        return self._loop

    def __enter__(self) -> H:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- crossing threads ----------------------------------------------------------------------

    def in_engine_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coro` on the engine's loop; await it with `asyncio.wrap_future`."""
        try:
            return asyncio.run_coroutine_threadsafe(coro, self.loop)
        except RuntimeError:  # the loop is closed
            coro.close()
            raise EngineThreadError("The engine has stopped.") from None

    def call(self, func: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Run the plain function `func` on the engine's loop (soon, in order)."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(func())
            except BaseException as exc:  # handed to the waiting thread, which re-raises it
                future.set_exception(exc)

        try:
            self.loop.call_soon_threadsafe(run)
        except RuntimeError:
            raise EngineThreadError("The engine has stopped.") from None
        return future

    def call_and_wait(self, func: Callable[[], T], timeout: float = CALL_TIMEOUT_S) -> T:
        """`func()` on the engine's loop, waited for (at once when already on that thread)."""
        if self.in_engine_thread():
            return func()
        try:
            return self.call(func).result(timeout)
        except concurrent.futures.TimeoutError:
            raise EngineThreadError(f"The engine did not answer within {timeout:g} s.") from None

    # -- the thread ----------------------------------------------------------------------------

    def _main(self) -> None:
        loop = self._loop_factory()
        asyncio.set_event_loop(loop)
        self._stop = asyncio.Event()
        self._loop = loop  # (after _stop: stop() reads them in this order)
        try:
            loop.run_until_complete(self._serve())
        finally:
            try:
                _cancel_remaining(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                asyncio.set_event_loop(None)
                loop.close()

    async def _serve(self) -> None:
        assert self._stop is not None
        try:
            hosted = await self._factory()
        except BaseException as exc:  # raised again by start(), in the console's thread
            self._ready.set_exception(exc)
            return
        self._ready.set_result(hosted)
        if not self._stop_requested.is_set():
            await self._stop.wait()
        try:
            await hosted.close()
        except Exception:  # a failed close must not keep the process from exiting
            log.exception("closing the proxy failed")


def _cancel_remaining(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
