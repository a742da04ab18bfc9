"""One RayDP Spark session for every Spark test of the run.

`raydp.init_spark` takes about 10 s (much more on a busy machine), so the
session starts once, on the session's local Ray cluster (`ray_session`),
the first time a test asks for `spark`, and stops at the end of the run.
The test that checks a clean stop (`test_stop_*`) stops it itself; it is
moved behind every other Spark test so none finds Spark stopped.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark_bridge.spark_session import BridgeSession, session

STOP_TEST_PREFIX = "test_stop_"


@pytest.fixture(scope="session")
def bridge_session(ray_session: None) -> Iterator[BridgeSession]:
    started = session(num_executors=1, executor_cores=1, executor_memory="1GB", app_name="raygroups-tests")
    yield started
    started.stop()


@pytest.fixture
def spark(bridge_session: BridgeSession) -> SparkSession:
    """The running SparkSession."""
    if bridge_session.stopped:
        pytest.fail("the session's Spark was stopped by an earlier test")
    return bridge_session.spark


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the stop test after the other Spark tests, keeping every other test in place."""
    spark_slots = [i for i, item in enumerate(items) if item.get_closest_marker("spark") is not None]
    spark_items = [items[i] for i in spark_slots]
    ordered = sorted(spark_items, key=lambda item: item.name.startswith(STOP_TEST_PREFIX))
    for slot, item in zip(spark_slots, ordered):
        items[slot] = item
