"""Spark 3.5's JVM Arrow and the installed pyarrow read each other's batches.

Every column type of the log's schema, with nulls, extremes and non-ASCII
text, goes from pyarrow to the JVM (`mapInArrow`), back to a Python worker
(a second `mapInArrow`, which checks the schema it receives) and to the
driver, unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from spark_bridge.reader import log_schema
from spark_bridge.rows import arrow_schema

pytestmark = pytest.mark.spark

SAMPLES: dict[str, list[Any]] = {
    "int32": [0, -1, 2**31 - 1, -(2**31), None],
    "int64": [0, -1, 2**63 - 1, -(2**63), None],
    "string": ["", "orders", "grüppe ☃ 𝄞", "x" * 1000, None],
    "bool": [True, False, None, True, False],
    "binary": [b"", b"1;4;2;0", bytes(range(256)), None, b"\xff"],
}


def sample_batch() -> pa.RecordBatch:
    schema = arrow_schema()
    return pa.RecordBatch.from_arrays(
        [pa.array(SAMPLES[str(field.type)], field.type) for field in schema],
        schema=schema,
    )


def emit(_: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield sample_batch()


def check_and_pass_on(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        if batch.schema.remove_metadata() != arrow_schema():
            raise AssertionError(f"the JVM sent {batch.schema}")
        yield batch


def test_every_column_type_round_trips_through_the_jvm(spark: SparkSession) -> None:
    schema = arrow_schema()
    assert {str(field.type) for field in schema} == {"int32", "int64", "string", "bool", "binary"}

    frame = spark.range(1, numPartitions=1).mapInArrow(emit, log_schema())
    again = frame.mapInArrow(check_and_pass_on, log_schema())
    rows = [tuple(row) for row in again.collect()]

    expected = sample_batch()
    assert again.schema == log_schema()
    assert rows == list(zip(*(column.to_pylist() for column in expected.columns)))
