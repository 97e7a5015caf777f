"""AWS's binary event stream framing (`application/vnd.amazon.eventstream`), both ways.

Bedrock's InvokeModelWithResponseStream answers in these frames; claudex decodes them
(`FrameDecoder`) and, when it serves Bedrock's wire to a client in Bedrock mode, writes them
(`encode_frame`). A frame, every integer big-endian:

    total length   uint32   the whole frame, these 12 prelude bytes and the final CRC included
    headers length uint32
    prelude CRC    uint32   CRC-32 of the 8 bytes above
    headers        name length (uint8), name (UTF-8), value type (uint8), value — repeated
    payload        total - headers - 16 bytes
    message CRC    uint32   CRC-32 of everything before it, prelude CRC included

Header value types: 0 true, 1 false, 2 int8, 3 int16, 4 int32, 5 int64, 6 bytes (uint16
length), 7 string (uint16 length, UTF-8), 8 timestamp (int64 milliseconds), 9 UUID (16 bytes).
Sources: AWS's event stream encoding (the Transcribe streaming guide's "Event stream encoding"),
and botocore's reader, `botocore/eventstream.py`, whose limits this decoder keeps (headers at most
128 KiB, payload at most 24 MiB) and whose own parser decodes `encode_frame`'s output in the tests.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

__all__ = [
    "MAX_HEADERS_BYTES",
    "MAX_PAYLOAD_BYTES",
    "EventStreamError",
    "Frame",
    "FrameDecoder",
    "HeaderValue",
    "encode_frame",
]

HeaderValue = str | bytes | bool | int
"""A header's value as decoded: strings, byte arrays and UUIDs (bytes), booleans, integers
(int8 to int64, and timestamps as milliseconds since the epoch)."""

_PRELUDE: Final = struct.Struct("!III")
_PRELUDE_BYTES: Final = 12
_CRC_BYTES: Final = 4
_OVERHEAD: Final = _PRELUDE_BYTES + _CRC_BYTES
MAX_HEADERS_BYTES: Final = 128 * 1024
MAX_PAYLOAD_BYTES: Final = 24 * 1024 * 1024

_TRUE, _FALSE, _INT8, _INT16, _INT32, _INT64, _BYTES, _STRING, _TIMESTAMP, _UUID = range(10)
_FIXED: Final[dict[int, struct.Struct]] = {
    _INT8: struct.Struct("!b"),
    _INT16: struct.Struct("!h"),
    _INT32: struct.Struct("!i"),
    _INT64: struct.Struct("!q"),
    _TIMESTAMP: struct.Struct("!q"),
}
_LENGTH16: Final = struct.Struct("!H")
_HEADERS_KEPT: Final = 64
_READ_HEADERS: dict[bytes, Mapping[str, HeaderValue]] = {}
"""Header blocks already read (a stream repeats a few): each read once per process."""
_UINT32: Final = struct.Struct("!I")


class EventStreamError(ValueError):
    """A frame that is not one: a CRC that does not match, a length out of bounds, a header
    that cannot be read, or a stream that ended inside a frame. The message says which frame
    (counted from 1) and at which byte of the stream it started."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded frame: its headers (in wire order) and payload."""

    headers: Mapping[str, HeaderValue]
    payload: bytes

    def _text(self, name: str) -> str:
        value = self.headers.get(name)
        return value if isinstance(value, str) else ""

    @property
    def message_type(self) -> str:
        """`event`, `exception` or `error` (empty when the header is missing)."""
        return self._text(":message-type")

    @property
    def event_type(self) -> str:
        """An event's kind (`chunk` on Bedrock)."""
        return self._text(":event-type")

    @property
    def exception_type(self) -> str:
        """An exception's modelled name (`modelStreamErrorException` on Bedrock)."""
        return self._text(":exception-type")

    @property
    def content_type(self) -> str:
        return self._text(":content-type")


def _crc(data: bytes | bytearray | memoryview, start: int = 0) -> int:
    return zlib.crc32(data, start) & 0xFFFFFFFF


def _encode_header(name: str, value: HeaderValue) -> bytes:
    raw_name = name.encode()
    if not 0 < len(raw_name) < 256:
        raise ValueError(f"event stream header name must be 1-255 bytes of UTF-8: {name!r}")
    head = bytes((len(raw_name),)) + raw_name
    if isinstance(value, bool):
        return head + bytes((_TRUE if value else _FALSE,))
    if isinstance(value, int):
        return head + bytes((_INT64,)) + _FIXED[_INT64].pack(value)
    raw = value.encode() if isinstance(value, str) else bytes(value)
    if len(raw) > 0xFFFF:
        raise ValueError(f"event stream header {name!r}: value over 65535 bytes")
    kind = _STRING if isinstance(value, str) else _BYTES
    return head + bytes((kind,)) + _LENGTH16.pack(len(raw)) + raw


