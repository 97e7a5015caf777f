"""Streams and the commit rule (DESIGN.md): nothing reaches the client before the first content
event of the client's protocol; every failure before it fails over, after it the client gets an
SSE `error` event and the provider's breaker a failure — never a second upstream call."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable

from claudex.engine.answers import passed_headers, tag
from claudex.engine.classify import Outcome, map_transport_error
from claudex.engine.exchange import Exchange, StreamCodec
from claudex.engine.ledger import Ledger
from claudex.engine.request import ForwardResult
from claudex.engine.secrets import SCRUBBER
from claudex.engine.stalls import StreamDeadlines, within
from claudex.engine.transport import UpstreamResponse
from claudex.providers import anthropic, openai, responses
from claudex.providers.sse import CommitWatcher, StreamSignal

log = logging.getLogger("claudex.proxy")
# The commit rule reads the client's protocol: the watcher sees what the client will get.
_SIGNALS = {"anthropic": anthropic.signal, "openai": openai.signal,
            "responses": responses.signal}


async def open_stream(ledger: Ledger, exchange: Exchange, resp: UpstreamResponse,
                      deadlines: StreamDeadlines) -> ForwardResult | tuple[Outcome, str]:
    """Hold the stream until its first content event; or, the stream closed, the outcome and
    words of why it failed before (the failure policy decides what follows). The first bytes
    and the first content must arrive by `deadlines` (engine/stalls.py)."""
    name = ledger.rt.name
    codec = exchange.stream_codec()
    watcher = CommitWatcher(_SIGNALS[exchange.client])
    held: list[bytes] = []
    chunks = resp.chunks().__aiter__()
    any_yet = False

    def failed(outcome: Outcome, message: str) -> tuple[Outcome, str]:
        resp.close()
        return outcome, message

    try:
        while True:
            try:
                chunk = await within(deadlines.next_event(any_yet), chunks.__anext__())
                any_yet = True
            except StopAsyncIteration:
                tail = codec.finish() if codec.finished else b""
                if tail and watcher.feed(tail) is StreamSignal.CONTENT:
                    held.append(tail)  # a complete, empty answer: commit to it
                    break
                return failed(Outcome.STREAM_ERROR, "stream ended before any content")
            out = codec.feed(chunk)
            if not out:
                continue
            held.append(out)
            signal = watcher.feed(out)
            if signal is StreamSignal.CONTENT:
                break
            if signal is StreamSignal.ERROR or codec.error:
                return failed(Outcome.STREAM_ERROR,
                              watcher.error_message or codec.error or "error event")
    except Exception as exc:
        outcome, words = map_transport_error(exc)
        if outcome is Outcome.DISCONNECTED:
            outcome = Outcome.STREAM_ERROR
        return failed(outcome, f"{words} before any content")
    except BaseException:  # cancelled: the client is gone
        resp.close()
        ledger.release()
        raise
    # Committed: from here on nothing is retried, so the request is never billed twice.
    ledger.committed()  # its time to first content, measured here
    headers = passed_headers(resp.raw_headers, translating=exchange.translating)
    headers["content-type"] = "text/event-stream; charset=utf-8" if exchange.translating \
        else headers.get("content-type", "text/event-stream")
    headers["cache-control"] = "no-cache"
    ledger.hand_to_stream()
    stream = _UntilClosed(_relay(ledger, exchange, codec, resp, chunks, held),
                          lambda: _let_go(ledger, resp))
    return tag(ForwardResult(200, headers, name, ledger.trail.attempts, stream=stream))


def _let_go(ledger: Ledger, resp: UpstreamResponse) -> None:
    resp.close()
    ledger.stream_ended()
    ledger.release(by_stream=True)  # a no-op when settled


class _UntilClosed:
    """The relay as the server gets it. Closing an async generator that never started runs none
    of its code, so a client gone before the first chunk was asked for would leave the breaker
    permit and the provider's slot held for good: then `let_go` does what the relay's `finally`
    would have done."""

    def __init__(self, relay: AsyncGenerator[bytes, None], let_go: Callable[[], None]) -> None:
        self._relay = relay
        self._let_go = let_go
        self._started = False

    def __aiter__(self) -> _UntilClosed:
        return self

    async def __anext__(self) -> bytes:
        self._started = True
        return await self._relay.__anext__()

    async def aclose(self) -> None:
        if not self._started:
            self._let_go()
        await self._relay.aclose()


async def _relay(ledger: Ledger, exchange: Exchange, codec: StreamCodec,
                 resp: UpstreamResponse, chunks: AsyncIterator[bytes],
                 held: list[bytes]) -> AsyncGenerator[bytes, None]:
    name = ledger.rt.name
    try:
        yield b"".join(held)
        held.clear()
        try:
            async for chunk in chunks:
                out = codec.feed(chunk)
                if codec.error is not None and out:
                    # The upstream's own error event may quote the key it was sent: mask it
                    # (only on this path; content events are never scanned).
                    out = SCRUBBER.data(out)
                if out:
                    yield out
        except Exception as exc:
            outcome, words = map_transport_error(exc)
            if outcome is Outcome.TIMEOUT:  # the socket's read timeout, set to the idle one
                words = (f"was silent for {ledger.rt.profile.stream_idle_timeout:g} s "
                         "(stream_idle_timeout)")
            message = f"{name}: upstream {words} after the response started"
            ledger.broke_mid_stream(message)
            log.warning("%s", message)
            yield exchange.sse_error(message)
            return
        if codec.error is not None or not codec.finished:
            message = (f"{name}: {codec.error}" if codec.error is not None
                       else f"{name}: upstream stream ended early")
            ledger.broke_mid_stream(message)
            log.warning("%s", message)
            if codec.error is None:
                yield exchange.sse_error(message)
            return
        tail = codec.finish()
        if tail:
            yield tail
        ledger.succeed(200, record_attempt=False)
    finally:
        resp.close()
        ledger.stream_ended()
        # A no-op when settled; the client disconnecting is not the provider's fault.
        ledger.release(by_stream=True)
