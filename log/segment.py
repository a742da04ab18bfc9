"""Segment files: naming, listing a partition directory, reading batches.

Owns the file names of FORMAT.md ("Files") and all reads of segment bytes.
Rules:
- A segment is `<base offset, 20 digits>.log`; its batches have base
  offsets >= its name. Compaction leftovers are `<base>.log.cleaned`
  (incomplete, ignored) and `<base>.<end>.swap` (complete: it replaces every
  `.log` whose base offset is in [base, end)). Listing resolves a swap the
  way recovery would, so a read-only reader sees a consistent log even in
  the middle of a compaction.
- Reads go in chunks of `buffer_size` bytes (a batch larger than a chunk is
  read whole), never past the file size seen when the read started, and
  never write. Reads use plain `read`, not mmap: a writer truncating a torn
  tail would make an mmap reader crash with SIGBUS.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from log.batch import HEADER_SIZE, MAGIC, RawBatch, header_next_offset, header_payload_length, scan_buffer
from log.errors import UnsupportedVersionError

OFFSET_DIGITS = 20
_LOG_NAME = re.compile(r"^(\d{20})\.log$")
_SWAP_NAME = re.compile(r"^(\d{20})\.(\d{20})\.swap$")
_CLEANED_NAME = re.compile(r"^(\d{20})\.log\.cleaned$")


class SegmentFile(NamedTuple):
    base_offset: int
    path: str


class SwapFile(NamedTuple):
    base_offset: int
    end_offset: int
    path: str


class DirListing(NamedTuple):
    # What to read, in offset order: .log files, with swaps replacing the
    # segments they cover.
    segments: list[SegmentFile]
    logs: list[SegmentFile]
    swaps: list[SwapFile]
    cleaned: list[str]


def segment_file_name(base_offset: int) -> str:
    return f"{base_offset:0{OFFSET_DIGITS}d}.log"


def cleaned_file_name(base_offset: int) -> str:
    return f"{base_offset:0{OFFSET_DIGITS}d}.log.cleaned"


def swap_file_name(base_offset: int, end_offset: int) -> str:
    return f"{base_offset:0{OFFSET_DIGITS}d}.{end_offset:0{OFFSET_DIGITS}d}.swap"


def list_dir(directory: str) -> DirListing:
    logs: list[SegmentFile] = []
    swaps: list[SwapFile] = []
    cleaned: list[str] = []
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if match := _LOG_NAME.match(name):
            logs.append(SegmentFile(int(match[1]), path))
        elif match := _SWAP_NAME.match(name):
            swaps.append(SwapFile(int(match[1]), int(match[2]), path))
        elif _CLEANED_NAME.match(name):
            cleaned.append(path)
    logs.sort()
    swaps.sort()
    segments = [s for s in logs if not any(w.base_offset <= s.base_offset < w.end_offset for w in swaps)]
    segments.extend(SegmentFile(w.base_offset, w.path) for w in swaps)
    segments.sort()
    return DirListing(segments, logs, swaps, cleaned)


@dataclass(slots=True)
class ScanOutcome:
    """How a segment read ended; filled in when its iterator is exhausted."""

    position: int = 0
    next_offset: int = 0
    # File size when the read began: bytes past it were not looked at.
    size: int = 0
    # None: clean end of file. Otherwise why the bytes at `position` are not
    # a valid batch ("incomplete batch" when the file ends inside one).
    reason: str | None = None


def read_segment(
    path: str, start: int, next_offset: int, buffer_size: int, outcome: ScanOutcome
) -> Iterator[RawBatch]:
    """Yield the valid batches of a segment from byte `start`.

    `next_offset` is the lowest base offset the first batch may have. Stops
    at the file end seen on open or at the first bad batch; `outcome` says
    which. Raises FileNotFoundError if the file is gone (compacted away).
    """
    with open(path, "rb", buffering=0) as file:
        size = outcome.size = os.fstat(file.fileno()).st_size
        file.seek(start)
        file_position, read_position, needed = start, start, 0
        buf = b""
        while True:
            want = min(max(buffer_size, needed), size - read_position)
            if want > 0:
                chunk = file.read(want)
                if not chunk:
                    # Truncated since the read began (a writer recovering).
                    size = read_position
                read_position += len(chunk)
                buf = buf + chunk if buf else chunk
            result = scan_buffer(buf, 0, file_position, next_offset, path)
            yield from result.batches
            next_offset = result.next_offset
            outcome.position, outcome.next_offset = result.position, next_offset
            if result.invalid_reason is not None:
                outcome.reason = result.invalid_reason
                return
            consumed = result.position - file_position
            if read_position >= size or want <= 0:
                outcome.reason = None if consumed == len(buf) else "incomplete batch"
                return
            buf = buf[consumed:]
            file_position, needed = result.position, result.needed


def seek_offset(path: str, offset: int, next_offset: int) -> tuple[int, int]:
    """Position of the first batch ending after `offset`, by hopping headers.

    Returns (position, next offset expected there). Skipped batches are not
    CRC-checked (they are not read); a header that does not parse stops the
    hop, and the read from there judges it.
    """
    position = 0
    with open(path, "rb", buffering=0) as file:
        size = os.fstat(file.fileno()).st_size
        while position + HEADER_SIZE <= size:
            header = os.pread(file.fileno(), HEADER_SIZE, position)
            batch_next = header_next_offset(header)
            if batch_next is None or batch_next > offset:
                break
            end = position + HEADER_SIZE + header_payload_length(header)
            if end > size:
                break
            position, next_offset = end, batch_next
    return position, next_offset


def find_valid_batch_after(path: str, position: int, next_offset: int, size: int) -> int | None:
    """Position of a valid batch after the bad one at `position`, if any.

    Tells a torn tail (nothing valid follows: safe to truncate) from damage
    in the middle of data (valid batches follow: truncating would lose
    them). Candidates are found by their magic, then fully checked. Only
    the first `size` bytes count: a live writer may have completed the
    batch, and appended more, since they were read.
    """
    with open(path, "rb", buffering=0) as file:
        file.seek(position + 1)
        data = file.read(max(0, size - position - 1))
    start = 0
    while (found := data.find(MAGIC, start)) >= 0:
        try:
            result = scan_buffer(data, found, position + 1, next_offset, path)
        except UnsupportedVersionError:
            return position + 1 + found
        if result.batches:
            return result.batches[0].position
        start = found + 1
    return None
