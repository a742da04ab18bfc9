"""Batch header, CRC and scanning of raw bytes."""

from __future__ import annotations

import struct
import zlib

import pytest

from log.batch import HEADER_SIZE, MAGIC, encode_batch, scan_buffer
from log.codec import encode_payload
from log.errors import UnsupportedVersionError

from tests.log.helpers import commit


def batch(base: int, count: int = 2, epoch: int = 4) -> bytes:
    records = [commit("g", "t", p, base + p) for p in range(count)]
    return encode_batch(base, count, count - 1, epoch, 1234, encode_payload(records))


def test_header_layout_is_the_documented_one() -> None:
    data = batch(7, count=3, epoch=9)
    magic, version, attributes, reserved, base, delta, count, epoch, ts, length, crc = struct.unpack_from(
        ">4sBBHqiiiqII", data
    )

    assert (magic, version, attributes, reserved) == (MAGIC, 1, 0, 0)
    assert (base, delta, count, epoch, ts, length) == (7, 2, 3, 9, 1234, len(data) - HEADER_SIZE)
    assert crc == zlib.crc32(data[HEADER_SIZE:], zlib.crc32(data[:40]))


def test_scan_reads_consecutive_batches() -> None:
    data = batch(0) + batch(2) + batch(4)

    result = scan_buffer(data, 0, 100, 0, "seg")

    assert [b.base_offset for b in result.batches] == [0, 2, 4]
    assert [b.position for b in result.batches] == [100, 100 + len(data) // 3, 100 + 2 * len(data) // 3]
    assert (result.position, result.next_offset) == (100 + len(data), 6)
    assert (result.invalid_reason, result.needed) == (None, 0)


@pytest.mark.parametrize("cut", [1, 3, HEADER_SIZE - 1, HEADER_SIZE, HEADER_SIZE + 5])
def test_an_incomplete_batch_asks_for_more_bytes(cut: int) -> None:
    first, second = batch(0), batch(2)

    result = scan_buffer(first + second[:cut], 0, 0, 0, "seg")

    assert len(result.batches) == 1
    assert result.invalid_reason is None
    assert result.position == len(first)
    # Until the header is complete, only the header's missing bytes are known.
    assert result.needed == (len(second) if cut >= HEADER_SIZE else HEADER_SIZE) - cut


@pytest.mark.parametrize("index", [0, 5, 9, 17, 21, 33, 39, 41, HEADER_SIZE + 3])
def test_any_damaged_byte_makes_the_batch_invalid(index: int) -> None:
    data = bytearray(batch(0))
    data[index] ^= 0x40

    result = scan_buffer(bytes(data), 0, 0, 0, "seg")

    assert result.batches == []
    assert result.invalid_reason is not None or result.needed > 0


def test_offsets_going_backwards_are_invalid() -> None:
    result = scan_buffer(batch(4) + batch(3), 0, 0, 0, "seg")

    assert [b.base_offset for b in result.batches] == [4]
    assert result.invalid_reason is not None and "base offset" in result.invalid_reason


def test_garbage_shorter_than_a_header_is_invalid_not_incomplete() -> None:
    result = scan_buffer(batch(0) + b"xyz", 0, 0, 0, "seg")

    assert result.invalid_reason == "bad magic"


def test_a_crc_valid_batch_of_a_newer_format_is_unsupported_not_corrupt() -> None:
    data = bytearray(batch(0))
    data[4] = 2
    data[40:44] = struct.pack(">I", zlib.crc32(bytes(data[HEADER_SIZE:]), zlib.crc32(bytes(data[:40]))))

    with pytest.raises(UnsupportedVersionError):
        scan_buffer(bytes(data), 0, 0, 0, "seg")


def test_encode_refuses_impossible_shapes() -> None:
    with pytest.raises(ValueError):
        encode_batch(0, 0, 0, 1, 1, b"")
    with pytest.raises(ValueError):
        encode_batch(0, 3, 1, 1, 1, b"")
