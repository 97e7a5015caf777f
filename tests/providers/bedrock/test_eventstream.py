"""The eventstream codec against botocore's own reader, a frame captured from Bedrock, and
broken frames."""

from __future__ import annotations

import struct
import zlib

import pytest
from botocore.eventstream import EventStreamBuffer
from hypothesis import given
from hypothesis import strategies as st

from claudex.providers.bedrock.eventstream import (
    MAX_PAYLOAD_BYTES,
    EventStreamError,
    FrameDecoder,
    encode_frame,
)

# One chunk frame as Bedrock sent it (AI21's Bedrock stream test data, ai21-python): 267 bytes,
# headers in Bedrock's order, the `p` padding in the payload.
CAPTURED = (
    b"\x00\x00\x01\x0b\x00\x00\x00K8\xa0\xa5\xc5\x0b:event-type\x07\x00\x05chunk\r:content-type"
    b"\x07\x00\x10application/json\r:message-type\x07\x00\x05event{"
    b'"bytes":"eyJjaG9pY2VzIjpbeyJpbmRleCI6MCwibWVzc2FnZSI6eyJyb2xlIjoiYXNzaXN0YW50IiwiY29udGVudCI6Ikkif'
    b'Swic3RvcF9yZWFzb24iOm51bGx9XX0=","p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJK"}\x11\x061?'
)


def _botocore_decode(data: bytes) -> list[tuple[dict[str, object], bytes]]:
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    return [(message.headers, message.payload) for message in buffer]


def test_a_captured_bedrock_frame_decodes() -> None:
    [frame] = FrameDecoder().feed(CAPTURED)
    assert dict(frame.headers) == {":event-type": "chunk", ":content-type": "application/json",
                                   ":message-type": "event"}
    assert frame.message_type == "event" and frame.event_type == "chunk"
    assert frame.payload.startswith(b'{"bytes":"eyJj') and frame.payload.endswith(b'HIJK"}')


def test_the_encoder_writes_the_captured_frame_byte_for_byte() -> None:
    decoded = FrameDecoder().feed(CAPTURED)[0]
    assert encode_frame(list(decoded.headers.items()), decoded.payload) == CAPTURED


header_values = st.one_of(st.text(max_size=40), st.binary(max_size=40), st.booleans(),
                          st.integers(min_value=-(2**63), max_value=2**63 - 1))
header_maps = st.dictionaries(st.text(min_size=1, max_size=20).filter(
    lambda name: len(name.encode()) < 256), header_values, max_size=6)


@given(header_maps, st.binary(max_size=300))
def test_botocore_reads_what_the_encoder_writes(headers: dict[str, object],
                                                payload: bytes) -> None:
    frame = encode_frame(headers, payload)  # type: ignore[arg-type]
    [(read_headers, read_payload)] = _botocore_decode(frame)
    assert read_headers == headers
    assert read_payload == payload


@given(st.lists(st.tuples(header_maps, st.binary(max_size=80)), min_size=1, max_size=4),
       st.data())
def test_any_split_of_a_stream_decodes_to_its_frames(frames: list[tuple[dict[str, object],
                                                                         bytes]],
                                                     data: st.DataObject) -> None:
    stream = b"".join(encode_frame(h, p) for h, p in frames)  # type: ignore[arg-type]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    decoder = FrameDecoder()
    decoded = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        decoded += decoder.feed(stream[start:end])
    decoder.finish()
    assert [(dict(f.headers), f.payload) for f in decoded] == frames
    assert decoder.pending_bytes == 0


def test_a_frame_fed_byte_by_byte_comes_out_once_whole() -> None:
    decoder = FrameDecoder()
    out = [frame for byte in CAPTURED for frame in decoder.feed(bytes([byte]))]
    assert len(out) == 1 and decoder.frames_decoded == 1


def test_a_flipped_payload_bit_fails_the_message_crc_and_says_where() -> None:
    good = encode_frame({":message-type": "event"}, b"hello")
    bad = bytearray(good + good)
    bad[len(good) + 30] ^= 0x01
    decoder = FrameDecoder()
    where = rf"frame 2 \(at byte {len(good)}\): message CRC mismatch"
    with pytest.raises(EventStreamError, match=where):
        decoder.feed(bytes(bad))
    with pytest.raises(EventStreamError):  # broken for good: nothing after it is aligned
        decoder.feed(good)


def test_a_flipped_length_fails_the_prelude_crc() -> None:
    bad = bytearray(CAPTURED)
    bad[3] ^= 0x02
    with pytest.raises(EventStreamError, match="prelude CRC mismatch"):
        FrameDecoder().feed(bytes(bad))


def _prelude(total: int, headers: int) -> bytes:
    head = struct.pack("!II", total, headers)
    return head + struct.pack("!I", zlib.crc32(head))


def test_impossible_and_oversized_lengths_are_refused_before_waiting_for_them() -> None:
    with pytest.raises(EventStreamError, match="impossible lengths"):
        FrameDecoder().feed(_prelude(10, 0))
    with pytest.raises(EventStreamError, match="impossible lengths"):
        FrameDecoder().feed(_prelude(20, 8))
    with pytest.raises(EventStreamError, match="payload of"):
        FrameDecoder().feed(_prelude(MAX_PAYLOAD_BYTES + 17, 0))


def test_a_stream_ending_inside_a_frame_is_an_error_at_finish() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(CAPTURED[:100]) == []
    with pytest.raises(EventStreamError, match=r"ended inside a frame \(100 bytes"):
        decoder.finish()


def test_unreadable_headers_are_refused() -> None:
    headers = b"\x03abc\x0d"  # value type 13 does not exist
    total = 16 + len(headers)
    head = _prelude(total, len(headers)) + headers
    frame = head + struct.pack("!I", zlib.crc32(head))
    with pytest.raises(EventStreamError, match="unknown header value type 13"):
        FrameDecoder().feed(frame)