def encode_frame(headers: Mapping[str, HeaderValue] | Iterable[tuple[str, HeaderValue]],
                 payload: bytes) -> bytes:
    """One frame: `headers` in the order given (str as string, bytes as byte array, bool,
    int as int64) and `payload`, with both CRCs. The mirror of `FrameDecoder`."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    encoded = b"".join(_encode_header(name, value) for name, value in pairs)
    if len(encoded) > MAX_HEADERS_BYTES:
        raise ValueError(f"event stream headers of {len(encoded)} bytes: over "
                         f"{MAX_HEADERS_BYTES}")
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"event stream payload of {len(payload)} bytes: over "
                         f"{MAX_PAYLOAD_BYTES}")
    total = _OVERHEAD + len(encoded) + len(payload)
    prelude = struct.pack("!II", total, len(encoded))
    prelude_crc = _crc(prelude)
    body = prelude + _UINT32.pack(prelude_crc) + encoded + payload
    return body + _UINT32.pack(_crc(body))


class FrameDecoder:
    """Incremental: `feed` any slice of the stream, get back the frames it completed (CRCs
    checked); a partial frame waits for more. After a bad frame the decoder is broken: every
    later `feed` raises the same error, since nothing after it can be trusted to be aligned."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._frames = 0
        self._offset = 0  # the stream's byte at which the buffer starts
        self._broken: EventStreamError | None = None

    @property
    def pending_bytes(self) -> int:
        """Bytes of an unfinished frame held for the next `feed`."""
        return len(self._buffer)

    @property
    def frames_decoded(self) -> int:
        return self._frames

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame]:
        if self._broken is not None:
            raise self._broken
        self._buffer += data
        frames: list[Frame] = []
        start = 0
        buffer = self._buffer
        try:
            while len(buffer) - start >= _PRELUDE_BYTES:
                total = self._check_prelude(buffer, start)
                if len(buffer) - start < total:
                    break
                frames.append(self._frame(buffer, start, total))
                start += total
        except EventStreamError as error:
            self._broken = error
            raise
        finally:
            if start:
                del buffer[:start]
                self._offset += start
        return frames

    def finish(self) -> None:
        """The stream ended: raise if it ended inside a frame."""
        if self._broken is not None:
            raise self._broken
        if self._buffer:
            raise self._error(f"the stream ended inside a frame ({len(self._buffer)} bytes of "
                              f"it arrived)", self._offset)

    def _error(self, what: str, at: int) -> EventStreamError:
        return EventStreamError(f"event stream frame {self._frames + 1} (at byte {at}): {what}")

    def _check_prelude(self, buffer: bytearray, start: int) -> int:
        total, headers_length, prelude_crc = _PRELUDE.unpack_from(buffer, start)
        at = self._offset + start
        computed = _crc(bytes(buffer[start:start + 8]))
        if computed != prelude_crc:
            raise self._error(f"prelude CRC mismatch (expected 0x{prelude_crc:08x}, computed "
                              f"0x{computed:08x})", at)
        if total < _OVERHEAD or headers_length > total - _OVERHEAD:
            raise self._error(f"impossible lengths (total {total}, headers {headers_length})",
                              at)
        if headers_length > MAX_HEADERS_BYTES:
            raise self._error(f"headers of {headers_length} bytes (at most "
                              f"{MAX_HEADERS_BYTES})", at)
        if total - _OVERHEAD - headers_length > MAX_PAYLOAD_BYTES:
            raise self._error(f"payload of {total - _OVERHEAD - headers_length} bytes (at most "
                              f"{MAX_PAYLOAD_BYTES})", at)
        return int(total)

    def _frame(self, buffer: bytearray, start: int, total: int) -> Frame:
        at = self._offset + start
        end = start + total
        (message_crc,) = _UINT32.unpack_from(buffer, end - _CRC_BYTES)
        with memoryview(buffer) as view:  # released before the buffer is trimmed, even on error
            computed = _crc(view[start:end - _CRC_BYTES])
        if computed != message_crc:
            raise self._error(f"message CRC mismatch (expected 0x{message_crc:08x}, computed "
                              f"0x{computed:08x})", at)
        (headers_length,) = _UINT32.unpack_from(buffer, start + 4)
        headers_start = start + _PRELUDE_BYTES
        payload_start = headers_start + headers_length
        raw = bytes(buffer[headers_start:payload_start])
        headers = _READ_HEADERS.get(raw)
        if headers is None:  # every chunk frame has the same three: read once, then looked up
            headers = MappingProxyType(self._headers(raw, at))
            if len(_READ_HEADERS) < _HEADERS_KEPT:
                _READ_HEADERS[raw] = headers
        payload = bytes(buffer[payload_start:end - _CRC_BYTES])
        self._frames += 1
        return Frame(headers, payload)

    def _headers(self, raw: bytes, at: int) -> dict[str, HeaderValue]:
        headers: dict[str, HeaderValue] = {}
        position = 0
        try:
            while position < len(raw):
                name_length = raw[position]
                name = raw[position + 1:position + 1 + name_length].decode()
                position += 1 + name_length
                if len(name.encode()) != name_length or not name:
                    raise ValueError("header name cut short")
                kind = raw[position]
                position += 1
                value, position = self._value(raw, position, kind)
                if name in headers:
                    raise ValueError(f"header {name!r} twice")
                headers[name] = value
        except (IndexError, UnicodeDecodeError, struct.error, ValueError) as error:
            raise self._error(f"unreadable headers: {error}", at) from None
        return headers

    @staticmethod
    def _value(raw: bytes, position: int, kind: int) -> tuple[HeaderValue, int]:
        if kind == _TRUE:
            return True, position
        if kind == _FALSE:
            return False, position
        fixed = _FIXED.get(kind)
        if fixed is not None:
            (number,) = fixed.unpack_from(raw, position)
            return int(number), position + fixed.size
        if kind in (_BYTES, _STRING):
            (length,) = _LENGTH16.unpack_from(raw, position)
            value = raw[position + 2:position + 2 + length]
            if len(value) != length:
                raise ValueError("header value cut short")
            return (value.decode() if kind == _STRING else value), position + 2 + length
        if kind == _UUID:
            value = raw[position:position + 16]
            if len(value) != 16:
                raise ValueError("UUID header cut short")
            return value, position + 16
        raise ValueError(f"unknown header value type {kind}")
