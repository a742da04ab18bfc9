"""Run-length column builders for the columnar decoder (`log/columnar.py`).

Owns collecting a column from the pieces a payload gives (an array of
values, or one value standing for `count` records) and turning it into one
numpy array per chunk. Rules:
- Appending is C-level list work only (`extend`, `append`): no Python
  bytecode per value, no numpy call per run. The conversion to numpy
  happens once per chunk, vectorised.
- A column's values must be ints (FORMAT.md); `IntRuns.array` raises
  `PayloadError` for anything else (a float, a string, an int beyond 64
  bits), never converts it.
- Every builder can `mark()` its length and `cut(mark)` back to it, so a
  batch that fails to decode leaves nothing behind.
"""

from __future__ import annotations

from array import array as typed_array
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from log.columns import PayloadError, array

IntArray = npt.NDArray[np.int64]
_INT32 = np.iinfo(np.int32)


class IntRuns:
    """An int column: values, some of which stand for several records."""

    __slots__ = ("values", "const_at", "const_counts")

    def __init__(self) -> None:
        self.values: list[Any] = []
        # Positions in `values` of the values that stand for several records, and how many.
        self.const_at: list[int] = []
        self.const_counts: list[int] = []

    def add_array(self, values: Iterable[Any]) -> None:
        self.values.extend(values)

    def add_constant(self, value: Any, count: int) -> None:
        if count != 1:
            self.const_at.append(len(self.values))
            self.const_counts.append(count)
        self.values.append(value)

    def add_column(self, column: Any, count: int) -> None:
        """An int column of FORMAT.md: an array of `count` ints, or one int standing for all."""
        if type(column) is int:
            self.add_constant(column, count)
        else:
            self.add_array(array(column, count))

    def mark(self) -> tuple[int, int]:
        return len(self.values), len(self.const_at)

    def cut(self, mark: tuple[int, int]) -> None:
        del self.values[mark[0]:]
        del self.const_at[mark[1]:]
        del self.const_counts[mark[1]:]

    def counts(self) -> IntArray | None:
        """How many records each value stands for (None: one each)."""
        if not self.const_at:
            return None
        counts = np.ones(len(self.values), dtype=np.int64)
        counts[self.const_at] = self.const_counts
        return counts

    def array(self) -> IntArray:
        """One int64 per record."""
        values = ints_array(self.values)
        counts = self.counts()
        return values if counts is None else np.repeat(values, counts)

    def ramp(self) -> IntArray:
        """One int per record, a value standing for `count` records being the first of
        `count` consecutive ints (offsets of a dense run)."""
        values = ints_array(self.values)
        counts = self.counts()
        if counts is None:
            return values
        begins = np.cumsum(counts) - counts
        steps = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(begins, counts)
        return np.repeat(values, counts) + steps


def ints_array(values: list[Any]) -> IntArray:
    """Python ints as int64; anything else (a float, a string, an int beyond 64 bits) raises
    PayloadError. `typed_array` converts in one C loop without numpy's type discovery and
    refuses what is not an int (msgpack's true and false are Python's 1 and 0). Unsigned
    first: CPython converts to "Q" in half the time of "q" (no argument parsing per item);
    a negative int makes it convert signed instead, and a value past int64's range, which
    only "Q" takes, is refused."""
    try:
        try:
            converted = typed_array("Q", values)
        except OverflowError:  # a negative int, or one beyond 64 bits
            converted = typed_array("q", values)
    except (TypeError, OverflowError) as exc:
        raise PayloadError(f"an int column does not convert: {exc!r}") from exc
    out = np.frombuffer(converted, dtype=np.int64)
    if converted.typecode == "Q" and len(out) and out.min() < 0:
        raise PayloadError("an int column holds a value beyond int64's range")
    return out


def as_int32(values: IntArray) -> npt.NDArray[np.int32]:
    if len(values) and (values.min() < _INT32.min or values.max() > _INT32.max):
        raise PayloadError("an int32 column holds a value out of range")
    return values.astype(np.int32)


class StringRuns:
    """A string column of many runs as indices into one table of the runs' strings."""

    __slots__ = ("table", "indices", "bases", "sizes")

    def __init__(self, table: list[Any]) -> None:
        # Shared by the columns of a chunk; entry 0 is the null string.
        self.table = table
        self.indices = IntRuns()
        # Per record: where its run's strings start in `table`, and how many there are.
        self.bases = IntRuns()
        self.sizes = IntRuns()

    def add_column(self, column: Any, count: int) -> None:
        """A string column of FORMAT.md: `[strings, indices | one index]`."""
        strings, ids = column
        if type(strings) is not list:
            raise PayloadError("string table is not an array")
        self.indices.add_column(ids, count)
        self.bases.add_constant(len(self.table), count)
        self.sizes.add_constant(len(strings), count)
        self.table.extend(strings)

    def add_null(self, count: int) -> None:
        self.indices.add_constant(0, count)
        self.bases.add_constant(0, count)
        self.sizes.add_constant(1, count)

    def mark(self) -> tuple[tuple[int, int], ...]:
        return self.indices.mark(), self.bases.mark(), self.sizes.mark()

    def cut(self, mark: tuple[tuple[int, int], ...]) -> None:
        self.indices.cut(mark[0])
        self.bases.cut(mark[1])
        self.sizes.cut(mark[2])

    def positions(self) -> IntArray:
        """Each record's position in `table`, every index checked against its own run's strings."""
        indices = self.indices.array()
        if len(indices) and (indices.min() < 0 or (indices >= self.sizes.array()).any()):
            raise PayloadError("a string index is out of its table's range")
        return indices + self.bases.array()
