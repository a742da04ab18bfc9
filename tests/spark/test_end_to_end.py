"""RayDP end to end on the session's local Ray cluster: start, read, lag, stop, nothing left.

The session was started by the `bridge_session` fixture; this test stops
it (conftest runs it after every other Spark test) and checks that every
JVM it started is gone, its temp files are deleted, RayDP's actors are
gone and Ray got its CPUs back.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import ray

from spark_bridge import jobs
from spark_bridge.jvm import list_processes, session_jvms
from spark_bridge.reader import read_offsets_log
from spark_bridge.spark_session import QUICK_JIT, BridgeSession, active_session

from tests.spark.histories import END_OFFSETS, HISTORY, write_history

pytestmark = pytest.mark.spark


def wait_for(condition: object, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.2)
    return bool(condition())  # type: ignore[operator]


def test_the_running_driver_jvm_has_our_java_options(bridge_session: BridgeSession) -> None:
    jvm = bridge_session.spark.sparkContext._jvm
    assert jvm is not None
    arguments = set(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())

    assert QUICK_JIT in arguments
    assert "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED" in arguments


def test_the_executors_read_arrow_without_per_access_checks(bridge_session: BridgeSession) -> None:
    # `reflect` is nondeterministic, so Spark runs it in the executors, one per task.
    properties = bridge_session.spark.range(2, numPartitions=2).selectExpr(
        "reflect('java.lang.System', 'getProperty', 'arrow.enable_unsafe_memory_access') AS unsafe",
        "reflect('java.lang.System', 'getProperty', 'arrow.enable_null_check_for_get') AS null_check",
    ).collect()

    assert [(row.unsafe, row.null_check) for row in properties] == [("true", "false")] * 2


def test_stop_leaves_no_spark_processes_or_files(bridge_session: BridgeSession, tmp_path: Path) -> None:
    assert bridge_session.mode == "raydp" and active_session() is bridge_session
    write_history(str(tmp_path), HISTORY)
    lag = jobs.consumer_lag(read_offsets_log(bridge_session.spark, tmp_path), END_OFFSETS)
    assert sorted((r.group_id, r.topic, r.topic_partition, r.lag) for r in lag.collect()) == [
        ("billing", "orders", 0, 22), ("billing", "payments", 0, 0),
        ("orders-app", "orders", 0, 15), ("orders-app", "orders", 1, 0),
    ]
    jvms = bridge_session.tracker.collect()
    # The driver's JVM, RayDP's app master and the executor.
    assert len(jvms) >= 3
    leftovers = set(bridge_session.tracker.leftovers)
    assert any(path.startswith("/tmp/ray/") for path in leftovers)

    bridge_session.stop()

    assert bridge_session.stopped and active_session() is None
    assert bridge_session.tracker.alive() == []
    since = bridge_session.tracker.started_s - 1
    assert session_jvms(list_processes(), {os.getpid()}, since) == []
    assert [path for path in leftovers if os.path.exists(path)] == []
    assert not [name for name in ray.util.list_named_actors() if name.endswith("_SPARK_MASTER")]
    total = ray.cluster_resources()["CPU"]
    assert wait_for(lambda: ray.available_resources().get("CPU") == total, 30)
    bridge_session.stop()
