"""Record batches: the 44-byte header, its CRC, and scanning bytes for batches.

Owns the batch layout of FORMAT.md ("Batch"). Rules:
- A batch is a header followed by one payload (see `codec`). The CRC is
  zlib.crc32 (CRC-32/ISO-HDLC, the same as java.util.zip.CRC32) over the
  first 40 header bytes followed by the payload, so a damaged header is
  caught as surely as a damaged payload.
- Scanning stops at the first batch that is incomplete (more bytes needed)
  or invalid (bad magic, bad CRC, impossible fields, offsets going
  backwards). Whether that is a torn tail or corruption is the caller's
  decision: only it knows whether more data follows.
- A CRC-valid batch of an unknown format version is not corruption; it
  raises `UnsupportedVersionError` and is never truncated.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from log.errors import UnsupportedVersionError

MAGIC = b"RGOL"
FORMAT_VERSION = 1
HEADER = struct.Struct(">4sBBHqiiiqII")
HEADER_SIZE = HEADER.size
CRC_COVERED_HEADER_BYTES = HEADER_SIZE - 4
_PREFIX = struct.Struct(">4sBBHqiiiqI")
_CRC = struct.Struct(">I")
_crc32 = zlib.crc32
_unpack_header = HEADER.unpack_from
INT32_MAX = 2**31 - 1


class RawBatch(NamedTuple):
    """A CRC-valid batch as found in a file; the payload is not decoded yet."""

    position: int
    base_offset: int
    last_offset_delta: int
    record_count: int
    leader_epoch: int
    timestamp_ms: int
    payload: memoryview

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size_bytes(self) -> int:
        return HEADER_SIZE + len(self.payload)


class ScanResult(NamedTuple):
    batches: list[RawBatch]
    # Where scanning stopped (a file position) and the next expected offset.
    position: int
    next_offset: int
    # None: stopped at the end of the buffer or at an incomplete batch
    # (`needed` more bytes would complete it). Else why the batch is invalid.
    invalid_reason: str | None
    needed: int


def encode_batch(
    base_offset: int,
    record_count: int,
    last_offset_delta: int,
    leader_epoch: int,
    timestamp_ms: int,
    payload: bytes,
) -> bytes:
    """Header + payload, ready to be written."""
    if record_count < 1 or last_offset_delta < record_count - 1 or last_offset_delta > INT32_MAX:
        raise ValueError(f"bad batch shape: {record_count} records over delta {last_offset_delta}")
    prefix = _PREFIX.pack(
        MAGIC, FORMAT_VERSION, 0, 0, base_offset, last_offset_delta, record_count,
        leader_epoch, timestamp_ms, len(payload),
    )
    crc = _crc32(payload, _crc32(prefix))
    return b"".join((prefix, _CRC.pack(crc), payload))


def header_next_offset(header: bytes) -> int | None:
    """Next offset from a bare header (no CRC check), None if it is not one."""
    if len(header) < HEADER_SIZE or header[:4] != MAGIC:
        return None
    fields = _unpack_header(header)
    return int(fields[4] + fields[5] + 1)


def header_payload_length(header: bytes) -> int:
    return int(_unpack_header(header)[9])


def scan_buffer(buf: bytes, start: int, file_position: int, next_offset: int, path: str) -> ScanResult:
    """Parse consecutive batches of `buf` from index `start`.

    `file_position` is the file position of buf[0]; `next_offset` the lowest
    base offset the next batch may have.
    """
    view = memoryview(buf)
    end = len(buf)
    pos = start
    batches: list[RawBatch] = []
    append = batches.append
    while pos < end:
        if end - pos < HEADER_SIZE:
            if buf[pos:pos + 4] != MAGIC[: min(4, end - pos)]:
                return ScanResult(batches, file_position + pos, next_offset, "bad magic", 0)
            return ScanResult(batches, file_position + pos, next_offset, None, HEADER_SIZE - (end - pos))
        magic, version, _, _, base, delta, count, epoch, ts_ms, length, crc = _unpack_header(buf, pos)
        if magic != MAGIC:
            return ScanResult(batches, file_position + pos, next_offset, "bad magic", 0)
        payload_end = pos + HEADER_SIZE + length
        if payload_end > end:
            return ScanResult(batches, file_position + pos, next_offset, None, payload_end - end)
        payload = view[pos + HEADER_SIZE:payload_end]
        if _crc32(payload, _crc32(view[pos:pos + CRC_COVERED_HEADER_BYTES])) != crc:
            return ScanResult(batches, file_position + pos, next_offset, "CRC mismatch", 0)
        if version != FORMAT_VERSION:
            where = f"{path} at byte {file_position + pos}"
            raise UnsupportedVersionError(f"{where}: batch format version {version}")
        if count < 1 or delta < count - 1 or base < next_offset:
            reason = f"impossible header: base offset {base} (>= {next_offset} expected), {count} records"
            return ScanResult(batches, file_position + pos, next_offset, reason, 0)
        append(RawBatch(file_position + pos, base, delta, count, epoch, ts_ms, payload))
        next_offset = base + delta + 1
        pos = payload_end
    return ScanResult(batches, file_position + pos, next_offset, None, 0)
