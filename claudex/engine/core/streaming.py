"""Streams and the commit rule (DESIGN.md): nothing reaches the client before the first content
event of the client's protocol; every failure before it fails over, after it the client gets an
SSE `error` event and the provider's breaker a failure — never a second upstream call."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

from claudex.engine.addons.windows import windows_in_stream
from claudex.engine.core.answers import passed_headers, tag
from claudex.engine.core.classify import Outcome, StreamStalled, map_transport_error
from claudex.engine.core.exchange import Exchange
from claudex.engine.core.ledger import Ledger
from claudex.engine.core.request import ForwardResult
from claudex.engine.core.runtime import ProviderRuntime
from claudex.engine.core.stalls import IdleWatch, StreamDeadlines
from claudex.engine.core.stream_codec import StreamCodec
from claudex.engine.core.transport import UpstreamResponse
from claudex.engine.core.usage import Usage, UsageScanner
from claudex.engine.masking.secrets import SCRUBBER
from claudex.providers import anthropic, openai, responses
from claudex.providers.context_limits import context_refusal
from claudex.providers.sse import CommitWatcher, StreamSignal

log = logging.getLogger("claudex.proxy")
# The commit rule reads the client's protocol: the watcher sees what the client will get.
_SIGNALS = {"anthropic": anthropic.signal, "openai": openai.signal,
            "responses": responses.signal}
# Remembers a context window a provider stated (or, None, said without its size) for the
# exchange's model (one_provider.py `OneProvider._learn_context_window`).
LearnWindow = Callable[[ProviderRuntime, Exchange, int | None], None]


async def open_stream(ledger: Ledger, exchange: Exchange, resp: UpstreamResponse,
                      deadlines: StreamDeadlines, learn: LearnWindow,
                      ) -> ForwardResult | tuple[Outcome, str]:
    """Hold the stream until its first content event; or, the stream closed, the outcome and
    words of why it failed before (the failure policy decides what follows). The first bytes
    and the first content must arrive by `deadlines` (engine/core/stalls.py).

    An error event before the content that says the conversation is over the context window
    (the Responses API's `response.failed` or `error` with code `context_length_exceeded`,
    inside a 200 stream: openai/codex codex-rs/codex-api/src/sse/responses.rs reads the former
    as ContextWindowExceeded) is that provider's context 400 in a stream: `learn` remembers the
    window, and it is `context_exceeded` at a backup (no breaker failure), or at the addressed
    profile passed on as it came (committed to, and no failure of the provider's either)."""
    name = ledger.rt.name
    codec = exchange.stream_codec()
    watcher = CommitWatcher(_SIGNALS[exchange.client])
    held: list[bytes] = []
    chunks = resp.chunks().__aiter__()
    any_yet = False
    chatgpt = exchange.chatgpt
    refused = False  # the addressed profile's context refusal, passed on

    def failed(outcome: Outcome, message: str) -> tuple[Outcome, str]:
        resp.close()
        return outcome, message

    # One timeout scope for the whole wait, moved from the first-event deadline to the commit
    # deadline at the first bytes (a scope per chunk cost a timer each).
    scope = asyncio.timeout_at(deadlines.next_event(False)[0])
    try:
        try:
            async with scope:
                while True:
                    try:
                        chunk = await chunks.__anext__()
                    except StopAsyncIteration:
                        tail = codec.finish() if codec.finished else b""
                        if tail and watcher.feed(tail) is StreamSignal.CONTENT:
                            held.append(tail)  # a complete, empty answer: commit to it
                            break
                        return failed(Outcome.STREAM_ERROR, "stream ended before any content")
                    if not any_yet:
                        any_yet = True
                        scope.reschedule(deadlines.next_event(True)[0])
                    if chatgpt and b"codex.rate_limits" in chunk:  # the plan's windows
                        windows_in_stream(ledger.flow, ledger.rt, chunk)
                    out = codec.feed(chunk)
                    if not out:
                        continue
                    held.append(out)
                    signal = watcher.feed(out)
                    if signal is StreamSignal.CONTENT:
                        break
                    if signal is StreamSignal.ERROR or codec.error:
                        message = watcher.error_message or codec.error or "error event"
                        refusal = context_refusal(message, chunk[-4096:])
                        if refusal is None:
                            return failed(Outcome.STREAM_ERROR, message)
                        learn(ledger.rt, exchange, refusal.window)
                        if not exchange.addressed:
                            return failed(Outcome.CONTEXT_EXCEEDED, message)
                        refused = True  # the client compacts on it, as on the 400
                        break
        except TimeoutError:
            if scope.expired():  # else the socket's own, passed on as it is
                raise StreamStalled(deadlines.next_event(any_yet)[1]) from None
            raise
    except Exception as exc:
        outcome, words = map_transport_error(exc)
        if outcome is Outcome.DISCONNECTED:
            outcome = Outcome.STREAM_ERROR
        exc.__traceback__ = None  # aiohttp's reader keeps it: its frames would keep this request
        return failed(outcome, f"{words} before any content")
    except BaseException:  # cancelled: the client is gone
        resp.close()
        ledger.release()
        raise
    # Committed: from here on nothing is retried, so the request is never billed twice.
    if refused:
        ledger.committed("context_exceeded", watcher.error_message or codec.error or "")
    else:
        ledger.committed()  # its time to first content, measured here
    headers = passed_headers(resp.raw_headers, translating=exchange.translating)
    # (a cloud's stream, Bedrock's eventstream, reaches the client as Anthropic SSE too)
    headers["content-type"] = "text/event-stream; charset=utf-8" if exchange.translating \
        or exchange.wire is not None else headers.get("content-type", "text/event-stream")
    headers["cache-control"] = "no-cache"
    ledger.hand_to_stream()
    stream = RelayedStream(ledger, exchange, codec, resp, chunks, b"".join(held), refused)
    return tag(ForwardResult(200, headers, name, ledger.trail.attempts, stream=stream))


class RelayedStream:
    """A committed stream as the server iterates it: the bytes held until the commit, then each
    upstream chunk through the codec, then the ending the stream earned (its tail, or one SSE
    error event). Closing it, or its end, settles the request once: the upstream response
    closed, the breaker permit back, the tokens its events reported handed to `count`'s callback.

    One object with its own `__anext__`, where a chain of async generators (transport, relay,
    close guard, usage counter) had each chunk resume four frames: every chunk of every stream
    passes here (bench/NOTES.md, streaming cost). For the same reason the silence after the
    commit is watched by one timer a stream (`IdleWatch`) instead of the socket read timeout,
    which aiohttp re-arms on every chunk."""

    def __init__(self, ledger: Ledger, exchange: Exchange, codec: StreamCodec,
                 resp: UpstreamResponse, chunks: AsyncIterator[bytes], first: bytes,
                 refused: bool = False) -> None:
        self._ledger = ledger
        self._refused = refused  # carries the provider's refusal of the request: no failure
        self._exchange = exchange
        self._codec = codec
        self._resp = resp
        self._next_chunk = chunks.__anext__
        self._ahead: list[bytes] = [first] if first else []  # sent before reading upstream
        self._upstream_over = False
        self._closed = False
        self._scanner = UsageScanner()
        self._done: Callable[[Usage | None], None] | None = None
        self._watch = IdleWatch(ledger.rt.profile.stream_idle_timeout, resp.close)
        self._now = self._watch.clock

    def count(self, done: Callable[[Usage | None], None]) -> None:
        """Call `done` with the usage the stream's events reported, once, when it ends or is
        closed (the engine counts the request then)."""
        self._done = done

    def usage_lines(self) -> tuple[str | None, str | None]:
        """The first and last lines that reported usage, as the client got them (a trace reads
        the answer's model and finish reason there: engine/addons/answer_facts.py)."""
        return self._scanner.first_line, self._scanner.last_line

    def __aiter__(self) -> RelayedStream:
        return self

    async def __anext__(self) -> bytes:
        if self._ahead:
            out = self._ahead.pop(0)
            self._scanner.feed(out)
            return out
        if self._upstream_over or self._closed:
            await self.aclose()
            raise StopAsyncIteration
        codec, watch, now, next_chunk = self._codec, self._watch, self._now, self._next_chunk
        while True:
            try:
                chunk = await next_chunk()
            except StopAsyncIteration:
                self._ending(None)
                return await self.__anext__()
            except Exception as exc:
                self._ending(exc)
                # aiohttp's reader keeps the exception, whose traceback holds this frame (and
                # so this stream): read, it is dropped, so the stream is not kept in a cycle.
                exc.__traceback__ = None
                return await self.__anext__()
            except BaseException:  # cancelled: the client is gone
                await self.aclose()
                raise
            watch.last = now()
            try:
                out = codec.feed(chunk)
            except Exception as exc:  # claudex's translator, not the provider: ended all the same
                self._ending(exc, ours=True)
                return await self.__anext__()
            if out:
                if codec.error is not None:
                    # The upstream's own error event may quote the key it was sent: mask it
                    # (only on this path; content events are never scanned).
                    out = SCRUBBER.data(out)
                self._scanner.feed(out)
                return out

    def _ending(self, exc: Exception | None, *, ours: bool = False) -> None:
        """The upstream stream is over (`exc`: it broke; `ours`: claudex's own translation of
        it failed): what the client gets last."""
        self._upstream_over = True
        self._watch.stop()
        ledger, codec = self._ledger, self._codec
        name = ledger.rt.name
        if ours and exc is not None:
            message = (f"{name}: claudex could not translate the stream "
                       f"({type(exc).__name__}); the answer is cut here")
            log.debug("translating %s's stream failed", name, exc_info=exc)
        elif self._watch.fired or exc is not None:
            if self._watch.fired:  # the watch closed the response
                words = (f"was silent for {ledger.rt.profile.stream_idle_timeout:g} s "
                         "(stream_idle_timeout)")
            else:
                assert exc is not None
                words = map_transport_error(exc)[1]
            message = f"{name}: upstream {words} after the response started"
        else:
            message = ""
        if message:
            ledger.broke_mid_stream(message)
            log.warning("%s", message)
            self._ahead.append(self._exchange.sse_error(message))
            return
        if self._refused:
            ledger.passed_on_in_stream()
            return
        if codec.error is not None or not codec.finished:
            message = (f"{name}: {codec.error}" if codec.error is not None
                       else f"{name}: upstream stream ended early")
            ledger.broke_mid_stream(message)
            log.warning("%s", message)
            if codec.error is None:
                self._ahead.append(self._exchange.sse_error(message))
            return
        try:
            tail = codec.finish()
        except Exception as exc:  # a translator that cannot close the answer
            self._ending(exc, ours=True)
            return
        if tail:
            self._ahead.append(tail)
        ledger.succeed(200, record_attempt=False)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._watch.stop()
        ledger = self._ledger
        try:
            self._resp.close()
            ledger.stream_ended()
            # A no-op when settled; the client disconnecting is not the provider's fault.
            ledger.release(by_stream=True)
        finally:
            done, self._done = self._done, None
            if done is not None:
                self._scanner.finish()
                done(self._scanner.usage)
            # The request is over: let go of it. Its flow holds its result, which holds this
            # stream, so the ledger (and `done`) made every stream's objects a cycle, freed by
            # the collector's rare passes instead of when the server drops the stream (the soak
            # saw ~8 MB of streams pile up between passes: bench/NOTES.md, issue 38).
            del self._ledger
